/**
 * Typed errors for Episodic's RFC 9457 `application/problem+json` answers: by `code` first,
 * then by status (docs/api.md, "Error codes").
 */

export interface FieldError {
  field: string;
  message: string;
}

export interface EpisodicErrorInit {
  status: number | null;
  code: string;
  detail: string;
  requestId?: string | null;
  errors?: FieldError[];
  problem?: Record<string, unknown>;
  retryAfter?: number | null;
}

/** An error answer from the server (status `null`: no answer arrived). */
export class EpisodicError extends Error {
  readonly status: number | null;
  /** The problem's stable `code` (`validation_failed`, `not_found`, ...). */
  readonly code: string;
  readonly detail: string;
  /** The problem's `requestId`, else the `X-Request-ID` response header. */
  readonly requestId: string | null;
  /** Field errors of a `validation_failed` answer, every one at once. */
  readonly errors: FieldError[];
  /** The whole problem body (`missingRole`, `missingGrant`, `decision`, ...). */
  readonly problem: Record<string, unknown>;
  /** Seconds from `Retry-After`, when the server sent it. */
  readonly retryAfter: number | null;

  constructor(init: EpisodicErrorInit) {
    const prefix = init.status === null ? init.code : `${init.status} ${init.code}`;
    const where = init.requestId ? ` (request ${init.requestId})` : "";
    super(`${prefix}: ${init.detail}${where}`);
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.detail = init.detail;
    this.requestId = init.requestId ?? null;
    this.errors = init.errors ?? [];
    this.problem = init.problem ?? {};
    this.retryAfter = init.retryAfter ?? null;
  }

  /** The role the key lacks (`403 forbidden`), when the server named one. */
  get missingRole(): string | null {
    const role = this.problem["missingRole"];
    return typeof role === "string" ? role : null;
  }
}

/** No HTTP answer: the connection failed or timed out (after the retries allowed). */
export class EpisodicConnectionError extends EpisodicError {}
/** 400: malformed JSON or a request malformed at the HTTP level. */
export class BadRequestError extends EpisodicError {}
/** 401 `unauthenticated`. */
export class AuthenticationError extends EpisodicError {}
/** 403: a missing role (`missingRole`) or grant. */
export class PermissionDeniedError extends EpisodicError {}
/** 403 `tenant_mismatch`. */
export class TenantMismatchError extends PermissionDeniedError {}
/** 403 `self_approval_forbidden`. */
export class SelfApprovalError extends PermissionDeniedError {}
/** 404 `not_found` / `route_not_found`. */
export class NotFoundError extends EpisodicError {}
/** 409 `conflict`. */
export class ConflictError extends EpisodicError {}
/** 413 `payload_too_large`. */
export class PayloadTooLargeError extends EpisodicError {}
/** 422 `validation_failed`. */
export class ValidationError extends EpisodicError {}
/** 422 `policy_denied`: nothing was stored. */
export class PolicyDeniedError extends EpisodicError {
  get decision(): Record<string, unknown> | null {
    const d = this.problem["decision"];
    return d && typeof d === "object" ? (d as Record<string, unknown>) : null;
  }
}
/** 429 `too_many_requests`. */
export class RateLimitedError extends EpisodicError {}
/** 5xx. */
export class ServerError extends EpisodicError {}
/** 503 `not_ready`, `storage_unavailable`, `too_many_connections`. */
export class UnavailableError extends ServerError {}

type ErrorClass = new (init: EpisodicErrorInit) => EpisodicError;

const BY_CODE: Record<string, ErrorClass> = {
  unauthenticated: AuthenticationError,
  forbidden: PermissionDeniedError,
  tenant_mismatch: TenantMismatchError,
  self_approval_forbidden: SelfApprovalError,
  not_found: NotFoundError,
  route_not_found: NotFoundError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  validation_failed: ValidationError,
  policy_denied: PolicyDeniedError,
  malformed_json: BadRequestError,
  bad_request: BadRequestError,
  too_many_requests: RateLimitedError,
  not_ready: UnavailableError,
  storage_unavailable: UnavailableError,
  too_many_connections: UnavailableError,
  internal: ServerError,
};

const BY_STATUS: Record<number, ErrorClass> = {
  400: BadRequestError,
  401: AuthenticationError,
  403: PermissionDeniedError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: ValidationError,
  429: RateLimitedError,
  503: UnavailableError,
};

/** Seconds from a `Retry-After` header: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed);
  const when = Date.parse(trimmed);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}

/** The typed error for an error answer. */
export function errorFromResponse(status: number, text: string, headers: Headers): EpisodicError {
  let problem: Record<string, unknown> = {};
  try {
    const parsed: unknown = text ? JSON.parse(text) : {};
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) {
      problem = parsed as Record<string, unknown>;
    }
  } catch {
    // Not JSON: a proxy's answer, say.
  }
  const code = typeof problem["code"] === "string" ? (problem["code"] as string) : `http_${status}`;
  let detail = typeof problem["detail"] === "string" ? (problem["detail"] as string) : "";
  if (!detail) detail = text.trim().slice(0, 200) || `HTTP ${status} without a problem body`;
  const requestId =
    (typeof problem["requestId"] === "string" ? (problem["requestId"] as string) : null) ??
    headers.get("x-request-id");
  const errors = Array.isArray(problem["errors"])
    ? (problem["errors"] as FieldError[]).filter((e) => e && typeof e === "object")
    : [];
  const cls = BY_CODE[code] ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : EpisodicError);
  return new cls({
    status,
    code,
    detail,
    requestId,
    errors,
    problem,
    retryAfter: parseRetryAfter(headers.get("retry-after")),
  });
}
