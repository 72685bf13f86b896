//! The JSON shapes of engine results that both edges answer with: HTTP (`api`) and MCP
//! (`mcp`), whose tool results are exactly the HTTP response bodies.
//!
//! Invariant: one function per shape, so a write, an observation or a problem reads the
//! same on every edge; nothing here decides anything, it only presents.

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::auth::TenantGrant;
use crate::engine::{Engine, WriteOutcome};
use crate::error::Problem;
use crate::model::Decision;

/// The status and body `POST /v1/events` returns for an accepted write (shared with
/// `POST /v1/observe`, whose `result` is exactly this body, and with the MCP write tools).
pub fn write_body(outcome: WriteOutcome) -> (StatusCode, Value) {
    let WriteOutcome {
        event, decision, ..
    } = outcome;
    match decision {
        Decision::Review { .. } => (
            StatusCode::ACCEPTED,
            json!({"eventId": event.event_id, "status": event.status, "decision": decision}),
        ),
        Decision::Allow { .. } | Decision::Deny { .. } => (
            StatusCode::CREATED,
            json!({"eventId": event.event_id, "status": event.status, "decision": decision, "event": event}),
        ),
    }
}

/// The body of `POST /v1/observe` for a caller already granted `writer` (shared with the
/// MCP `observe_interaction` tool): the status and JSON the route answers with.
pub async fn observe_interaction(
    engine: &Engine,
    grant: &TenantGrant,
    body: &Value,
) -> Result<(StatusCode, Value), Problem> {
    let seen = engine.observe(grant, body).await?;
    let classification = seen.classification.to_json();
    let (Some(candidate), Some(written)) = (seen.candidate, seen.written) else {
        let reason = seen.classification.verdict.ignore.map(|r| r.as_str());
        let body =
            json!({"outcome": "ignored", "reason": reason, "classification": classification});
        return Ok((StatusCode::OK, body));
    };
    match written {
        Ok(outcome) => {
            let (status, result) = write_body(outcome);
            let body = json!({
                "outcome": "candidate",
                "candidate": candidate,
                "classification": classification,
                "result": result,
            });
            Ok((status, body))
        }
        Err(p) => Err(with_context(p, candidate, classification)),
    }
}

/// A write problem (e.g. `policy_denied`) keeps its code and gains the candidate and the
/// classification, so the caller can see what was proposed.
fn with_context(p: Problem, candidate: Value, classification: Value) -> Problem {
    p.with_extra("outcome", json!("candidate"))
        .with_extra("candidate", candidate)
        .with_extra("classification", classification)
}

/// The JSON body of a problem.
pub fn problem_body(p: &Problem, request_id: Option<&str>) -> Value {
    let mut v = json!({
        "type": format!("urn:episodic:problem:{}", p.code.as_str()),
        "title": p.code.title(),
        "status": p.code.status(),
        "detail": p.detail,
        "code": p.code.as_str(),
    });
    if let Some(obj) = v.as_object_mut() {
        if !p.errors.is_empty() {
            obj.insert("errors".into(), json!(p.errors));
        }
        if let Some(rid) = request_id {
            obj.insert("requestId".into(), Value::String(rid.to_string()));
        }
        if let Some(extra) = &p.extra {
            for (k, val) in extra {
                obj.insert(k.clone(), val.clone());
            }
        }
    }
    v
}
