//! Which fields define an event's subject for stale suppression.

use ahash::RandomState;

use super::head::NONE;
use crate::model::StoredEvent;

/// Which fields define an event's subject for stale suppression.
///
/// With both `actor` and `resources`, the subject also speaks for itself: an event whose actor
/// is one of its own resources (the customer's own request) outdates older events of the
/// same type and resources by any actor (an agent's note about the customer). Such events
/// are also listed by their [`SubjectRule::topic`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubjectRule {
    /// Same actor.
    pub actor: bool,
    /// Same event type.
    pub event_type: bool,
    /// Same non-empty set of resource refs.
    pub resources: bool,
}

impl Default for SubjectRule {
    fn default() -> Self {
        SubjectRule {
            actor: true,
            event_type: true,
            resources: true,
        }
    }
}

impl SubjectRule {
    /// The rule that disables stale suppression.
    pub const OFF: SubjectRule = SubjectRule {
        actor: false,
        event_type: false,
        resources: false,
    };

    /// Whether any field is selected.
    pub fn enabled(&self) -> bool {
        self.actor || self.event_type || self.resources
    }

    /// Whether subjects speak for themselves (`actor` and `resources` both selected).
    pub fn voices(&self) -> bool {
        self.actor && self.resources
    }

    /// A 32-bit hash (by `hasher`) of an event's key without the actor, when subjects speak
    /// for themselves and the event has resources, else [`NONE`]. Equal keys give equal
    /// topics; unequal ones may collide, so a match is confirmed with [`super::Table::same_topic`].
    pub fn topic(&self, e: &StoredEvent, hasher: &RandomState) -> u32 {
        if !self.voices() || e.resource_refs.is_empty() {
            return NONE;
        }
        let mut refs: Vec<&str> = e.resource_refs.iter().map(String::as_str).collect();
        refs.sort_unstable();
        refs.dedup();
        let event_type = self.event_type.then_some(e.event_type.as_str());
        let h = hasher.hash_one((&e.tenant_id, event_type, refs));
        (h as u32).min(NONE - 1)
    }

    pub(super) fn without_actor(&self) -> SubjectRule {
        SubjectRule {
            actor: false,
            ..*self
        }
    }

    /// The subject key of an event, or `None` when it has no subject under this rule.
    pub fn key(&self, e: &StoredEvent) -> Option<String> {
        if !self.enabled() || (self.resources && e.resource_refs.is_empty()) {
            return None;
        }
        let mut key = e.tenant_id.clone();
        if self.actor {
            key.push('\u{1f}');
            key.push_str(&e.actor_id);
        }
        if self.event_type {
            key.push('\u{1f}');
            key.push_str(&e.event_type);
        }
        if self.resources {
            let mut refs: Vec<&str> = e.resource_refs.iter().map(String::as_str).collect();
            refs.sort_unstable();
            refs.dedup();
            key.push('\u{1f}');
            key.push_str(&refs.join("\u{1e}"));
        }
        Some(key)
    }
}
