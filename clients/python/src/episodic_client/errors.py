"""Typed errors for Episodic's RFC 9457 ``application/problem+json`` answers.

Every error answer of the server carries a stable ``code`` (docs/api.md, "Error codes"), the
HTTP ``status``, a human ``detail`` and the request's id (``requestId``, also sent as the
``X-Request-ID`` header). :func:`error_from_response` turns one into the most specific
subclass of :class:`EpisodicError`: by ``code`` first, then by status.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Type

__all__ = [
    "EpisodicError",
    "EpisodicConnectionError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "TenantMismatchError",
    "SelfApprovalError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "ValidationError",
    "PolicyDeniedError",
    "RateLimitedError",
    "ServerError",
    "UnavailableError",
    "FieldError",
    "error_from_response",
]


class FieldError(Dict[str, str]):
    """One entry of a problem's ``errors``: ``{"field": ..., "message": ...}``."""

    @property
    def field(self) -> str:
        return self.get("field", "")

    @property
    def message(self) -> str:
        return self.get("message", "")


class EpisodicError(Exception):
    """An error answer from the server (or no answer at all, for the connection subclass).

    Attributes:
        status: the HTTP status (``None`` when no answer arrived).
        code: the problem's stable ``code`` (``"validation_failed"``, ``"not_found"``, ...).
        request_id: the problem's ``requestId``, else the ``X-Request-ID`` response header.
        detail: what went wrong, and what to change where the server knows it.
        errors: the field errors of a ``validation_failed`` answer (every one at once).
        problem: the whole problem body, for the fields a subclass does not name
            (``missingRole``, ``missingGrant``, ``decision``, ...).
        retry_after: seconds from the ``Retry-After`` header, when the server sent one.
    """

    def __init__(
        self,
        status: Optional[int],
        code: str,
        detail: str,
        *,
        request_id: Optional[str] = None,
        errors: Optional[List[FieldError]] = None,
        problem: Optional[Mapping[str, Any]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.request_id = request_id
        self.errors: List[FieldError] = list(errors or [])
        self.problem: Dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after
        where = f" (request {request_id})" if request_id else ""
        prefix = f"{status} {code}" if status is not None else code
        super().__init__(f"{prefix}: {detail}{where}")

    @property
    def missing_role(self) -> Optional[str]:
        """The role the key lacks (``403 forbidden``), if the server named one."""
        return self.problem.get("missingRole")


class EpisodicConnectionError(EpisodicError):
    """No HTTP answer: the connection failed or timed out (after the retries allowed)."""


class BadRequestError(EpisodicError):
    """400: malformed JSON or a request malformed at the HTTP level."""


class AuthenticationError(EpisodicError):
    """401 ``unauthenticated``: missing, unknown or revoked key."""


class PermissionDeniedError(EpisodicError):
    """403: the key lacks a role (``missing_role``) or a grant (``missingGrant``)."""


class TenantMismatchError(PermissionDeniedError):
    """403 ``tenant_mismatch``: a body names another tenant than the key's."""


class SelfApprovalError(PermissionDeniedError):
    """403 ``self_approval_forbidden``: a key may not decide the review of its own write."""


class NotFoundError(EpisodicError):
    """404: no such event visible to the key (or no such route)."""


class ConflictError(EpisodicError):
    """409: an ``eventId`` reused with other content, a deleted id reused, a target
    already superseded, or a review no longer pending."""


class PayloadTooLargeError(EpisodicError):
    """413: the body is over the server's limit."""


class ValidationError(EpisodicError):
    """422 ``validation_failed``: ``errors`` lists every field error at once."""


class PolicyDeniedError(EpisodicError):
    """422 ``policy_denied``: the write policy denied the event; nothing was stored."""

    @property
    def decision(self) -> Optional[Dict[str, Any]]:
        """The policy's decision (``{"decision": "deny", "reason": ...}``)."""
        return self.problem.get("decision")


class RateLimitedError(EpisodicError):
    """429 ``too_many_requests``: too many failed authentications (see ``retry_after``)."""


class ServerError(EpisodicError):
    """500 and other 5xx answers not covered by :class:`UnavailableError`."""


class UnavailableError(ServerError):
    """503: ``not_ready``, ``storage_unavailable`` or ``too_many_connections``."""


_BY_CODE: Dict[str, Type[EpisodicError]] = {
    "unauthenticated": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "tenant_mismatch": TenantMismatchError,
    "self_approval_forbidden": SelfApprovalError,
    "not_found": NotFoundError,
    "route_not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "validation_failed": ValidationError,
    "policy_denied": PolicyDeniedError,
    "malformed_json": BadRequestError,
    "bad_request": BadRequestError,
    "too_many_requests": RateLimitedError,
    "not_ready": UnavailableError,
    "storage_unavailable": UnavailableError,
    "too_many_connections": UnavailableError,
    "internal": ServerError,
}

_BY_STATUS: Dict[int, Type[EpisodicError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    429: RateLimitedError,
    503: UnavailableError,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    from datetime import datetime, timezone

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def error_from_response(
    status: int, body: bytes, headers: Mapping[str, str]
) -> EpisodicError:
    """The typed error for an error answer (problem+json, or anything else a proxy sent)."""
    problem: Dict[str, Any] = {}
    try:
        parsed = json.loads(body.decode("utf-8")) if body else {}
        if isinstance(parsed, dict):
            problem = parsed
    except (UnicodeDecodeError, ValueError):
        pass
    code = str(problem.get("code") or _fallback_code(status))
    detail = problem.get("detail")
    if not isinstance(detail, str) or not detail:
        text = body.decode("utf-8", "replace").strip()[:200] if body else ""
        detail = text or f"HTTP {status} without a problem body"
    request_id = problem.get("requestId") or _header(headers, "x-request-id")
    raw_errors = problem.get("errors") or []
    errors = [FieldError(e) for e in raw_errors if isinstance(e, dict)]
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else EpisodicError
    return cls(
        status,
        code,
        detail,
        request_id=request_id,
        errors=errors,
        problem=problem,
        retry_after=parse_retry_after(_header(headers, "retry-after")),
    )


def _header(headers: Mapping[str, str], name: str) -> Optional[str]:
    value = headers.get(name)
    if value is None:
        value = headers.get(name.title())
    return value


def _fallback_code(status: int) -> str:
    # No problem body (a proxy's answer, say): say only what the status says.
    return f"http_{status}"
