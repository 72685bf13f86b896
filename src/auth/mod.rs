//! Credentials → principal → grant. The only module that can construct a [`TenantGrant`],
//! which every storage and retrieval call requires.
//!
//! Invariants: only SHA-256 digests of keys are stored; digests are compared in constant
//! time; the tenant of every grant comes from the key record, never from a request; a
//! revoked or unknown key never yields a principal.

mod keys;
mod replicated;
pub mod strength;

pub use keys::{KeyRecord, KeyStore, KeyStoreError, NewKey, Revocation, MAX_LABEL_CHARS};

impl Principal {
    /// A principal from a key record's fields (for the key store).
    ///
    /// Public only as a diagnostics surface for offline evaluation: the scenario suite of
    /// `episodic-eval` plays writers, readers, reviewers and actor-limited keys in process
    /// without a key store. Nothing here authenticates anyone: the server only ever gets a
    /// principal from [`KeyStore::authenticate`].
    pub fn from_parts(
        key_id: String,
        tenant: Option<String>,
        roles: Vec<String>,
        limits: Limits,
    ) -> Self {
        Principal {
            key_id,
            tenant,
            roles,
            limits,
            default_trust: None,
        }
    }

    /// The principal, whose writes that name no `sourceTrust` get `trust` (its key's
    /// default).
    pub fn with_default_trust(mut self, trust: Option<crate::model::SourceTrust>) -> Self {
        self.default_trust = trust;
        self
    }
}

use crate::error::ErrorCode;
use crate::model::{PrivacyClass, StoredEvent};

/// Why a key may not do what it asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Missing, malformed, unknown or revoked key.
    #[error(
        "unknown or revoked API key; use a current key (POST /v1/admin/keys or `episodic keys \
         create` makes one)"
    )]
    Unauthenticated,
    /// A key with no tenant (the admin key) asked for a tenant's data.
    #[error("this key is not bound to a tenant; create a tenant key with POST /v1/admin/keys")]
    NotTenantBound,
    /// The key lacks a role the request needs.
    #[error("missing role: {0}")]
    MissingRole(String),
}

impl AuthError {
    /// The stable client-visible code.
    pub fn code(&self) -> ErrorCode {
        match self {
            AuthError::Unauthenticated => ErrorCode::Unauthenticated,
            AuthError::NotTenantBound | AuthError::MissingRole(_) => ErrorCode::Forbidden,
        }
    }
}

/// Role names with built-in meaning.
pub mod roles {
    /// May write events.
    pub const WRITER: &str = "writer";
    /// May recall, list the timeline and get events.
    pub const READER: &str = "reader";
    /// May delete, erase and read the audit trail (compaction needs the admin key).
    pub const OPERATOR: &str = "operator";
    /// May manage keys and policy.
    pub const ADMIN: &str = "admin";
    /// The seed's default approver role.
    pub const MEMORY_REVIEWER: &str = "memory_reviewer";
    /// May read `/metrics` (the `EPISODIC_METRICS_TOKEN` principal; admin keys may too).
    pub const METRICS: &str = "metrics";

    /// The roles any tenant key may hold, whatever the policy. Beyond them a tenant key may
    /// hold only an approver role: the policy's, or one an event awaiting review names.
    pub const TENANT: [&str; 4] = [WRITER, READER, OPERATOR, MEMORY_REVIEWER];

    /// Roles no tenant key may hold: the admin key's, and the metrics token's (store-wide
    /// figures are not a tenant's to read).
    pub const RESERVED: [&str; 2] = [ADMIN, METRICS];
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    key_id: String,
    tenant: Option<String>,
    roles: Vec<String>,
    limits: Limits,
    default_trust: Option<crate::model::SourceTrust>,
}

/// What a key may see beyond its tenant binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Only these actors' events (`None`: every actor).
    pub actor_ids: Option<Vec<String>>,
    /// Most restricted privacy class the key may read.
    pub max_privacy_class: PrivacyClass,
}

impl Limits {
    /// No limits (admin and in-process tools).
    pub fn unlimited() -> Self {
        Limits {
            actor_ids: None,
            max_privacy_class: PrivacyClass::Sensitive,
        }
    }
}

impl Principal {
    /// The key's public id.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// The key's tenant (`None` for the admin key).
    pub fn tenant(&self) -> Option<&str> {
        self.tenant.as_deref()
    }

    /// Whether the key holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// A tenant-bound grant for an action needing `role`, or 403 naming what is missing.
    pub fn grant(&self, role: &str) -> Result<TenantGrant, AuthError> {
        let Some(tenant) = &self.tenant else {
            return Err(AuthError::NotTenantBound);
        };
        if !self.has_role(role) {
            return Err(AuthError::MissingRole(role.to_string()));
        }
        Ok(TenantGrant {
            tenant: tenant.clone(),
            key_id: self.key_id.clone(),
            roles: self.roles.clone(),
            limits: self.limits.clone(),
            internal: false,
            default_trust: self.default_trust,
        })
    }

    /// A grant to delete events: with the operator role (every event the key sees), else
    /// with the writer role (the engine then lets it forget only what its own key wrote);
    /// without either, 403 naming the operator role.
    pub fn deletion_grant(&self) -> Result<TenantGrant, AuthError> {
        self.grant(roles::OPERATOR)
            .or_else(|missing| self.grant(roles::WRITER).map_err(|_| missing))
    }

    /// A tenant-bound grant whatever the roles (for routes that check a role per item, such
    /// as review decisions, which need the event's approver role).
    pub fn tenant_grant(&self) -> Result<TenantGrant, AuthError> {
        let Some(tenant) = &self.tenant else {
            return Err(AuthError::NotTenantBound);
        };
        Ok(TenantGrant {
            tenant: tenant.clone(),
            key_id: self.key_id.clone(),
            roles: self.roles.clone(),
            limits: self.limits.clone(),
            internal: false,
            default_trust: self.default_trust,
        })
    }

    /// Succeeds only for keys holding the admin role.
    pub fn require_admin(&self) -> Result<(), AuthError> {
        if self.has_role(roles::ADMIN) {
            return Ok(());
        }
        Err(AuthError::MissingRole(roles::ADMIN.to_string()))
    }
}

/// Proof that a caller may act within one tenant (and within its key's limits). Only this
/// module constructs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantGrant {
    tenant: String,
    key_id: String,
    roles: Vec<String>,
    limits: Limits,
    /// An in-process tool's grant (no key).
    internal: bool,
    /// The `sourceTrust` its writes get when they name none.
    default_trust: Option<crate::model::SourceTrust>,
}

impl TenantGrant {
    /// The tenant every storage call is confined to.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The key that acts.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Whether the key holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// Whether the key may act for `actor`.
    pub fn allows_actor(&self, actor: &str) -> bool {
        self.limits
            .actor_ids
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|a| a == actor))
    }

    /// The most sensitive privacy class the key may read.
    pub fn max_privacy_class(&self) -> crate::model::PrivacyClass {
        self.limits.max_privacy_class
    }

    /// The `sourceTrust` the key's writes get when they name none (`None`: `agent_inferred`).
    pub fn default_source_trust(&self) -> Option<crate::model::SourceTrust> {
        self.default_trust
    }

    /// The actors the key is limited to, if any.
    pub fn actor_limit(&self) -> Option<&[String]> {
        self.limits.actor_ids.as_deref()
    }

    /// Whether an event is inside this grant: same tenant, allowed actor, readable class.
    /// Anything else is invisible, exactly like another tenant's event.
    pub fn can_see(&self, e: &StoredEvent) -> bool {
        e.tenant_id == self.tenant && self.reaches(&e.actor_id, e.privacy_class)
    }

    /// Whether an event of `actor` and `class` of the grant's tenant is inside the grant.
    pub fn reaches(&self, actor: &str, class: PrivacyClass) -> bool {
        self.allows_actor(actor) && class <= self.limits.max_privacy_class
    }

    /// Whether the grant sees every event of its tenant (no actor limit, every privacy
    /// class).
    pub fn sees_whole_tenant(&self) -> bool {
        self.limits.actor_ids.is_none() && self.limits.max_privacy_class == PrivacyClass::Sensitive
    }

    /// A grant for in-process tools (eval, import) that act for a tenant without a key.
    pub fn internal(tenant: &str, actor: &str) -> Self {
        TenantGrant {
            tenant: tenant.to_string(),
            key_id: format!("internal:{actor}"),
            roles: Vec::new(),
            limits: Limits::unlimited(),
            internal: true,
            default_trust: None,
        }
    }

    /// Whether this is an in-process tool's grant ([`TenantGrant::internal`]).
    pub fn is_internal(&self) -> bool {
        self.internal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(tenant: Option<&str>, roles: &[&str]) -> Principal {
        Principal {
            key_id: "k".into(),
            tenant: tenant.map(str::to_string),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            limits: Limits::unlimited(),
            default_trust: None,
        }
    }

    #[test]
    fn grant_needs_tenant_and_role() {
        let p = principal(Some("acme"), &[roles::READER]);
        assert_eq!(p.grant(roles::READER).expect("grant").tenant(), "acme");
        let err = p.grant(roles::WRITER).expect_err("no writer");
        assert_eq!(err, AuthError::MissingRole(roles::WRITER.to_string()));
        assert_eq!(err.code(), ErrorCode::Forbidden);
        let admin = principal(None, &[roles::ADMIN]);
        assert!(admin.grant(roles::READER).is_err());
        assert!(admin.require_admin().is_ok());
        assert!(p.require_admin().is_err());
    }
}
