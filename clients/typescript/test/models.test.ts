/**
 * The declared types agree with the server's /openapi.json: `shapes` lists, for each type,
 * its fields and which are required, typed against the interfaces (`satisfies`), so a field
 * added to or dropped from an interface without this list failing to compile is impossible.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import type * as T from "../src/types.js";
import { startServer, type Server } from "./server.js";

type Shape<X> = { [K in keyof Required<X>]: {} extends Pick<X, K> ? "optional" : "required" };

const shapes = {
  EventWrite: { summary: "required", actorId: "required", occurredAt: "required", sourceRefs: "required", eventId: "optional", eventType: "optional", actorNames: "optional", projectId: "optional", resourceRefs: "optional", sourceTrust: "optional", confidence: "optional", privacyClass: "optional", retention: "optional", supersedesEventIds: "optional", correctionPath: "optional", metadata: "optional", tenantId: "optional" } satisfies Shape<T.EventWrite>,
  StoredEvent: { eventId: "required", eventType: "required", occurredAt: "required", recordedAt: "required", actorId: "required", tenantId: "required", resourceRefs: "required", summary: "required", sourceRefs: "required", sourceTrust: "required", confidence: "required", privacyClass: "required", retention: "required", supersedesEventIds: "required", correctionPath: "required", policyVersion: "required", status: "required", projectId: "optional", metadata: "optional", contentWarnings: "optional", actorNames: "optional", supersededBy: "optional", supersededAt: "optional" } satisfies Shape<T.StoredEvent>,
  WriteResponse: { eventId: "required", status: "required", decision: "required", event: "optional", derived: "optional", visibleToWriter: "optional", visibility: "optional" } satisfies Shape<T.WriteResponse>,
  Retention: { deleteOnRequest: "required", expiresAt: "optional" } satisfies Shape<T.Retention>,
  Derived: { field: "required", value: "required", reason: "required" } satisfies Shape<T.Derived>,
  BatchResult: { status: "required", eventId: "optional", eventStatus: "optional", decision: "optional", event: "optional", derived: "optional", error: "optional" } satisfies Shape<T.BatchResult>,
  BatchResponse: { results: "required" } satisfies Shape<T.BatchResponse>,
  Interaction: { text: "required", role: "required", actorId: "required", occurredAt: "required", sourceRefs: "required", sourceTrust: "optional", projectId: "optional", resourceRefs: "optional" } satisfies Shape<T.Interaction>,
  ObserveResponse: { outcome: "required", classification: "required", reason: "optional", candidate: "optional", result: "optional" } satisfies Shape<T.ObserveResponse>,
  Scope: { actorIds: "optional", projectIds: "optional", eventTypes: "optional", resourceRefs: "optional", occurredAfter: "optional", occurredBefore: "optional", metadata: "optional" } satisfies Shape<T.Scope>,
  RecallRequest: { query: "required", scope: "optional", limit: "optional", includeSuperseded: "optional", includeStale: "optional", asOf: "optional", exact: "optional" } satisfies Shape<T.RecallRequest>,
  Breakdown: { relevance: "required", lexical: "required", context: "required", episode: "required", actor: "required", date: "required", question: "required", recency: "required", trust: "required", confidence: "required", cosine: "required", bm25: "required" } satisfies Shape<T.ScoreBreakdown>,
  RecallStats: { candidates: "required", path: "required", exact: "required" } satisfies Shape<T.RecallStats>,
  Hit: { event: "required", score: "required", scoreBreakdown: "required", stale: "required", staleBy: "optional" } satisfies Shape<T.Hit>,
  RecallResponse: { results: "required", evidence: "required", stats: "required" } satisfies Shape<T.RecallResponse>,
  TimelinePage: { events: "required", nextCursor: "optional" } satisfies Shape<T.TimelinePage>,
  Receipt: { eventId: "required", deletedAt: "required", purged: "required" } satisfies Shape<T.Receipt>,
  AuditEntry: { at: "required", tenantId: "required", keyId: "required", action: "required", eventIds: "required", seq: "optional", logSeq: "optional", detail: "optional" } satisfies Shape<T.AuditEntry>,
  AuditPage: { entries: "required", nextCursor: "optional" } satisfies Shape<T.AuditPage>,
  HistoryResponse: { eventId: "required", history: "required", event: "optional" } satisfies Shape<T.HistoryResponse>,
  ErasureReceipt: { actorId: "required", erasedAt: "required", erased: "required", kept: "required", purged: "required" } satisfies Shape<T.ErasureReceipt>,
  ReviewItem: { event: "required", decision: "required" } satisfies Shape<T.ReviewItem>,
  ReviewList: { reviews: "required" } satisfies Shape<T.ReviewList>,
  ReviewOutcome: { eventId: "required", status: "required", decidedAt: "required", note: "optional" } satisfies Shape<T.ReviewOutcome>,
  ProblemDoc: { type: "required", title: "required", status: "required", detail: "required", code: "required", requestId: "optional", errors: "optional", missingRole: "optional" } satisfies Shape<T.Problem>,
  ImportSummary: { lines: "required", allowed: "required", review: "required", unchanged: "required", notImported: "required", embedded: "required", vectorsReused: "required", denied: "required", failed: "required", invalid: "required" } satisfies Shape<T.ImportSummary>,
  Decision: { decision: "required", reason: "required", approverRole: "optional" } satisfies Shape<T.Decision>,
};

interface Schema {
  properties?: Record<string, unknown>;
  required?: string[];
  oneOf?: Schema[];
}

function fieldsOf(schema: Schema): { props: Set<string>; required: Set<string> } {
  if (schema.oneOf) {
    const parts = schema.oneOf.map(fieldsOf);
    const props = new Set(parts.flatMap((p) => [...p.props]));
    const required = new Set([...parts[0]!.required].filter((f) => parts.every((p) => p.required.has(f))));
    return { props, required };
  }
  return { props: new Set(Object.keys(schema.properties ?? {})), required: new Set(schema.required ?? []) };
}

let server: Server;
before(async () => {
  server = await startServer();
});
after(async () => server?.stop());

test("every declared field exists in /openapi.json and required fields agree", async () => {
  const doc = (await (await fetch(`${server.baseUrl}/openapi.json`)).json()) as { components: { schemas: Record<string, Schema> } };
  for (const [name, shape] of Object.entries(shapes)) {
    const schema = doc.components.schemas[name];
    assert.ok(schema, `no schema ${name}`);
    const { props, required } = fieldsOf(schema);
    const declared = Object.keys(shape);
    for (const f of declared) assert.ok(props.has(f), `${name}.${f} is not in the schema`);
    const declaredRequired = declared.filter((f) => (shape as Record<string, string>)[f] === "required").sort();
    assert.deepEqual(declaredRequired, [...required].sort(), `${name}: required fields differ`);
  }
  for (const name of ["EventWrite", "StoredEvent", "WriteResponse", "RecallRequest", "Scope", "Hit", "Breakdown", "Interaction"]) {
    const { props } = fieldsOf(doc.components.schemas[name]!);
    assert.deepEqual([...props].sort(), Object.keys(shapes[name as keyof typeof shapes]).sort(), `${name} misses fields`);
  }
});
