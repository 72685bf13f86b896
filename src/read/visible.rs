//! What one grant may see: the single filter every path that returns events, ids, counts or
//! audit entries goes through, so that an event outside a key's grant is indistinguishable
//! from one that never existed.
//!
//! Invariants:
//! - an event is visible to a grant iff it is live, of the grant's tenant, of an actor the
//!   grant allows, of a privacy class at or below the grant's ceiling, and not expired at the
//!   read time (expiry is judged at read time, whatever the sweep has done);
//! - a deleted event's id is known to a grant iff the event was inside the grant (its
//!   tombstone keeps actor and privacy class); a tombstone of an older log that kept neither
//!   is known only to grants that see the whole tenant;
//! - an event is presented as the grant sees it: a supersession by a correction the grant
//!   cannot see is not shown (the event reads as active, without `supersededBy`), and
//!   `supersedesEventIds` lists only ids the grant knows; the retrieval paths' head-level
//!   twin of this rule is [`super::Access`];
//! - an audit entry reaches a grant that does not see the whole tenant iff it records the
//!   grant's own key's action or names an event the grant knows; it then names only known
//!   ids and keeps no detail of another key's request (scopes, query hashes, limits);
//! - an event id is stored as given (chosen or generated) only when the writer sees every
//!   event of class `internal` or below and the event is of such a class ([`stored_id`]);
//!   otherwise it is namespaced by the writing key (`id~tag`; chosen ids may not hold `~`).
//!   So an id without the mark names an event every key that may store such ids can see,
//!   and a write's answer never depends on an event outside the writer's grant.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::{Entry, Lookup, Table, Tombstone};
use crate::audit::{AuditEntry, AuditQuery, Keyed};
use crate::auth::TenantGrant;
use crate::model::{EventInput, PrivacyClass, StoredEvent, Timestamp};

/// What a grant finds under an event id.
#[derive(Debug, Clone, Copy)]
pub enum Seen<'a> {
    /// Nothing it may know of: never existed, another tenant's, outside the grant, expired.
    Absent,
    /// A visible live event.
    Live(&'a Arc<Entry>),
    /// A deleted event that was inside the grant.
    Deleted(&'a Arc<Tombstone>),
}

/// One grant's view of the table at one instant.
pub struct Visible<'a> {
    grant: &'a TenantGrant,
    table: &'a Table,
    keyed: &'a Keyed,
    now: Timestamp,
    /// The suffix of ids the grant's key chose where they had to be namespaced (made on
    /// first use: most views never look an id up by its chosen form).
    alias: std::cell::OnceCell<String>,
}

/// Separates a chosen id from its key's tag in a namespaced id; chosen ids may not hold it.
pub const NAMESPACE_MARK: char = '~';

/// The id a write with chosen id `chosen` and privacy class `class` is stored under.
///
/// Stored as given when the writer sees every event of class `internal` or below of its
/// tenant (no actor limit, ceiling at least `internal`) and the event is of such a class:
/// then any event already holding the id is one the writer can see, and so is this one to
/// every key that could choose the same id. Otherwise the id is `chosen~tag`, with the
/// writing key's opaque tag ([`Keyed::key_tag`]): it can collide only with the same key's
/// own writes. In-process tools (import) keep ids as given.
pub fn stored_id(grant: &TenantGrant, keyed: &Keyed, chosen: &str, class: PrivacyClass) -> String {
    let plain = grant.is_internal()
        || (grant.actor_limit().is_none()
            && grant.max_privacy_class() >= PrivacyClass::Internal
            && class <= PrivacyClass::Internal);
    if plain {
        chosen.to_string()
    } else {
        format!(
            "{chosen}{NAMESPACE_MARK}{}",
            keyed.key_tag(grant.tenant(), grant.key_id())
        )
    }
}

impl<'a> Visible<'a> {
    /// The view of `grant` over `table` at `now`.
    pub fn new(grant: &'a TenantGrant, table: &'a Table, keyed: &'a Keyed, now: Timestamp) -> Self {
        Visible {
            grant,
            table,
            keyed,
            now,
            alias: std::cell::OnceCell::new(),
        }
    }

    fn alias(&self) -> &str {
        self.alias.get_or_init(|| {
            let tag = self.keyed.key_tag(self.grant.tenant(), self.grant.key_id());
            format!("{NAMESPACE_MARK}{tag}")
        })
    }

    /// Whether a live event is visible: in the grant and not expired.
    pub fn sees(&self, e: &StoredEvent) -> bool {
        self.grant.can_see(e) && e.retention.expires_at.is_none_or(|t| t > self.now)
    }

    /// Whether the grant knows a deleted event (it was inside the grant).
    pub fn knows_deleted(&self, t: &Tombstone) -> bool {
        t.tenant_id == self.grant.tenant()
            && match &t.audience {
                Some(a) => self.grant.reaches(&a.actor_id, a.privacy_class),
                None => self.grant.sees_whole_tenant(),
            }
    }

    /// What the grant finds under exactly `id`.
    fn exact(&self, id: &str) -> Seen<'a> {
        match self.table.lookup(self.grant.tenant(), id) {
            Lookup::Live(e) if self.sees(&e.event) => Seen::Live(e),
            Lookup::Deleted(t) if self.knows_deleted(t) => Seen::Deleted(t),
            Lookup::Live(_) | Lookup::Deleted(_) | Lookup::Missing => Seen::Absent,
        }
    }

    /// What the grant finds under `id`: the event of that id, or else the one the grant's
    /// key stored when it chose `id` and the id had to be namespaced ([`stored_id`]).
    pub fn lookup(&self, id: &str) -> Seen<'a> {
        match self.exact(id) {
            Seen::Absent if !id.contains(NAMESPACE_MARK) => {
                self.exact(&format!("{id}{}", self.alias()))
            }
            found => found,
        }
    }

    /// What the grant's key finds among its own writes under `id` (or the id it was
    /// namespaced to, as [`Self::lookup`]), whether or not the grant sees them: a key may
    /// forget what it wrote. Nothing of another key's writes is found here.
    pub fn own(&self, id: &str) -> Seen<'a> {
        let key = self.grant.key_id();
        let mine = |id: &str| match self.table.lookup(self.grant.tenant(), id) {
            Lookup::Live(e) if e.key_id == key => Seen::Live(e),
            Lookup::Deleted(t) if t.writer.as_deref() == Some(key) => Seen::Deleted(t),
            Lookup::Live(_) | Lookup::Deleted(_) | Lookup::Missing => Seen::Absent,
        };
        match mine(id) {
            Seen::Absent if !id.contains(NAMESPACE_MARK) => mine(&format!("{id}{}", self.alias())),
            found => found,
        }
    }

    /// The visible live event found under `id` ([`Self::lookup`]).
    pub fn live(&self, id: &str) -> Option<&'a Arc<Entry>> {
        match self.lookup(id) {
            Seen::Live(e) => Some(e),
            Seen::Deleted(_) | Seen::Absent => None,
        }
    }

    /// Whether the grant knows exactly `id` (a visible event, or a deleted one inside it).
    pub fn knows(&self, id: &str) -> bool {
        !matches!(self.exact(id), Seen::Absent)
    }

    /// The event as the grant sees it (see the module docs).
    pub fn present(&self, e: &StoredEvent) -> StoredEvent {
        let mut out = e.clone();
        self.hide_unknown(&mut out);
        out
    }

    /// [`Visible::present`] for a shared event: the same event, shared again, when the
    /// grant knows every event it names (most answers), else a presented copy.
    pub fn present_shared(&self, e: &Arc<StoredEvent>) -> Arc<StoredEvent> {
        let hides = e.superseded_by.as_ref().is_some_and(|by| !self.knows(by))
            || e.supersedes_event_ids.iter().any(|id| !self.knows(id));
        if hides {
            Arc::new(self.present(e))
        } else {
            Arc::clone(e)
        }
    }

    /// Drops from `out` what names events the grant does not know.
    fn hide_unknown(&self, out: &mut StoredEvent) {
        if out.superseded_by.as_ref().is_some_and(|by| !self.knows(by)) {
            out.status = crate::model::EventStatus::Active;
            out.superseded_by = None;
            out.superseded_at = None;
        }
        out.supersedes_event_ids.retain(|id| self.knows(id));
    }

    /// Whether writing `input` would repeat the stored `event` (an idempotent retry, see
    /// [`EventInput::same_content`]): compared with the event as the grant sees it when it
    /// sees it (so a line of the grant's own export, whose `supersedesEventIds` lists only
    /// the ids the grant knows, repeats it), else with the event as stored.
    pub fn repeats(&self, input: &EventInput, event: &StoredEvent) -> bool {
        if self.sees(event) {
            input.same_content(&self.present(event))
        } else {
            input.same_content(event)
        }
    }

    /// The audit entry as the grant may see it, or `None` (see the module docs); `q` is
    /// checked again on what remains, so that a filter on an unknown id finds nothing.
    pub fn audit(&self, mut e: AuditEntry, q: &AuditQuery) -> Option<AuditEntry> {
        if self.grant.sees_whole_tenant() || e.key_id == self.grant.key_id() {
            return Some(e);
        }
        // A write's first id is the event written (the others are what it corrects): an
        // entry about an event the grant does not know is not shown at all.
        let about_first = matches!(e.action.as_str(), "write" | "correct" | "deny");
        if about_first && e.event_ids.first().is_none_or(|id| !self.knows(id)) {
            return None;
        }
        e.event_ids.retain(|id| self.knows(id));
        if e.event_ids.is_empty() || !q.matches(&e) {
            return None;
        }
        e.detail = self.audit_detail(e.detail);
        Some(e)
    }

    /// Another key's entry detail, without its request and with only known ids.
    fn audit_detail(&self, detail: Value) -> Value {
        const KEPT: [&str; 8] = [
            "decision",
            "policyVersion",
            "reason",
            "contentHash",
            "noteHash",
            "replayed",
            "recovered",
            "actorId",
        ];
        const ID_LISTS: [&str; 4] = ["supersedes", "kept", "redeleted", "reserved"];
        let Value::Object(obj) = detail else {
            return Value::Null;
        };
        let mut out = Map::new();
        for (k, v) in obj {
            if KEPT.contains(&k.as_str()) {
                out.insert(k, v);
            } else if ID_LISTS.contains(&k.as_str()) {
                out.insert(k, self.known_ids(v));
            }
        }
        Value::Object(out)
    }

    /// A list of ids (or of `{eventId, ...}` objects) with only the known ones.
    fn known_ids(&self, list: Value) -> Value {
        let Value::Array(items) = list else {
            return Value::Array(Vec::new());
        };
        let id_of = |v: &Value| {
            v.as_str()
                .or_else(|| v.get("eventId").and_then(Value::as_str))
                .map(str::to_string)
        };
        Value::Array(
            items
                .into_iter()
                .filter(|v| id_of(v).is_some_and(|id| self.knows(&id)))
                .collect(),
        )
    }
}
