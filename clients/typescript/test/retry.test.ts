import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import { EpisodicClient, EpisodicConnectionError, RateLimitedError, UnavailableError } from "../src/index.js";
import { FaultProxy, freePort, problem, startServer, type Fault, type Server } from "./server.js";

let server: Server;
before(async () => {
  server = await startServer();
});
after(async () => server?.stop());

const FAST = { maxRetries: 3, backoff: 0.01, maxBackoff: 0.05 };

async function withProxy<R>(script: Fault[], run: (proxy: FaultProxy, c: EpisodicClient) => Promise<R>, retry: object = FAST): Promise<R> {
  const proxy = await new FaultProxy(server.baseUrl, script).start();
  try {
    return await run(proxy, new EpisodicClient(proxy.url, server.key, { retry }));
  } finally {
    await proxy.close();
  }
}

test("a write whose answer was lost is retried and returns the stored result", async () => {
  const who = `user:${randomUUID().slice(0, 8)}`;
  const answer = await withProxy([["lose"]], async (proxy, c) => {
    const a = await c.writeMinimal("Dana prefers letters", who, "2026-06-17T09:20:00Z", ["chat-9"]);
    assert.equal(proxy.forwarded, 2);
    assert.deepEqual(new Set(proxy.seen.map((s) => JSON.parse(s.body).eventId)), new Set([a.eventId]));
    return a;
  });
  const direct = new EpisodicClient(server.baseUrl, server.key);
  const events = (await direct.timeline({ actorId: who })).events;
  assert.deepEqual(events.map((e) => e.eventId), [answer.eventId]);
  assert.equal(answer.event?.recordedAt, events[0]!.recordedAt);
});

test("503 not_ready and 429 are retried after Retry-After, even for observe", async () => {
  await withProxy([["answer", 503, problem(503, "not_ready"), "1"], ["answer", 429, problem(429, "too_many_requests"), "0"]], async (proxy, c) => {
    const started = Date.now();
    const a = await c.observe({ text: "ok thanks!", role: "user", actorId: "user:x", occurredAt: "2026-06-17T09:20:00Z", sourceRefs: ["chat-1"] });
    assert.equal(a.outcome, "ignored");
    assert.ok(Date.now() - started >= 1000);
    assert.equal(proxy.seen.length, 3);
  });
});

test("what may have acted is not repeated without an id", async () => {
  await withProxy([["lose"]], async (proxy, c) => {
    const err = await c.observe({ text: "Please send invoices to billing from now on", role: "user", actorId: "user:y", occurredAt: "2026-06-17T09:20:00Z", sourceRefs: ["c"] }).catch((e: unknown) => e);
    assert.ok(err instanceof EpisodicConnectionError && err.status === null);
    assert.equal(proxy.forwarded, 1);
  });
  await withProxy([["answer", 503, problem(503, "storage_unavailable"), null]], async (proxy, c) => {
    const err = await c.approve("some-event").catch((e: unknown) => e);
    assert.ok(err instanceof UnavailableError);
    assert.equal(err.code, "storage_unavailable");
    assert.equal(err.requestId, "injected-storage_unavailable");
    assert.equal(proxy.seen.length, 1);
  });
});

test("a long Retry-After is not waited for; retries stop at the limit", async () => {
  await withProxy([["answer", 429, problem(429, "too_many_requests"), "3600"]], async (proxy, c) => {
    const err = await c.recall("anything").catch((e: unknown) => e);
    assert.ok(err instanceof RateLimitedError && err.retryAfter === 3600);
    assert.equal(proxy.seen.length, 1);
  });
  const fault: Fault = ["answer", 503, problem(503, "not_ready"), "0"];
  await withProxy([fault, fault, fault, fault], async (proxy, c) => {
    await assert.rejects(c.recall("anything"), UnavailableError);
    assert.equal(proxy.seen.length, 4);
  });
});

test("connection refused is a connection error after the retries", async () => {
  const c = new EpisodicClient(`http://127.0.0.1:${await freePort()}`, "epi_x", { retry: FAST });
  const err = await c.recall("anything").catch((e: unknown) => e);
  assert.ok(err instanceof EpisodicConnectionError);
  assert.match(err.detail, /ECONNREFUSED \(after 4 attempt\(s\)\)/);
});

test("without retries the id is left to the server", async () => {
  await withProxy([], async (proxy, c) => {
    await c.writeMinimal("Dana asked for a callback", "user:z", "2026-06-17T09:20:00Z", ["chat-3"]);
    assert.equal(JSON.parse(proxy.seen[0]!.body).eventId, undefined);
  }, { maxRetries: 0 });
});
