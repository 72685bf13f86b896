//! Bulk transfer and backup while serving: `GET /v1/export`, `POST /v1/import` and
//! `POST /v1/admin/backup`.
//!
//! Invariants:
//! - export needs `reader` and holds exactly what the key's reads return (its tenant,
//!   actors and privacy ceiling; nothing deleted, erased or expired), taken from one view of
//!   the store; its lines are written on a blocking thread and streamed in chunks, never
//!   held whole in memory, while writes go on; the response names its event count
//!   (`Episodic-Export-Events`) so a client can tell a cut stream from a complete one;
//! - import needs `writer`; the tenant comes from the key (a line naming another is refused
//!   on its own, never rewritten); every line is a write through the engine's import
//!   ([`crate::engine::Engine::import`]), exactly as `episodic import` writes it, except
//!   that vectors in lines are ignored ([`Vectors::Ignore`]); the body is bounded by
//!   `--max-import-bytes`; the answer is 200 only when every line was written or unchanged,
//!   207 otherwise, with every line not imported listed; JSON parsing runs on blocking
//!   threads;
//! - backup is the admin's (it copies every tenant), is written under the configured
//!   backup directory under a name the server chooses (a request names no path), and is
//!   answered once the copy is complete and durable.

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::extract::{read_limited, Auth, OptionalJsonBody};
use super::openapi::{AuthErrors, BackupBody, BodyErrors, ProblemDoc, Unavailable};
use super::AppState;
use crate::auth::{roles, TenantGrant};
use crate::engine::{Engine, ImportLine};
use crate::error::{ErrorCode, FieldError};
use crate::wire::transfer::{export_line, parse_line, ImportSummary, LineIssue, Vectors};
use crate::wire::Problem;

/// The header of an export's response that gives its number of lines.
pub const EXPORT_COUNT_HEADER: &str = "episodic-export-events";
/// The media type of NDJSON bodies.
const NDJSON: &str = "application/x-ndjson";
/// Bytes of lines sent per chunk of an export.
const EXPORT_CHUNK_BYTES: usize = 256 * 1024;
/// Chunks an export may have written ahead of the client.
const EXPORT_CHUNKS_AHEAD: usize = 4;
/// Lines of an import parsed and written together (one model call, one group commit).
const IMPORT_BATCH_LINES: usize = 64;

/// `GET /v1/export`: the key's tenant's events as NDJSON.
#[utoipa::path(
    get,
    path = "/v1/export",
    tag = "events",
    operation_id = "export_events",
    summary = "Export the tenant's events as NDJSON, one event per line, as this key reads them",
    description = "Streams every event the key may read (live, not expired, within its actors and \
                   `maxPrivacyClass`), in log order (a correction after the events it supersedes), \
                   one JSON object per line, exactly as `episodic export` writes them. Taken from \
                   one consistent view while the server keeps serving. `POST /v1/import` reads \
                   the same lines; importing an export into the same store reports every line \
                   `unchanged`. The `Episodic-Export-Events` header gives the number of lines.",
    params(("withVectors" = Option<bool>, Query, description = "Also give each event's summary embedding (`vector`) and the model that made it (`embeddingModel`)")),
    responses(
        (status = 200, description = "one event per line", content_type = "application/x-ndjson", body = String,
            headers(("Episodic-Export-Events" = u64, description = "lines in the body")),
            example = json!("{\"eventId\":\"01a24454-71f4-778f-b32b-882dff93f1ec\",\"eventType\":\"user_preference_stated\",\"occurredAt\":\"2026-06-17T09:20:00Z\",\"recordedAt\":\"2026-06-17T09:20:01.5Z\",\"actorId\":\"user:dana\",\"tenantId\":\"acme\",\"resourceRefs\":[],\"summary\":\"Dana asked for renewal notices by email\",\"sourceRefs\":[\"chat-17\"],\"sourceTrust\":\"user_provided\",\"confidence\":\"medium\",\"privacyClass\":\"internal\",\"retention\":{\"deleteOnRequest\":true},\"supersedesEventIds\":[],\"correctionPath\":\"\",\"policyVersion\":\"v1\",\"status\":\"active\"}\n")),
        (status = 422, description = "an unknown or malformed parameter", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn export(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::READER)?;
    let with_vectors = vectors_param(&params)?;
    let engine = state.engine(&grant)?;
    let snapshot = engine.export(&grant, with_vectors).await?;
    let count = snapshot.len();
    let model = engine.embedder().model_id().to_string();
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(EXPORT_CHUNKS_AHEAD);
    // Serializing is CPU work and waits on the client: a blocking thread, never the pool's.
    tokio::task::spawn_blocking(move || {
        let mut chunk = Vec::with_capacity(EXPORT_CHUNK_BYTES);
        for e in snapshot.events() {
            let vector = snapshot.vector(e);
            chunk.extend(export_line(
                e.event,
                vector.as_deref().map(|v| (v, model.as_str())),
            ));
            if chunk.len() >= EXPORT_CHUNK_BYTES {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(EXPORT_CHUNK_BYTES));
                if tx.blocking_send(Ok(Bytes::from(full))).is_err() {
                    return; // the client went away
                }
            }
        }
        if !chunk.is_empty() {
            let _ = tx.blocking_send(Ok(Bytes::from(chunk)));
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    headers.insert(EXPORT_COUNT_HEADER, HeaderValue::from(count as u64));
    Ok(response)
}

fn vectors_param(params: &HashMap<String, String>) -> Result<bool, Problem> {
    let mut errors: Vec<FieldError> = params
        .keys()
        .filter(|k| k.as_str() != "withVectors")
        .map(|k| FieldError::new(k.clone(), "unknown parameter"))
        .collect();
    let with = match params.get("withVectors").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            errors.push(FieldError::new("withVectors", "must be true or false"));
            false
        }
    };
    if errors.is_empty() {
        Ok(with)
    } else {
        Err(Problem::validation(errors))
    }
}

/// `POST /v1/import`: NDJSON lines written into the key's tenant.
#[utoipa::path(
    post,
    path = "/v1/import",
    tag = "events",
    operation_id = "import_events",
    summary = "Import NDJSON events into the key's tenant, each line a write with its own outcome",
    description = "Each non-blank line is one complete event record (every field of the event, as \
                   `GET /v1/export` writes it; `recordedAt`, `status`, `policyVersion`, \
                   `supersededBy`, `supersededAt` and `contentWarnings` are dropped and derived \
                   again). Every line goes through validation, the write policy and the \
                   idempotency check of `POST /v1/events`: a line whose `eventId` already holds \
                   the same content is `unchanged`. A line naming another `tenantId` is refused \
                   (`tenant_mismatch`). A correction is written only after every line before it. \
                   `vector` and `embeddingModel` fields are ignored: summaries are embedded by \
                   the server. The body is at most `--max-import-bytes` (64 MiB by default). \
                   The answer accounts for every line: 200 when all were written or unchanged, \
                   207 when some were not (`denied`, `invalid` and `failed` list them with line \
                   number, code and detail).",
    request_body(content = Option<String>, content_type = "application/x-ndjson",
        description = "One event record per line (blank lines are skipped; an empty body imports nothing)",
        example = json!("{\"eventId\":\"ev-1\",\"eventType\":\"user_preference_stated\",\"occurredAt\":\"2026-06-17T09:20:00Z\",\"actorId\":\"user:dana\",\"resourceRefs\":[],\"summary\":\"Dana asked for renewal notices by email\",\"sourceRefs\":[\"chat-17\"],\"sourceTrust\":\"user_provided\",\"confidence\":\"medium\",\"privacyClass\":\"internal\",\"retention\":{\"deleteOnRequest\":true},\"supersedesEventIds\":[],\"correctionPath\":\"\"}\n{\"eventId\":\"ev-2\",\"eventType\":\"correction_received\",\"occurredAt\":\"2026-06-18T10:00:00Z\",\"actorId\":\"user:dana\",\"resourceRefs\":[],\"summary\":\"Dana now wants renewal notices by text message\",\"sourceRefs\":[\"chat-18\"],\"sourceTrust\":\"user_provided\",\"confidence\":\"high\",\"privacyClass\":\"internal\",\"retention\":{\"deleteOnRequest\":true},\"supersedesEventIds\":[\"ev-1\"],\"correctionPath\":\"user_message\"}\n")),
    responses(
        (status = 200, description = "every line written or unchanged", body = ImportSummary,
            example = json!({"lines": 2, "allowed": 2, "review": 0, "unchanged": 0, "denied": [], "invalid": [], "failed": [], "notImported": 0, "embedded": 2, "vectorsReused": 0})),
        (status = 207, description = "some lines were not imported: `denied`, `invalid` and `failed` list each", body = ImportSummary,
            example = json!({"lines": 2, "allowed": 1, "review": 0, "unchanged": 0, "denied": [], "invalid": [{"line": 2, "code": "tenant_mismatch", "detail": "the line names tenant \"other\", not acme"}], "failed": [], "notImported": 1, "embedded": 1, "vectorsReused": 0})),
        (status = 400, description = "the body is not UTF-8 text", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 408, description = "the body did not arrive within the body timeout", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 413, description = "the body exceeds `--max-import-bytes`", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 415, description = "the body is not NDJSON (`application/x-ndjson`, `application/jsonl` or `application/json`)", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "an unknown query parameter", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 503, description = "not ready, or storage failed part way: the problem's `summary` says which lines were imported before it", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors
    )
)]
pub async fn import(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
    request: axum::extract::Request,
) -> Result<Response, Problem> {
    let grant = principal.grant(roles::WRITER)?;
    if let Some(k) = params.keys().next() {
        return Err(Problem::validation(vec![FieldError::new(
            k.clone(),
            "unknown parameter",
        )]));
    }
    check_ndjson(&request)?;
    let engine = state.engine(&grant)?;
    let body = read_limited(request.into_body(), state.import_limit).await?;
    let summary = import_body(&engine, &grant, body).await?;
    let status = if summary.complete() {
        StatusCode::OK
    } else {
        StatusCode::MULTI_STATUS
    };
    Ok((status, Json(json!(summary))).into_response())
}

fn check_ndjson(req: &axum::extract::Request) -> Result<(), Problem> {
    let Some(ct) = req.headers().get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim();
    if [
        NDJSON,
        "application/jsonl",
        "application/json",
        "application/x-jsonlines",
    ]
    .contains(&essence)
    {
        return Ok(());
    }
    Err(Problem::new(
        ErrorCode::UnsupportedMediaType,
        "send the body as application/x-ndjson: one JSON event per line",
    ))
}

/// Parses and writes every line of `body`, a batch at a time.
async fn import_body(
    engine: &Engine,
    grant: &TenantGrant,
    body: Bytes,
) -> Result<ImportSummary, Problem> {
    let mut summary = ImportSummary::default();
    let mut lines = numbered_lines(&body);
    loop {
        let chunk: Vec<(usize, Bytes)> = lines.by_ref().take(IMPORT_BATCH_LINES).collect();
        if chunk.is_empty() {
            return Ok(summary);
        }
        let (tenant, limits) = (grant.tenant().to_string(), engine.config().limits.clone());
        let parsed = tokio::task::spawn_blocking(move || {
            chunk
                .into_iter()
                .map(|(n, text)| parse_bytes(&text, n, &tenant, &limits))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?;
        let mut batch = Vec::with_capacity(parsed.len());
        for p in parsed {
            match p {
                Ok(line) => batch.push(line),
                Err(issue) => summary.invalid_line(issue),
            }
        }
        if batch.is_empty() {
            continue;
        }
        let written = engine.import(grant, batch).await.map_err(Problem::from)?;
        if let Err(stopped) = summary.add(written) {
            return Err(stopped
                .problem
                .with_extra("summary", json!(summary))
                .with_extra("stoppedAtLine", json!(stopped.line)));
        }
    }
}

fn parse_bytes(
    text: &[u8],
    line: usize,
    tenant: &str,
    limits: &crate::model::validate::Limits,
) -> Result<ImportLine, LineIssue> {
    match std::str::from_utf8(text) {
        Ok(text) => parse_line(text, line, tenant, limits, Vectors::Ignore),
        Err(e) => Err(LineIssue {
            line,
            code: ErrorCode::MalformedJson.as_str().to_string(),
            detail: format!("the line is not UTF-8: {e}"),
            errors: Vec::new(),
        }),
    }
}

/// The non-blank lines of `body` with their 1-based numbers (each a cheap slice of it).
fn numbered_lines(body: &Bytes) -> impl Iterator<Item = (usize, Bytes)> + '_ {
    let mut start = 0;
    let mut number = 0;
    std::iter::from_fn(move || loop {
        if start >= body.len() {
            return None;
        }
        let end = body[start..]
            .iter()
            .position(|b| *b == b'\n')
            .map_or(body.len(), |p| start + p);
        let line = body.slice(start..end);
        start = end + 1;
        number += 1;
        if !line.iter().all(u8::is_ascii_whitespace) {
            return Some((number, line));
        }
    })
}

/// `POST /v1/admin/backup` (admin): a consistent copy of the whole store.
#[utoipa::path(
    post,
    path = "/v1/admin/backup",
    tag = "admin",
    operation_id = "create_backup",
    summary = "Take an online backup of the whole store into the server's backup directory",
    description = "Copies the event log (events with their vectors), the audit trail, its hash \
                   key and the key records, as they stood at one log position, into a new \
                   directory under `--backup-dir` (default `<data-dir>/backups`) named by the \
                   server; writes continue meanwhile. The answer comes once the copy is complete \
                   and fsynced, with its position (`logSequence`: every write acknowledged before \
                   this request is at or below it) and each file's SHA-256. Restore with \
                   `episodic restore --from <path> --data-dir <new dir>`. Not available in \
                   cluster mode (409).",
    request_body(content = Option<BackupBody>, description = "None, or an empty object: the server names the backup and its place", example = json!({})),
    responses(
        (status = 201, description = "the backup, complete and durable", body = crate::engine::BackupReport),
        (status = 409, description = "cluster mode: streams are replicated instead", body = ProblemDoc, content_type = "application/problem+json"),
        (status = 422, description = "the body names a field (a backup takes none)", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn backup(
    State(state): State<AppState>,
    Auth(principal): Auth,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, Problem> {
    principal.require_admin()?;
    match body {
        None | Some(Value::Null) => {}
        Some(Value::Object(fields)) if fields.is_empty() => {}
        Some(Value::Object(fields)) => {
            let errors = fields
                .keys()
                .map(|k| {
                    FieldError::new(
                        k.clone(),
                        "unknown field: a backup takes none (the server names its directory \
                         under --backup-dir)",
                    )
                })
                .collect();
            return Err(Problem::validation(errors));
        }
        Some(_) => {
            return Err(Problem::validation(vec![FieldError::new(
                "",
                "the body must be absent, null or an empty object",
            )]))
        }
    }
    let engine = super::routes::single_engine(&state, "online backup")?;
    let report = engine.backup(principal.key_id()).await?;
    Ok((StatusCode::CREATED, Json(json!(report))).into_response())
}
