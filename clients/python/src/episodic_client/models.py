"""Typed shapes of the main requests and answers (``TypedDict``, so values stay plain dicts).

Field names are the API's camelCase. Each model names the ``/openapi.json`` component it
mirrors in :data:`SCHEMAS`; the package's tests check every declared field against that
schema, and that required fields agree. A ``_...Required`` base holds the required keys and
the public class adds the optional ones (``total=False``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from typing import TypedDict

__all__ = [
    "Retention",
    "EventWrite",
    "Decision",
    "Derived",
    "StoredEvent",
    "WriteResponse",
    "BatchResult",
    "BatchResponse",
    "Interaction",
    "ObserveResponse",
    "Scope",
    "RecallRequest",
    "ScoreBreakdown",
    "RecallStats",
    "Hit",
    "RecallResponse",
    "TimelinePage",
    "Receipt",
    "AuditEntry",
    "AuditPage",
    "HistoryResponse",
    "ErasureReceipt",
    "ReviewItem",
    "ReviewList",
    "ReviewOutcome",
    "Problem",
    "ImportSummary",
    "SCHEMAS",
]


class _RetentionRequired(TypedDict):
    deleteOnRequest: bool


class Retention(_RetentionRequired, total=False):
    expiresAt: Optional[str]


class _EventWriteRequired(TypedDict):
    summary: str
    actorId: str
    occurredAt: str
    sourceRefs: List[str]


class EventWrite(_EventWriteRequired, total=False):
    """The body of ``POST /v1/events``; only the four required fields are the minimal write."""

    eventId: Optional[str]
    eventType: Optional[str]
    actorNames: Optional[List[str]]
    projectId: Optional[str]
    resourceRefs: Optional[List[str]]
    sourceTrust: Optional[str]
    confidence: Optional[str]
    privacyClass: Optional[str]
    retention: Optional[Retention]
    supersedesEventIds: Optional[List[str]]
    correctionPath: Optional[str]
    metadata: Optional[Dict[str, Any]]
    tenantId: Optional[str]


class _DecisionRequired(TypedDict):
    decision: str
    reason: str


class Decision(_DecisionRequired, total=False):
    approverRole: str


class Derived(TypedDict):
    field: str
    value: Any
    reason: str


class _StoredEventRequired(TypedDict):
    eventId: str
    eventType: str
    occurredAt: str
    recordedAt: str
    actorId: str
    tenantId: str
    resourceRefs: List[str]
    summary: str
    sourceRefs: List[str]
    sourceTrust: str
    confidence: str
    privacyClass: str
    retention: Retention
    supersedesEventIds: List[str]
    correctionPath: str
    policyVersion: str
    status: str


class StoredEvent(_StoredEventRequired, total=False):
    projectId: Optional[str]
    metadata: Dict[str, Any]
    contentWarnings: List[str]
    actorNames: List[str]
    supersededBy: Optional[str]
    supersededAt: Optional[str]


class _WriteResponseRequired(TypedDict):
    eventId: str
    status: str
    decision: Decision


class WriteResponse(_WriteResponseRequired, total=False):
    """A write's answer (201 ``active`` or 202 ``pending_review``)."""

    event: Optional[StoredEvent]
    derived: Optional[List[Derived]]
    visibleToWriter: Optional[bool]
    visibility: Optional[str]


class _ProblemRequired(TypedDict):
    type: str
    title: str
    status: int
    detail: str
    code: str


class Problem(_ProblemRequired, total=False):
    requestId: Optional[str]
    errors: Optional[List[Dict[str, str]]]
    missingRole: Optional[str]


class _BatchResultRequired(TypedDict):
    status: int


class BatchResult(_BatchResultRequired, total=False):
    eventId: Optional[str]
    eventStatus: Optional[str]
    decision: Optional[Decision]
    event: Optional[StoredEvent]
    derived: Optional[List[Derived]]
    error: Optional[Problem]


class BatchResponse(TypedDict):
    results: List[BatchResult]


class _InteractionRequired(TypedDict):
    text: str
    role: str
    actorId: str
    occurredAt: str
    sourceRefs: List[str]


class Interaction(_InteractionRequired, total=False):
    """The body of ``POST /v1/observe``; ``role`` is user, assistant, tool or system."""

    sourceTrust: Optional[str]
    projectId: Optional[str]
    resourceRefs: List[str]


class _ObserveResponseRequired(TypedDict):
    outcome: str
    classification: Dict[str, Any]


class ObserveResponse(_ObserveResponseRequired, total=False):
    reason: Optional[str]
    candidate: Optional[Dict[str, Any]]
    result: Optional[WriteResponse]


class Scope(TypedDict, total=False):
    """Recall's scope: lists are any-of; the tenant always comes from the key."""

    actorIds: List[str]
    projectIds: List[str]
    eventTypes: List[str]
    resourceRefs: List[str]
    occurredAfter: Optional[str]
    occurredBefore: Optional[str]
    metadata: Dict[str, Any]


class _RecallRequestRequired(TypedDict):
    query: str


class RecallRequest(_RecallRequestRequired, total=False):
    scope: Scope
    limit: int
    includeSuperseded: bool
    includeStale: bool
    asOf: Optional[str]
    exact: bool


class ScoreBreakdown(TypedDict):
    relevance: float
    lexical: float
    context: float
    episode: float
    actor: float
    date: float
    question: float
    recency: float
    trust: float
    confidence: float
    cosine: float
    bm25: float


class RecallStats(TypedDict):
    candidates: int
    path: str
    exact: bool


class _HitRequired(TypedDict):
    event: StoredEvent
    score: float
    scoreBreakdown: ScoreBreakdown
    stale: bool


class Hit(_HitRequired, total=False):
    staleBy: Optional[str]


class RecallResponse(TypedDict):
    """``evidence`` holds one block per hit, in the order of ``results``."""

    results: List[Hit]
    evidence: str
    stats: RecallStats


class _TimelinePageRequired(TypedDict):
    events: List[StoredEvent]


class TimelinePage(_TimelinePageRequired, total=False):
    nextCursor: Optional[str]


class Receipt(TypedDict):
    eventId: str
    deletedAt: str
    purged: bool


class _AuditEntryRequired(TypedDict):
    at: str
    tenantId: str
    keyId: str
    action: str
    eventIds: List[str]


class AuditEntry(_AuditEntryRequired, total=False):
    seq: int
    logSeq: Optional[int]
    detail: Dict[str, Any]


class _AuditPageRequired(TypedDict):
    entries: List[AuditEntry]


class AuditPage(_AuditPageRequired, total=False):
    nextCursor: Optional[str]


class _HistoryResponseRequired(TypedDict):
    eventId: str
    history: List[AuditEntry]


class HistoryResponse(_HistoryResponseRequired, total=False):
    event: Optional[StoredEvent]


class ErasureReceipt(TypedDict):
    actorId: str
    erasedAt: str
    erased: List[str]
    kept: List[Dict[str, str]]
    purged: bool


class ReviewItem(TypedDict):
    event: StoredEvent
    decision: Decision


class ReviewList(TypedDict):
    reviews: List[ReviewItem]


class _ReviewOutcomeRequired(TypedDict):
    eventId: str
    status: str
    decidedAt: str


class ReviewOutcome(_ReviewOutcomeRequired, total=False):
    note: Optional[str]


class ImportSummary(TypedDict):
    """``POST /v1/import``'s answer: counts, and the lines not imported with why."""

    lines: int
    allowed: int
    review: int
    unchanged: int
    notImported: int
    embedded: int
    vectorsReused: int
    denied: List[Dict[str, Any]]
    failed: List[Dict[str, Any]]
    invalid: List[Dict[str, Any]]


#: Each model and the ``components.schemas`` entry of ``/openapi.json`` it mirrors.
SCHEMAS: Dict[type, str] = {
    Retention: "Retention",
    EventWrite: "EventWrite",
    Decision: "Decision",
    Derived: "Derived",
    StoredEvent: "StoredEvent",
    WriteResponse: "WriteResponse",
    BatchResult: "BatchResult",
    BatchResponse: "BatchResponse",
    Interaction: "Interaction",
    ObserveResponse: "ObserveResponse",
    Scope: "Scope",
    RecallRequest: "RecallRequest",
    ScoreBreakdown: "Breakdown",
    RecallStats: "RecallStats",
    Hit: "Hit",
    RecallResponse: "RecallResponse",
    TimelinePage: "TimelinePage",
    Receipt: "Receipt",
    AuditEntry: "AuditEntry",
    AuditPage: "AuditPage",
    HistoryResponse: "HistoryResponse",
    ErasureReceipt: "ErasureReceipt",
    ReviewItem: "ReviewItem",
    ReviewList: "ReviewList",
    ReviewOutcome: "ReviewOutcome",
    Problem: "ProblemDoc",
    ImportSummary: "ImportSummary",
}
