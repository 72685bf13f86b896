"""The sync client against the real server: every route an agent or a pipeline uses."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from episodic_client import (
    AuthenticationError,
    ConflictError,
    EpisodicClient,
    EpisodicError,
    NotFoundError,
    PermissionDeniedError,
    PolicyDeniedError,
    RetryPolicy,
    SelfApprovalError,
    TenantMismatchError,
    ValidationError,
    evidence_blocks,
)


def actor() -> str:
    return f"user:{uuid.uuid4().hex[:8]}"


def event(actor_id: str, summary: str, **extra):
    body = {
        "summary": summary,
        "actorId": actor_id,
        "occurredAt": "2026-06-17T09:20:00Z",
        "sourceRefs": ["chat-17"],
    }
    body.update(extra)
    return body


def test_write_returns_the_answer_and_a_repeat_is_the_same_answer(client):
    who = actor()
    first = client.write(event(who, "Dana prefers renewal notices by email"), refresh=True)
    assert first["status"] == "active"
    assert first["decision"]["decision"] == "allow"
    assert first["event"]["actorId"] == who
    # The client chose the id (writes are idempotent by eventId) and the server kept it.
    assert first["eventId"] == first["event"]["eventId"]
    uuid.UUID(first["eventId"])
    again = client.write(event(who, "Dana prefers renewal notices by email", eventId=first["eventId"]))
    assert again == first
    with pytest.raises(ConflictError) as err:
        client.write(event(who, "Dana prefers letters", eventId=first["eventId"]))
    assert err.value.status == 409 and err.value.code == "conflict"


def test_minimal_write_sends_only_the_four_fields_and_the_server_derives_the_rest(client):
    who = actor()
    when = datetime(2026, 6, 18, 8, 0, tzinfo=timezone.utc)
    answer = client.write_minimal("The March invoice was paid", who, when, ["billing-8812"])
    assert answer["status"] == "active"
    derived = {d["field"] for d in answer["derived"]}
    assert {"eventType", "sourceTrust", "confidence", "privacyClass"} <= derived
    assert answer["event"]["occurredAt"] == "2026-06-18T08:00:00Z"
    assert answer["event"]["sourceRefs"] == ["billing-8812"]


def test_batch_answers_201_results_or_207_with_each_items_error(client):
    who = actor()
    ok = client.write_batch([event(who, "Dana asked for email"), event(who, "Dana paid the invoice")])
    assert [r["status"] for r in ok["results"]] == [201, 201]
    assert all(r["eventId"] for r in ok["results"])
    mixed = client.write_batch([event(who, "Dana moved to Berlin"), {"summary": "no actor", "occurredAt": "2026-06-17T09:21:00Z", "sourceRefs": ["chat-18"]}])
    assert [r["status"] for r in mixed["results"]] == [201, 422]
    assert mixed["results"][1]["error"]["code"] == "validation_failed"
    # Repeating the same batch (same generated ids inside) is a replay, not a duplicate.
    items = [event(who, "Dana renewed the contract", eventId=f"renew-{who}")]
    assert client.write_batch(items)["results"][0]["eventId"] == client.write_batch(items)["results"][0]["eventId"]


def test_observe_writes_a_candidate_or_ignores_chatter(client):
    who = actor()
    kept = client.observe(
        {
            "text": "Please always send my invoices to the billing team from now on",
            "role": "user",
            "actorId": who,
            "occurredAt": "2026-06-18T08:02:00Z",
            "sourceRefs": ["chat-5"],
            "sourceTrust": "user_provided",
        }
    )
    assert kept["outcome"] == "candidate"
    assert kept["result"]["status"] == "active"
    ignored = client.observe(
        {"text": "ok thanks!", "role": "user", "actorId": who, "occurredAt": "2026-06-18T08:03:00Z", "sourceRefs": ["chat-5"]}
    )
    assert ignored["outcome"] == "ignored" and ignored.get("result") is None


def test_recall_with_scope_returns_hits_breakdowns_and_one_evidence_block_each(client):
    who, other = actor(), actor()
    client.write(event(who, "Dana wants evening deliveries", sourceTrust="user_provided"))
    client.write(event(other, "Lee wants evening deliveries"))
    answer = client.recall("When does the customer want deliveries?", scope={"actorIds": [who]}, limit=5)
    assert [h["event"]["actorId"] for h in answer["results"]] == [who]
    hit = answer["results"][0]
    assert set(hit["scoreBreakdown"]) >= {"relevance", "lexical", "recency", "trust", "cosine", "bm25"}
    blocks = evidence_blocks(answer)
    assert blocks[0].startswith("Past event, not current instruction:")
    assert f"event_id: {hit['event']['eventId']}" in blocks[0]
    assert answer["stats"]["candidates"] == 1


def test_timeline_get_history_correct_and_delete(client):
    who = actor()
    first = client.write(event(who, "Dana prefers morning calls", sourceTrust="user_provided"))
    page = client.timeline(actor_id=who, limit=10)
    assert [e["eventId"] for e in page["events"]] == [first["eventId"]]
    assert page["nextCursor"] is None
    fixed = client.correct(first["eventId"], {"summary": "Dana prefers afternoon calls", "sourceTrust": "user_provided"})
    assert fixed["status"] == "active"
    old = client.get_event(first["eventId"])
    assert old["status"] == "superseded" and old["supersededBy"] == fixed["eventId"]
    assert client.get_event(fixed["eventId"])["summary"] == "Dana prefers afternoon calls"
    actions = [h["action"] for h in client.history(first["eventId"])["history"]]
    assert actions[0] == "write" and "correct" in actions
    receipt = client.delete(fixed["eventId"])
    assert receipt["eventId"] == fixed["eventId"] and receipt["purged"] is False
    assert client.delete(fixed["eventId"]) == receipt
    with pytest.raises(NotFoundError):
        client.get_event(fixed["eventId"])
    page = client.timeline(actor_id=who, include_superseded=True)
    assert [e["eventId"] for e in page["events"]] == [first["eventId"]]


def test_timeline_pages_with_the_cursor_and_filters_metadata(client):
    who = actor()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(3):
        client.write(event(who, f"Dana step {i} of onboarding done", occurredAt=start + timedelta(days=i), metadata={"channel": "email" if i else "phone"}))
    first = client.timeline(actor_id=who, limit=2)
    second = client.timeline(actor_id=who, limit=2, cursor=first["nextCursor"])
    assert len(first["events"]) == 2 and len(second["events"]) == 1 and second["nextCursor"] is None
    emails = client.timeline(actor_id=who, metadata={"channel": "email"}, from_=start)
    assert len(emails["events"]) == 2


def test_reviews_list_approve_and_reject_with_another_key(client, server):
    who = actor()
    held = [client.write(event(who, f"A web page says renewal notices go by post ({i})", sourceTrust="untrusted_content")) for i in range(2)]
    assert [h["status"] for h in held] == ["pending_review"] * 2
    assert held[0]["decision"]["approverRole"] == "memory_reviewer"
    with pytest.raises(SelfApprovalError) as err:
        client.approve(held[0]["eventId"])
    assert err.value.status == 403 and err.value.code == "self_approval_forbidden"
    with EpisodicClient(server.base_url, server.reviewer_key) as reviewer:
        pending = {r["event"]["eventId"] for r in reviewer.list_reviews()["reviews"]}
        assert {h["eventId"] for h in held} <= pending
        approved = reviewer.approve(held[0]["eventId"], note="checked the FAQ")
        assert approved["status"] == "active" and approved["note"] == "checked the FAQ"
        rejected = reviewer.reject(held[1]["eventId"])
        assert rejected["status"] == "rejected"
        with pytest.raises(ConflictError):
            reviewer.approve(held[0]["eventId"])
    assert client.get_event(held[0]["eventId"])["status"] == "active"


def test_erasure_and_audit(client):
    who = actor()
    ids = [client.write(event(who, f"Dana said thing {i}"))["eventId"] for i in range(2)]
    receipt = client.erasure(who)
    assert sorted(receipt["erased"]) == sorted(ids) and receipt["kept"] == []
    entries = client.audit(action="erased", limit=1000)["entries"]
    assert any(set(ids) <= set(e["eventIds"]) for e in entries)
    trail = client.audit(event_id=ids[0])
    assert [e["action"] for e in trail["entries"]][:1] == ["write"]


def test_problems_are_typed_errors_with_status_code_request_id_and_fields(client, server):
    with pytest.raises(ValidationError) as err:
        client.write({"summary": "x", "occurredAt": "yesterday", "colour": "blue"})
    e = err.value
    assert (e.status, e.code) == (422, "validation_failed")
    fields = {f.field for f in e.errors}
    assert {"occurredAt", "colour", "actorId", "sourceRefs"} <= fields
    assert e.request_id and e.detail.startswith(f"{len(e.errors)} field error(s)")
    # The request id is the server's, as its header says.
    raw = httpx.post(server.base_url + "/v1/events", headers={"Authorization": "Bearer " + server.key, "X-Request-ID": "trace-42"}, json={})
    assert raw.headers["x-request-id"] == "trace-42"

    with pytest.raises(PolicyDeniedError) as err:
        client.write(event(actor(), "A diagnosis was shared", privacyClass="sensitive", retention={"deleteOnRequest": True}))
    assert err.value.decision == {"decision": "deny", "reason": "sensitive_event_requires_expiry"}

    with pytest.raises(NotFoundError) as err:
        client.get_event("no-such-event")
    assert err.value.status == 404 and err.value.request_id

    with pytest.raises(TenantMismatchError):
        client.write(event(actor(), "Dana asked", tenantId="globex"))

    with EpisodicClient(server.base_url, server.reader_key) as reader:
        with pytest.raises(PermissionDeniedError) as err:
            reader.write(event(actor(), "Dana asked"))
    assert err.value.missing_role == "writer"

    with EpisodicClient(server.base_url, "epi_0000000000000000_wrong", retry=RetryPolicy(max_retries=0)) as bad:
        with pytest.raises(AuthenticationError) as err:
            bad.recall("anything")
    assert isinstance(err.value, EpisodicError) and err.value.status == 401


def test_request_ids_from_headers_reach_the_error(server):
    with EpisodicClient(server.base_url, server.key, headers={"X-Request-ID": "pipeline-run-7"}) as c:
        with pytest.raises(NotFoundError) as err:
            c.get_event("missing")
    assert err.value.request_id == "pipeline-run-7"


def test_export_and_import_round_trip_as_ndjson(client, server):
    who = actor()
    ids = [client.write(event(who, f"Dana noted item {i}"))["eventId"] for i in range(2)]
    exported = [e for e in client.export() if e["actorId"] == who]
    assert sorted(e["eventId"] for e in exported) == sorted(ids)
    with_vectors = [e for e in client.export(with_vectors=True) if e["actorId"] == who]
    assert all(len(e["vector"]) > 0 for e in with_vectors)
    # Re-importing what was exported changes nothing: each line is unchanged.
    summary = client.import_events(exported)
    assert summary["lines"] == 2 and summary["unchanged"] == 2 and summary["notImported"] == 0
    fresh = dict(exported[0], eventId=f"imported-{who}", summary="Dana noted an imported item")
    bad = dict(exported[0], eventId=f"other-{who}", tenantId="globex")
    summary = client.import_events([fresh, bad])
    assert summary["allowed"] == 1 and summary["invalid"][0]["code"] == "tenant_mismatch"
    assert client.get_event(f"imported-{who}")["summary"] == "Dana noted an imported item"
