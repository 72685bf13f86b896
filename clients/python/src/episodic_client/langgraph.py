"""Episodic as a LangGraph store (``pip install 'episodic-client[langgraph]'``).

::

    from episodic_client import EpisodicClient
    from episodic_client.langgraph import EpisodicStore

    graph = builder.compile(store=EpisodicStore(EpisodicClient("http://127.0.0.1:8080", key)))

Namespaces. A namespace is ``(tenant, actor)`` or ``(tenant, actor, project)``:

- ``tenant`` is the key's tenant; a write sends it as ``tenantId``, so another tenant is
  refused by the server (``TenantMismatchError``), and reads only ever see the key's tenant.
- ``actor`` is the event's ``actorId``; ``project`` its ``projectId``.
- A search prefix may be shorter: ``()`` or ``(tenant,)`` searches the whole tenant,
  ``(tenant, actor)`` one actor (every project), ``(tenant, actor, project)`` one project.

Labels may not contain ``.`` (LangGraph's rule), so an actor id with a dot cannot be named.

Operations.

- ``put(ns, key, value)`` writes an event whose ``eventId`` is ``key``. Its summary is
  ``value["summary"]``, else the first string of ``value["content"]``, ``value["text"]``,
  ``value["memory"]``. Keys of ``value`` that are event fields (``occurredAt``,
  ``eventType``, ``sourceRefs``, ``sourceTrust``, ``confidence``, ``privacyClass``,
  ``resourceRefs``, ``retention``) go to the event; every other key goes to the event's
  ``metadata`` (so it must be a string, number, boolean or an object of them, as metadata
  allows). Omitted: ``occurredAt`` is now, ``sourceRefs`` is ``[source_ref]``.
  ``put`` on a key that holds other content is a correction: Episodic never overwrites, the
  old event is superseded (kept in its history) and the key reads the new one. A correction
  by an ``agent_inferred`` source waits for review (the write policy's rule); give the store
  ``source_trust=`` (e.g. ``"user_provided"``) when its writes are not the agent's inference.
- ``get(ns, key)`` reads the event (following corrections to the current one); ``None`` when
  absent, deleted, or in another namespace.
- ``search(prefix, query=..., filter=..., limit=..., offset=...)`` is a recall in the
  prefix's scope (``filter`` is the scope's ``metadata`` equality filter); without
  ``query`` it lists the timeline, oldest first. ``SearchItem.score`` is the recall score.
- ``delete(ns, key)`` deletes the event and every earlier version of it (``DELETE
  /v1/events/{id}``: a writer forgets its own key's writes, an operator any event).
- ``list_namespaces`` walks the timeline of the key's tenant.

An item's ``value`` on reading holds the text under the key it was written with (for an
event written otherwise than through the store, under ``text_key``, ``"content"`` by
default), the metadata keys, and ``"episodic"``: the event's provenance (``eventId``, ``occurredAt``,
``recordedAt``, ``eventType``, ``status``, ``sourceRefs``, ``sourceTrust``, ``confidence``,
``privacyClass``; for a search hit also ``evidence`` and ``scoreBreakdown``). ``put`` ignores
an ``"episodic"`` key, so a value read can be written back.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timezone
from typing import Any, Dict, Generator, Iterable, List, Mapping, Optional, Tuple

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
    )
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "episodic_client.langgraph needs langgraph: pip install 'episodic-client[langgraph]'"
    ) from exc

from .client import AsyncEpisodicClient, EpisodicClient, evidence_blocks, new_event_id
from .errors import ConflictError, EpisodicError, NotFoundError

__all__ = ["EpisodicStore"]

#: Keys of a put's value that are event fields rather than metadata.
EVENT_FIELDS = (
    "summary",
    "occurredAt",
    "eventType",
    "sourceRefs",
    "sourceTrust",
    "confidence",
    "privacyClass",
    "resourceRefs",
    "retention",
)
#: Where a put's text may be, in order, when the value has no ``summary``.
TEXT_KEYS = ("content", "text", "memory")
#: The metadata entry the store keeps for itself: the item's key and its text's key.
RESERVED = "langgraph"
#: The value key holding provenance on reading; ignored by put.
PROVENANCE = "episodic"
_PROVENANCE_FIELDS = (
    "eventId",
    "occurredAt",
    "recordedAt",
    "eventType",
    "status",
    "sourceRefs",
    "sourceTrust",
    "confidence",
    "privacyClass",
)
_MAX_CHAIN = 64
_RECALL_MAX = 100
_PAGE = 500

# A step of a store operation: the client method to call, with its arguments.
_Call = Tuple[str, Tuple[Any, ...], Dict[str, Any]]
_Steps = Generator[_Call, Any, Any]


def _call(name: str, *args: Any, **kwargs: Any) -> _Call:
    return (name, args, kwargs)


def _time(value: Optional[str]) -> datetime:
    """An RFC 3339 UTC time as the server writes it (up to nanoseconds) as a datetime."""
    if not value:
        return datetime.now(timezone.utc)
    match = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", value)
    if not match:
        raise ValueError(f"not an RFC 3339 time: {value!r}")
    whole, fraction, zone = match.groups()
    micros = (fraction or "")[:6].ljust(6, "0")
    zone = "+00:00" if zone == "Z" else zone
    return datetime.fromisoformat(f"{whole}.{micros}{zone}")


def _namespace_of(event: Mapping[str, Any]) -> Tuple[str, ...]:
    ns: Tuple[str, ...] = (event["tenantId"], event["actorId"])
    if event.get("projectId"):
        ns += (event["projectId"],)
    return ns


def _in_prefix(event: Mapping[str, Any], prefix: Tuple[str, ...]) -> bool:
    return _namespace_of(event)[: len(prefix)] == tuple(prefix)


def _check_namespace(namespace: Tuple[str, ...], *, exact: bool) -> None:
    longest = 3
    if len(namespace) > longest or (exact and len(namespace) < 2):
        want = "(tenant, actor) or (tenant, actor, project)"
        if not exact:
            want = "a prefix of " + want
        raise InvalidNamespaceError(f"an Episodic namespace is {want}, not {namespace!r}")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"namespace labels are non-empty strings: {namespace!r}")


class EpisodicStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Episodic events (see the module's docs)."""

    def __init__(
        self,
        client: Optional[EpisodicClient] = None,
        *,
        async_client: Optional[AsyncEpisodicClient] = None,
        source_ref: str = "langgraph-store",
        source_trust: Optional[str] = None,
        text_key: str = "content",
    ) -> None:
        if client is None and async_client is None:
            raise ValueError("EpisodicStore needs client= or async_client=")
        self.text_key = text_key
        self.client = client
        self.async_client = async_client
        self.source_ref = source_ref
        self.source_trust = source_trust

    # Drivers: run an operation's steps against the sync or the async client.

    def _run(self, steps: _Steps) -> Any:
        if self.client is None:
            raise ValueError("this EpisodicStore has only an async client: use the a* methods")
        try:
            call = next(steps)
            while True:
                name, args, kwargs = call
                try:
                    result = getattr(self.client, name)(*args, **kwargs)
                except EpisodicError as err:
                    call = steps.throw(err)
                else:
                    call = steps.send(result)
        except StopIteration as stop:
            return stop.value

    async def _arun(self, steps: _Steps) -> Any:
        if self.async_client is None:
            return await asyncio.get_running_loop().run_in_executor(None, self._run, steps)
        try:
            call = next(steps)
            while True:
                name, args, kwargs = call
                try:
                    result = await getattr(self.async_client, name)(*args, **kwargs)
                except EpisodicError as err:
                    call = steps.throw(err)
                else:
                    call = steps.send(result)
        except StopIteration as stop:
            return stop.value

    def batch(self, ops: Iterable[Op]) -> List[Result]:
        return [self._run(self._op(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> List[Result]:
        return [await self._arun(self._op(op)) for op in ops]

    def _op(self, op: Op) -> _Steps:
        if isinstance(op, GetOp):
            return self._get(op.namespace, op.key)
        if isinstance(op, SearchOp):
            return self._search(op.namespace_prefix, op.query, op.filter, op.limit, op.offset)
        if isinstance(op, PutOp):
            if op.value is None:
                return self._delete(op.namespace, op.key)
            return self._put(op.namespace, op.key, op.value)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"unknown store operation {op!r}")

    # Operations, as steps.

    def _chain(self, key: str) -> Generator[_Call, Any, List[Dict[str, Any]]]:
        """The event stored under ``key`` and each correction of it, oldest first."""
        try:
            event = yield _call("get_event", key)
        except NotFoundError:
            return []
        chain = [event]
        while event.get("status") == "superseded" and event.get("supersededBy"):
            if len(chain) >= _MAX_CHAIN:
                break
            try:
                event = yield _call("get_event", event["supersededBy"])
            except NotFoundError:
                break
            chain.append(event)
        return chain

    def _get(self, namespace: Tuple[str, ...], key: str) -> _Steps:
        _check_namespace(namespace, exact=True)
        chain = yield from self._chain(key)
        if not chain or _namespace_of(chain[-1]) != tuple(namespace):
            return None
        head = chain[-1]
        return Item(
            value=self._value(head),
            key=key,
            namespace=_namespace_of(head),
            created_at=_time(chain[0].get("recordedAt")),
            updated_at=_time(head.get("recordedAt")),
        )

    def _put(self, namespace: Tuple[str, ...], key: str, value: Mapping[str, Any]) -> _Steps:
        _check_namespace(namespace, exact=True)
        event = self._event(namespace, key, value)
        try:
            yield _call("write", event)
            return None
        except ConflictError as conflict:
            # The key holds other content (or was deleted): correct its current version.
            chain = yield from self._chain(key)
            if not chain:
                raise ConflictError(
                    409,
                    "conflict",
                    f"key {key!r} cannot be written again: its event was deleted, and Episodic "
                    "keeps a deleted id reserved so nothing is resurrected; use another key",
                    request_id=conflict.request_id,
                    problem=conflict.problem,
                ) from conflict
            head = chain[-1]
            if _namespace_of(head) != tuple(namespace):
                raise ConflictError(
                    409,
                    "conflict",
                    f"key {key!r} is already used in namespace {_namespace_of(head)!r}",
                    request_id=conflict.request_id,
                ) from conflict
            if _same_content(head, event):
                return None
            changes = {k: v for k, v in event.items() if k not in ("eventId", "tenantId")}
            changes["eventId"] = new_event_id()
            yield _call("correct", head["eventId"], changes)
            return None

    def _delete(self, namespace: Tuple[str, ...], key: str) -> _Steps:
        _check_namespace(namespace, exact=True)
        chain = yield from self._chain(key)
        if not chain or _namespace_of(chain[-1]) != tuple(namespace):
            return None
        for event in reversed(chain):
            try:
                yield _call("delete", event["eventId"])
            except NotFoundError:
                pass
        return None

    def _search(
        self,
        prefix: Tuple[str, ...],
        query: Optional[str],
        filter: Optional[Dict[str, Any]],
        limit: int,
        offset: int,
    ) -> _Steps:
        prefix = tuple(prefix)
        _check_namespace(prefix, exact=False)
        items: List[SearchItem] = []
        if query:
            scope: Dict[str, Any] = {}
            if len(prefix) >= 2:
                scope["actorIds"] = [prefix[1]]
            if len(prefix) >= 3:
                scope["projectIds"] = [prefix[2]]
            if filter:
                scope["metadata"] = dict(filter)
            want = min(_RECALL_MAX, offset + limit)
            recall = yield _call("recall", query, scope or None, want)
            hits = list(zip(recall["results"], evidence_blocks(recall)))[offset : offset + limit]
            for hit, block in hits:
                event = hit["event"]
                if not _in_prefix(event, prefix):
                    continue
                value = self._value(event)
                value[PROVENANCE]["evidence"] = block
                value[PROVENANCE]["scoreBreakdown"] = hit["scoreBreakdown"]
                items.append(self._search_item(event, value, hit["score"]))
            return items
        skipped = 0
        cursor = None
        while len(items) < limit:
            page = yield _call(
                "timeline",
                actor_id=prefix[1] if len(prefix) >= 2 else None,
                project_id=prefix[2] if len(prefix) >= 3 else None,
                metadata=dict(filter) if filter else None,
                limit=_PAGE,
                cursor=cursor,
            )
            for event in page["events"]:
                if not _in_prefix(event, prefix):
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
                items.append(self._search_item(event, self._value(event), None))
                if len(items) >= limit:
                    break
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return items

    def _list_namespaces(self, op: ListNamespacesOp) -> _Steps:
        seen = set()
        cursor = None
        while True:
            page = yield _call("timeline", limit=_PAGE, cursor=cursor)
            for event in page["events"]:
                ns = _namespace_of(event)
                if op.max_depth is not None:
                    ns = ns[: op.max_depth]
                seen.add(ns)
            cursor = page.get("nextCursor")
            if not cursor:
                break
        matches = sorted(ns for ns in seen if _matches(ns, op.match_conditions))
        return matches[op.offset : op.offset + op.limit]

    # Values and events.

    def _event(self, namespace: Tuple[str, ...], key: str, value: Mapping[str, Any]) -> Dict[str, Any]:
        if not isinstance(value, Mapping):
            raise TypeError(f"a store value is a mapping, not {type(value).__name__}")
        for field, label in (("tenantId", 0), ("actorId", 1), ("projectId", 2)):
            given = value.get(field)
            if given is not None and (label >= len(namespace) or given != namespace[label]):
                raise ValueError(f"value's {field} {given!r} is not the namespace's: {namespace!r}")
        text_key = "summary" if isinstance(value.get("summary"), str) else None
        if text_key is None:
            text_key = next((k for k in TEXT_KEYS if isinstance(value.get(k), str)), None)
        if text_key is None:
            raise ValueError(
                "a store value needs its text as a string under summary, content, text or memory"
            )
        skip = set(EVENT_FIELDS) | {text_key, "tenantId", "actorId", "projectId", "metadata", PROVENANCE}
        metadata: Dict[str, Any] = dict(value.get("metadata") or {})
        metadata.update({k: v for k, v in value.items() if k not in skip})
        if RESERVED in metadata:
            raise ValueError(f"{RESERVED!r} is the store's own metadata key; use another name")
        metadata[RESERVED] = {"key": key, "textKey": text_key}
        event: Dict[str, Any] = {k: value[k] for k in EVENT_FIELDS if value.get(k) is not None}
        event["summary"] = value[text_key]
        event.update(
            {
                "eventId": key,
                "tenantId": namespace[0],
                "actorId": namespace[1],
                "metadata": metadata,
            }
        )
        if len(namespace) == 3:
            event["projectId"] = namespace[2]
        event.setdefault("occurredAt", datetime.now(timezone.utc))
        event.setdefault("sourceRefs", [self.source_ref])
        if self.source_trust is not None:
            event.setdefault("sourceTrust", self.source_trust)
        return event

    def _value(self, event: Mapping[str, Any]) -> Dict[str, Any]:
        metadata = dict(event.get("metadata") or {})
        own = metadata.pop(RESERVED, None) or {}
        value: Dict[str, Any] = metadata
        value[own.get("textKey", self.text_key)] = event["summary"]
        value[PROVENANCE] = {k: event.get(k) for k in _PROVENANCE_FIELDS}
        return value

    def _search_item(self, event: Mapping[str, Any], value: Dict[str, Any], score: Optional[float]) -> SearchItem:
        own = (event.get("metadata") or {}).get(RESERVED) or {}
        return SearchItem(
            namespace=_namespace_of(event),
            key=own.get("key", event["eventId"]),
            value=value,
            created_at=_time(event.get("recordedAt")),
            updated_at=_time(event.get("recordedAt")),
            score=score,
        )


def _same_content(stored: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether a put repeats what the key already holds (its time of writing aside)."""
    for field, given in event.items():
        if field in ("eventId", "tenantId", "occurredAt", "sourceRefs"):
            continue
        if stored.get(field) != given:
            return False
    return True


def _matches(ns: Tuple[str, ...], conditions: Any) -> bool:
    for cond in conditions or ():
        path = tuple(cond.path)
        if len(path) > len(ns):
            return False
        part = ns[: len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path) :]
        if any(p != "*" and p != n for p, n in zip(path, part)):
            return False
    return True
