//! `episodic-eval scenarios`: a labelled suite of small stories run end to end through the
//! engine, scored on the seed's evaluation metrics.
//!
//! Role: each scenario ([`format`](mod@format)) is a story over two or more tenants: direct writes,
//! interactions sent through the observer, reviews, corrections, deletions, erasures,
//! expiries, compaction, then recalls, timelines and gets with expected results. The runner
//! ([`run`]) plays every scenario on a fresh engine in its own temporary data directory with
//! the real embedding model, each tenant acting through its own grants (writer/operator,
//! reviewer, and actor-limited keys where the story says so), and scores:
//! event-write precision and recall (observe decisions vs labels), attribution accuracy,
//! stale-event recall, correction success, deletion and expiry success, tenant (and user)
//! isolation failures, retrieval relevance (recall@k, nDCG@5) and the unsafe-write rate, plus
//! policy-decision accuracy, timeline order and evidence framing.
//!
//! Invariants:
//! - labels come from the story, never from the engine: what must not be returned is derived
//!   from the labelled decisions, deletions, corrections, expiries and `stale` lists;
//! - every read the runner makes, including its own end-of-scenario probes, is checked for
//!   other tenants' events (by tenant id and by content) and for forbidden events;
//! - story times are shifted so the scenario's `now` is the real clock; an expiry already
//!   past in the story is written a moment ahead of the real clock (the engine rightly
//!   refuses an already-expired event) and the runner waits for it before reading;
//! - deterministic: files, scenarios and steps in order, one batched embedding per scenario,
//!   exact scoring; only wall times vary between runs.

pub mod format;
mod report;
mod runner;

pub use format::{load, Scenario};
pub use report::{Failure, Metrics, Report};
pub use runner::run;

use std::path::PathBuf;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// A scenario file or a directory of `*.jsonl` files.
    pub path: PathBuf,
    /// The models directory.
    pub model_dir: PathBuf,
    /// Only scenarios whose id starts with this prefix.
    pub only: Option<String>,
}

/// Loads the suite and runs it.
pub fn evaluate(opts: &Options) -> anyhow::Result<Report> {
    let mut scenarios = load(&opts.path)?;
    if let Some(prefix) = &opts.only {
        scenarios.retain(|s| s.id.starts_with(prefix.as_str()));
        if scenarios.is_empty() {
            anyhow::bail!("no scenario id starts with {prefix}");
        }
    }
    run(&scenarios, &opts.path, &opts.model_dir)
}
