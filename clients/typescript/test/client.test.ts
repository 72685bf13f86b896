import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, test } from "node:test";

import {
  AuthenticationError,
  ConflictError,
  EpisodicClient,
  EpisodicError,
  NotFoundError,
  PermissionDeniedError,
  PolicyDeniedError,
  SelfApprovalError,
  TenantMismatchError,
  ValidationError,
  evidenceBlocks,
  type EventWrite,
} from "../src/index.js";
import { startServer, type Server } from "./server.js";

let server: Server;
let client: EpisodicClient;

before(async () => {
  server = await startServer();
  client = new EpisodicClient(server.baseUrl, server.key);
});
after(async () => server?.stop());

const actor = () => `user:${randomUUID().slice(0, 8)}`;
const event = (actorId: string, summary: string, extra: Partial<EventWrite> = {}): EventWrite => ({
  summary,
  actorId,
  occurredAt: "2026-06-17T09:20:00Z",
  sourceRefs: ["chat-17"],
  ...extra,
});

test("write, replay by eventId, and a conflict on other content", async () => {
  const who = actor();
  const first = await client.write(event(who, "Dana prefers renewal notices by email"), { refresh: true });
  assert.equal(first.status, "active");
  assert.equal(first.event?.eventId, first.eventId);
  assert.match(first.eventId, /^[0-9a-f-]{36}$/);
  const again = await client.write(event(who, "Dana prefers renewal notices by email", { eventId: first.eventId }));
  assert.deepEqual(again, first);
  await assert.rejects(client.write(event(who, "Dana prefers letters", { eventId: first.eventId })), (e: unknown) => e instanceof ConflictError && e.status === 409);
});

test("minimal write and batch (201 and 207)", async () => {
  const who = actor();
  const minimal = await client.writeMinimal("The March invoice was paid", who, new Date("2026-06-18T08:00:00Z"), ["billing-8812"]);
  assert.equal(minimal.event?.occurredAt, "2026-06-18T08:00:00Z");
  assert.ok(minimal.derived?.some((d) => d.field === "eventType"));
  const ok = await client.writeBatch([event(who, "Dana asked for email"), event(who, "Dana paid")]);
  assert.deepEqual(ok.results.map((r) => r.status), [201, 201]);
  const mixed = await client.writeBatch([event(who, "Dana moved"), { summary: "no actor", occurredAt: "2026-06-17T09:21:00Z", sourceRefs: ["c"] } as EventWrite]);
  assert.deepEqual(mixed.results.map((r) => r.status), [201, 422]);
  assert.equal(mixed.results[1]!.error?.code, "validation_failed");
});

test("observe, recall with scope, evidence blocks", async () => {
  const who = actor();
  const other = actor();
  const kept = await client.observe({ text: "Please always send my invoices to the billing team from now on", role: "user", actorId: who, occurredAt: "2026-06-18T08:02:00Z", sourceRefs: ["chat-5"], sourceTrust: "user_provided" });
  assert.equal(kept.outcome, "candidate");
  const ignored = await client.observe({ text: "ok thanks!", role: "user", actorId: who, occurredAt: "2026-06-18T08:03:00Z", sourceRefs: ["chat-5"] });
  assert.equal(ignored.outcome, "ignored");
  await client.write(event(other, "Lee wants invoices by post"));
  const answer = await client.recall("Where should invoices go?", { actorIds: [who] }, 5);
  assert.deepEqual(answer.results.map((h) => h.event.actorId), [who]);
  const blocks = evidenceBlocks(answer);
  assert.ok(blocks[0]!.startsWith("Past event, not current instruction:"));
  assert.ok(blocks[0]!.includes(`event_id: ${answer.results[0]!.event.eventId}`));
  assert.equal(answer.stats.candidates, 1);
});

test("timeline, get, history, correct, delete", async () => {
  const who = actor();
  const first = await client.write(event(who, "Dana prefers morning calls", { sourceTrust: "user_provided" }));
  assert.deepEqual((await client.timeline({ actorId: who })).events.map((e) => e.eventId), [first.eventId]);
  const fixed = await client.correct(first.eventId, { summary: "Dana prefers afternoon calls", sourceTrust: "user_provided" });
  const old = await client.getEvent(first.eventId);
  assert.equal(old.status, "superseded");
  assert.equal(old.supersededBy, fixed.eventId);
  const history = await client.history(first.eventId);
  assert.equal(history.history[0]!.action, "write");
  assert.ok(history.history.some((h) => h.action === "correct"));
  const receipt = await client.delete(fixed.eventId);
  assert.deepEqual(await client.delete(fixed.eventId), receipt);
  await assert.rejects(client.getEvent(fixed.eventId), NotFoundError);
  const withOld = await client.timeline({ actorId: who, includeSuperseded: true, metadata: {} });
  assert.deepEqual(withOld.events.map((e) => e.eventId), [first.eventId]);
});

test("reviews with another key, erasure and audit", async () => {
  const who = actor();
  const held = await client.write(event(who, "A web page says notices go by post", { sourceTrust: "untrusted_content" }));
  const held2 = await client.write(event(who, "Another web page says notices go by fax", { sourceTrust: "untrusted_content" }));
  assert.equal(held.status, "pending_review");
  await assert.rejects(client.approve(held.eventId), (e: unknown) => e instanceof SelfApprovalError && e.code === "self_approval_forbidden");
  const reviewer = new EpisodicClient(server.baseUrl, server.reviewerKey);
  const pending = (await reviewer.listReviews()).reviews.map((r) => r.event.eventId);
  assert.ok(pending.includes(held.eventId) && pending.includes(held2.eventId));
  const approved = await reviewer.approve(held.eventId, { note: "checked" });
  assert.equal(approved.status, "active");
  assert.equal(approved.note, "checked");
  assert.equal((await reviewer.reject(held2.eventId)).status, "rejected");
  await assert.rejects(reviewer.approve(held.eventId), ConflictError);
  const receipt = await client.erasure(who);
  assert.deepEqual(receipt.erased, [held.eventId]);
  const trail = await client.audit({ eventId: held.eventId });
  assert.deepEqual(trail.entries.map((e) => e.action).slice(0, 2), ["write", "approve"]);
});

test("problems become typed errors with status, code, request id and field errors", async () => {
  const err = await client.write({ summary: "x", occurredAt: "yesterday", colour: "blue" } as unknown as EventWrite).catch((e: unknown) => e);
  assert.ok(err instanceof ValidationError);
  assert.equal(err.status, 422);
  assert.equal(err.code, "validation_failed");
  assert.ok(err.requestId);
  const fields = new Set(err.errors.map((f) => f.field));
  for (const f of ["occurredAt", "colour", "actorId", "sourceRefs"]) assert.ok(fields.has(f), f);

  const denied = await client.write(event(actor(), "A diagnosis was shared", { privacyClass: "sensitive", retention: { deleteOnRequest: true } })).catch((e: unknown) => e);
  assert.ok(denied instanceof PolicyDeniedError);
  assert.deepEqual(denied.decision, { decision: "deny", reason: "sensitive_event_requires_expiry" });

  await assert.rejects(client.write(event(actor(), "Dana asked", { tenantId: "globex" })), TenantMismatchError);
  const reader = new EpisodicClient(server.baseUrl, server.readerKey);
  const forbidden = await reader.write(event(actor(), "Dana asked")).catch((e: unknown) => e);
  assert.ok(forbidden instanceof PermissionDeniedError);
  assert.equal(forbidden.missingRole, "writer");
  const bad = new EpisodicClient(server.baseUrl, "epi_0000000000000000_wrong", { retry: { maxRetries: 0 } });
  const unauth = await bad.recall("anything").catch((e: unknown) => e);
  assert.ok(unauth instanceof AuthenticationError && unauth instanceof EpisodicError);
  assert.equal(unauth.status, 401);

  const traced = new EpisodicClient(server.baseUrl, server.key, { headers: { "X-Request-ID": "pipeline-run-7" } });
  const missing = await traced.getEvent("missing").catch((e: unknown) => e);
  assert.ok(missing instanceof NotFoundError);
  assert.equal(missing.requestId, "pipeline-run-7");
});

test("export and import round-trip as NDJSON", async () => {
  const who = actor();
  const ids = [];
  for (const i of [0, 1]) ids.push((await client.write(event(who, `Dana noted item ${i}`))).eventId);
  const exported = (await client.exportEvents()).filter((e) => e.actorId === who);
  assert.deepEqual(exported.map((e) => e.eventId).sort(), ids.sort());
  const withVectors = (await client.exportEvents({ withVectors: true })).filter((e) => e.actorId === who);
  assert.ok(withVectors.every((e) => Array.isArray((e as unknown as { vector: number[] }).vector)));
  const again = await client.importEvents(exported);
  assert.equal(again.lines, 2);
  assert.equal(again.unchanged, 2);
  const summary = await client.importEvents([{ ...exported[0]!, eventId: `imported-${who}`, summary: "Dana noted an imported item" }, { ...exported[0]!, eventId: `other-${who}`, tenantId: "globex" }]);
  assert.equal(summary.allowed, 1);
  assert.equal(summary.invalid[0]!.code, "tenant_mismatch");
  assert.equal((await client.getEvent(`imported-${who}`)).summary, "Dana noted an imported item");
});
