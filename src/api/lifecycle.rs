//! Lifecycle routes: delete, erasure, compaction, audit trail and event history.
//!
//! Invariants: every route here needs the `operator` role (history: `reader`), and acts only
//! within the key's tenant; receipts are returned only after the deletion is durable.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};

use super::extract::{Auth, JsonBody};
use super::openapi::{
    AuditPage, AuthErrors, BodyErrors, ErasureBody, HistoryResponse, ProblemDoc, Unavailable,
};
use super::AppState;
use crate::audit::{AuditAction, AuditQuery};
use crate::auth::roles;
use crate::error::ErrorCode;
use crate::error::FieldError;
use crate::model::ident::{self, MAX_ID_BYTES};
use crate::model::Timestamp;
use crate::wire::Problem;

/// Most audit entries one page may hold.
const MAX_AUDIT_LIMIT: usize = 1000;

/// `DELETE /v1/events/{eventId}` (operator, or writer for the key's own writes): a deletion
/// receipt.
#[utoipa::path(
    delete,
    path = "/v1/events/{eventId}",
    tag = "events",
    summary = "Delete an event (operator; a writer its own key's writes); idempotent receipt",
    params(("eventId" = String, Path, description = "Event id")),
    responses(
        (status = 200, description = "deletion receipt", body = crate::engine::Receipt),
        (status = 404, description = "no such event", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn delete_event(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.deletion_grant()?;
    let receipt = state.engine(&grant)?.delete(&grant, &event_id).await?;
    Ok(Json(json!(receipt)))
}

/// `POST /v1/erasure` (operator), body `{"actorId"}`: an erasure receipt.
#[utoipa::path(
    post,
    path = "/v1/erasure",
    tag = "governance",
    summary = "Erase an actor's deletable events",
    request_body = ErasureBody,
    responses(
        (status = 200, description = "erasure receipt", body = crate::engine::ErasureReceipt),
        (status = 422, description = "validation failed; `errors` lists every field", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        BodyErrors,
        Unavailable
    )
)]
pub async fn erasure(
    State(state): State<AppState>,
    Auth(principal): Auth,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::OPERATOR)?;
    let actor = parse_erasure(&body)?;
    let receipt = state.engine(&grant)?.erase(&grant, &actor).await?;
    Ok(Json(json!(receipt)))
}

fn parse_erasure(body: &Value) -> Result<String, Problem> {
    let mut errors: Vec<FieldError> = body
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| k.as_str() != "actorId")
                .map(|k| FieldError::unknown(k.clone(), &["actorId"]))
                .collect()
        })
        .unwrap_or_default();
    let checked = match body.get("actorId") {
        Some(Value::String(a)) => ident::field("actorId", a, MAX_ID_BYTES),
        _ => Err(FieldError::new("actorId", "must be a non-empty string")),
    };
    let actor = checked.unwrap_or_else(|e| {
        errors.push(e);
        String::new()
    });
    if errors.is_empty() {
        Ok(actor)
    } else {
        Err(Problem::validation(errors))
    }
}

/// `GET /v1/admin/reembed` (admin): the model that serves, and the progress of the
/// re-embedding `--reembed-to` started.
#[utoipa::path(
    get,
    path = "/v1/admin/reembed",
    tag = "admin",
    summary = "The serving model, and a re-embedding's progress",
    responses(
        (status = 200, description = "the model and the re-embedding", body = crate::engine::ModelStatus),
        AuthErrors,
        Unavailable
    )
)]
pub async fn reembed_status(
    State(state): State<AppState>,
    Auth(principal): Auth,
) -> Result<Json<crate::engine::ModelStatus>, Problem> {
    principal.require_admin()?;
    let engine = super::routes::single_engine(&state, "re-embedding")?;
    Ok(Json(engine.model_status()))
}

/// `POST /v1/admin/compact` (admin): physical purge of every tenant's deleted content. It
/// rewrites the whole store, so it is not a tenant's to run (each tenant's trail records
/// its own purged ids).
#[utoipa::path(
    post,
    path = "/v1/admin/compact",
    tag = "admin",
    summary = "Physically purge deleted, erased and expired content",
    responses(
        (status = 200, description = "what was purged", body = crate::engine::CompactReport),
        AuthErrors,
        Unavailable
    )
)]
pub async fn compact(
    State(state): State<AppState>,
    Auth(principal): Auth,
    headers: axum::http::HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    forwarded: Option<axum::Extension<super::forward::Forwarded>>,
) -> Result<Json<Value>, Problem> {
    principal.require_admin()?;
    let Some(node) = state.engines.node().cloned() else {
        let engine = super::routes::single_engine(&state, "compaction")?;
        let report = engine.compact(principal.key_id()).await?;
        return Ok(Json(json!(report)));
    };
    // Cluster mode: each node rotates the shards it serves; the node asked first asks the
    // others, and the answer sums them all. It names to each node the shards its view says
    // that node holds, and a node serving fewer (one is opening, or its lease moved) answers
    // 503 before it compacts anything: a 200 covers every shard of the cluster.
    if let Some(axum::Extension(_)) = forwarded {
        let named = query.get("shards").map(String::as_str).unwrap_or_default();
        let expected = parse_shards(named)?;
        let engines = serving(&node, &expected)?;
        let mut reports = Vec::new();
        for engine in engines {
            reports.push(json!(engine.compact(principal.key_id()).await?));
        }
        return Ok(Json(merge_reports(&reports)));
    }
    node.refresh_view().map_err(|e| {
        Problem::new(
            ErrorCode::StorageUnavailable,
            format!("the cluster's view could not be read: {e}"),
        )
    })?;
    let view = node.view();
    let mut by_node: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    for shard in node.shard_ids() {
        let Some((owner, _)) = view.owner_url(shard) else {
            return Err(Problem::new(
                ErrorCode::StorageUnavailable,
                format!("shard {shard} has no owner now; compaction would skip it"),
            ));
        };
        by_node.entry(owner.to_string()).or_default().push(shard);
    }
    let mine = by_node.remove(&node.config().node_id).unwrap_or_default();
    let engines = serving(&node, &mine)?;
    let forward = state
        .forward
        .clone()
        .ok_or_else(|| Problem::new(ErrorCode::Internal, "no forwarder in cluster mode"))?;
    let mut reports = Vec::new();
    for (id, shards) in by_node {
        let url = &view.nodes[&id];
        let listed: Vec<String> = shards.iter().map(u32::to_string).collect();
        let uri: axum::http::Uri = format!("/v1/admin/compact?shards={}", listed.join(","))
            .parse()
            .expect("a valid path");
        let response = forward
            .send(
                url,
                &axum::http::Method::POST,
                &uri,
                &headers,
                Default::default(),
            )
            .await
            .map_err(|e| {
                Problem::new(
                    ErrorCode::StorageUnavailable,
                    format!("node {id} could not be asked to compact: {e}"),
                )
            })?;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
            .await
            .map_err(|e| Problem::new(ErrorCode::StorageUnavailable, e.to_string()))?;
        if !status.is_success() {
            return Err(Problem::new(
                ErrorCode::StorageUnavailable,
                format!(
                    "node {id} failed to compact ({status}): {}",
                    String::from_utf8_lossy(&body)
                ),
            ));
        }
        reports.push(
            serde_json::from_slice(&body).map_err(|e| {
                Problem::new(ErrorCode::Internal, format!("node {id}'s report: {e}"))
            })?,
        );
    }
    for engine in engines {
        reports.push(json!(engine.compact(principal.key_id()).await?));
    }
    Ok(Json(merge_reports(&reports)))
}

/// The shards a forwarded compaction names (`1,3`), as its first node listed them.
fn parse_shards(named: &str) -> Result<Vec<u32>, Problem> {
    named
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse().map_err(|_| {
                Problem::new(
                    ErrorCode::BadRequest,
                    format!("`shards` names {s:?}, not a shard number"),
                )
            })
        })
        .collect()
}

/// The engines of every shard this node serves, once each of `expected` is among them;
/// a 503 naming the first it does not serve (opening, or its lease lost since the view).
fn serving(
    node: &crate::cluster::Node,
    expected: &[u32],
) -> Result<Vec<crate::engine::Engine>, Problem> {
    let engines = node.engines();
    if let Some(missing) = expected
        .iter()
        .find(|s| !engines.iter().any(|(shard, _)| shard == *s))
    {
        return Err(Problem::new(
            ErrorCode::StorageUnavailable,
            format!(
                "node {} does not serve shard {missing} now; compaction would skip it",
                node.config().node_id
            ),
        ));
    }
    Ok(engines.into_iter().map(|(_, e)| e).collect())
}

/// One report of many (per shard or per node): numbers summed, lists joined, and the
/// latest time kept.
fn merge_reports(reports: &[Value]) -> Value {
    let mut merged = serde_json::Map::new();
    merged.insert("compactedAt".into(), json!(crate::model::Timestamp::now()));
    merged.insert("purgedEventIds".into(), json!([]));
    merged.insert("logBytesBefore".into(), json!(0));
    merged.insert("logBytesAfter".into(), json!(0));
    merged.insert("liveEvents".into(), json!(0));
    for report in reports {
        let Some(fields) = report.as_object() else {
            continue;
        };
        for (k, v) in fields {
            let slot = merged.entry(k.clone()).or_insert(Value::Null);
            match (slot.clone(), v) {
                (Value::Number(a), Value::Number(b)) => {
                    *slot = json!(a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0));
                }
                (Value::Array(mut a), Value::Array(b)) => {
                    a.extend(b.iter().cloned());
                    *slot = Value::Array(a);
                }
                (Value::String(a), Value::String(b)) if b.as_str() > a.as_str() => {
                    *slot = v.clone();
                }
                (Value::Null, _) => *slot = v.clone(),
                _ => {}
            }
        }
    }
    Value::Object(merged)
}

/// `GET /v1/audit?eventId=&action=&from=&to=&limit=&cursor=` (operator).
#[utoipa::path(
    get,
    path = "/v1/audit",
    operation_id = "read_audit_trail",
    tag = "governance",
    summary = "The tenant's audit trail, paginated",
    params(
        ("eventId" = Option<String>, Query, description = "Only entries mentioning this event"),
        ("action" = inline(Option<AuditAction>), Query, description = "Only this action (any other name is refused with the list of actions)"),
        ("from" = Option<String>, Query, format = DateTime, description = "Inclusive lower bound (RFC 3339)"),
        ("to" = Option<String>, Query, format = DateTime, description = "Exclusive upper bound (RFC 3339)"),
        ("limit" = Option<u32>, Query, minimum = 1, maximum = 1000, description = "Page size, 1-1000 (default 100)"),
        ("cursor" = Option<String>, Query, pattern = "^[0-9]{1,19}$", description = "`nextCursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "a page of entries", body = AuditPage),
        (status = 422, description = "bad parameter", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn audit(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::OPERATOR)?;
    let q = parse_audit_query(&params)?;
    let entries = state.engine(&grant)?.audit_page(&grant, &q).await?;
    let next = (entries.len() == q.limit)
        .then(|| entries.last().map(|e| e.seq.to_string()))
        .flatten();
    Ok(Json(json!({"entries": entries, "nextCursor": next})))
}

/// `GET /v1/events/{eventId}/history` (reader): the life of one event.
#[utoipa::path(
    get,
    path = "/v1/events/{eventId}/history",
    operation_id = "event_history",
    tag = "events",
    summary = "An event's history: decision, reads, supersession, deletion",
    params(("eventId" = String, Path, description = "Event id")),
    responses(
        (status = 200, description = "current state and audit entries", body = HistoryResponse),
        (status = 404, description = "no such event", body = ProblemDoc, content_type = "application/problem+json"),
        AuthErrors,
        Unavailable
    )
)]
pub async fn history(
    State(state): State<AppState>,
    Auth(principal): Auth,
    Path(event_id): Path<String>,
) -> Result<Json<Value>, Problem> {
    let grant = principal.grant(roles::READER)?;
    let (current, entries) = state.engine(&grant)?.history(&grant, &event_id).await?;
    Ok(Json(
        json!({"eventId": event_id, "event": current, "history": entries}),
    ))
}

const AUDIT_PARAMS: [&str; 6] = ["eventId", "action", "from", "to", "limit", "cursor"];

fn parse_audit_query(params: &HashMap<String, String>) -> Result<AuditQuery, Problem> {
    let mut errors: Vec<FieldError> = params
        .keys()
        .filter(|k| !AUDIT_PARAMS.contains(&k.as_str()))
        .map(|k| FieldError::unknown_parameter(k.clone(), &AUDIT_PARAMS))
        .collect();
    let mut time = |key: &str| {
        let value = params.get(key)?;
        let t = Timestamp::parse(value);
        if t.is_none() {
            errors.push(FieldError::new(key, "must be an RFC 3339 date-time"));
        }
        t
    };
    let from = time("from");
    let to = time("to");
    let limit = match params.get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if (1..=MAX_AUDIT_LIMIT).contains(&n) => n,
        Some(_) => {
            errors.push(FieldError::new(
                "limit",
                format!("must be an integer from 1 to {MAX_AUDIT_LIMIT}"),
            ));
            100
        }
    };
    let after_seq = match params.get("cursor").map(|c| c.parse::<u64>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            errors.push(FieldError::new(
                "cursor",
                "is not a cursor returned by this server",
            ));
            None
        }
    };
    let event_id = id_param(params, "eventId", &mut errors);
    let action = params
        .get("action")
        .and_then(|name| match AuditAction::from_name(name) {
            Some(action) => Some(action),
            None => {
                errors.push(FieldError::new(
                    "action",
                    format!("must be one of {}", AuditAction::names()),
                ));
                None
            }
        });
    if !errors.is_empty() {
        return Err(Problem::validation(errors));
    }
    Ok(AuditQuery {
        event_id,
        action,
        from,
        to,
        limit,
        after_seq,
    })
}

/// An id-valued query parameter through the identifier rule (`None` when absent).
fn id_param(
    params: &HashMap<String, String>,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let raw = params.get(key)?;
    ident::field(key, raw, MAX_ID_BYTES)
        .map_err(|e| errors.push(e))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_compaction_names_its_shards_or_is_refused() {
        assert_eq!(parse_shards("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_shards("1,3").unwrap(), vec![1, 3]);
        let err = parse_shards("1,x").unwrap_err();
        assert_eq!(err.code, ErrorCode::BadRequest);
    }
}
