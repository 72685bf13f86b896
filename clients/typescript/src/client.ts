/**
 * An async client for Episodic's HTTP API (Node 20+, global `fetch`).
 *
 * Retries: a request is tried again, up to `retry.maxRetries` times, after `429` or `503`
 * (waiting what `Retry-After` says) and after a connection failure. A request whose answer
 * was lost is repeated only when that is safe: reads, deletions, and writes, which carry a
 * client-chosen `eventId` (generated when the caller gave none); the server answers a write
 * repeated with the same id and content with the original answer, so a retried write returns
 * the stored result; an import is repeated only when each line names its `eventId`. `observe`, `approve`, `reject` and `erasure` are repeated only when the
 * server cannot have acted (no connection, `429`, `503 not_ready` / `too_many_connections`).
 */

import { randomUUID } from "node:crypto";

import { EpisodicConnectionError, EpisodicError, errorFromResponse } from "./errors.js";
import type {
  AuditPage,
  BatchResponse,
  ErasureReceipt,
  EventWrite,
  HistoryResponse,
  ImportSummary,
  Interaction,
  MetadataValue,
  ObserveResponse,
  RecallResponse,
  Receipt,
  ReviewList,
  ReviewOutcome,
  Scope,
  StoredEvent,
  TimelinePage,
  WriteResponse,
} from "./types.js";

export interface RetryPolicy {
  /** 0 turns retries off. Default 3. */
  maxRetries: number;
  /** First backoff in seconds without `Retry-After`; doubled each time. Default 0.25. */
  backoff: number;
  maxBackoff: number;
  /** A longer `Retry-After` is not waited for: the error is thrown. Default 60. */
  maxRetryAfter: number;
}

export interface ClientOptions {
  timeoutMs?: number;
  retry?: Partial<RetryPolicy>;
  headers?: Record<string, string>;
}

export interface WriteOptions {
  /** `true` / `"wait_for"`: answer once the event is in the committed scope index. */
  refresh?: boolean | "wait_for" | "false";
}

export interface RecallOptions {
  includeSuperseded?: boolean;
  includeStale?: boolean;
  asOf?: string | Date;
  exact?: boolean;
}

export interface TimelineQuery {
  actorId?: string;
  projectId?: string;
  eventType?: string;
  from?: string | Date;
  to?: string | Date;
  limit?: number;
  cursor?: string;
  includeSuperseded?: boolean;
  asOf?: string | Date;
  metadata?: Record<string, MetadataValue | MetadataValue[]>;
}

export interface AuditQuery {
  eventId?: string;
  action?: string;
  from?: string | Date;
  to?: string | Date;
  limit?: number;
  cursor?: string;
}

interface Req {
  method: string;
  path: string;
  params?: Record<string, string>;
  body?: unknown;
  idempotent: boolean;
  ok: number[];
  /** NDJSON both ways (export's answer, import's body). */
  ndjson?: boolean;
}

const NOT_ACTED = new Set(["not_ready", "too_many_connections"]);
/** Connection failures that mean nothing was sent. */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);

/** A client-chosen event id (1-128 characters of `A-Za-z0-9._:-`). */
export function newEventId(): string {
  return randomUUID();
}

/** The recall answer's `evidence` as one block per hit, in `results` order. */
export function evidenceBlocks(recall: RecallResponse): string[] {
  const blocks = recall.evidence ? recall.evidence.split("\n\n") : [];
  if (blocks.length !== recall.results.length) {
    throw new Error(
      `the recall answer has ${recall.results.length} results but ${blocks.length} evidence blocks`,
    );
  }
  return blocks;
}

function time(value: string | Date | undefined): string | undefined {
  return value instanceof Date ? value.toISOString() : value;
}

function jsonable(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(jsonable);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonable(v)]));
  }
  return value;
}

function params(values: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(values)) {
    if (value === undefined || value === null) continue;
    if (value instanceof Date) out[name] = value.toISOString();
    else if (typeof value === "object") out[name] = JSON.stringify(value);
    else out[name] = String(value);
  }
  return out;
}

function refresh(opts?: WriteOptions): Record<string, string> | undefined {
  const r = opts?.refresh;
  if (r === undefined || r === false || r === "false") return undefined;
  return { refresh: "wait_for" };
}

function id(eventId: string): string {
  if (typeof eventId !== "string" || !eventId) throw new TypeError("an event id must be a non-empty string");
  return encodeURIComponent(eventId);
}

function causeCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let i = 0; i < 4 && e && typeof e === "object"; i++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

const sleep = (seconds: number) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

export class EpisodicClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    if (!baseUrl) throw new TypeError("baseUrl is required, e.g. http://127.0.0.1:8080");
    if (!apiKey) throw new TypeError("apiKey is required: a tenant key (epi_...)");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.retry = { maxRetries: 3, backoff: 0.25, maxBackoff: 8, maxRetryAfter: 60, ...options.retry };
    this.headers = { Authorization: `Bearer ${apiKey}`, Accept: "application/json", ...options.headers };
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  /** `POST /v1/events`: 201 allowed, 202 held for review. */
  write(event: EventWrite, opts?: WriteOptions): Promise<WriteResponse> {
    return this.send({ method: "POST", path: "/v1/events", params: refresh(opts), body: this.withEventId(event), idempotent: true, ok: [201, 202] });
  }

  /** `POST /v1/events` with only what the caller alone knows; the server derives the rest. */
  writeMinimal(
    summary: string,
    actorId: string,
    occurredAt: string | Date,
    sourceRefs: string[],
    opts?: WriteOptions & { eventId?: string },
  ): Promise<WriteResponse> {
    const event: EventWrite = { summary, actorId, occurredAt: time(occurredAt)!, sourceRefs };
    if (opts?.eventId) event.eventId = opts.eventId;
    return this.write(event, opts);
  }

  /** `POST /v1/events:batch`: results in input order (201 all stored, 207 otherwise). */
  writeBatch(events: EventWrite[], opts?: WriteOptions): Promise<BatchResponse> {
    const body = { events: events.map((e) => this.withEventId(e)) };
    return this.send({ method: "POST", path: "/v1/events:batch", params: refresh(opts), body, idempotent: true, ok: [201, 207] });
  }

  /** `POST /v1/observe`: ignored (200) or written as a candidate (201/202). */
  observe(interaction: Interaction): Promise<ObserveResponse> {
    return this.send({ method: "POST", path: "/v1/observe", body: jsonable(interaction), idempotent: false, ok: [200, 201, 202] });
  }

  /** `POST /v1/recall`: hits with score breakdowns, evidence blocks, stats. */
  recall(query: string, scope?: Scope, limit = 10, opts: RecallOptions = {}): Promise<RecallResponse> {
    const body: Record<string, unknown> = { query, limit };
    if (scope) body["scope"] = scope;
    if (opts.includeSuperseded !== undefined) body["includeSuperseded"] = opts.includeSuperseded;
    if (opts.includeStale !== undefined) body["includeStale"] = opts.includeStale;
    if (opts.asOf !== undefined) body["asOf"] = time(opts.asOf);
    if (opts.exact !== undefined) body["exact"] = opts.exact;
    return this.send({ method: "POST", path: "/v1/recall", body, idempotent: true, ok: [200] });
  }

  /** `GET /v1/timeline`: events by `occurredAt`, keyset-paginated. */
  timeline(query: TimelineQuery = {}): Promise<TimelinePage> {
    return this.send({ method: "GET", path: "/v1/timeline", params: params({ ...query }), idempotent: true, ok: [200] });
  }

  /** `GET /v1/events/{eventId}`. */
  getEvent(eventId: string): Promise<StoredEvent> {
    return this.send({ method: "GET", path: `/v1/events/${id(eventId)}`, idempotent: true, ok: [200] });
  }

  /** `GET /v1/events/{eventId}/history`. */
  history(eventId: string): Promise<HistoryResponse> {
    return this.send({ method: "GET", path: `/v1/events/${id(eventId)}/history`, idempotent: true, ok: [200] });
  }

  /** `POST /v1/events/{eventId}/correct`: only what changes; the rest is carried over. */
  correct(eventId: string, changes: Partial<EventWrite>, opts?: WriteOptions): Promise<WriteResponse> {
    return this.send({ method: "POST", path: `/v1/events/${id(eventId)}/correct`, params: refresh(opts), body: this.withEventId(changes), idempotent: true, ok: [201, 202] });
  }

  /** `DELETE /v1/events/{eventId}`: the receipt (the same when repeated). */
  delete(eventId: string): Promise<Receipt> {
    return this.send({ method: "DELETE", path: `/v1/events/${id(eventId)}`, idempotent: true, ok: [200] });
  }

  /** `POST /v1/erasure`: every event of the actor marked `deleteOnRequest`. */
  erasure(actorId: string): Promise<ErasureReceipt> {
    return this.send({ method: "POST", path: "/v1/erasure", body: { actorId }, idempotent: false, ok: [200] });
  }

  /** `GET /v1/reviews?status=pending`. */
  listReviews(opts: { limit?: number } = {}): Promise<ReviewList> {
    return this.send({ method: "GET", path: "/v1/reviews", params: params({ status: "pending", limit: opts.limit }), idempotent: true, ok: [200] });
  }

  /** `POST /v1/reviews/{eventId}/approve`. */
  approve(eventId: string, opts: { note?: string } = {}): Promise<ReviewOutcome> {
    return this.review(eventId, "approve", opts.note);
  }

  /** `POST /v1/reviews/{eventId}/reject`. */
  reject(eventId: string, opts: { note?: string } = {}): Promise<ReviewOutcome> {
    return this.review(eventId, "reject", opts.note);
  }

  /** `GET /v1/export`: every event the key may read, one object per NDJSON line. */
  exportEvents(opts: { withVectors?: boolean } = {}): Promise<StoredEvent[]> {
    return this.send({ method: "GET", path: "/v1/export", params: params({ withVectors: opts.withVectors }), idempotent: true, ok: [200], ndjson: true });
  }

  /** `POST /v1/import`: events as export gives them; the summary (200 or 207). */
  importEvents(events: object[]): Promise<ImportSummary> {
    const lines = events.map((e) => jsonable(e) as Record<string, unknown>);
    // A line without an eventId gets a new id on each try: repeat only lines that have one.
    const safe = lines.every((l) => typeof l["eventId"] === "string" && l["eventId"] !== "");
    return this.send({ method: "POST", path: "/v1/import", body: lines, idempotent: safe, ok: [200, 207], ndjson: true });
  }

  /** `GET /v1/audit`. */
  audit(query: AuditQuery = {}): Promise<AuditPage> {
    return this.send({ method: "GET", path: "/v1/audit", params: params({ ...query }), idempotent: true, ok: [200] });
  }

  private review(eventId: string, verdict: string, note?: string): Promise<ReviewOutcome> {
    const body = note === undefined ? {} : { note };
    return this.send({ method: "POST", path: `/v1/reviews/${id(eventId)}/${verdict}`, body, idempotent: false, ok: [200] });
  }

  private withEventId<T extends object>(event: T): Record<string, unknown> {
    if (!event || typeof event !== "object") throw new TypeError("an event is an object of its fields");
    const body = jsonable(event) as Record<string, unknown>;
    if (this.retry.maxRetries > 0 && !body["eventId"]) body["eventId"] = newEventId();
    return body;
  }

  private ndjson(req: Req, text: string, headers: Headers): unknown[] {
    const lines = text.split("\n").filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as unknown);
    const announced = headers.get("episodic-export-events");
    if (announced !== null && Number(announced) !== lines.length) {
      throw new EpisodicError({
        status: 200,
        code: "incomplete_export",
        detail: `${req.path} announced ${announced} events but ${lines.length} arrived`,
        requestId: headers.get("x-request-id"),
      });
    }
    return lines;
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.retry.maxBackoff, this.retry.backoff * 2 ** attempt);
    return base / 2 + Math.random() * (base / 2);
  }

  private delayAfterError(req: Req, attempt: number, err: EpisodicError): number | null {
    if (attempt >= this.retry.maxRetries || err.status === null) return null;
    if (err.status === 503) {
      if (!req.idempotent && !NOT_ACTED.has(err.code)) return null;
    } else if (err.status === 502 || err.status === 504) {
      if (!req.idempotent) return null;
    } else if (err.status !== 429) {
      return null;
    }
    if (err.retryAfter !== null) return err.retryAfter > this.retry.maxRetryAfter ? null : err.retryAfter;
    return this.backoff(attempt);
  }

  private async send<T>(req: Req): Promise<T> {
    const url = new URL(this.baseUrl + req.path);
    for (const [k, v] of Object.entries(req.params ?? {})) url.searchParams.set(k, v);
    const headers: Record<string, string> = { ...this.headers };
    let payload: string | undefined;
    if (req.body !== undefined && req.ndjson) {
      payload = (req.body as unknown[]).map((l) => JSON.stringify(l) + "\n").join("");
      headers["Content-Type"] = "application/x-ndjson";
    } else if (req.body !== undefined) {
      payload = JSON.stringify(req.body);
      headers["Content-Type"] = "application/json";
    }
    for (let attempt = 0; ; attempt++) {
      let response: Response;
      try {
        response = await fetch(url, { method: req.method, headers, body: payload, signal: AbortSignal.timeout(this.timeoutMs) });
      } catch (err) {
        const code = causeCode(err);
        const neverSent = code !== undefined && NEVER_SENT.has(code);
        if (attempt < this.retry.maxRetries && (neverSent || req.idempotent)) {
          await sleep(this.backoff(attempt));
          continue;
        }
        throw new EpisodicConnectionError({
          status: null,
          code: "connection_failed",
          detail: `${req.method} ${url.href}: ${code ?? (err as Error).message} (after ${attempt + 1} attempt(s))`,
        });
      }
      const text = await response.text();
      if (req.ok.includes(response.status)) {
        try {
          if (req.ndjson && req.method === "GET") return this.ndjson(req, text, response.headers) as T;
          return JSON.parse(text) as T;
        } catch {
          throw new EpisodicError({
            status: response.status,
            code: "invalid_response",
            detail: `${req.method} ${req.path} answered ${response.status} with a body that is not JSON`,
            requestId: response.headers.get("x-request-id"),
          });
        }
      }
      const error = errorFromResponse(response.status, text, response.headers);
      const delay = this.delayAfterError(req, attempt, error);
      if (delay === null) throw error;
      await sleep(delay);
    }
  }
}
