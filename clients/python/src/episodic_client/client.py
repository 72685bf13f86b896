"""Sync and async clients for Episodic's HTTP API.

Both classes have the same methods; each returns the API's JSON answer as a dict (typed in
:mod:`episodic_client.models`) and raises a subclass of :class:`~episodic_client.errors.EpisodicError`
for an error answer.

Retries. A request is tried again, up to ``RetryPolicy.max_retries`` times, after
``429`` or ``503`` (waiting what ``Retry-After`` says, when it says it), and after a
connection failure. A request that was sent but whose answer was lost is tried again only
when repeating it is safe: reads, deletions, and writes, which are made idempotent with a
client-chosen ``eventId``. The server answers a write repeated with the same ``eventId`` and
the same content with the original answer, so a retried write returns the stored result
and never stores the event twice; :meth:`EpisodicClient.write`, ``write_minimal``,
``write_batch`` and ``correct`` therefore set a generated ``eventId`` when the caller gave
none; an import is repeated only when each of its lines names its ``eventId`` (a repeated
line is then ``unchanged``). ``observe``, ``approve``, ``reject`` and ``erasure`` carry no such id: they are
retried only when the server cannot have acted on them (no connection, ``429``,
``503 not_ready`` or ``too_many_connections``).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union
from urllib.parse import quote

import httpx

from .errors import EpisodicConnectionError, EpisodicError, error_from_response

__all__ = ["EpisodicClient", "AsyncEpisodicClient", "RetryPolicy", "evidence_blocks"]

Json = Dict[str, Any]
Refresh = Union[bool, str, None]

#: Codes of 503 answers given before the server did anything with the request.
_NOT_ACTED = ("not_ready", "too_many_connections")


@dataclass(frozen=True)
class RetryPolicy:
    """How transient failures are retried (``max_retries=0`` turns retries off)."""

    max_retries: int = 3
    #: First backoff in seconds when the server names no ``Retry-After``; doubled each time.
    backoff: float = 0.25
    max_backoff: float = 8.0
    #: A ``Retry-After`` longer than this is not waited for: the error is raised instead.
    max_retry_after: float = 60.0


@dataclass
class _Request:
    method: str
    path: str
    params: Optional[Dict[str, str]] = None
    body: Optional[Any] = None
    #: Safe to send again when the answer was lost.
    idempotent: bool = True
    #: Statuses that are success for this route (others raise).
    ok: Sequence[int] = (200,)
    #: ``"json"``: a JSON body both ways; ``"ndjson"``: newline-delimited JSON both ways.
    format: str = "json"


def _rfc3339(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(
                "a naive datetime has no time zone: give an aware one (e.g. datetime.now(timezone.utc))"
            )
        return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    return value


def _jsonable(value: Any) -> Any:
    """Converts datetimes (anywhere in a body) to RFC 3339 UTC strings."""
    if isinstance(value, Mapping):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return _rfc3339(value)


def _refresh(refresh: Refresh) -> Optional[Dict[str, str]]:
    if refresh is None or refresh is False or refresh == "false":
        return None
    if refresh is True or refresh == "wait_for":
        return {"refresh": "wait_for"}
    raise ValueError(f"refresh must be True, False, 'wait_for' or 'false', not {refresh!r}")


def _params(**values: Any) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, Mapping):
            out[name] = json.dumps(_jsonable(value), separators=(",", ":"))
        else:
            out[name] = str(_rfc3339(value))
    return out


def _id(event_id: str) -> str:
    if not isinstance(event_id, str) or not event_id:
        raise ValueError("an event id must be a non-empty string")
    return quote(event_id, safe="")


def new_event_id() -> str:
    """A client-chosen event id (the API accepts 1-128 characters of ``A-Za-z0-9._:-``)."""
    return str(uuid.uuid4())


def evidence_blocks(recall: Mapping[str, Any]) -> List[str]:
    """The recall answer's ``evidence`` split into one block per hit, in ``results`` order.

    The server separates blocks by a blank line and renders line breaks inside a summary as
    visible escapes, so a block never contains a blank line of its own.
    """
    evidence = recall.get("evidence") or ""
    results = recall.get("results") or []
    blocks = evidence.split("\n\n") if evidence else []
    if len(blocks) != len(results):
        raise ValueError(
            f"the recall answer has {len(results)} results but {len(blocks)} evidence blocks"
        )
    return blocks


class _Base:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: Optional[RetryPolicy] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required, e.g. http://127.0.0.1:8080")
        if not api_key:
            raise ValueError("api_key is required: a tenant key (epi_...)")
        self.base_url = base_url.rstrip("/")
        self.retry = retry if retry is not None else RetryPolicy()
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            **dict(headers or {}),
        }
        self._timeout = timeout

    # Request builders, shared by the sync and async clients.

    def _with_event_id(self, event: Mapping[str, Any]) -> Json:
        if not isinstance(event, Mapping):
            raise TypeError(f"an event is a mapping of its fields, not {type(event).__name__}")
        body = _jsonable(event)
        if self.retry.max_retries > 0 and not body.get("eventId"):
            body["eventId"] = new_event_id()
        return body

    def _write(self, event: Mapping[str, Any], refresh: Refresh) -> _Request:
        return _Request(
            "POST", "/v1/events", _refresh(refresh), self._with_event_id(event), ok=(201, 202)
        )

    def _write_minimal(
        self,
        summary: str,
        actor_id: str,
        occurred_at: Union[str, datetime],
        source_refs: Sequence[str],
        event_id: Optional[str],
        refresh: Refresh,
    ) -> _Request:
        if isinstance(source_refs, str):
            source_refs = [source_refs]
        event: Json = {
            "summary": summary,
            "actorId": actor_id,
            "occurredAt": occurred_at,
            "sourceRefs": list(source_refs),
        }
        if event_id is not None:
            event["eventId"] = event_id
        return self._write(event, refresh)

    def _write_batch(self, events: Sequence[Mapping[str, Any]], refresh: Refresh) -> _Request:
        body = {"events": [self._with_event_id(e) for e in events]}
        return _Request("POST", "/v1/events:batch", _refresh(refresh), body, ok=(201, 207))

    def _observe(self, interaction: Mapping[str, Any]) -> _Request:
        return _Request(
            "POST", "/v1/observe", None, _jsonable(interaction), idempotent=False, ok=(200, 201, 202)
        )

    def _recall(
        self,
        query: str,
        scope: Optional[Mapping[str, Any]],
        limit: Optional[int],
        include_superseded: Optional[bool],
        include_stale: Optional[bool],
        as_of: Union[str, datetime, None],
        exact: Optional[bool],
    ) -> _Request:
        body: Json = {"query": query}
        if scope:
            body["scope"] = _jsonable(scope)
        for name, value in (
            ("limit", limit),
            ("includeSuperseded", include_superseded),
            ("includeStale", include_stale),
            ("asOf", _rfc3339(as_of)),
            ("exact", exact),
        ):
            if value is not None:
                body[name] = value
        return _Request("POST", "/v1/recall", None, body)

    def _timeline(self, **filters: Any) -> _Request:
        params = _params(
            actorId=filters.get("actor_id"),
            projectId=filters.get("project_id"),
            eventType=filters.get("event_type"),
            **{"from": filters.get("from_"), "to": filters.get("to")},
            limit=filters.get("limit"),
            cursor=filters.get("cursor"),
            includeSuperseded=filters.get("include_superseded"),
            asOf=filters.get("as_of"),
            metadata=filters.get("metadata"),
        )
        return _Request("GET", "/v1/timeline", params)

    def _correct(self, event_id: str, changes: Mapping[str, Any], refresh: Refresh) -> _Request:
        return _Request(
            "POST",
            f"/v1/events/{_id(event_id)}/correct",
            _refresh(refresh),
            self._with_event_id(changes),
            ok=(201, 202),
        )

    def _review(self, event_id: str, verdict: str, note: Optional[str]) -> _Request:
        body = {"note": note} if note is not None else {}
        return _Request(
            "POST", f"/v1/reviews/{_id(event_id)}/{verdict}", None, body, idempotent=False
        )

    def _export(self, with_vectors: Optional[bool]) -> _Request:
        return _Request("GET", "/v1/export", _params(withVectors=with_vectors), format="ndjson")

    def _import(self, events: Sequence[Mapping[str, Any]]) -> _Request:
        lines = [_jsonable(e) for e in events]
        # A line without an eventId gets a new id on each try: repeat only lines that have one.
        safe = all(isinstance(line, Mapping) and line.get("eventId") for line in lines)
        return _Request(
            "POST", "/v1/import", None, lines, idempotent=safe, ok=(200, 207), format="ndjson"
        )

    def _audit(self, **filters: Any) -> _Request:
        params = _params(
            eventId=filters.get("event_id"),
            action=filters.get("action"),
            **{"from": filters.get("from_"), "to": filters.get("to")},
            limit=filters.get("limit"),
            cursor=filters.get("cursor"),
        )
        return _Request("GET", "/v1/audit", params)

    # Answers and retries.

    def _http_kwargs(self, req: _Request) -> Json:
        kwargs: Json = {"params": req.params}
        if req.body is not None and req.format == "ndjson":
            text = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in req.body)
            kwargs["content"] = text.encode("utf-8")
            kwargs["headers"] = {"Content-Type": "application/x-ndjson"}
        elif req.body is not None:
            kwargs["content"] = json.dumps(req.body).encode("utf-8")
            kwargs["headers"] = {"Content-Type": "application/json"}
        return kwargs

    def _answer(self, req: _Request, response: httpx.Response) -> Json:
        if response.status_code in req.ok:
            if req.format == "ndjson" and req.method == "GET":
                return self._ndjson(req, response)
            try:
                return response.json()
            except ValueError as exc:
                raise EpisodicError(
                    response.status_code,
                    "invalid_response",
                    f"{req.method} {req.path} answered {response.status_code} with a body that is not JSON",
                    request_id=response.headers.get("x-request-id"),
                ) from exc
        raise error_from_response(response.status_code, response.content, response.headers)

    def _ndjson(self, req: _Request, response: httpx.Response) -> Any:
        lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
        announced = response.headers.get("episodic-export-events")
        if announced is not None and int(announced) != len(lines):
            raise EpisodicError(
                response.status_code,
                "incomplete_export",
                f"{req.path} announced {announced} events but {len(lines)} arrived",
                request_id=response.headers.get("x-request-id"),
            )
        return lines

    def _delay_after_error(self, req: _Request, attempt: int, err: EpisodicError) -> Optional[float]:
        if attempt >= self.retry.max_retries or err.status is None:
            return None
        if err.status == 429:
            pass
        elif err.status == 503:
            if not req.idempotent and err.code not in _NOT_ACTED:
                return None
        elif err.status in (502, 504):
            if not req.idempotent:
                return None
        else:
            return None
        if err.retry_after is not None:
            if err.retry_after > self.retry.max_retry_after:
                return None
            return err.retry_after
        return self._backoff(attempt)

    def _delay_after_transport(self, req: _Request, attempt: int, exc: httpx.TransportError) -> Optional[float]:
        if attempt >= self.retry.max_retries:
            return None
        # A failed connect sent nothing; any later failure may have reached the server.
        never_sent = isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
        if never_sent or req.idempotent:
            return self._backoff(attempt)
        return None

    def _backoff(self, attempt: int) -> float:
        base = min(self.retry.max_backoff, self.retry.backoff * (2**attempt))
        return base / 2 + random.uniform(0, base / 2)

    def _transport_error(self, req: _Request, exc: httpx.TransportError, attempts: int) -> EpisodicConnectionError:
        return EpisodicConnectionError(
            None,
            "connection_failed",
            f"{req.method} {self.base_url}{req.path}: {type(exc).__name__}: {exc} "
            f"(after {attempts} attempt(s))",
        )


class EpisodicClient(_Base):
    """A blocking client: one API key, one tenant.

    ``EpisodicClient("http://127.0.0.1:8080", key)``; use it as a context manager or call
    :meth:`close`. ``retry=RetryPolicy(max_retries=0)`` turns retries off.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: Optional[RetryPolicy] = None,
        headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout=timeout, retry=retry, headers=headers)
        self._http = http_client or httpx.Client(timeout=timeout)
        self._owns_http = http_client is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "EpisodicClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, req: _Request) -> Json:
        attempt = 0
        while True:
            kwargs = self._http_kwargs(req)
            headers = {**self._headers, **kwargs.pop("headers", {})}
            try:
                response = self._http.request(
                    req.method, self.base_url + req.path, headers=headers, **kwargs
                )
            except httpx.TransportError as exc:
                delay = self._delay_after_transport(req, attempt, exc)
                if delay is None:
                    raise self._transport_error(req, exc, attempt + 1) from exc
            else:
                try:
                    return self._answer(req, response)
                except EpisodicError as err:
                    delay = self._delay_after_error(req, attempt, err)
                    if delay is None:
                        raise
            time.sleep(delay)
            attempt += 1

    def write(self, event: Mapping[str, Any], *, refresh: Refresh = None) -> Json:
        """``POST /v1/events``: the write's answer (201 allowed, 202 held for review)."""
        return self._send(self._write(event, refresh))

    def write_minimal(
        self,
        summary: str,
        actor_id: str,
        occurred_at: Union[str, datetime],
        source_refs: Sequence[str],
        *,
        event_id: Optional[str] = None,
        refresh: Refresh = None,
    ) -> Json:
        """``POST /v1/events`` with only what the caller alone knows; the server derives the rest."""
        return self._send(
            self._write_minimal(summary, actor_id, occurred_at, source_refs, event_id, refresh)
        )

    def write_batch(self, events: Sequence[Mapping[str, Any]], *, refresh: Refresh = None) -> Json:
        """``POST /v1/events:batch``: ``{"results": [...]}`` in input order (201 or 207)."""
        return self._send(self._write_batch(events, refresh))

    def observe(self, interaction: Mapping[str, Any]) -> Json:
        """``POST /v1/observe``: ignored (200) or written as a candidate (201/202)."""
        return self._send(self._observe(interaction))

    def recall(
        self,
        query: str,
        scope: Optional[Mapping[str, Any]] = None,
        limit: Optional[int] = 10,
        *,
        include_superseded: Optional[bool] = None,
        include_stale: Optional[bool] = None,
        as_of: Union[str, datetime, None] = None,
        exact: Optional[bool] = None,
    ) -> Json:
        """``POST /v1/recall``: ``results`` (best first, with score breakdowns), ``evidence``, ``stats``."""
        return self._send(
            self._recall(query, scope, limit, include_superseded, include_stale, as_of, exact)
        )

    def timeline(
        self,
        *,
        actor_id: Optional[str] = None,
        project_id: Optional[str] = None,
        event_type: Optional[str] = None,
        from_: Union[str, datetime, None] = None,
        to: Union[str, datetime, None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        include_superseded: Optional[bool] = None,
        as_of: Union[str, datetime, None] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Json:
        """``GET /v1/timeline``: ``{events, nextCursor}`` by ``occurredAt``."""
        return self._send(
            self._timeline(
                actor_id=actor_id, project_id=project_id, event_type=event_type, from_=from_,
                to=to, limit=limit, cursor=cursor, include_superseded=include_superseded,
                as_of=as_of, metadata=metadata,
            )
        )

    def get_event(self, event_id: str) -> Json:
        """``GET /v1/events/{eventId}``: the event with its current ``status``."""
        return self._send(_Request("GET", f"/v1/events/{_id(event_id)}"))

    def history(self, event_id: str) -> Json:
        """``GET /v1/events/{eventId}/history``: ``{eventId, event, history}``."""
        return self._send(_Request("GET", f"/v1/events/{_id(event_id)}/history"))

    def correct(self, event_id: str, changes: Mapping[str, Any], *, refresh: Refresh = None) -> Json:
        """``POST /v1/events/{eventId}/correct``: only what changes; the rest is carried over."""
        return self._send(self._correct(event_id, changes, refresh))

    def delete(self, event_id: str) -> Json:
        """``DELETE /v1/events/{eventId}``: the deletion receipt (the same when repeated)."""
        return self._send(_Request("DELETE", f"/v1/events/{_id(event_id)}"))

    def erasure(self, actor_id: str) -> Json:
        """``POST /v1/erasure``: every event of the actor marked ``deleteOnRequest``."""
        return self._send(
            _Request("POST", "/v1/erasure", None, {"actorId": actor_id}, idempotent=False)
        )

    def list_reviews(self, *, limit: Optional[int] = None) -> Json:
        """``GET /v1/reviews?status=pending``: events this key may decide, oldest first."""
        return self._send(_Request("GET", "/v1/reviews", _params(status="pending", limit=limit)))

    def approve(self, event_id: str, *, note: Optional[str] = None) -> Json:
        """``POST /v1/reviews/{eventId}/approve``: the event becomes active."""
        return self._send(self._review(event_id, "approve", note))

    def reject(self, event_id: str, *, note: Optional[str] = None) -> Json:
        """``POST /v1/reviews/{eventId}/reject``: the event is deleted."""
        return self._send(self._review(event_id, "reject", note))

    def export(self, *, with_vectors: Optional[bool] = None) -> List[Json]:
        """``GET /v1/export``: every event the key may read, one dict per NDJSON line."""
        return self._send(self._export(with_vectors))  # type: ignore[return-value]

    def import_events(self, events: Sequence[Mapping[str, Any]]) -> Json:
        """``POST /v1/import``: events as export gives them; the summary (200 or 207)."""
        return self._send(self._import(events))

    def audit(
        self,
        *,
        event_id: Optional[str] = None,
        action: Optional[str] = None,
        from_: Union[str, datetime, None] = None,
        to: Union[str, datetime, None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Json:
        """``GET /v1/audit``: ``{entries, nextCursor}`` of the tenant's audit trail."""
        return self._send(
            self._audit(event_id=event_id, action=action, from_=from_, to=to, limit=limit, cursor=cursor)
        )


class AsyncEpisodicClient(_Base):
    """The same surface as :class:`EpisodicClient`, every method a coroutine."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retry: Optional[RetryPolicy] = None,
        headers: Optional[Mapping[str, str]] = None,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        super().__init__(base_url, api_key, timeout=timeout, retry=retry, headers=headers)
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http_client is None

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncEpisodicClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _send(self, req: _Request) -> Json:
        attempt = 0
        while True:
            kwargs = self._http_kwargs(req)
            headers = {**self._headers, **kwargs.pop("headers", {})}
            try:
                response = await self._http.request(
                    req.method, self.base_url + req.path, headers=headers, **kwargs
                )
            except httpx.TransportError as exc:
                delay = self._delay_after_transport(req, attempt, exc)
                if delay is None:
                    raise self._transport_error(req, exc, attempt + 1) from exc
            else:
                try:
                    return self._answer(req, response)
                except EpisodicError as err:
                    delay = self._delay_after_error(req, attempt, err)
                    if delay is None:
                        raise
            await asyncio.sleep(delay)
            attempt += 1

    async def write(self, event: Mapping[str, Any], *, refresh: Refresh = None) -> Json:
        return await self._send(self._write(event, refresh))

    async def write_minimal(
        self,
        summary: str,
        actor_id: str,
        occurred_at: Union[str, datetime],
        source_refs: Sequence[str],
        *,
        event_id: Optional[str] = None,
        refresh: Refresh = None,
    ) -> Json:
        return await self._send(
            self._write_minimal(summary, actor_id, occurred_at, source_refs, event_id, refresh)
        )

    async def write_batch(self, events: Sequence[Mapping[str, Any]], *, refresh: Refresh = None) -> Json:
        return await self._send(self._write_batch(events, refresh))

    async def observe(self, interaction: Mapping[str, Any]) -> Json:
        return await self._send(self._observe(interaction))

    async def recall(
        self,
        query: str,
        scope: Optional[Mapping[str, Any]] = None,
        limit: Optional[int] = 10,
        *,
        include_superseded: Optional[bool] = None,
        include_stale: Optional[bool] = None,
        as_of: Union[str, datetime, None] = None,
        exact: Optional[bool] = None,
    ) -> Json:
        return await self._send(
            self._recall(query, scope, limit, include_superseded, include_stale, as_of, exact)
        )

    async def timeline(
        self,
        *,
        actor_id: Optional[str] = None,
        project_id: Optional[str] = None,
        event_type: Optional[str] = None,
        from_: Union[str, datetime, None] = None,
        to: Union[str, datetime, None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        include_superseded: Optional[bool] = None,
        as_of: Union[str, datetime, None] = None,
        metadata: Optional[Mapping[str, Any]] = None,
    ) -> Json:
        return await self._send(
            self._timeline(
                actor_id=actor_id, project_id=project_id, event_type=event_type, from_=from_,
                to=to, limit=limit, cursor=cursor, include_superseded=include_superseded,
                as_of=as_of, metadata=metadata,
            )
        )

    async def get_event(self, event_id: str) -> Json:
        return await self._send(_Request("GET", f"/v1/events/{_id(event_id)}"))

    async def history(self, event_id: str) -> Json:
        return await self._send(_Request("GET", f"/v1/events/{_id(event_id)}/history"))

    async def correct(self, event_id: str, changes: Mapping[str, Any], *, refresh: Refresh = None) -> Json:
        return await self._send(self._correct(event_id, changes, refresh))

    async def delete(self, event_id: str) -> Json:
        return await self._send(_Request("DELETE", f"/v1/events/{_id(event_id)}"))

    async def erasure(self, actor_id: str) -> Json:
        return await self._send(
            _Request("POST", "/v1/erasure", None, {"actorId": actor_id}, idempotent=False)
        )

    async def list_reviews(self, *, limit: Optional[int] = None) -> Json:
        return await self._send(
            _Request("GET", "/v1/reviews", _params(status="pending", limit=limit))
        )

    async def approve(self, event_id: str, *, note: Optional[str] = None) -> Json:
        return await self._send(self._review(event_id, "approve", note))

    async def reject(self, event_id: str, *, note: Optional[str] = None) -> Json:
        return await self._send(self._review(event_id, "reject", note))

    async def export(self, *, with_vectors: Optional[bool] = None) -> List[Json]:
        return await self._send(self._export(with_vectors))  # type: ignore[return-value]

    async def import_events(self, events: Sequence[Mapping[str, Any]]) -> Json:
        return await self._send(self._import(events))

    async def audit(
        self,
        *,
        event_id: Optional[str] = None,
        action: Optional[str] = None,
        from_: Union[str, datetime, None] = None,
        to: Union[str, datetime, None] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Json:
        return await self._send(
            self._audit(event_id=event_id, action=action, from_=from_, to=to, limit=limit, cursor=cursor)
        )
