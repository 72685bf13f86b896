//! The scope index's health: whether it is in step with the log, shared with readers
//! (`/readyz`, `/metrics`), and what a repair by the writer must apply again.
//!
//! Invariants: a failure is never silent — it is logged, counted and marks the index
//! degraded until a repair commits; the first reason is kept until then; repairs are tried
//! with a backoff doubling from [`FIRST_BACKOFF`] to [`MAX_BACKOFF`]. The writer's side of
//! keeping the index in step (commits, repairs) is in [`super::writer`].

use std::time::{Duration, Instant};

use crate::index::scope::ScopeIndexError;

/// First pause before a repair is tried again.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Longest pause between two repair attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The scope index's health, shared with readers (`/readyz`, `/metrics`), and what a repair
/// must apply again.
#[derive(Debug, Default)]
pub struct ScopeHealth {
    state: parking_lot::Mutex<SyncState>,
}

#[derive(Debug, Default)]
struct SyncState {
    /// Why the index is degraded, until a repair commits.
    degraded: Option<String>,
    /// Internal ids deleted since the last good commit.
    deleted: Vec<u32>,
    /// Failed commits, updates and repairs since start.
    failures: u64,
    /// When a repair may be tried next.
    next_try: Option<Instant>,
    backoff: Duration,
}

impl ScopeHealth {
    /// Why the index is degraded, or `None` when it is in step with the log.
    pub fn degraded(&self) -> Option<String> {
        self.state.lock().degraded.clone()
    }

    /// Failed commits, updates and repairs since start.
    pub fn failures(&self) -> u64 {
        self.state.lock().failures
    }

    /// Marks the index degraded (the first reason is kept until a repair).
    pub(crate) fn degrade(&self, reason: String) {
        let mut s = self.state.lock();
        s.failures += 1;
        if s.degraded.is_none() {
            tracing::error!(reason = %reason, "scope index degraded; fresh events are answered from memory until it is repaired");
            s.degraded = Some(reason);
            s.backoff = FIRST_BACKOFF;
            s.next_try = Some(Instant::now());
        }
    }

    /// Records a deletion for a repair to apply again.
    pub(crate) fn deleted(&self, doc: u32) {
        self.state.lock().deleted.push(doc);
    }

    /// Whether a repair is due now; if so, the next one waits twice as long.
    pub(crate) fn repair_due(&self) -> bool {
        let mut s = self.state.lock();
        if s.degraded.is_none() || s.next_try.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        s.next_try = Some(Instant::now() + s.backoff);
        s.backoff = (s.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
        true
    }

    /// A good commit: nothing is left to apply again.
    pub(crate) fn committed(&self) {
        let mut s = self.state.lock();
        s.next_try = None;
        s.deleted.clear();
    }

    /// The deletions since the last good commit.
    pub(crate) fn pending_deletes(&self) -> Vec<u32> {
        self.state.lock().deleted.clone()
    }

    /// A repair committed and checked: the index is in step with the log again.
    pub(crate) fn healed(&self) {
        let mut s = self.state.lock();
        if let Some(reason) = s.degraded.take() {
            tracing::info!(after = %reason, "scope index repaired and in step with the log");
        }
        s.deleted.clear();
        s.next_try = None;
    }

    pub(crate) fn failed(&self, what: &str, e: &ScopeIndexError) {
        crate::telemetry::scope_index_failure();
        self.degrade(format!("{what}: {e}"));
    }
}
