//! Heads: the few facts of an event that recall filters and ranks by, copied into one dense
//! array next to the table's slots (see [`super::table`]), and the scope filter in their
//! numbers.
//!
//! Invariants: a gone (empty or deleted) slot's head has tenant [`NONE`], which no grant's
//! tenant number equals, so no filter or grant ever matches it; [`HeadFilter::matches`] is the
//! same predicate as [`crate::index::scope::matches`] for filters without resources.

use std::sync::atomic::{AtomicU64, Ordering};

use ahash::RandomState;

use crate::model::{Confidence, EventStatus, PrivacyClass, SourceTrust};
use crate::rank::Prior;

/// The position of `class` in [`crate::model::PrivacyClass::ALL`].
pub(super) fn class_index(class: PrivacyClass) -> usize {
    match class {
        PrivacyClass::Public => 0,
        PrivacyClass::Internal => 1,
        PrivacyClass::Private => 2,
        PrivacyClass::Sensitive => 3,
    }
}

/// No value (no project, no source, no subject), or a head that belongs to no tenant.
pub const NONE: u32 = u32::MAX;

/// [`Head::source`] of an event without a source ref.
pub const NO_SOURCE: u64 = u64::MAX;

/// A source ref's 64-bit hash (never [`NO_SOURCE`]); fixed keys, so equal in every process.
pub(super) fn source_hash(source: &str) -> u64 {
    let h = RandomState::with_seeds(1, 2, 3, 4).hash_one(source);
    if h == NO_SOURCE {
        0
    } else {
        h
    }
}

/// A slot's facts for filtering and ranking, see the module docs. An empty or deleted slot's
/// head has tenant [`NONE`], which no grant's tenant number equals.
#[derive(Debug, Clone, Copy)]
pub struct Head {
    /// Internal id.
    pub doc: u32,
    /// Tenant number ([`super::Table::tenant_number`]).
    pub tenant: u32,
    /// Actor number ([`super::Table::actor_name`]).
    pub actor: u32,
    /// Project number, or [`NONE`].
    pub project: u32,
    /// Event type number ([`super::Table::kind_number`]).
    pub kind: u32,
    /// Hash of the first source ref (the episode's conversation or document), or
    /// [`NO_SOURCE`].
    pub source: u64,
    /// Subject list ([`super::Entry::subject`]), or [`NONE`].
    pub subject: u32,
    /// Its topic ([`super::SubjectRule::topic`]): under it the table lists the events that their
    /// subject stated itself ([`super::Table::voice_docs`]).
    pub topic: u32,
    /// Status.
    pub status: EventStatus,
    /// Source trust.
    pub trust: SourceTrust,
    /// Confidence.
    pub confidence: Confidence,
    /// Privacy class and whether its text asks a question.
    pub marks: Marks,
    /// `occurredAt` (unix ms).
    pub occurred_ms: i64,
    /// `recordedAt` ([`crate::model::Timestamp::unix_nanos_saturating`]).
    pub recorded_ns: i64,
    /// Retention expiry (saturating unix ns), `i64::MAX` when it never expires.
    pub expires_ns: i64,
    /// When it was superseded (saturating unix ns), `i64::MIN` when not or not known (plain
    /// integers rather than options keep a head at 72 bytes).
    pub superseded_ns: i64,
}

impl Head {
    /// The head of an empty or deleted slot.
    pub(super) fn gone(doc: u32) -> Self {
        Head {
            doc,
            tenant: NONE,
            actor: NONE,
            project: NONE,
            kind: NONE,
            source: NO_SOURCE,
            subject: NONE,
            topic: NONE,
            status: EventStatus::PendingReview,
            trust: SourceTrust::UntrustedContent,
            confidence: Confidence::Low,
            marks: Marks::new(PrivacyClass::Sensitive, false),
            occurred_ms: 0,
            recorded_ns: 0,
            expires_ns: i64::MIN,
            superseded_ns: i64::MIN,
        }
    }

    /// Ranking inputs other than relevance (as [`super::Entry::prior`]).
    pub fn prior(&self) -> Prior {
        Prior {
            occurred_ms: self.occurred_ms,
            trust: self.trust,
            confidence: self.confidence,
            asks: self.marks.asks(),
        }
    }
}

/// A head's privacy class and whether its event's text ends in a question ([`crate::rank::asks`]), in one
/// byte: the flag would otherwise grow a head from 72 to 80 bytes, 11% more to read per
/// candidate of a broad scope. Bits 0–1: the class, least to most restricted (the order of
/// [`crate::model::PrivacyClass::ALL`]); bit 2: asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marks(u8);

impl Marks {
    const ASKS: u8 = 0b100;

    /// The marks of an event of class `privacy` whose text asks or not.
    pub fn new(privacy: PrivacyClass, asks: bool) -> Self {
        let class = match privacy {
            PrivacyClass::Public => 0,
            PrivacyClass::Internal => 1,
            PrivacyClass::Private => 2,
            PrivacyClass::Sensitive => 3,
        };
        Marks(class | if asks { Self::ASKS } else { 0 })
    }

    /// The privacy class.
    pub fn privacy(self) -> PrivacyClass {
        PrivacyClass::ALL[usize::from(self.0 & 0b11)]
    }

    /// Whether the event's text ends in a question.
    pub fn asks(self) -> bool {
        self.0 & Self::ASKS != 0
    }
}

/// The ids whose heads changed since a copy of the heads was taken ([`super::Table::watched_heads`]):
/// a copy's head of an id not marked here still equals the table's. Bits are set by the
/// table's writer under its write lock and read under its read lock, so the lock orders
/// them and relaxed atomics suffice.
#[derive(Debug)]
pub struct Changed {
    bits: Vec<AtomicU64>,
    /// Ids at or above this were not copied and count as changed.
    len: u32,
}

impl Changed {
    pub(super) fn new(len: u32) -> Self {
        Changed {
            bits: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            len,
        }
    }

    pub(super) fn mark(&self, doc: u32) {
        if let Some(word) = self.bits.get(doc as usize / 64) {
            word.fetch_or(1 << (doc % 64), Ordering::Relaxed);
        }
    }

    /// Whether `doc`'s head may differ from the copy's.
    pub fn has(&self, doc: u32) -> bool {
        doc >= self.len
            || self.bits[doc as usize / 64].load(Ordering::Relaxed) & (1 << (doc % 64)) != 0
    }
}

/// A scope filter in the numbers of heads ([`super::Table::head_filter`]): the same predicate as
/// [`crate::index::scope::matches`] for filters without resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadFilter {
    /// Tenant number.
    pub tenant: u32,
    /// Any of these actor numbers (`None` = any).
    pub(super) actors: Option<Vec<u32>>,
    /// Any of these project numbers (`None` = any; events without a project never match).
    pub(super) projects: Option<Vec<u32>>,
    /// Any of these event type numbers (`None` = any).
    pub(super) kinds: Option<Vec<u32>>,
    /// Inclusive lower bound on `occurredAt` (ms).
    pub(super) after_ms: Option<i64>,
    /// Exclusive upper bound on `occurredAt` (ms).
    pub(super) before_ms: Option<i64>,
}

impl HeadFilter {
    /// Whether the event of `h` is in scope (a gone slot's head never is).
    pub fn matches(&self, h: &Head) -> bool {
        let within = |list: &Option<Vec<u32>>, n: u32| {
            list.as_ref().is_none_or(|l| l.binary_search(&n).is_ok())
        };
        h.tenant == self.tenant
            && within(&self.actors, h.actor)
            && within(&self.projects, h.project)
            && within(&self.kinds, h.kind)
            && self.after_ms.is_none_or(|a| h.occurred_ms >= a)
            && self.before_ms.is_none_or(|b| h.occurred_ms < b)
    }
}
