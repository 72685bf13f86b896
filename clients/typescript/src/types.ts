/**
 * The main request and answer shapes, field names as the API spells them (camelCase).
 * `test/models.test.ts` checks each against the server's `/openapi.json`.
 */

export type SourceTrust =
  | "user_provided"
  | "tool_result"
  | "approved_source"
  | "operator_entered"
  | "untrusted_content"
  | "agent_inferred";
export type Confidence = "low" | "medium" | "high";
export type PrivacyClass = "public" | "internal" | "private" | "sensitive";
export type MetadataValue = string | number | boolean | { [key: string]: MetadataValue };

export interface Retention {
  deleteOnRequest: boolean;
  expiresAt?: string | null;
}

/** The body of `POST /v1/events`; the four required fields alone are the minimal write. */
export interface EventWrite {
  summary: string;
  actorId: string;
  occurredAt: string;
  sourceRefs: string[];
  eventId?: string | null;
  eventType?: string | null;
  actorNames?: string[] | null;
  projectId?: string | null;
  resourceRefs?: string[] | null;
  sourceTrust?: SourceTrust | null;
  confidence?: Confidence | null;
  privacyClass?: PrivacyClass | null;
  retention?: Retention | null;
  supersedesEventIds?: string[] | null;
  correctionPath?: string | null;
  metadata?: Record<string, MetadataValue> | null;
  tenantId?: string | null;
}

export interface Decision {
  decision: "allow" | "review" | "deny";
  reason: string;
  approverRole?: string;
}

export interface Derived {
  field: string;
  value: unknown;
  reason: string;
}

export interface StoredEvent {
  eventId: string;
  eventType: string;
  occurredAt: string;
  recordedAt: string;
  actorId: string;
  tenantId: string;
  resourceRefs: string[];
  summary: string;
  sourceRefs: string[];
  sourceTrust: SourceTrust;
  confidence: Confidence;
  privacyClass: PrivacyClass;
  retention: Retention;
  supersedesEventIds: string[];
  correctionPath: string;
  policyVersion: string;
  status: "active" | "pending_review" | "superseded";
  projectId?: string | null;
  metadata?: Record<string, MetadataValue>;
  contentWarnings?: string[];
  actorNames?: string[];
  supersededBy?: string | null;
  supersededAt?: string | null;
}

export interface WriteResponse {
  eventId: string;
  status: "active" | "pending_review";
  decision: Decision;
  event?: StoredEvent | null;
  derived?: Derived[] | null;
  visibleToWriter?: boolean | null;
  visibility?: string | null;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  requestId?: string | null;
  errors?: { field: string; message: string }[] | null;
  missingRole?: string | null;
}

export interface BatchResult {
  status: number;
  eventId?: string | null;
  eventStatus?: "active" | "pending_review" | null;
  decision?: Decision | null;
  event?: StoredEvent | null;
  derived?: Derived[] | null;
  error?: Problem | null;
}

export interface BatchResponse {
  results: BatchResult[];
}

/** The body of `POST /v1/observe`. */
export interface Interaction {
  text: string;
  role: "user" | "assistant" | "tool" | "system";
  actorId: string;
  occurredAt: string;
  sourceRefs: string[];
  sourceTrust?: SourceTrust | null;
  projectId?: string | null;
  resourceRefs?: string[];
}

export interface ObserveResponse {
  outcome: "ignored" | "candidate";
  classification: Record<string, unknown>;
  reason?: string | null;
  candidate?: Record<string, unknown> | null;
  result?: WriteResponse | null;
}

export interface Scope {
  actorIds?: string[];
  projectIds?: string[];
  eventTypes?: string[];
  resourceRefs?: string[];
  occurredAfter?: string | null;
  occurredBefore?: string | null;
  metadata?: Record<string, MetadataValue | MetadataValue[]>;
}

export interface RecallRequest {
  query: string;
  scope?: Scope;
  limit?: number;
  includeSuperseded?: boolean;
  includeStale?: boolean;
  asOf?: string | null;
  exact?: boolean;
}

export interface ScoreBreakdown {
  relevance: number;
  lexical: number;
  context: number;
  episode: number;
  actor: number;
  date: number;
  question: number;
  recency: number;
  trust: number;
  confidence: number;
  cosine: number;
  bm25: number;
}

export interface RecallStats {
  candidates: number;
  path: string;
  exact: boolean;
}

export interface Hit {
  event: StoredEvent;
  score: number;
  scoreBreakdown: ScoreBreakdown;
  stale: boolean;
  staleBy?: string | null;
}

/** `evidence` holds one block per hit, in the order of `results`. */
export interface RecallResponse {
  results: Hit[];
  evidence: string;
  stats: RecallStats;
}

export interface TimelinePage {
  events: StoredEvent[];
  nextCursor?: string | null;
}

export interface Receipt {
  eventId: string;
  deletedAt: string;
  purged: boolean;
}

export interface AuditEntry {
  at: string;
  tenantId: string;
  keyId: string;
  action: string;
  eventIds: string[];
  seq?: number;
  logSeq?: number | null;
  detail?: Record<string, unknown>;
}

export interface AuditPage {
  entries: AuditEntry[];
  nextCursor?: string | null;
}

export interface HistoryResponse {
  eventId: string;
  history: AuditEntry[];
  event?: StoredEvent | null;
}

export interface ErasureReceipt {
  actorId: string;
  erasedAt: string;
  erased: string[];
  kept: { eventId: string; reason: string }[];
  purged: boolean;
}

export interface ReviewItem {
  event: StoredEvent;
  decision: Decision;
}

export interface ReviewList {
  reviews: ReviewItem[];
}

export interface ReviewOutcome {
  eventId: string;
  status: string;
  decidedAt: string;
  note?: string | null;
}

export interface ImportSummary {
  lines: number;
  allowed: number;
  review: number;
  unchanged: number;
  notImported: number;
  embedded: number;
  vectorsReused: number;
  denied: Record<string, unknown>[];
  failed: Record<string, unknown>[];
  invalid: { line: number; code: string; detail: string }[];
}
