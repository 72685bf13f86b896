//! What a read may see, in the units of a [`Head`]: the view ([`Visibility`]: supersession,
//! `asOf`, the read time) and the grant ([`Access`]: tenant, actors, privacy ceiling).
//!
//! Invariants: [`Access::shows`] is the head-level twin of [`super::Visible::sees`] and
//! [`super::Visible::present`]: a head passes iff its entry is visible to the grant and shown
//! by the view, with a supersession counted only when the grant knows the correction;
//! expiry is judged at the read time, never left to the sweep.

use super::entry::Lookup;
use super::head::Head;
use super::table::Table;
use crate::auth::TenantGrant;
use crate::model::{EventStatus, PrivacyClass, Timestamp};

/// Which events a query may see.
#[derive(Debug, Clone, Copy)]
pub struct Visibility {
    /// Also return superseded events.
    pub include_superseded: bool,
    /// Memory as it stood at this `recordedAt` time (deletions still win).
    pub as_of: Option<Timestamp>,
    /// The read time (expiry is always judged now).
    pub now: Timestamp,
}

/// [`Visibility`] in the units of a [`Head`]; `Copy`, built once per read.
#[derive(Debug, Clone, Copy)]
pub struct View {
    include_superseded: bool,
    as_of_ns: Option<i64>,
    now_ns: i64,
}

impl View {
    /// The view of `vis`.
    pub fn new(vis: &Visibility) -> Self {
        View {
            include_superseded: vis.include_superseded,
            as_of_ns: vis.as_of.map(Timestamp::unix_nanos_saturating),
            now_ns: vis.now.unix_nanos_saturating(),
        }
    }

    /// An event's status as the view sees it, or `None` when invisible (expired, pending
    /// review, recorded after `as_of`, or an empty or deleted slot).
    pub fn status(&self, h: &Head) -> Option<EventStatus> {
        let expired = h.expires_ns <= self.now_ns;
        if expired || self.as_of_ns.is_some_and(|t| h.recorded_ns > t) {
            return None;
        }
        match h.status {
            EventStatus::Active => Some(EventStatus::Active),
            EventStatus::PendingReview => None,
            EventStatus::Superseded => match self.as_of_ns {
                Some(t) if h.superseded_ns > t => Some(EventStatus::Active),
                _ => Some(EventStatus::Superseded),
            },
        }
    }
}

/// A grant in the units of a [`Head`]: its tenant's number, the numbers of the actors it is
/// limited to, and its privacy ceiling. The head-level twin of [`super::Visible`]:
/// a head passes [`Access::shows`] iff its entry is visible to the grant and shown by the
/// view, with a supersession counted only when the grant knows the correction.
pub struct Access {
    tenant: u32,
    actors: Option<Vec<u32>>,
    max_privacy: PrivacyClass,
    /// The grant sees the whole tenant.
    whole: bool,
}

impl Access {
    /// `None` when the table has never held an event of the grant's tenant.
    pub fn new(table: &Table, grant: &TenantGrant) -> Option<Self> {
        let tenant = table.tenant_number(grant.tenant())?;
        let actors = grant.actor_limit().map(|names| {
            let mut n: Vec<u32> = names.iter().filter_map(|a| table.actor_number(a)).collect();
            n.sort_unstable();
            n
        });
        Some(Access {
            tenant,
            actors,
            max_privacy: grant.max_privacy_class(),
            whole: grant.sees_whole_tenant(),
        })
    }

    /// Whether the grant may see the event (tenant, actor, privacy class).
    pub fn allows(&self, h: &Head) -> bool {
        h.tenant == self.tenant
            && h.marks.privacy() <= self.max_privacy
            && self.allows_actor(h.actor)
    }

    /// Whether the grant may see events of actor number `actor`.
    pub fn allows_actor(&self, actor: u32) -> bool {
        self.actors
            .as_ref()
            .is_none_or(|a| a.binary_search(&actor).is_ok())
    }

    /// Whether the grant sees `h` and the view shows it.
    pub fn shows(&self, table: &Table, view: &View, h: &Head) -> bool {
        self.allows(h)
            && match self.status(table, view, h) {
                Some(EventStatus::Active) => true,
                Some(EventStatus::Superseded) => view.include_superseded,
                Some(EventStatus::PendingReview) | None => false,
            }
    }

    /// The view's status of `h` for this grant: superseded only if the grant knows the
    /// correction (a live visible one, or a deleted one that was inside the grant).
    pub fn status(&self, table: &Table, view: &View, h: &Head) -> Option<EventStatus> {
        match view.status(h)? {
            EventStatus::Superseded if !self.knows_superseder(table, view, h) => {
                Some(EventStatus::Active)
            }
            status => Some(status),
        }
    }

    /// Whether the grant knows the correction that superseded `h`: a live one it may see
    /// that has not expired, or a deleted one whose audience it covered.
    pub fn knows_superseder(&self, table: &Table, view: &View, h: &Head) -> bool {
        let Some(entry) = table.get(h.doc) else {
            return false;
        };
        let Some(by) = entry.event.superseded_by.as_deref() else {
            return false;
        };
        match table.lookup(&entry.event.tenant_id, by) {
            Lookup::Live(c) => {
                let ch = table.head(c.doc);
                self.allows(&ch) && ch.expires_ns > view.now_ns
            }
            Lookup::Deleted(t) => match &t.audience {
                Some(a) => {
                    a.privacy_class <= self.max_privacy
                        && table
                            .actor_number(&a.actor_id)
                            .is_some_and(|n| self.allows_actor(n))
                }
                None => self.whole,
            },
            Lookup::Missing => false,
        }
    }
}
