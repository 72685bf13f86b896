"""The async client has the sync client's surface; here it drives the same routes."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from episodic_client import AsyncEpisodicClient, NotFoundError, ValidationError, evidence_blocks


def run(coro):
    return asyncio.run(coro)


def test_the_async_client_covers_the_agent_routes(server):
    who = f"user:{uuid.uuid4().hex[:8]}"

    async def scenario():
        async with AsyncEpisodicClient(server.base_url, server.key) as c:
            written = await c.write({"summary": "Dana prefers invoices by email", "actorId": who, "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-1"], "sourceTrust": "user_provided"})
            minimal = await c.write_minimal("Dana paid the March invoice", who, "2026-06-18T09:20:00Z", ["billing-1"])
            batch = await c.write_batch([{"summary": "Dana moved to Berlin", "actorId": who, "occurredAt": "2026-06-19T09:20:00Z", "sourceRefs": ["chat-2"]}])
            observed = await c.observe({"text": "ok thanks!", "role": "user", "actorId": who, "occurredAt": "2026-06-19T09:21:00Z", "sourceRefs": ["chat-2"]})
            recall = await c.recall("How does Dana want invoices?", scope={"actorIds": [who]}, limit=3)
            timeline = await c.timeline(actor_id=who)
            fixed = await c.correct(written["eventId"], {"summary": "Dana prefers invoices by post", "sourceTrust": "user_provided"})
            got = await c.get_event(written["eventId"])
            history = await c.history(written["eventId"])
            receipt = await c.delete(minimal["eventId"])
            reviews = await c.list_reviews()
            audit = await c.audit(event_id=written["eventId"])
            exported = [e for e in await c.export() if e["actorId"] == who]
            reimported = await c.import_events(exported)
            erased = await c.erasure(who)
            with pytest.raises(NotFoundError):
                await c.get_event(minimal["eventId"])
            with pytest.raises(ValidationError) as err:
                await c.recall("")
            return locals()

    r = run(scenario())
    assert r["written"]["status"] == "active" and r["minimal"]["status"] == "active"
    assert r["batch"]["results"][0]["status"] == 201
    assert r["observed"]["outcome"] == "ignored"
    assert r["recall"]["results"][0]["event"]["eventId"] == r["written"]["eventId"]
    assert len(evidence_blocks(r["recall"])) == len(r["recall"]["results"])
    assert len(r["timeline"]["events"]) == 3
    assert r["got"]["supersededBy"] == r["fixed"]["eventId"]
    assert r["history"]["history"][0]["action"] == "write"
    assert r["receipt"]["eventId"] == r["minimal"]["eventId"]
    assert isinstance(r["reviews"]["reviews"], list)
    assert r["audit"]["entries"][0]["action"] == "write"
    assert len(r["exported"]) == 3 and r["reimported"]["unchanged"] == 3
    assert r["fixed"]["eventId"] in r["erased"]["erased"]
    assert r["err"].value.errors[0]["field"] == "query"
