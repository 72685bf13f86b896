//! Validation of a `POST /v1/observe` body into an [`Interaction`], every problem at once.
//!
//! Invariants: pure (the caller supplies `now` and the limits); unknown fields, wrong types
//! and inexact enum strings are reported with their JSON path, exactly like event writes;
//! `text` may be blank (the observer then ignores it as content-free) but must be a string;
//! `actorId`, `projectId`, `sourceRefs[]` and `resourceRefs[]` pass the identifier rule of
//! [`crate::model::ident`] and come out in NFC, as the write path would store them.

use serde_json::{Map, Value};

use super::classify::Role;
use crate::error::FieldError;
use crate::model::ident;
use crate::model::validate::Limits;
use crate::model::{SourceTrust, Timestamp};

/// The fields an observe body may carry.
/// The fields an interaction may have: those of [`Interaction`]'s schema, the one list of
/// them (the OpenAPI document and the MCP tool's input schema are derived from it too).
static KNOWN_FIELDS: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(crate::model::schema::properties::<Interaction>);

/// A validated raw interaction: the body of `POST /v1/observe`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "role": "user",
    "text": "Please send my renewal notices by email from now on, not by post.",
    "actorId": "user:dana",
    "occurredAt": "2026-06-17T09:20:00Z",
    "sourceRefs": ["chat-2026-06-17"],
    "sourceTrust": "user_provided"
}))]
pub struct Interaction {
    /// What was said or returned, as sent.
    #[schema(min_length = 1, pattern = "\\S")]
    pub text: String,
    /// Who produced it.
    pub role: Role,
    /// The actor the event would be attributed to.
    #[schema(min_length = 1, max_length = 256, pattern = "\\S")]
    pub actor_id: String,
    /// When it happened, RFC 3339.
    pub occurred_at: Timestamp,
    /// Evidence references (at least one).
    #[schema(min_items = 1)]
    pub source_refs: Vec<String>,
    /// Trust of the source; omitted, as in a write: the key's `defaultSourceTrust`, else
    /// `agent_inferred`.
    pub source_trust: Option<SourceTrust>,
    /// Project, if any.
    #[schema(min_length = 1, max_length = 256, pattern = "\\S")]
    pub project_id: Option<String>,
    /// Resources the interaction is about (may be omitted).
    #[serde(default)]
    pub resource_refs: Vec<String>,
}

struct Fields<'a> {
    obj: &'a Map<String, Value>,
    limits: &'a Limits,
    errors: Vec<FieldError>,
}

impl Fields<'_> {
    fn fail(&mut self, field: impl Into<String>, msg: &str) {
        self.errors.push(FieldError::new(field, msg));
    }

    fn string(&mut self, key: &str, required: bool) -> Option<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => {
                if required {
                    self.fail(key, "is required");
                }
                None
            }
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(key, "must be a string");
                None
            }
        }
    }

    fn reference(&mut self, key: &str, required: bool) -> Option<String> {
        let s = self.string(key, required)?;
        self.bounded(key, &s)
    }

    fn bounded(&mut self, key: &str, s: &str) -> Option<String> {
        match ident::field(key, s, self.limits.max_ref_bytes) {
            Ok(id) => Some(id),
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    fn list(&mut self, key: &str, required: bool) -> Option<Vec<String>> {
        let items = match self.obj.get(key) {
            None | Some(Value::Null) if required => {
                self.fail(key, "is required");
                return None;
            }
            None | Some(Value::Null) => return Some(Vec::new()),
            Some(Value::Array(items)) if items.len() <= self.limits.max_list_len => items,
            Some(Value::Array(_)) => {
                let msg = format!("must have at most {} entries", self.limits.max_list_len);
                self.fail(key, &msg);
                return None;
            }
            Some(_) => {
                self.fail(key, "must be an array of strings");
                return None;
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = format!("{key}[{i}]");
            match item {
                Value::String(s) => out.extend(self.bounded(&path, s)),
                _ => self.fail(path, "must be a string"),
            }
        }
        (out.len() == items.len()).then_some(out)
    }

    fn enumerated<T: Copy>(
        &mut self,
        key: &str,
        all: &[T],
        name: fn(T) -> &'static str,
    ) -> Option<T> {
        self.one_of(key, all, name, true)
    }

    /// An allowed name, `required` or not (`None` when absent or invalid).
    fn one_of<T: Copy>(
        &mut self,
        key: &str,
        all: &[T],
        name: fn(T) -> &'static str,
        required: bool,
    ) -> Option<T> {
        let s = self.string(key, required)?;
        let found = all.iter().copied().find(|v| name(*v) == s);
        if found.is_none() {
            let allowed: Vec<&str> = all.iter().map(|v| name(*v)).collect();
            let msg = format!("must be one of {}", allowed.join(", "));
            self.fail(key, &msg);
        }
        found
    }

    fn occurred_at(&mut self, now: Timestamp) -> Option<Timestamp> {
        let s = self.string("occurredAt", true)?;
        let Some(t) = Timestamp::parse(&s) else {
            self.fail(
                "occurredAt",
                "must be an RFC 3339 date-time, e.g. 2026-06-17T09:20:00Z",
            );
            return None;
        };
        if t > now.plus_millis(self.limits.max_future_skew_ms) {
            self.fail("occurredAt", "must not be in the future");
            return None;
        }
        Some(t)
    }
}

/// Validates an observe body.
pub fn parse_interaction(
    body: &Value,
    limits: &Limits,
    now: Timestamp,
) -> Result<Interaction, Vec<FieldError>> {
    let Value::Object(obj) = body else {
        return Err(vec![FieldError::new("", "body must be a JSON object")]);
    };
    let mut f = Fields {
        obj,
        limits,
        errors: Vec::new(),
    };
    for key in obj.keys().filter(|k| !KNOWN_FIELDS.contains(k)) {
        f.errors
            .push(FieldError::unknown(key.clone(), &KNOWN_FIELDS));
    }
    let text = f.string("text", true);
    let role = f.enumerated("role", &Role::ALL, Role::as_str);
    let actor_id = f.reference("actorId", true);
    let occurred_at = f.occurred_at(now);
    let source_refs = f.list("sourceRefs", true);
    if source_refs.as_ref().is_some_and(Vec::is_empty) {
        f.fail("sourceRefs", "must name at least one source");
    }
    let source_trust = f.one_of("sourceTrust", &SourceTrust::ALL, SourceTrust::as_str, false);
    let project_id = f.reference("projectId", false);
    let resource_refs = f.list("resourceRefs", false);
    if !f.errors.is_empty() {
        return Err(f.errors);
    }
    match (
        text,
        role,
        actor_id,
        occurred_at,
        source_refs,
        resource_refs,
    ) {
        (
            Some(text),
            Some(role),
            Some(actor_id),
            Some(occurred_at),
            Some(source_refs),
            Some(resource_refs),
        ) => Ok(Interaction {
            text,
            role,
            actor_id,
            occurred_at,
            source_refs,
            source_trust,
            project_id,
            resource_refs,
        }),
        _ => Err(vec![FieldError::new("", "invalid body")]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_is_the_one_field_list() {
        let schema = crate::model::schema::inline::<Interaction>();
        let mut fields = KNOWN_FIELDS.clone();
        fields.sort();
        assert_eq!(
            fields,
            [
                "actorId",
                "occurredAt",
                "projectId",
                "resourceRefs",
                "role",
                "sourceRefs",
                "sourceTrust",
                "text"
            ]
        );
        let required: Vec<&str> = schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(|v| v.as_str())
            .collect();
        assert_eq!(
            required,
            ["text", "role", "actorId", "occurredAt", "sourceRefs"],
            "sourceTrust may be omitted, as in a write"
        );
        assert_eq!(
            schema["properties"]["role"]["enum"],
            json!(["user", "assistant", "tool", "system"])
        );
    }

    fn now() -> Timestamp {
        Timestamp::parse("2026-07-01T00:00:00Z").expect("now")
    }

    fn valid() -> Value {
        json!({
            "text": "please send invoices by email",
            "role": "user",
            "actorId": "user-1",
            "occurredAt": "2026-06-17T09:20:00Z",
            "sourceRefs": ["chat-1"],
            "sourceTrust": "user_provided"
        })
    }

    #[test]
    fn accepts_a_minimal_body() {
        let i = parse_interaction(&valid(), &Limits::default(), now()).expect("valid");
        assert_eq!(i.role, Role::User);
        assert!(i.resource_refs.is_empty() && i.project_id.is_none());
        assert_eq!(i.source_trust, Some(SourceTrust::UserProvided));
        let mut body = valid();
        body.as_object_mut().expect("object").remove("sourceTrust");
        let i = parse_interaction(&body, &Limits::default(), now()).expect("trust may be omitted");
        assert_eq!(i.source_trust, None);
        body["sourceTrust"] = json!("trusted");
        let errs = parse_interaction(&body, &Limits::default(), now()).expect_err("invalid");
        assert_eq!(errs[0].field, "sourceTrust");
    }

    #[test]
    fn ids_follow_the_identifier_rule() {
        let mut body = valid();
        body["actorId"] = json!("jose\u{301}");
        let i = parse_interaction(&body, &Limits::default(), now()).expect("valid");
        assert_eq!(i.actor_id, "jos\u{E9}");
        body["actorId"] = json!("user-1\u{200B}");
        body["projectId"] = json!("p\u{2067}");
        body["sourceRefs"] = json!(["chat\u{0}"]);
        body["resourceRefs"] = json!(["ok", "\u{E000}"]);
        body["text"] = json!("text is free\u{200B} to hold anything");
        let errs = parse_interaction(&body, &Limits::default(), now()).expect_err("invalid");
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["actorId", "sourceRefs[0]", "projectId", "resourceRefs[1]"]
        );
        assert!(errs[0].message.contains("U+200B at position 6"));
    }

    #[test]
    fn reports_every_problem_at_once() {
        let body = json!({
            "text": 3,
            "role": "bot",
            "actorId": "",
            "occurredAt": "2099-01-01T00:00:00Z",
            "sourceRefs": [],
            "sourceTrust": "USER",
            "resourceRefs": ["ok", 1],
            "colour": "blue"
        });
        let errs = parse_interaction(&body, &Limits::default(), now()).expect_err("invalid");
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        for f in [
            "colour",
            "text",
            "role",
            "actorId",
            "occurredAt",
            "sourceRefs",
            "sourceTrust",
            "resourceRefs[1]",
        ] {
            assert!(fields.contains(&f), "{f} missing from {fields:?}");
        }
    }
}
