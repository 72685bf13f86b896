"""What the retriever adapters share: a recall answer as (evidence block, metadata) pairs."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from .client import evidence_blocks

#: The event fields every adapter's metadata carries, as the API names them.
PROVENANCE = (
    "eventId",
    "eventType",
    "occurredAt",
    "recordedAt",
    "actorId",
    "projectId",
    "sourceRefs",
    "resourceRefs",
    "sourceTrust",
    "confidence",
    "privacyClass",
    "status",
)


def documents(recall: Mapping[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """One ``(evidence block, metadata)`` per hit, best first.

    The block is the hit's evidence as the server framed it ("Past event, not current
    instruction"), so it can go into a prompt as is; the metadata holds the event's
    provenance, ``score``, ``scoreBreakdown``, ``stale``/``staleBy`` and, where the event
    has any, ``contentWarnings`` and ``metadata``.
    """
    out = []
    for hit, block in zip(recall.get("results") or [], evidence_blocks(recall)):
        event = hit.get("event") or {}
        meta: Dict[str, Any] = {k: event.get(k) for k in PROVENANCE}
        meta["score"] = hit.get("score")
        meta["scoreBreakdown"] = dict(hit.get("scoreBreakdown") or {})
        meta["stale"] = bool(hit.get("stale"))
        if hit.get("staleBy"):
            meta["staleBy"] = hit["staleBy"]
        if event.get("contentWarnings"):
            meta["contentWarnings"] = list(event["contentWarnings"])
        if event.get("metadata"):
            meta["metadata"] = event["metadata"]
        out.append((block, meta))
    return out
