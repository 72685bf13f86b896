//! The NDJSON of bulk transfer, shared by the command line (`episodic import` / `export`)
//! and the HTTP API (`POST /v1/import`, `GET /v1/export`): one event per line, as export
//! writes it and import reads it, and the summary an import answers with.
//!
//! Invariants:
//! - an exported line is the whole stored event as the exporting grant sees it (every field
//!   of [`StoredEvent`], so a field added to events travels without a change here), plus,
//!   when asked for, its `vector` and the `embeddingModel` that made it;
//! - an import line is a complete event record (a write body with every field of the seed's
//!   event, as export writes it), validated exactly as a write; the fields the server owns
//!   (`recordedAt`, `status`, `policyVersion`, `supersededBy`, `supersededAt`,
//!   `contentWarnings`) are dropped and re-derived, never trusted; a line naming another
//!   tenant is refused (`tenant_mismatch`), never rewritten;
//! - an `eventId` as stored (with the namespace mark of a key's writes, `id~tag`) is read
//!   as such; whether the importing grant may write it is the engine's decision;
//! - a line's vector is kept only when the caller trusts vectors and the line names the
//!   model in use ([`Vectors`]);
//! - the summary accounts for every non-blank line exactly once: `allowed`, `review`,
//!   `unchanged`, or one of the `denied`, `invalid` and `failed` lists with its line number,
//!   stable code and detail; [`ImportSummary::complete`] is true only when no line is in
//!   those lists.

use serde::Serialize;
use serde_json::{Map, Value};

use super::Problem;
use crate::engine::{ImportLine, ImportedBatch};
use crate::error::{ErrorCode, FieldError};
use crate::model::validate::{validate_event, Limits};
use crate::model::{Decision, StoredEvent, Timestamp};
use crate::read::NAMESPACE_MARK;

/// Fields of an exported line that the server owns; an import drops them.
pub const SERVER_OWNED: [&str; 6] = [
    "recordedAt",
    "status",
    "policyVersion",
    "supersededBy",
    "supersededAt",
    "contentWarnings",
];
/// The summary embedding an export adds to a line when asked for.
pub const VECTOR_FIELD: &str = "vector";
/// The model that made [`VECTOR_FIELD`].
pub const MODEL_FIELD: &str = "embeddingModel";
/// Longest key tag accepted after the namespace mark of an id as stored.
const MAX_TAG_CHARS: usize = 64;

/// What an import does with the vectors lines carry.
#[derive(Debug, Clone, Copy)]
pub enum Vectors<'a> {
    /// Reuse a line's vector when its `embeddingModel` is this model (the operator's
    /// command line, which reads files it chose).
    Reuse(&'a str),
    /// Drop every vector and embed the summary (the HTTP API: a vector sent by a client
    /// cannot be checked against its summary, and could make an event rank for any query).
    Ignore,
}

/// One exported line: the event as JSON, with its vector and model when given, and a
/// trailing newline.
pub fn export_line(event: &StoredEvent, vector: Option<(&[f32], &str)>) -> Vec<u8> {
    let mut line = serde_json::to_value(event).unwrap_or(Value::Null);
    if let (Some((v, model)), Value::Object(obj)) = (vector, &mut line) {
        obj.insert(VECTOR_FIELD.into(), serde_json::json!(v));
        obj.insert(MODEL_FIELD.into(), Value::String(model.to_string()));
    }
    let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// A line that was not written.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LineIssue {
    /// 1-based line number.
    pub line: usize,
    /// Stable error code (`malformed_json`, `validation_failed`, `tenant_mismatch`,
    /// `policy_denied`, `conflict`, `not_found`, `forbidden`, …).
    pub code: String,
    /// What was wrong.
    pub detail: String,
    /// Field errors, for invalid lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

impl LineIssue {
    fn of(line: usize, problem: &Problem) -> Self {
        LineIssue {
            line,
            code: problem.code.as_str().to_string(),
            detail: problem.detail.clone(),
            errors: problem.errors.clone(),
        }
    }
}

/// What an import did with every line.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportSummary {
    /// Non-blank lines read.
    pub lines: usize,
    /// Written and retrievable.
    pub allowed: usize,
    /// Written and held for review.
    pub review: usize,
    /// Already present with the same content (an idempotent retry: nothing written).
    pub unchanged: usize,
    /// Refused by the write policy.
    pub denied: Vec<LineIssue>,
    /// Malformed JSON, failed validation, or another tenant's line.
    pub invalid: Vec<LineIssue>,
    /// Refused for another reason (an id holding different content, an unknown or already
    /// superseded correction target, an actor outside the key's limits).
    pub failed: Vec<LineIssue>,
    /// Lines not imported: the sum of the three lists (0 when every line was written or
    /// unchanged).
    pub not_imported: usize,
    /// Summaries embedded by the model.
    pub embedded: usize,
    /// Vectors reused from the lines.
    pub vectors_reused: usize,
}

/// A failure that stops an import: the store cannot take writes (the lines before it were
/// imported, as the summary says; this one and those after it were not).
#[derive(Debug, Clone)]
pub struct Aborted {
    /// The line that met the failure.
    pub line: usize,
    /// Its problem (`storage_unavailable` or `internal`).
    pub problem: Problem,
}

impl ImportSummary {
    /// Whether every line was written or unchanged.
    pub fn complete(&self) -> bool {
        self.not_imported == 0
    }

    /// Counts a line that could not be parsed or validated.
    pub fn invalid_line(&mut self, issue: LineIssue) {
        self.lines += 1;
        self.not_imported += 1;
        self.invalid.push(issue);
    }

    /// Counts a batch of parsed lines written by the engine; stops at the first line the
    /// store could not take.
    pub fn add(&mut self, batch: ImportedBatch) -> Result<(), Aborted> {
        self.embedded += batch.embedded;
        self.vectors_reused += batch.vectors_reused;
        for r in batch.results {
            self.lines += 1;
            let problem = match r.result {
                Ok(o) if o.retried => {
                    self.unchanged += 1;
                    continue;
                }
                Ok(o) => {
                    match o.decision {
                        Decision::Review { .. } => self.review += 1,
                        Decision::Allow { .. } | Decision::Deny { .. } => self.allowed += 1,
                    }
                    continue;
                }
                Err(e) => Problem::from(e),
            };
            let issue = LineIssue::of(r.line, &problem);
            self.not_imported += 1;
            match problem.code {
                ErrorCode::PolicyDenied => self.denied.push(issue),
                ErrorCode::ValidationFailed => self.invalid.push(issue),
                ErrorCode::StorageUnavailable | ErrorCode::Internal | ErrorCode::NotReady => {
                    self.failed.push(issue);
                    return Err(Aborted {
                        line: r.line,
                        problem,
                    });
                }
                _ => self.failed.push(issue),
            }
        }
        Ok(())
    }

    /// One line of text for a person: the counts, and whether anything was left out.
    pub fn describe(&self) -> String {
        format!(
            "{} lines: {} allowed, {} review, {} unchanged, {} denied, {} invalid, {} failed{}",
            self.lines,
            self.allowed,
            self.review,
            self.unchanged,
            self.denied.len(),
            self.invalid.len(),
            self.failed.len(),
            if self.complete() {
                String::new()
            } else {
                format!("; {} lines NOT imported", self.not_imported)
            }
        )
    }
}

/// Parses and validates one import line of `tenant` (see the module's invariants).
pub fn parse_line(
    text: &str,
    line: usize,
    tenant: &str,
    limits: &Limits,
    vectors: Vectors<'_>,
) -> Result<ImportLine, LineIssue> {
    let issue = |code: ErrorCode, detail: String, errors: Vec<FieldError>| LineIssue {
        line,
        code: code.as_str().to_string(),
        detail,
        errors,
    };
    let value: Value = serde_json::from_str(text)
        .map_err(|e| issue(ErrorCode::MalformedJson, e.to_string(), Vec::new()))?;
    let Value::Object(mut obj) = value else {
        return Err(issue(
            ErrorCode::ValidationFailed,
            "a line must be a JSON object".into(),
            Vec::new(),
        ));
    };
    if let Some(named) = obj.get("tenantId").filter(|t| *t != tenant) {
        return Err(issue(
            ErrorCode::TenantMismatch,
            format!("the line names tenant {named}, not {tenant}"),
            Vec::new(),
        ));
    }
    let vector = take_vector(&mut obj, vectors);
    for field in SERVER_OWNED {
        obj.remove(field);
    }
    let stored_id = split_stored_id(&mut obj)
        .map_err(|e| issue(ErrorCode::ValidationFailed, e.message.clone(), vec![e]))?;
    let body = Value::Object(obj);
    let mut input = validate_event(&body, limits, Timestamp::now()).map_err(|errs| {
        issue(
            ErrorCode::ValidationFailed,
            format!("{} field error(s)", errs.len()),
            errs,
        )
    })?;
    if let (Some(id), Some(full)) = (&mut input.event_id, stored_id) {
        *id = full;
    }
    Ok(ImportLine {
        line,
        input,
        vector,
    })
}

/// Removes the line's vector fields; keeps the vector only if `vectors` says to and the
/// model that made it is the one named there.
fn take_vector(obj: &mut Map<String, Value>, vectors: Vectors<'_>) -> Option<Vec<f32>> {
    let model = obj.remove(MODEL_FIELD);
    let vector = obj.remove(VECTOR_FIELD)?;
    match vectors {
        Vectors::Reuse(model_id) if model.as_ref().and_then(Value::as_str) == Some(model_id) => {
            serde_json::from_value(vector).ok()
        }
        Vectors::Reuse(_) | Vectors::Ignore => None,
    }
}

/// An `eventId` as stored (`id~tag`): its plain part is left in the body for validation and
/// the whole id is returned, once its tag is checked.
fn split_stored_id(obj: &mut Map<String, Value>) -> Result<Option<String>, FieldError> {
    let Some(Value::String(id)) = obj.get("eventId") else {
        return Ok(None);
    };
    let Some((base, tag)) = id.split_once(NAMESPACE_MARK) else {
        return Ok(None);
    };
    if tag.is_empty()
        || tag.len() > MAX_TAG_CHARS
        || !tag.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(FieldError::new(
            "eventId",
            format!(
                "an id as stored is `<id>{NAMESPACE_MARK}<tag>`, the tag 1-{MAX_TAG_CHARS} ASCII \
                 letters and digits"
            ),
        ));
    }
    let (full, base) = (id.clone(), base.to_string());
    obj.insert("eventId".into(), Value::String(base));
    Ok(Some(full))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(extra: Value) -> String {
        let mut v = serde_json::json!({
            "eventId": "ev-1",
            "eventType": "task_milestone",
            "occurredAt": "2026-01-05T08:00:00Z",
            "actorId": "ana",
            "resourceRefs": [],
            "summary": "Ana shipped the release",
            "sourceRefs": ["ticket-1"],
            "sourceTrust": "user_provided",
            "confidence": "high",
            "privacyClass": "internal",
            "retention": {"deleteOnRequest": true},
            "supersedesEventIds": [],
            "correctionPath": "",
            "tenantId": "acme",
            "recordedAt": "2026-01-05T08:00:01Z",
            "status": "active",
            "policyVersion": "v1",
        });
        if let (Value::Object(obj), Value::Object(more)) = (&mut v, extra) {
            obj.extend(more);
        }
        v.to_string()
    }

    #[test]
    fn an_exported_line_parses_without_its_server_fields() {
        let l = parse_line(
            &line(Value::Null),
            3,
            "acme",
            &Limits::default(),
            Vectors::Ignore,
        )
        .expect("valid");
        assert_eq!(l.line, 3);
        assert_eq!(l.input.event_id.as_deref(), Some("ev-1"));
        assert!(l.vector.is_none());
    }

    #[test]
    fn another_tenant_is_refused_not_rewritten() {
        let text = line(serde_json::json!({"tenantId": "other"}));
        let e = parse_line(&text, 1, "acme", &Limits::default(), Vectors::Ignore)
            .expect_err("other tenant");
        assert_eq!(e.code, "tenant_mismatch");
    }

    #[test]
    fn an_id_as_stored_keeps_its_tag_and_a_bad_tag_is_invalid() {
        let text = line(serde_json::json!({"eventId": "ev-1~0a1b2c3d4e5f6a7b"}));
        let l = parse_line(&text, 1, "acme", &Limits::default(), Vectors::Ignore).expect("ok");
        assert_eq!(l.input.event_id.as_deref(), Some("ev-1~0a1b2c3d4e5f6a7b"));
        let text = line(serde_json::json!({"eventId": "ev-1~bad tag"}));
        let e =
            parse_line(&text, 1, "acme", &Limits::default(), Vectors::Ignore).expect_err("bad tag");
        assert_eq!(e.code, "validation_failed");
        assert_eq!(e.errors[0].field, "eventId");
    }

    #[test]
    fn vectors_are_kept_only_when_trusted_and_of_the_model_in_use() {
        let text = line(serde_json::json!({"vector": [0.6, 0.8], "embeddingModel": "m"}));
        let limits = Limits::default();
        let kept = parse_line(&text, 1, "acme", &limits, Vectors::Reuse("m")).expect("ok");
        assert_eq!(kept.vector, Some(vec![0.6, 0.8]));
        let other = parse_line(&text, 1, "acme", &limits, Vectors::Reuse("n")).expect("ok");
        assert!(other.vector.is_none());
        let ignored = parse_line(&text, 1, "acme", &limits, Vectors::Ignore).expect("ok");
        assert!(ignored.vector.is_none());
    }
}
