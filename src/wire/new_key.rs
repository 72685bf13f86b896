//! A new tenant key's settings, checked once for both ways a key is made: the body of
//! `POST /v1/admin/keys` (`api`) and the flags of `episodic keys create`
//! ([`crate::offline_keys`]), which builds the same body; and the JSON both answer with.
//!
//! Invariants: every field error is reported at once; a tenant key holds only the built-in
//! tenant roles ([`roles::TENANT`]) and the approver roles in use (the caller finds those,
//! and only when [`asks_for_other_roles`]), never `admin` or `metrics`; an unknown role is
//! refused naming the known ones; the answer shows the plaintext key, which exists nowhere
//! else.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::Problem;
use crate::auth::{roles, KeyStore, KeyStoreError, Limits, NewKey, MAX_LABEL_CHARS};
use crate::error::FieldError;
use crate::model::ident::{self, MAX_ID_BYTES};
use crate::model::{PrivacyClass, SourceTrust};

/// A `POST /v1/admin/keys` body, checked.
#[derive(Debug, Clone)]
pub struct NewKeyInput {
    /// The tenant the key is bound to.
    pub tenant: String,
    /// Its roles, sorted and without duplicates.
    pub roles: Vec<String>,
    /// Its actor and privacy limits.
    pub limits: Limits,
    /// What it is for.
    pub label: Option<String>,
    /// The `sourceTrust` its writes get when they name none.
    pub default_source_trust: Option<SourceTrust>,
}

impl NewKeyInput {
    /// Stores the key in `keys` (blocking file or bucket I/O).
    pub fn create(self, keys: &KeyStore) -> Result<NewKey, KeyStoreError> {
        keys.create_trusting(
            &self.tenant,
            self.roles,
            self.limits,
            self.label,
            self.default_source_trust,
        )
    }
}

/// The fields of a `POST /v1/admin/keys` body.
pub const NEW_KEY_FIELDS: [&str; 6] = [
    "tenantId",
    "roles",
    "actorIds",
    "maxPrivacyClass",
    "label",
    "defaultSourceTrust",
];

/// Checks a new key's body, every field at once. `approvers` are the approver roles in use
/// (the policy's, and those events awaiting review name); a role neither built in nor among
/// them is refused.
pub fn parse_new_key(body: &Value, approvers: &BTreeSet<String>) -> Result<NewKeyInput, Problem> {
    let mut errors = Vec::new();
    let obj = body.as_object().cloned().unwrap_or_default();
    for k in obj.keys().filter(|k| !NEW_KEY_FIELDS.contains(&k.as_str())) {
        errors.push(FieldError::unknown(k.clone(), &NEW_KEY_FIELDS));
    }
    let tenant = parse_tenant(obj.get("tenantId"), &mut errors);
    let roles = parse_roles(obj.get("roles"), approvers, &mut errors);
    let limits = parse_limits(&obj, &mut errors);
    let label = parse_label(obj.get("label"), &mut errors);
    let default_source_trust = match obj.get("defaultSourceTrust") {
        None | Some(Value::Null) => None,
        Some(v) => match serde_json::from_value::<SourceTrust>(v.clone()) {
            Ok(t) => Some(t),
            Err(_) => {
                let known: Vec<&str> = SourceTrust::ALL.iter().map(|t| t.as_str()).collect();
                errors.push(FieldError::new(
                    "defaultSourceTrust",
                    format!("must be one of {}", known.join(", ")),
                ));
                None
            }
        },
    };
    if errors.is_empty() {
        Ok(NewKeyInput {
            tenant,
            roles,
            limits,
            label,
            default_source_trust,
        })
    } else {
        Err(Problem::validation(errors))
    }
}

/// An optional label: 1 to [`MAX_LABEL_CHARS`] characters, none of them a control character.
fn parse_label(v: Option<&Value>, errors: &mut Vec<FieldError>) -> Option<String> {
    match v {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if (1..=MAX_LABEL_CHARS).contains(&s.chars().count())
                && !s.chars().any(char::is_control) =>
        {
            Some(s.clone())
        }
        Some(_) => {
            errors.push(FieldError::new(
                "label",
                format!("must be a string of 1 to {MAX_LABEL_CHARS} characters, none of them a control character"),
            ));
            None
        }
    }
}

/// A tenant id: the identifier rule, then the tenant charset.
fn parse_tenant(v: Option<&Value>, errors: &mut Vec<FieldError>) -> String {
    let Some(Value::String(raw)) = v else {
        errors.push(FieldError::new("tenantId", TENANT_CHARSET));
        return String::new();
    };
    match ident::field("tenantId", raw, MAX_TENANT_BYTES) {
        Ok(t) if valid_name(&t) => t,
        Ok(_) => {
            errors.push(FieldError::new("tenantId", TENANT_CHARSET));
            String::new()
        }
        Err(e) => {
            errors.push(e);
            String::new()
        }
    }
}

fn parse_limits(obj: &serde_json::Map<String, Value>, errors: &mut Vec<FieldError>) -> Limits {
    let actor_ids = match obj.get("actorIds") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) if !items.is_empty() => Some(parse_actor_ids(items, errors)),
        Some(_) => {
            errors.push(FieldError::new(
                "actorIds",
                "must be a non-empty array of actor ids",
            ));
            None
        }
    };
    let max_privacy_class = match obj.get("maxPrivacyClass") {
        None | Some(Value::Null) => PrivacyClass::Internal,
        Some(v) => match serde_json::from_value::<PrivacyClass>(v.clone()) {
            Ok(p) => p,
            Err(_) => {
                errors.push(FieldError::new(
                    "maxPrivacyClass",
                    "must be one of public, internal, private, sensitive",
                ));
                PrivacyClass::Internal
            }
        },
    };
    Limits {
        actor_ids,
        max_privacy_class,
    }
}

/// Each entry through the identifier rule, so a key limited to `user-1` names the same
/// actor as events written for it.
fn parse_actor_ids(items: &[Value], errors: &mut Vec<FieldError>) -> Vec<String> {
    let mut ids = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = format!("actorIds[{i}]");
        let checked = match item.as_str() {
            Some(raw) => ident::field(&field, raw, MAX_ID_BYTES),
            None => Err(FieldError::new(field, "must be a non-empty string")),
        };
        match checked {
            Ok(id) => ids.push(id),
            Err(e) => errors.push(e),
        }
    }
    ids
}

fn parse_roles(
    v: Option<&Value>,
    approvers: &BTreeSet<String>,
    errors: &mut Vec<FieldError>,
) -> Vec<String> {
    let Some(Value::Array(items)) = v else {
        errors.push(FieldError::new(
            "roles",
            "must be a non-empty array of role names",
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let field = || format!("roles[{i}]");
        match item.as_str() {
            Some(r) if r == roles::ADMIN => {
                errors.push(FieldError::new(field(), "tenant keys cannot hold admin"))
            }
            Some(r) if r == roles::METRICS => errors.push(FieldError::new(
                field(),
                "tenant keys cannot hold metrics: /metrics takes the admin key or EPISODIC_METRICS_TOKEN",
            )),
            Some(r) if roles::TENANT.contains(&r) || approvers.contains(r) => {
                out.push(r.to_string())
            }
            Some(r) if is_role_name(r) => errors.push(FieldError::new(
                field(),
                format!("unknown role {r}; known roles: {}", known_roles(approvers)),
            )),
            _ => errors.push(FieldError::new(
                field(),
                "must be a lowercase role name such as writer",
            )),
        }
    }
    if items.is_empty() {
        errors.push(FieldError::new("roles", "must not be empty"));
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `r` is spelt like a role: 1-64 characters of `a-z` and `_`.
fn is_role_name(r: &str) -> bool {
    !r.is_empty() && r.len() <= 64 && r.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// The roles a tenant key may hold, sorted and comma-separated: the built-in ones and the
/// approver roles in use.
fn known_roles(approvers: &BTreeSet<String>) -> String {
    let mut known: BTreeSet<&str> = roles::TENANT.into_iter().collect();
    known.extend(approvers.iter().map(String::as_str));
    known.into_iter().collect::<Vec<_>>().join(", ")
}

/// Whether a new key's body names a role that is neither built in nor reserved (only then
/// are the approver roles in use looked up).
pub fn asks_for_other_roles(body: &Value) -> bool {
    body.get("roles")
        .and_then(Value::as_array)
        .is_some_and(|items| {
            items.iter().filter_map(Value::as_str).any(|r| {
                is_role_name(r) && !roles::TENANT.contains(&r) && !roles::RESERVED.contains(&r)
            })
        })
}

/// Longest tenant id, in bytes.
const MAX_TENANT_BYTES: usize = 128;
/// What a tenant id may hold.
const TENANT_CHARSET: &str = "must be 1-128 characters of [A-Za-z0-9._:-]";

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_TENANT_BYTES
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

/// The answer to a created key: the plaintext key (shown this once) and its settings.
pub fn new_key_body(new: &NewKey) -> Value {
    json!({
        "key": new.key,
        "keyId": new.record.key_id,
        "tenantId": new.record.tenant_id,
        "roles": new.record.roles,
        "actorIds": new.record.actor_ids,
        "maxPrivacyClass": new.record.max_privacy_class,
        "label": new.record.label,
        "defaultSourceTrust": new.record.default_source_trust,
    })
}
