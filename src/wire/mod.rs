//! The JSON shapes of engine results that both edges answer with: HTTP (`api`) and MCP
//! (`mcp`), whose tool results are exactly the HTTP response bodies.
//!
//! Invariants: one function per shape, so a write, an observation or a problem reads the
//! same on every edge; a body is parsed into its typed input here or in `model`, once, and
//! the engine sees only the typed input; nothing here decides anything beyond what a body
//! says (validation, and a `tenantId` that must be the key's).

use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::auth::TenantGrant;
use crate::engine::{Engine, WriteOutcome};
use crate::error::{ErrorCode, FieldError, Invalid};
use crate::model::validate::{validate_draft, validate_event};
use crate::model::{Decision, EventDraft, EventInput, Timestamp};
use crate::observe::parse_interaction;

pub mod new_key;
mod problem;
pub mod transfer;

pub use problem::{problem_body, Problem};

/// A write body parsed into the engine's typed input: validated (every field error at
/// once, under the engine's limits; derivable fields may be omitted), then its optional
/// `tenantId` checked against the key's tenant (403 `tenant_mismatch`; the stored tenant
/// always comes from the key). The HTTP and MCP writes.
pub fn event_draft(
    engine: &Engine,
    grant: &TenantGrant,
    body: &Value,
) -> Result<EventDraft, Problem> {
    let draft = validate_draft(body, &engine.config().limits, Timestamp::now()).map_err(Invalid)?;
    check_tenant(grant, body)?;
    Ok(draft)
}

/// Like [`event_draft`] for a body that must be a complete record (every field of the
/// seed's event present): in-process loaders that bring their own vectors.
pub fn event_input(
    engine: &Engine,
    grant: &TenantGrant,
    body: &Value,
) -> Result<EventInput, Problem> {
    let input = validate_event(body, &engine.config().limits, Timestamp::now()).map_err(Invalid)?;
    check_tenant(grant, body)?;
    Ok(input)
}

/// The fields a partial correction carries over from the event it corrects when the body
/// omits them. `sourceTrust` is not among them: a correction is a new assertion by its
/// writer, so an omitted trust follows the ordinary rule (`agent_inferred`) rather than
/// borrowing the corrected event's.
const CARRIED_OVER: [&str; 11] = [
    "eventType",
    "occurredAt",
    "actorId",
    "projectId",
    "resourceRefs",
    "summary",
    "sourceRefs",
    "confidence",
    "privacyClass",
    "retention",
    "metadata",
];

/// A partial correction of `target` (`POST /v1/events/{id}/correct`, the MCP
/// `correct_event` tool): `body` holds only the fields that change (and optionally the new
/// event's `eventId` and a `correctionPath`); the rest is carried over from `target` as the
/// grant sees it (404 if it does not), and the result supersedes it. Validated exactly as a
/// write, with the merged record's field names.
pub fn correction_draft(
    engine: &Engine,
    grant: &TenantGrant,
    target: &str,
    body: &Value,
) -> Result<EventDraft, Problem> {
    let Value::Object(changes) = body else {
        return Err(Invalid(vec![FieldError::new("", "body must be a JSON object")]).into());
    };
    if changes.contains_key("supersedesEventIds") {
        return Err(Invalid(vec![FieldError::new(
            "supersedesEventIds",
            "is implied: a correction supersedes the event it is posted to",
        )])
        .into());
    }
    let changed: Vec<&String> = changes
        .keys()
        .filter(|k| !["eventId", "correctionPath", "tenantId"].contains(&k.as_str()))
        .collect();
    if changed.is_empty() {
        return Err(Invalid(vec![FieldError::new(
            "",
            "name at least one field that changes (e.g. summary); the rest is carried over",
        )])
        .into());
    }
    let current = engine.get(grant, target)?;
    let mut merged = match serde_json::to_value(&current) {
        Ok(Value::Object(fields)) => fields
            .into_iter()
            .filter(|(k, _)| CARRIED_OVER.contains(&k.as_str()))
            .collect::<serde_json::Map<String, Value>>(),
        _ => serde_json::Map::new(),
    };
    for (k, v) in changes {
        merged.insert(k.clone(), v.clone());
    }
    merged.insert("supersedesEventIds".into(), json!([current.event_id]));
    event_draft(engine, grant, &Value::Object(merged))
}

fn check_tenant(grant: &TenantGrant, body: &Value) -> Result<(), Problem> {
    match body.get("tenantId") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(t)) if t == grant.tenant() => Ok(()),
        Some(_) => Err(Problem::new(
            ErrorCode::TenantMismatch,
            "tenantId in the body differs from the key's tenant; leave tenantId out (the \
             tenant always comes from the key)",
        )),
    }
}

/// The status and body `POST /v1/events` returns for an accepted write (shared with
/// `POST /v1/observe`, whose `result` is exactly this body, and with the MCP write tools).
/// A write that omitted derivable fields also gets `derived`: each field the server filled
/// in or changed, its value and why; a write stored where the writing key cannot see it
/// gets `visibleToWriter: false` and `visibility`, saying why.
pub fn write_body(outcome: WriteOutcome) -> (StatusCode, Value) {
    let WriteOutcome {
        event,
        decision,
        derived,
        hidden_from_writer,
        ..
    } = outcome;
    let (status, mut body) = match decision {
        Decision::Review { .. } => (
            StatusCode::ACCEPTED,
            json!({"eventId": event.event_id, "status": event.status, "decision": decision}),
        ),
        Decision::Allow { .. } | Decision::Deny { .. } => (
            StatusCode::CREATED,
            json!({"eventId": event.event_id, "status": event.status, "decision": decision, "event": event}),
        ),
    };
    if !derived.is_empty() {
        body["derived"] = json!(derived);
    }
    if let Some(why) = hidden_from_writer {
        body["visibleToWriter"] = json!(false);
        body["visibility"] = json!(why);
    }
    (status, body)
}

/// The body of `POST /v1/observe` for a caller already granted `writer` (shared with the
/// MCP `observe_interaction` tool): the status and JSON the route answers with.
pub async fn observe_interaction(
    engine: &Engine,
    grant: &TenantGrant,
    body: &Value,
) -> Result<(StatusCode, Value), Problem> {
    let limits = &engine.config().limits;
    let interaction = parse_interaction(body, limits, Timestamp::now()).map_err(Invalid)?;
    let seen = engine.observe(grant, &interaction).await?;
    let classification = seen.classification.to_json();
    let (Some(candidate), Some(written)) = (seen.candidate.as_ref(), seen.written) else {
        let reason = seen.classification.verdict.ignore.map(|r| r.as_str());
        let body =
            json!({"outcome": "ignored", "reason": reason, "classification": classification});
        return Ok((StatusCode::OK, body));
    };
    let candidate = candidate_json(candidate);
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
        Err(e) => Err(with_context(e.into(), candidate, classification)),
    }
}

/// A write problem (e.g. `policy_denied`) keeps its code and gains the candidate and the
/// classification, so the caller can see what was proposed.
fn with_context(p: Problem, candidate: Value, classification: Value) -> Problem {
    p.with_extra("outcome", json!("candidate"))
        .with_extra("candidate", candidate)
        .with_extra("classification", classification)
}

/// An observed candidate as the response shows it: the event's fields, without those a
/// candidate never sets (an id, a correction path, superseded events) or left unset (a
/// project).
fn candidate_json(input: &EventInput) -> Value {
    let mut value = serde_json::to_value(input).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.retain(|key, v| !v.is_null() && key != "supersedesEventIds");
    }
    value
}
