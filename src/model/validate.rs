//! Turns an untyped JSON body into a validated [`EventInput`], reporting every problem at once.
//!
//! Invariants: nothing reaches the log unless it passed here; unknown fields, wrong types,
//! inexact enum strings and out-of-bounds values are all reported, each with its JSON path;
//! every id field (`eventId`, `tenantId`, `actorId`, `projectId`, `resourceRefs[]`,
//! `sourceRefs[]`, `supersedesEventIds[]`) passes the identifier rule of [`super::ident`]
//! and is kept in its NFC form, while `summary` is free text and keeps its characters;
//! the validator is pure (the caller supplies `now`).

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

use super::draft::EventDraft;
use super::event::{Confidence, EventInput, PrivacyClass, Retention, SourceTrust};
use super::metadata::Metadata;
use super::time::Timestamp;
use crate::error::{FieldError, Invalid};

/// The seed's six event types, the default registry.
pub const DEFAULT_EVENT_TYPES: [&str; 6] = [
    "user_preference_stated",
    "correction_received",
    "task_milestone",
    "human_approval",
    "tool_observed_event",
    "incident_or_failure",
];

/// Bounds applied to every write.
#[derive(Debug, Clone)]
pub struct Limits {
    /// How far in the future `occurredAt` may be, in milliseconds.
    pub max_future_skew_ms: i64,
    /// Maximum `summary` size in bytes.
    pub max_summary_bytes: usize,
    /// Registered event types.
    pub event_types: Vec<String>,
    /// Maximum length of ids and references, in bytes.
    pub max_ref_bytes: usize,
    /// Maximum entries in each list field.
    pub max_list_len: usize,
    /// Most events in one batch write.
    pub max_batch_events: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_future_skew_ms: 5 * 60 * 1000,
            max_summary_bytes: 4096,
            event_types: DEFAULT_EVENT_TYPES.iter().map(|s| s.to_string()).collect(),
            max_ref_bytes: super::ident::MAX_ID_BYTES,
            max_list_len: 64,
            max_batch_events: 256,
        }
    }
}

/// Every field a write body may hold: those of [`EventInput`] (the one list, from its
/// schema), plus `tenantId` (checked against the key's tenant) and `recordedAt` (refused:
/// the server sets it).
static KNOWN_FIELDS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    let mut fields = super::schema::properties::<EventInput>();
    fields.extend(["tenantId".to_string(), "recordedAt".to_string()]);
    fields
});

/// Server-owned fields a client may not set.
const SERVER_FIELDS: [&str; 1] = ["recordedAt"];

/// Collects field errors while reading one JSON object.
struct Reader<'a> {
    obj: &'a Map<String, Value>,
    prefix: &'a str,
    errors: Vec<FieldError>,
    limits: &'a Limits,
}

impl<'a> Reader<'a> {
    fn path(&self, key: &str) -> String {
        format!("{}{}", self.prefix, key)
    }

    fn fail(&mut self, key: &str, message: impl Into<String>) {
        let field = self.path(key);
        self.errors.push(FieldError::new(field, message));
    }

    /// `None` when absent or null; records a type error for non-strings.
    fn opt_str(&mut self, key: &str) -> Option<String> {
        match self.obj.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.fail(key, "must be a string");
                None
            }
        }
    }

    fn req_str(&mut self, key: &str) -> Option<String> {
        if !self.obj.contains_key(key) || self.obj.get(key) == Some(&Value::Null) {
            self.fail(key, "is required");
            return None;
        }
        self.opt_str(key)
    }

    /// A required string that must be non-empty and bounded.
    fn req_text(&mut self, key: &str, max: usize) -> Option<String> {
        let s = self.req_str(key)?;
        self.check_text(key, s, max)
    }

    fn check_text(&mut self, key: &str, s: String, max: usize) -> Option<String> {
        match text_error(&s, max) {
            Some(message) => {
                self.fail(key, message);
                None
            }
            None => Some(s),
        }
    }

    /// An id: the shared identifier rule, bounded by `max` bytes after normalization.
    fn check_id(&mut self, key: &str, s: &str, max: usize) -> Option<String> {
        match super::ident::field(&self.path(key), s, max) {
            Ok(id) => Some(id),
            Err(e) => {
                self.errors.push(e);
                None
            }
        }
    }

    /// A required id.
    fn req_id(&mut self, key: &str, max: usize) -> Option<String> {
        let s = self.req_str(key)?;
        self.check_id(key, &s, max)
    }

    /// `Some(None)` when absent or null; `None` when invalid.
    fn opt_enum<T: Copy>(
        &mut self,
        key: &str,
        all: &[T],
        name: fn(T) -> &'static str,
    ) -> Option<Option<T>> {
        if self.obj.get(key).is_none_or(Value::is_null) {
            return Some(None);
        }
        self.req_enum(key, all, name).map(Some)
    }

    /// `Some(None)` when absent or null; `None` when invalid.
    fn opt_str_list(&mut self, key: &str) -> Option<Option<Vec<String>>> {
        if self.obj.get(key).is_none_or(Value::is_null) {
            return Some(None);
        }
        self.str_list(key, true).map(Some)
    }

    fn req_enum<T: Copy>(
        &mut self,
        key: &str,
        all: &[T],
        name: fn(T) -> &'static str,
    ) -> Option<T> {
        let s = self.req_str(key)?;
        let found = all.iter().copied().find(|v| name(*v) == s);
        if found.is_none() {
            let allowed: Vec<&str> = all.iter().map(|v| name(*v)).collect();
            self.fail(key, format!("must be one of {}", allowed.join(", ")));
        }
        found
    }

    fn time(&mut self, key: &str, s: &str) -> Option<Timestamp> {
        let t = Timestamp::parse(s);
        if t.is_none() {
            self.fail(
                key,
                "must be an RFC 3339 date-time, e.g. 2026-06-17T09:20:00Z",
            );
        }
        t
    }

    /// A list of non-empty bounded strings; `required` controls absence handling.
    fn str_list(&mut self, key: &str, required: bool) -> Option<Vec<String>> {
        let Some(value) = self.obj.get(key).filter(|v| !v.is_null()) else {
            if required {
                self.fail(key, "is required");
                return None;
            }
            return Some(Vec::new());
        };
        let Value::Array(items) = value else {
            self.fail(key, "must be an array of strings");
            return None;
        };
        if items.len() > self.limits.max_list_len {
            self.fail(
                key,
                format!("must have at most {} entries", self.limits.max_list_len),
            );
            return None;
        }
        self.list_items(key, items)
    }

    fn list_items(&mut self, key: &str, items: &[Value]) -> Option<Vec<String>> {
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, item) in items.iter().enumerate() {
            let item_key = format!("{key}[{i}]");
            match item {
                Value::String(s) => match self.check_id(&item_key, s, self.limits.max_ref_bytes) {
                    Some(s) => out.push(s),
                    None => ok = false,
                },
                _ => {
                    self.fail(&item_key, "must be a string");
                    ok = false;
                }
            }
        }
        ok.then_some(out)
    }

    fn unknown_fields<S: AsRef<str>>(&mut self, known: &[S]) {
        let unknown: Vec<String> = self
            .obj
            .keys()
            .filter(|k| !known.iter().any(|f| f.as_ref() == k.as_str()))
            .cloned()
            .collect();
        // A server-owned field is known (and refused on its own), never one to suggest.
        let shown: Vec<&str> = known
            .iter()
            .map(AsRef::as_ref)
            .filter(|f| !SERVER_FIELDS.contains(f))
            .collect();
        for key in unknown {
            let field = self.path(&key);
            self.errors.push(FieldError::unknown(field, &shown));
        }
    }
}

/// Validates a complete write body (every field of the seed's record present): offline
/// import and callers that build full records. `now` bounds `occurredAt` and
/// `retention.expiresAt`.
pub fn validate_event(
    body: &Value,
    limits: &Limits,
    now: Timestamp,
) -> Result<EventInput, Vec<FieldError>> {
    let absent = |key: &str| body.get(key).is_none_or(Value::is_null);
    let missing: Vec<FieldError> = [
        "eventType",
        "resourceRefs",
        "sourceTrust",
        "confidence",
        "privacyClass",
        "retention",
    ]
    .into_iter()
    .filter(|field| body.is_object() && absent(field))
    .map(|field| FieldError::new(field, "is required"))
    .collect();
    match validate_draft(body, limits, now) {
        // Every field present (an absent or null field is `None` in the draft): complete.
        Ok(draft) => draft.into_input().ok_or(missing),
        Err(mut errors) => {
            errors.extend(missing);
            sort_like_body(&mut errors);
            Err(errors)
        }
    }
}

/// The order [`read_fields`] reads a body's fields in (its errors come in this order, after
/// those of unknown and server-owned fields).
const READ_ORDER: [&str; 17] = [
    "eventId",
    "eventType",
    "occurredAt",
    "tenantId",
    "actorId",
    "actorNames",
    "projectId",
    "resourceRefs",
    "summary",
    "sourceRefs",
    "sourceTrust",
    "confidence",
    "privacyClass",
    "retention",
    "supersedesEventIds",
    "correctionPath",
    "metadata",
];

/// Orders field errors as a reader reports them (a stable sort: one field's errors keep
/// their order).
fn sort_like_body(errors: &mut [FieldError]) {
    let position = |field: &str| {
        let top = field.split(['.', '[']).next().unwrap_or(field);
        READ_ORDER
            .iter()
            .position(|k| *k == top)
            .map_or(0, |p| p + 1)
    };
    errors.sort_by_key(|e| position(&e.field));
}

/// Validates a write body whose derivable fields may be omitted ([`EventDraft`]): only
/// `summary`, `actorId`, `occurredAt` and `sourceRefs` are required. `now` bounds
/// `occurredAt` and `retention.expiresAt`.
pub fn validate_draft(
    body: &Value,
    limits: &Limits,
    now: Timestamp,
) -> Result<EventDraft, Vec<FieldError>> {
    let Value::Object(obj) = body else {
        return Err(vec![FieldError::new("", "body must be a JSON object")]);
    };
    let mut r = Reader {
        obj,
        prefix: "",
        errors: Vec::new(),
        limits,
    };
    r.unknown_fields(&KNOWN_FIELDS);
    for key in SERVER_FIELDS {
        if obj.contains_key(key) {
            r.fail(key, "is set by the server");
        }
    }
    let draft = read_fields(&mut r, limits, now);
    match (draft, r.errors.is_empty()) {
        (Some(draft), true) => Ok(draft),
        _ => Err(r.errors),
    }
}

fn read_fields(r: &mut Reader<'_>, limits: &Limits, now: Timestamp) -> Option<EventDraft> {
    let event_id = read_event_id(r, limits);
    let event_type = read_event_type(r, limits);
    let occurred_at = read_occurred_at(r, limits, now);
    read_tenant_id(r, limits);
    let actor_id = r.req_id("actorId", limits.max_ref_bytes);
    let actor_names = read_actor_names(r);
    let project_id = r
        .opt_str("projectId")
        .and_then(|p| r.check_id("projectId", &p, limits.max_ref_bytes));
    let resource_refs = r.opt_str_list("resourceRefs");
    let summary = r.req_text("summary", limits.max_summary_bytes);
    let source_refs = read_source_refs(r);
    let source_trust = r.opt_enum("sourceTrust", &SourceTrust::ALL, SourceTrust::as_str);
    let confidence = r.opt_enum("confidence", &Confidence::ALL, Confidence::as_str);
    let privacy_class = r.opt_enum("privacyClass", &PrivacyClass::ALL, PrivacyClass::as_str);
    let retention = read_retention(r, now);
    let supersedes_event_ids = r.opt_str_list("supersedesEventIds");
    let correction_path = r.opt_str("correctionPath");
    let metadata = read_metadata(r);
    Some(EventDraft {
        event_id: event_id?,
        event_type: event_type?,
        occurred_at: occurred_at?,
        actor_id: actor_id?,
        actor_names: actor_names?,
        project_id,
        resource_refs: resource_refs?,
        summary: summary?,
        source_refs: source_refs?,
        source_trust: source_trust?,
        confidence: confidence?,
        privacy_class: privacy_class?,
        retention: retention?,
        supersedes_event_ids: supersedes_event_ids?,
        correction_path,
        metadata: metadata?,
    })
}

/// Most names an event may give its actor.
pub const MAX_ACTOR_NAMES: usize = 4;
/// Longest actor name, in bytes.
pub const MAX_ACTOR_NAME_BYTES: usize = 64;

/// Empty when absent or null; `None` when invalid. Each name is kept in NFC;
/// it must hold a letter or digit (a name is matched by its words), and names repeated
/// (ignoring case) are kept once.
fn read_actor_names(r: &mut Reader<'_>) -> Option<Vec<String>> {
    let names = r.opt_str_list("actorNames")?.unwrap_or_default();
    if names.len() > MAX_ACTOR_NAMES {
        r.fail(
            "actorNames",
            format!("may hold at most {MAX_ACTOR_NAMES} names"),
        );
        return None;
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    let mut ok = true;
    for (i, name) in names.iter().enumerate() {
        let name: String = name.nfc().collect();
        let field = format!("actorNames[{i}]");
        if name.len() > MAX_ACTOR_NAME_BYTES {
            r.fail(
                &field,
                format!("must be at most {MAX_ACTOR_NAME_BYTES} bytes"),
            );
            ok = false;
        } else if !name.chars().any(char::is_alphanumeric) {
            r.fail(&field, "must hold a letter or digit");
            ok = false;
        } else if name.chars().any(char::is_control) {
            r.fail(&field, "must not hold control characters");
            ok = false;
        } else if !out.iter().any(|n| n.to_lowercase() == name.to_lowercase()) {
            out.push(name);
        }
    }
    ok.then_some(out)
}

/// Empty when absent or null; `None` when invalid (each problem reported at its path).
fn read_metadata(r: &mut Reader<'_>) -> Option<Metadata> {
    match r.obj.get("metadata") {
        None | Some(Value::Null) => Some(Metadata::default()),
        Some(value) => match Metadata::parse(&r.path("metadata"), value) {
            Ok(m) => Some(m),
            Err(errors) => {
                r.errors.extend(errors);
                None
            }
        },
    }
}

/// `Some(None)` when absent; `None` when invalid.
fn read_event_id(r: &mut Reader<'_>, limits: &Limits) -> Option<Option<String>> {
    let Some(id) = r.opt_str("eventId") else {
        return Some(None);
    };
    let id = r.check_id("eventId", &id, limits.max_ref_bytes.min(128))?;
    if !id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        r.fail(
            "eventId",
            "may contain only ASCII letters, digits, '-', '_', '.' and ':'",
        );
        return None;
    }
    Some(Some(id))
}

/// `tenantId` is optional and must equal the key's tenant (checked by the engine); here it
/// only has to be a well-formed id.
fn read_tenant_id(r: &mut Reader<'_>, limits: &Limits) {
    if let Some(t) = r.opt_str("tenantId") {
        r.check_id("tenantId", &t, limits.max_ref_bytes);
    }
}

/// `Some(None)` when absent (derived); `None` when invalid.
fn read_event_type(r: &mut Reader<'_>, limits: &Limits) -> Option<Option<String>> {
    let Some(t) = r.opt_str("eventType") else {
        return Some(None);
    };
    match event_type_error(&t, limits) {
        Some(message) => {
            r.fail("eventType", message);
            None
        }
        None => Some(Some(t)),
    }
}

/// What is wrong with a free text field (`summary`), if anything.
fn text_error(s: &str, max: usize) -> Option<String> {
    if s.trim().is_empty() {
        return Some("must not be empty".to_string());
    }
    (s.len() > max).then(|| format!("must be at most {max} bytes"))
}

/// What is wrong with an event type, if anything: it must be registered.
fn event_type_error(t: &str, limits: &Limits) -> Option<String> {
    if limits.event_types.iter().any(|known| known == t) {
        return None;
    }
    Some(format!(
        "must be a registered event type: {}",
        limits.event_types.join(", ")
    ))
}

/// The write rules a server-built event can break although its parts were validated where
/// they came from: an observed candidate takes its ids, times and refs from a validated
/// interaction (same identifier rule), but its summary is the masked, bounded text and its
/// type the classifier's, so those two are checked here, as a body's would be.
pub fn check_derived(input: &EventInput, limits: &Limits) -> Result<(), Invalid> {
    let mut errors = Vec::new();
    if let Some(message) = event_type_error(&input.event_type, limits) {
        errors.push(FieldError::new("eventType", message));
    }
    if let Some(message) = text_error(&input.summary, limits.max_summary_bytes) {
        errors.push(FieldError::new("summary", message));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Invalid(errors))
    }
}

fn read_occurred_at(r: &mut Reader<'_>, limits: &Limits, now: Timestamp) -> Option<Timestamp> {
    let s = r.req_str("occurredAt")?;
    let t = r.time("occurredAt", &s)?;
    if t > now.plus_millis(limits.max_future_skew_ms) {
        r.fail("occurredAt", "must not be in the future");
        return None;
    }
    Some(t)
}

fn read_source_refs(r: &mut Reader<'_>) -> Option<Vec<String>> {
    let refs = r.str_list("sourceRefs", true)?;
    if refs.is_empty() {
        r.fail("sourceRefs", "must name at least one source");
        return None;
    }
    Some(refs)
}

/// `Some(None)` when absent (derived); `None` when invalid.
fn read_retention(r: &mut Reader<'_>, now: Timestamp) -> Option<Option<Retention>> {
    let Some(value) = r.obj.get("retention").filter(|v| !v.is_null()) else {
        return Some(None);
    };
    let Value::Object(obj) = value else {
        r.fail("retention", "must be an object");
        return None;
    };
    let mut inner = Reader {
        obj,
        prefix: "retention.",
        errors: Vec::new(),
        limits: r.limits,
    };
    let retention = read_retention_fields(&mut inner, now);
    r.errors.append(&mut inner.errors);
    retention.map(Some)
}

fn read_retention_fields(r: &mut Reader<'_>, now: Timestamp) -> Option<Retention> {
    r.unknown_fields(&["expiresAt", "deleteOnRequest"]);
    let expires_at = match r.opt_str("expiresAt") {
        None => Some(None),
        Some(s) => r.time("expiresAt", &s).and_then(|t| {
            if t <= now {
                r.fail("expiresAt", "must be in the future");
                None
            } else {
                Some(Some(t))
            }
        }),
    };
    let delete_on_request = match r.obj.get("deleteOnRequest") {
        Some(Value::Bool(b)) => Some(*b),
        None | Some(Value::Null) => Some(true),
        Some(_) => {
            r.fail("deleteOnRequest", "must be a boolean");
            None
        }
    };
    Some(Retention {
        expires_at: expires_at?,
        delete_on_request: delete_on_request?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        Timestamp::parse("2026-07-01T00:00:00Z").expect("now")
    }

    fn valid() -> Value {
        json!({
            "eventType": "correction_received",
            "occurredAt": "2026-06-17T09:20:00Z",
            "actorId": "user-1",
            "resourceRefs": ["deploy-config"],
            "summary": "User corrected the deployment target from staging to production.",
            "sourceRefs": ["support-ticket-1842"],
            "sourceTrust": "user_provided",
            "confidence": "high",
            "privacyClass": "internal",
            "retention": {"deleteOnRequest": true}
        })
    }

    fn fields(body: &Value) -> Vec<String> {
        let errs = validate_event(body, &Limits::default(), now()).expect_err("invalid");
        errs.into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn accepts_the_seed_record() {
        let input = validate_event(&valid(), &Limits::default(), now()).expect("valid");
        assert_eq!(input.event_type, "correction_received");
        assert_eq!(input.source_refs, vec!["support-ticket-1842"]);
        assert!(input.event_id.is_none());
    }

    #[test]
    fn reports_every_problem_at_once() {
        let mut body = valid();
        body["occurredAt"] = json!("yesterday");
        body["actorId"] = json!("  ");
        body["sourceRefs"] = json!([]);
        body["confidence"] = json!("HIGH");
        body["eventType"] = json!("note");
        body["colour"] = json!("blue");
        let got = fields(&body);
        for f in [
            "occurredAt",
            "actorId",
            "sourceRefs",
            "confidence",
            "eventType",
            "colour",
        ] {
            assert!(got.contains(&f.to_string()), "{f} missing from {got:?}");
        }
    }

    #[test]
    fn rejects_future_time_and_past_expiry() {
        let mut body = valid();
        body["occurredAt"] = json!("2026-07-02T00:00:00Z");
        body["retention"] = json!({"deleteOnRequest": true, "expiresAt": "2026-01-01T00:00:00Z"});
        assert_eq!(fields(&body), vec!["occurredAt", "retention.expiresAt"]);
    }

    #[test]
    fn bounds_summary_and_requires_fields() {
        let mut body = valid();
        body["summary"] = json!("x".repeat(5000));
        body.as_object_mut().expect("obj").remove("retention");
        body.as_object_mut().expect("obj").remove("privacyClass");
        assert_eq!(fields(&body), vec!["summary", "privacyClass", "retention"]);
    }

    #[test]
    fn rejects_server_fields_and_bad_list_items() {
        let mut body = valid();
        body["recordedAt"] = json!("2026-06-17T09:20:00Z");
        body["resourceRefs"] = json!(["ok", 3, ""]);
        body["retention"] = json!({"deleteOnRequest": "yes", "ttl": 3});
        let got = fields(&body);
        assert!(got.contains(&"recordedAt".to_string()));
        assert!(got.contains(&"resourceRefs[1]".to_string()));
        assert!(got.contains(&"resourceRefs[2]".to_string()));
        assert!(got.contains(&"retention.deleteOnRequest".to_string()));
        assert!(got.contains(&"retention.ttl".to_string()));
    }

    #[test]
    fn event_id_charset_is_bounded() {
        let mut body = valid();
        body["eventId"] = json!("bad id/with slash");
        assert_eq!(fields(&body), vec!["eventId"]);
        body["eventId"] = json!("evt-2026.06:17_a");
        assert!(validate_event(&body, &Limits::default(), now()).is_ok());
    }

    #[test]
    fn every_id_field_passes_the_identifier_rule() {
        let mut body = valid();
        body["actorId"] = json!("user-1\u{200B}");
        body["projectId"] = json!("p\u{202E}1");
        body["resourceRefs"] = json!(["ok", "r\u{0}"]);
        body["sourceRefs"] = json!(["\u{FEFF}src"]);
        body["supersedesEventIds"] = json!(["e\u{AD}1"]);
        body["eventId"] = json!("evt\u{2066}");
        body["tenantId"] = json!("acme\u{200D}");
        body["summary"] = json!("free text keeps\u{200B} its characters");
        let errs = validate_event(&body, &Limits::default(), now()).expect_err("invalid");
        let got: Vec<(&str, &str)> = errs
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "eventId",
                    "must not contain control, format or bidi characters (U+2066 at position 3)"
                ),
                (
                    "tenantId",
                    "must not contain control, format or bidi characters (U+200D at position 4)"
                ),
                (
                    "actorId",
                    "must not contain control, format or bidi characters (U+200B at position 6)"
                ),
                (
                    "projectId",
                    "must not contain control, format or bidi characters (U+202E at position 1)"
                ),
                (
                    "resourceRefs[1]",
                    "must not contain control, format or bidi characters (U+0000 at position 1)"
                ),
                (
                    "sourceRefs[0]",
                    "must not contain control, format or bidi characters (U+FEFF at position 0)"
                ),
                (
                    "supersedesEventIds[0]",
                    "must not contain control, format or bidi characters (U+00AD at position 1)"
                ),
            ]
        );
    }

    #[test]
    fn ids_are_stored_in_nfc_and_surrounding_spaces_rejected() {
        let mut body = valid();
        body["actorId"] = json!("jose\u{301}");
        body["resourceRefs"] = json!(["cafe\u{301}"]);
        let input = validate_event(&body, &Limits::default(), now()).expect("valid");
        assert_eq!(input.actor_id, "jos\u{E9}");
        assert_eq!(input.resource_refs, vec!["caf\u{E9}"]);
        body["actorId"] = json!("user-1 ");
        assert_eq!(fields(&body), vec!["actorId"]);
    }

    #[test]
    fn non_object_body_is_one_error() {
        assert_eq!(fields(&json!([1, 2])), vec![""]);
    }
}
