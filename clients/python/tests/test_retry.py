"""Retries against the real server behind a fault-injecting proxy (tests/faults.py)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest

from conftest import free_port
from faults import FaultProxy, problem
from episodic_client import (
    AsyncEpisodicClient,
    EpisodicClient,
    EpisodicConnectionError,
    RateLimitedError,
    RetryPolicy,
    UnavailableError,
)

FAST = RetryPolicy(max_retries=3, backoff=0.01, max_backoff=0.05)


def body(seen):
    return json.loads(seen[2])


def test_a_write_whose_answer_was_lost_is_retried_and_returns_the_stored_result(server):
    who = f"user:{uuid.uuid4().hex[:8]}"
    with FaultProxy(server.base_url, [("lose",)]) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        answer = c.write({"summary": "Dana prefers letters", "actorId": who, "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-9"]})
        # Both attempts reached the server, with the same client-chosen id...
        assert proxy.forwarded == 2
        ids = {body(s)["eventId"] for s in proxy.seen}
        assert ids == {answer["eventId"]}
    # ...and the second got the first one's stored result: one event, not two.
    with EpisodicClient(server.base_url, server.key) as direct:
        events = direct.timeline(actor_id=who)["events"]
        assert [e["eventId"] for e in events] == [answer["eventId"]]
        assert answer["event"]["recordedAt"] == events[0]["recordedAt"]


def test_a_lost_batch_and_a_lost_correction_are_replayed_too(server):
    who = f"user:{uuid.uuid4().hex[:8]}"
    with FaultProxy(server.base_url, [("lose",), ("forward",), ("lose",)]) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        batch = c.write_batch([{"summary": f"Dana step {i}", "actorId": who, "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-9"]} for i in range(2)])
        first = batch["results"][0]["eventId"]
        fixed = c.correct(first, {"summary": "Dana step zero", "sourceTrust": "user_provided"})
        assert proxy.forwarded == 4
    with EpisodicClient(server.base_url, server.key) as direct:
        ids = [e["eventId"] for e in direct.timeline(actor_id=who, include_superseded=True)["events"]]
        assert sorted(ids) == sorted([r["eventId"] for r in batch["results"]] + [fixed["eventId"]])


def test_503_and_429_are_retried_after_retry_after(server):
    script = [("answer", 503, problem(503, "not_ready"), "1"), ("answer", 429, problem(429, "too_many_requests"), "0")]
    with FaultProxy(server.base_url, script) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        started = time.monotonic()
        # observe carries no idempotency id, but these answers mean the server did nothing.
        answer = c.observe({"text": "ok thanks!", "role": "user", "actorId": "user:x", "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-1"]})
        assert answer["outcome"] == "ignored"
        assert time.monotonic() - started >= 1.0
        assert len(proxy.seen) == 3 and proxy.forwarded == 1


def test_what_may_have_acted_is_not_repeated_without_an_id(server):
    with FaultProxy(server.base_url, [("lose",)]) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        with pytest.raises(EpisodicConnectionError) as err:
            c.observe({"text": "Please send invoices to the billing team from now on", "role": "user", "actorId": "user:y", "occurredAt": "2026-06-17T09:20:00Z", "sourceRefs": ["chat-1"]})
        assert err.value.status is None and proxy.forwarded == 1
    script = [("answer", 503, problem(503, "storage_unavailable"), None)]
    with FaultProxy(server.base_url, script) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        with pytest.raises(UnavailableError) as err:
            c.approve("some-event")
        assert err.value.code == "storage_unavailable" and err.value.request_id == "injected-storage_unavailable"
        assert len(proxy.seen) == 1


def test_retries_stop_at_the_limit_and_a_long_retry_after_is_not_waited_for(server):
    script = [("answer", 429, problem(429, "too_many_requests"), "3600")]
    with FaultProxy(server.base_url, script) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        with pytest.raises(RateLimitedError) as err:
            c.recall("anything")
        assert err.value.retry_after == 3600 and len(proxy.seen) == 1
    script = [("answer", 503, problem(503, "not_ready"), "0")] * 4
    with FaultProxy(server.base_url, script) as proxy, EpisodicClient(proxy.url, server.key, retry=FAST) as c:
        with pytest.raises(UnavailableError):
            c.recall("anything")
        assert len(proxy.seen) == 4


def test_connection_refused_is_a_connection_error_after_the_retries():
    url = f"http://127.0.0.1:{free_port()}"
    with EpisodicClient(url, "epi_x", retry=FAST) as c:
        with pytest.raises(EpisodicConnectionError) as err:
            c.recall("anything")
    assert "after 4 attempt(s)" in err.value.detail


def test_without_retries_the_client_leaves_the_id_to_the_server(server):
    with FaultProxy(server.base_url, []) as proxy, EpisodicClient(proxy.url, server.key, retry=RetryPolicy(max_retries=0)) as c:
        c.write_minimal("Dana asked for a callback", "user:z", "2026-06-17T09:20:00Z", ["chat-3"])
        assert "eventId" not in body(proxy.seen[0])


def test_the_async_client_replays_a_lost_write(server):
    who = f"user:{uuid.uuid4().hex[:8]}"

    async def go(url):
        async with AsyncEpisodicClient(url, server.key, retry=FAST) as c:
            return await c.write_minimal("Dana prefers calls", who, "2026-06-17T09:20:00Z", ["chat-4"])

    with FaultProxy(server.base_url, [("lose",)]) as proxy:
        answer = asyncio.run(go(proxy.url))
        assert proxy.forwarded == 2
    with EpisodicClient(server.base_url, server.key) as direct:
        assert [e["eventId"] for e in direct.timeline(actor_id=who)["events"]] == [answer["eventId"]]
