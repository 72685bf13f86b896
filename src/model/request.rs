//! Recall and timeline requests: parsing and validation of client input.
//!
//! Invariants: unknown fields and parameters are rejected, each named by its path (`scope.x`
//! inside the scope), the known ones read from the types' schemas; `limit` is bounded; times are
//! RFC 3339; a cursor is opaque to clients and validated when decoded; every scope value
//! (`actorIds`, `projectIds`, `eventTypes`, `resourceRefs` and the timeline's `actorId`,
//! `projectId`, `eventType`) passes the identifier rule of [`crate::model::ident`] and is
//! matched in its NFC form, exactly as ids are stored.

use std::collections::{BTreeMap, HashMap};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::error::{FieldError, Invalid};
use crate::model::ident::{self, MAX_ID_BYTES};
use crate::model::metadata::MetaFilter;
use crate::model::Timestamp;

/// Most results one recall may ask for.
pub const MAX_RECALL_LIMIT: usize = 100;
/// Most events one timeline page may hold.
pub const MAX_TIMELINE_LIMIT: usize = 500;
/// Longest accepted query text, in bytes.
pub const MAX_QUERY_BYTES: usize = 4096;

/// Scope filters of a recall or timeline (all optional; lists are any-of).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scope {
    /// Actors.
    #[serde(default)]
    pub actor_ids: Vec<String>,
    /// Projects.
    #[serde(default)]
    pub project_ids: Vec<String>,
    /// Event types.
    #[serde(default)]
    pub event_types: Vec<String>,
    /// Resources (any-of).
    #[serde(default)]
    pub resource_refs: Vec<String>,
    /// Inclusive lower bound on `occurredAt`.
    #[serde(default)]
    pub occurred_after: Option<Timestamp>,
    /// Exclusive upper bound on `occurredAt`.
    #[serde(default)]
    pub occurred_before: Option<Timestamp>,
    /// Metadata equality, e.g. `{"channel": "email", "ticket.priority": [1, 2]}`: each
    /// dotted path must hold the value (or one of the listed values); strings, numbers and
    /// booleans compare by kind and value (`"2"` is not `2`). Applied in the scope index,
    /// before any scoring.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: BTreeMap<String, Value>,
}

/// A validated recall request: the body of `POST /v1/recall` (and of the MCP `recall` tool),
/// whose schema is derived from this type; omitted fields take their defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(example = json!({
    "query": "How does Dana want renewal notices?",
    "scope": {"actorIds": ["user:dana"], "metadata": {"channel": "email"}},
    "limit": 5
}))]
pub struct RecallRequest {
    /// What to look for (1–4096 bytes).
    #[schema(min_length = 1, max_length = 4096, pattern = "\\S")]
    pub query: String,
    /// Scope filters, any-of within a list; the tenant always comes from the key.
    #[serde(default)]
    pub scope: Scope,
    /// How many hits, 1–100 (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100, default = 10)]
    pub limit: usize,
    /// Also return corrected (superseded) events.
    #[serde(default)]
    pub include_superseded: bool,
    /// Also return stale events, marked with `staleBy`.
    #[serde(default)]
    pub include_stale: bool,
    /// Answer as memory stood at this recorded time; recency is measured from it.
    #[serde(default)]
    pub as_of: Option<Timestamp>,
    /// Score every visible in-scope event, whatever approximate path the server would
    /// take for a broad scope: the answer is then the exact in-scope top k
    /// (`stats.exact: true`), at the exact path's cost.
    #[serde(default)]
    pub exact: bool,
}

/// The fields a recall body may have: those of [`RecallRequest`]'s schema, the one list of
/// them (the OpenAPI document and the MCP tool's input schema are derived from it too).
static RECALL_FIELDS: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(crate::model::schema::properties::<RecallRequest>);

/// The fields a scope may have, from [`Scope`]'s schema.
static SCOPE_FIELDS: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(crate::model::schema::properties::<Scope>);

/// Each key of `obj` that `known` lacks, as an `unknown field` error at `prefix` + key.
fn unknown_fields(obj: &Map<String, Value>, known: &[String], prefix: &str) -> Vec<FieldError> {
    obj.keys()
        .filter(|k| !known.contains(k))
        .map(|k| FieldError::unknown(format!("{prefix}{k}"), known))
        .collect()
}

impl RecallRequest {
    /// Parses and validates a recall body, reporting every problem, each at its field.
    pub fn parse(body: &Value) -> Result<Self, Invalid> {
        let Value::Object(obj) = body else {
            return Err(Invalid(vec![FieldError::new(
                "",
                "body must be a JSON object",
            )]));
        };
        let mut errors = unknown_fields(obj, &RECALL_FIELDS, "");
        let query = match obj.get("query") {
            Some(Value::String(q)) if !q.trim().is_empty() && q.len() <= MAX_QUERY_BYTES => {
                q.clone()
            }
            Some(Value::String(q)) if q.len() > MAX_QUERY_BYTES => {
                errors.push(FieldError::new(
                    "query",
                    format!("must be at most {MAX_QUERY_BYTES} bytes"),
                ));
                String::new()
            }
            _ => {
                errors.push(FieldError::new("query", "must be a non-empty string"));
                String::new()
            }
        };
        let scope = parse_scope(obj.get("scope"), &mut errors);
        let limit = parse_limit(obj.get("limit"), "limit", 10, MAX_RECALL_LIMIT, &mut errors);
        let include_superseded = parse_bool(
            obj.get("includeSuperseded"),
            "includeSuperseded",
            &mut errors,
        );
        let include_stale = parse_bool(obj.get("includeStale"), "includeStale", &mut errors);
        let as_of = parse_time_value(obj.get("asOf"), "asOf", &mut errors);
        let exact = parse_bool(obj.get("exact"), "exact", &mut errors);
        if !errors.is_empty() {
            return Err(Invalid(errors));
        }
        Ok(RecallRequest {
            query,
            scope,
            limit,
            include_superseded,
            include_stale,
            as_of,
            exact,
        })
    }
}

fn parse_scope(value: Option<&Value>, errors: &mut Vec<FieldError>) -> Scope {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Scope::default();
    };
    let Value::Object(obj) = value else {
        errors.push(FieldError::new("scope", "must be an object"));
        return Scope::default();
    };
    let unknown = unknown_fields(obj, &SCOPE_FIELDS, "scope.");
    if !unknown.is_empty() {
        errors.extend(unknown);
        return Scope::default();
    }
    match serde_json::from_value::<Scope>(value.clone()) {
        Ok(mut scope) => {
            check_range(scope.occurred_after, scope.occurred_before, "scope", errors);
            for (name, list) in [
                ("actorIds", &mut scope.actor_ids),
                ("projectIds", &mut scope.project_ids),
                ("eventTypes", &mut scope.event_types),
                ("resourceRefs", &mut scope.resource_refs),
            ] {
                normalize_ids(&format!("scope.{name}"), list, errors);
            }
            scope.metadata = normalize_metadata("scope.metadata", &scope.metadata, errors);
            scope
        }
        Err(e) => {
            errors.push(FieldError::new("scope", e.to_string()));
            Scope::default()
        }
    }
}

/// A scope's metadata filter, validated (every problem at its path) with its strings in NFC.
fn normalize_metadata(
    field: &str,
    raw: &BTreeMap<String, Value>,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<String, Value> {
    let before = errors.len();
    MetaFilter::parse(field, raw, errors);
    if errors.len() > before {
        return BTreeMap::new();
    }
    raw.iter()
        .map(|(k, v)| (k.clone(), nfc_strings(v)))
        .collect()
}

/// `v` with every string in NFC.
fn nfc_strings(v: &Value) -> Value {
    use unicode_normalization::UnicodeNormalization;
    match v {
        Value::String(s) => Value::String(s.nfc().collect()),
        Value::Array(items) => Value::Array(items.iter().map(nfc_strings).collect()),
        other => other.clone(),
    }
}

/// Replaces each entry with its normalized id, reporting `field[i]` for each bad one.
fn normalize_ids(field: &str, ids: &mut [String], errors: &mut Vec<FieldError>) {
    for (i, id) in ids.iter_mut().enumerate() {
        match ident::field(&format!("{field}[{i}]"), id, MAX_ID_BYTES) {
            Ok(n) => *id = n,
            Err(e) => errors.push(e),
        }
    }
}

fn check_range(
    after: Option<Timestamp>,
    before: Option<Timestamp>,
    field: &str,
    errors: &mut Vec<FieldError>,
) {
    if let (Some(a), Some(b)) = (after, before) {
        if a >= b {
            errors.push(FieldError::new(
                field,
                "the time range is empty (start must be before end)",
            ));
        }
    }
}

fn parse_limit(
    v: Option<&Value>,
    field: &str,
    default: usize,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> usize {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return default;
    };
    // JSON Schema counts 10.0 as an integer, so a whole-valued float is accepted.
    let whole = v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 1e9)
            .map(|f| f as u64)
    });
    match whole {
        Some(n) if n >= 1 && n <= max as u64 => n as usize,
        _ => {
            errors.push(FieldError::new(
                field,
                format!("must be an integer from 1 to {max}"),
            ));
            default
        }
    }
}

fn parse_time_value(
    v: Option<&Value>,
    field: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Timestamp> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => {
            let t = Timestamp::parse(s);
            if t.is_none() {
                errors.push(FieldError::new(field, "must be an RFC 3339 date-time"));
            }
            t
        }
        Some(_) => {
            errors.push(FieldError::new(field, "must be an RFC 3339 date-time"));
            None
        }
    }
}

fn parse_bool(v: Option<&Value>, field: &str, errors: &mut Vec<FieldError>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            errors.push(FieldError::new(field, "must be a boolean"));
            false
        }
    }
}

/// A keyset position in the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// `occurredAt` of the last event returned, in unix ms.
    pub occurred_ms: i64,
    /// Its id (tie-break).
    pub event_id: String,
}

impl Cursor {
    /// Opaque text form.
    pub fn encode(&self) -> String {
        let raw = format!("{}|{}", self.occurred_ms, self.event_id);
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    }

    /// Parses the opaque form.
    pub fn decode(s: &str) -> Option<Cursor> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(s)
            .ok()?;
        let text = String::from_utf8(bytes).ok()?;
        let (ms, id) = text.split_once('|')?;
        Some(Cursor {
            occurred_ms: ms.parse().ok()?,
            event_id: id.to_string(),
        })
    }
}

/// A validated timeline query.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineQuery {
    /// Scope (single actor, project and type from the query string).
    pub scope: Scope,
    /// Page size.
    pub limit: usize,
    /// Position after which to continue.
    pub cursor: Option<Cursor>,
    /// Also return superseded events.
    pub include_superseded: bool,
    /// Answer as memory stood at this `recordedAt` time.
    pub as_of: Option<Timestamp>,
    /// Name, for each stale event of the page, the newer event that makes it stale (as
    /// recall judges staleness in the same view).
    pub mark_stale: bool,
}

const TIMELINE_PARAMS: [&str; 11] = [
    "actorId",
    "projectId",
    "eventType",
    "from",
    "to",
    "limit",
    "cursor",
    "includeSuperseded",
    "asOf",
    "metadata",
    "markStale",
];

impl TimelineQuery {
    /// Parses query-string parameters, reporting every problem.
    pub fn parse(params: &HashMap<String, String>) -> Result<Self, Invalid> {
        let mut errors: Vec<FieldError> = params
            .keys()
            .filter(|k| !TIMELINE_PARAMS.contains(&k.as_str()))
            .map(|k| FieldError::unknown_parameter(k.clone(), &TIMELINE_PARAMS))
            .collect();
        let from = parse_time_param(params, "from", &mut errors);
        let to = parse_time_param(params, "to", &mut errors);
        let as_of = parse_time_param(params, "asOf", &mut errors);
        check_range(from, to, "from", &mut errors);
        let limit = match params.get("limit") {
            None => 50,
            Some(s) => {
                let v = s.parse::<u64>().map(Value::from).unwrap_or(Value::Null);
                if v.is_null() {
                    errors.push(FieldError::new(
                        "limit",
                        format!("must be an integer from 1 to {MAX_TIMELINE_LIMIT}"),
                    ));
                    50
                } else {
                    parse_limit(Some(&v), "limit", 50, MAX_TIMELINE_LIMIT, &mut errors)
                }
            }
        };
        // An empty cursor means the first page, like the other empty parameters.
        let cursor = match params.get("cursor").filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => {
                let parsed = Cursor::decode(c);
                if parsed.is_none() {
                    errors.push(FieldError::new(
                        "cursor",
                        "is not a cursor returned by this server",
                    ));
                }
                parsed
            }
        };
        let include_superseded = bool_param(params, "includeSuperseded", &mut errors);
        let mark_stale = bool_param(params, "markStale", &mut errors);
        let actor_ids = id_param(params, "actorId", &mut errors);
        let project_ids = id_param(params, "projectId", &mut errors);
        let event_types = id_param(params, "eventType", &mut errors);
        let metadata = metadata_param(params, &mut errors);
        if !errors.is_empty() {
            return Err(Invalid(errors));
        }
        Ok(TimelineQuery {
            scope: Scope {
                actor_ids,
                project_ids,
                event_types,
                resource_refs: Vec::new(),
                occurred_after: from,
                occurred_before: to,
                metadata,
            },
            limit,
            cursor,
            include_superseded,
            as_of,
            mark_stale,
        })
    }
}

/// A boolean query parameter: absent or `false` is false, `true` is true, anything else an
/// error.
fn bool_param(params: &HashMap<String, String>, key: &str, errors: &mut Vec<FieldError>) -> bool {
    match params.get(key).map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => {
            errors.push(FieldError::new(key, "must be true or false"));
            false
        }
    }
}

/// The timeline's `metadata` parameter: a JSON object, as a recall scope's `metadata`.
fn metadata_param(
    params: &HashMap<String, String>,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<String, Value> {
    let Some(raw) = params.get("metadata").filter(|v| !v.is_empty()) else {
        return BTreeMap::new();
    };
    match serde_json::from_str::<BTreeMap<String, Value>>(raw) {
        Ok(map) => normalize_metadata("metadata", &map, errors),
        Err(_) => {
            errors.push(FieldError::new(
                "metadata",
                "must be a JSON object such as {\"channel\":\"email\"}",
            ));
            BTreeMap::new()
        }
    }
}

/// A single-valued id parameter as a scope list: empty when absent or empty (an empty
/// parameter means no filter), else the normalized id.
fn id_param(
    params: &HashMap<String, String>,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let Some(raw) = params.get(key).filter(|v| !v.is_empty()) else {
        return Vec::new();
    };
    match ident::field(key, raw, MAX_ID_BYTES) {
        Ok(id) => vec![id],
        Err(e) => {
            errors.push(e);
            Vec::new()
        }
    }
}

fn parse_time_param(
    params: &HashMap<String, String>,
    key: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Timestamp> {
    let s = params.get(key)?;
    let t = Timestamp::parse(s);
    if t.is_none() {
        errors.push(FieldError::new(key, "must be an RFC 3339 date-time"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recall_defaults_and_bounds() {
        let r = RecallRequest::parse(&json!({"query": "renewal"})).expect("ok");
        assert_eq!(r.limit, 10);
        assert_eq!(r.scope, Scope::default());
        for bad in [
            json!({"query": ""}),
            json!({"query": "x", "limit": 0}),
            json!({"query": "x", "limit": 101}),
            json!({"query": "x", "limit": 2.5}),
            json!({"query": "x", "limit": -3.0}),
            json!({"query": "x", "colour": 1}),
            json!({"query": "x", "scope": {"actor": "a"}}),
        ] {
            assert!(RecallRequest::parse(&bad).is_err(), "{bad}");
        }
        let whole = RecallRequest::parse(&json!({"query": "x", "limit": 32.0})).expect("32.0");
        assert_eq!(whole.limit, 32);
        let err = RecallRequest::parse(&json!({"query": 3, "limit": "x"})).expect_err("bad");
        assert_eq!(err.0.len(), 2);
    }

    #[test]
    fn unknown_fields_are_named_where_they_stand() {
        let fields = |body: Value| -> Vec<String> {
            RecallRequest::parse(&body)
                .expect_err("invalid")
                .0
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        assert_eq!(
            fields(json!({"query": "x", "bogusField": 1})),
            vec!["bogusField"]
        );
        assert_eq!(
            fields(json!({"bogusField": 1, "limit": 0})),
            vec!["bogusField", "query", "limit"],
            "a missing query is named too, with every other problem"
        );
        assert_eq!(
            fields(json!({"query": "x", "scope": {"actorIds": ["a"], "actor": "a"}})),
            vec!["scope.actor"]
        );
        assert_eq!(fields(json!({"query": "x", "scope": []})), vec!["scope"]);
        assert_eq!(fields(json!(["x"])), vec![""]);
        let mut known = RECALL_FIELDS.clone();
        known.sort();
        assert_eq!(
            known,
            vec![
                "asOf",
                "exact",
                "includeStale",
                "includeSuperseded",
                "limit",
                "query",
                "scope"
            ]
        );
    }

    #[test]
    fn cursor_round_trip_and_rejects_garbage() {
        let c = Cursor {
            occurred_ms: 1_700_000_000_000,
            event_id: "e|1".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("!!!"), None);
    }

    #[test]
    fn scope_ids_follow_the_identifier_rule() {
        let r = RecallRequest::parse(&json!({"query": "x", "scope": {
            "actorIds": ["jose\u{301}"], "resourceRefs": ["r1"]
        }}))
        .expect("ok");
        assert_eq!(r.scope.actor_ids, vec!["jos\u{E9}"]);
        let err = RecallRequest::parse(&json!({"query": "x", "scope": {
            "actorIds": ["ok", "user-1\u{200B}"],
            "projectIds": ["p\u{202E}"],
            "eventTypes": ["\u{0}"],
            "resourceRefs": [" r"]
        }}))
        .expect_err("bad");
        let fields: Vec<&str> = err.0.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "scope.actorIds[1]",
                "scope.projectIds[0]",
                "scope.eventTypes[0]",
                "scope.resourceRefs[0]"
            ]
        );
        assert!(err.0[0].message.contains("U+200B at position 6"));
        let mut p = HashMap::new();
        p.insert("actorId".to_string(), "user-1\u{200B}".to_string());
        p.insert("projectId".to_string(), "cafe\u{301}".to_string());
        let err = TimelineQuery::parse(&p).expect_err("bad");
        assert_eq!(err.0.len(), 1);
        assert_eq!(err.0[0].field, "actorId");
        p.insert("actorId".to_string(), "u".to_string());
        let q = TimelineQuery::parse(&p).expect("ok");
        assert_eq!(q.scope.project_ids, vec!["caf\u{E9}"]);
    }

    #[test]
    fn timeline_params() {
        let mut p = HashMap::new();
        p.insert("actorId".to_string(), "a".to_string());
        p.insert("limit".to_string(), "2".to_string());
        let q = TimelineQuery::parse(&p).expect("ok");
        assert_eq!(q.limit, 2);
        assert_eq!(q.scope.actor_ids, vec!["a"]);
        assert!(!q.mark_stale, "stale marks only on request");
        p.insert("markStale".to_string(), "true".to_string());
        assert!(TimelineQuery::parse(&p).expect("ok").mark_stale);
        p.insert("bogus".to_string(), "1".to_string());
        p.insert("from".to_string(), "nope".to_string());
        p.insert("markStale".to_string(), "yes".to_string());
        let err = TimelineQuery::parse(&p).expect_err("bad");
        assert_eq!(err.0.len(), 3);
        assert!(err.0.iter().any(|e| e.field == "markStale"), "{err:?}");
    }
}
