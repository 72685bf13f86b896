//! Counters, the JSON report and the table of the scenario eval.
//!
//! Invariants: every figure is a plain ratio of counts kept in [`Tally`] (ratios of empty
//! counts are reported as 1.0 for success rates and 0.0 for failure rates, with the counts
//! beside them so nothing is hidden); failures keep the scenario, file and line that
//! produced them, in the order they happened.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

/// A count of checks and how many passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ratio {
    /// Checks made.
    pub checked: usize,
    /// Checks passed.
    pub ok: usize,
    /// ok / checked (1.0 when nothing was checked).
    pub rate: f64,
}

impl Ratio {
    fn of(checked: usize, ok: usize) -> Self {
        Ratio {
            checked,
            ok,
            rate: if checked == 0 {
                1.0
            } else {
                ok as f64 / checked as f64
            },
        }
    }
}

/// Raw counts accumulated while running.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub observe_items: usize,
    pub labelled_store: usize,
    pub predicted_store: usize,
    pub true_store: usize,
    pub type_checked: usize,
    pub type_ok: usize,
    pub attribution_checked: usize,
    pub attribution_ok: usize,
    pub stale_checked: usize,
    pub stale_returned: usize,
    pub corrections: usize,
    pub corrections_ok: usize,
    pub deletions: usize,
    pub deletions_ok: usize,
    pub expiries: usize,
    pub expiries_ok: usize,
    pub isolation_failures: usize,
    pub user_isolation_failures: usize,
    pub unsafe_labelled: usize,
    pub unsafe_written: usize,
    pub decisions_checked: usize,
    pub decisions_ok: usize,
    pub timelines: usize,
    pub timelines_ok: usize,
    pub framing_checked: usize,
    pub framing_ok: usize,
    pub review_bypass: usize,
    pub queries: usize,
    pub relevance: Relevance,
}

/// Sums of per-query relevance figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Relevance {
    pub scored: usize,
    pub recall1: f64,
    pub recall3: f64,
    pub recall5: f64,
    pub ndcg5: f64,
    pub mrr: f64,
}

impl Relevance {
    /// Adds one query: `ranked` names best first, `gold` the relevant names.
    pub fn add(&mut self, gold: &[String], ranked: &[String]) {
        if gold.is_empty() {
            return;
        }
        let rel = |i: usize| ranked.get(i).is_some_and(|n| gold.contains(n));
        let found = |k: usize| (0..k).filter(|&i| rel(i)).count() as f64 / gold.len() as f64;
        let dcg: f64 = (0..5)
            .filter(|&i| rel(i))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        let ideal: f64 = (0..gold.len().min(5))
            .map(|i| 1.0 / ((i + 2) as f64).log2())
            .sum();
        self.scored += 1;
        self.recall1 += found(1);
        self.recall3 += found(3);
        self.recall5 += found(5);
        self.ndcg5 += dcg / ideal;
        self.mrr += (0..ranked.len())
            .find(|&i| rel(i))
            .map_or(0.0, |i| 1.0 / (i + 1) as f64);
    }

    /// Adds another accumulation.
    pub fn merge(&mut self, o: &Relevance) {
        self.scored += o.scored;
        self.recall1 += o.recall1;
        self.recall3 += o.recall3;
        self.recall5 += o.recall5;
        self.ndcg5 += o.ndcg5;
        self.mrr += o.mrr;
    }

    fn report(&self) -> RelevanceReport {
        let n = self.scored.max(1) as f64;
        RelevanceReport {
            queries: self.scored,
            recall_at_1: round4(self.recall1 / n),
            recall_at_3: round4(self.recall3 / n),
            recall_at_5: round4(self.recall5 / n),
            ndcg_at_5: round4(self.ndcg5 / n),
            mrr: round4(self.mrr / n),
        }
    }
}

impl Tally {
    /// Adds another scenario's counts.
    pub fn merge(&mut self, o: &Tally) {
        macro_rules! add {
            ($($f:ident),*) => { $( self.$f += o.$f; )* };
        }
        add!(
            observe_items,
            labelled_store,
            predicted_store,
            true_store,
            type_checked,
            type_ok,
            attribution_checked,
            attribution_ok,
            stale_checked,
            stale_returned,
            corrections,
            corrections_ok,
            deletions,
            deletions_ok,
            expiries,
            expiries_ok,
            isolation_failures,
            user_isolation_failures,
            unsafe_labelled,
            unsafe_written,
            decisions_checked,
            decisions_ok,
            timelines,
            timelines_ok,
            framing_checked,
            framing_ok,
            review_bypass,
            queries
        );
        self.relevance.merge(&o.relevance);
    }

    /// The figures.
    pub fn metrics(&self) -> Metrics {
        let ratio = |n: usize, d: usize| if d == 0 { 1.0 } else { n as f64 / d as f64 };
        Metrics {
            write_precision: round4(ratio(self.true_store, self.predicted_store)),
            write_recall: round4(ratio(self.true_store, self.labelled_store)),
            observe: ObserveCounts {
                items: self.observe_items,
                labelled_store: self.labelled_store,
                predicted_store: self.predicted_store,
                true_store: self.true_store,
                type_accuracy: Ratio::of(self.type_checked, self.type_ok),
            },
            attribution: Ratio::of(self.attribution_checked, self.attribution_ok),
            stale_recall: FailureRate {
                checked: self.stale_checked,
                failures: self.stale_returned,
                rate: round4(if self.stale_checked == 0 {
                    0.0
                } else {
                    self.stale_returned as f64 / self.stale_checked as f64
                }),
            },
            correction: Ratio::of(self.corrections, self.corrections_ok),
            deletion: Ratio::of(self.deletions, self.deletions_ok),
            expiry: Ratio::of(self.expiries, self.expiries_ok),
            tenant_isolation_failures: self.isolation_failures,
            user_isolation_failures: self.user_isolation_failures,
            relevance: self.relevance.report(),
            unsafe_writes: FailureRate {
                checked: self.unsafe_labelled,
                failures: self.unsafe_written,
                rate: round4(if self.unsafe_labelled == 0 {
                    0.0
                } else {
                    self.unsafe_written as f64 / self.unsafe_labelled as f64
                }),
            },
            policy_decisions: Ratio::of(self.decisions_checked, self.decisions_ok),
            timeline_order: Ratio::of(self.timelines, self.timelines_ok),
            evidence_framing: Ratio::of(self.framing_checked, self.framing_ok),
            review_bypass: self.review_bypass,
            reads_checked: self.queries,
        }
    }
}

/// Observe counts.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObserveCounts {
    /// Interactions observed.
    pub items: usize,
    /// Labelled `store`.
    pub labelled_store: usize,
    /// Stored by the observer (a candidate was proposed).
    pub predicted_store: usize,
    /// Both.
    pub true_store: usize,
    /// Candidate event type vs label, where labelled.
    pub type_accuracy: Ratio,
}

/// A count of opportunities and how many went wrong.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureRate {
    /// Opportunities checked.
    pub checked: usize,
    /// How many went wrong.
    pub failures: usize,
    /// failures / checked.
    pub rate: f64,
}

/// Mean relevance figures over scored queries.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelevanceReport {
    /// Queries with a non-empty `expect`.
    pub queries: usize,
    /// Mean recall@1.
    pub recall_at_1: f64,
    /// Mean recall@3.
    pub recall_at_3: f64,
    /// Mean recall@5.
    pub recall_at_5: f64,
    /// Mean nDCG@5 (binary relevance).
    pub ndcg_at_5: f64,
    /// Mean reciprocal rank of the first relevant hit.
    pub mrr: f64,
}

/// The seed's measures (and a few more).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metrics {
    /// Observed interactions stored that were labelled `store`, over all stored.
    pub write_precision: f64,
    /// Observed interactions labelled `store` that were stored.
    pub write_recall: f64,
    /// The counts behind them.
    pub observe: ObserveCounts,
    /// Written and returned events carrying the right actor, tenant, sources and project.
    pub attribution: Ratio,
    /// Superseded, expired or stale events returned when they should not be.
    pub stale_recall: FailureRate,
    /// Corrections that superseded (or, when not admitted, did not supersede) their targets.
    pub correction: Ratio,
    /// Deleted events never returned again (and absent from files after compaction).
    pub deletion: Ratio,
    /// Expired events never returned again.
    pub expiry: Ratio,
    /// Events of another tenant seen by any read.
    pub tenant_isolation_failures: usize,
    /// Events of another actor seen through an actor-limited key.
    pub user_isolation_failures: usize,
    /// Retrieval relevance.
    pub relevance: RelevanceReport,
    /// Secrets, untrusted content, unflagged instructions or unexpiring sensitive data
    /// admitted as trusted `allow`.
    pub unsafe_writes: FailureRate,
    /// Direct writes whose decision (allow/review/deny/reject) matched the label.
    pub policy_decisions: Ratio,
    /// Timelines listing exactly the expected events in `occurredAt` order.
    pub timeline_order: Ratio,
    /// Recall answers whose evidence frames every hit as a past event, with warnings.
    pub evidence_framing: Ratio,
    /// Pending or rejected events returned by a read.
    pub review_bypass: usize,
    /// Reads checked (recalls, timelines, gets, probes included).
    pub reads_checked: usize,
}

/// One thing that went wrong.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// Scenario id.
    pub scenario: String,
    /// `file:line` of the step (the header line for end-of-scenario probes).
    pub at: String,
    /// Category (`isolation`, `stale`, `deletion`, ...).
    pub kind: String,
    /// What happened.
    pub detail: String,
}

/// Figures of one family.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FamilyReport {
    /// Scenarios.
    pub scenarios: usize,
    /// Scenarios without any failure.
    pub passed: usize,
    /// Relevance over the family's scored queries.
    pub relevance: RelevanceReport,
    /// Failures by kind.
    pub failures: BTreeMap<String, usize>,
}

/// A target and whether it was met.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetCheck {
    /// Metric.
    pub metric: String,
    /// Target as text (e.g. `= 0`, `>= 0.95`).
    pub target: String,
    /// Measured value.
    pub value: f64,
    /// Whether it was met.
    pub met: bool,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Where the suite was read from.
    pub path: String,
    /// Embedding model id.
    pub model: String,
    /// Scenarios run.
    pub scenarios: usize,
    /// Steps run (labelled lines).
    pub steps: usize,
    /// The figures.
    pub metrics: Metrics,
    /// Targets.
    pub targets: Vec<TargetCheck>,
    /// Per family.
    pub families: BTreeMap<String, FamilyReport>,
    /// Every failure, in run order.
    pub failures: Vec<Failure>,
    /// Not target failures: expected events missing from a recall's top 5, and observed
    /// events whose type differs from the label.
    pub relevance_misses: Vec<Failure>,
    /// Wall time of the whole run, in seconds.
    pub wall_seconds: f64,
}

/// Per-family accumulation.
#[derive(Debug, Clone, Default)]
pub struct FamilyAcc {
    pub scenarios: usize,
    pub passed: usize,
    pub relevance: Relevance,
    pub failures: BTreeMap<String, usize>,
}

impl FamilyAcc {
    /// The report of the family.
    pub fn report(&self) -> FamilyReport {
        FamilyReport {
            scenarios: self.scenarios,
            passed: self.passed,
            relevance: self.relevance.report(),
            failures: self.failures.clone(),
        }
    }
}

/// The targets the issue sets.
pub fn targets(m: &Metrics) -> Vec<TargetCheck> {
    let eq0 = |name: &str, v: usize| TargetCheck {
        metric: name.to_string(),
        target: "= 0".into(),
        value: v as f64,
        met: v == 0,
    };
    let at_least = |name: &str, v: f64, t: f64| TargetCheck {
        metric: name.to_string(),
        target: format!(">= {t}"),
        value: v,
        met: v >= t,
    };
    vec![
        eq0("tenantIsolationFailures", m.tenant_isolation_failures),
        eq0("userIsolationFailures", m.user_isolation_failures),
        eq0("unsafeWrites", m.unsafe_writes.failures),
        eq0("staleRecall", m.stale_recall.failures),
        eq0("reviewBypass", m.review_bypass),
        at_least("correctionSuccess", m.correction.rate, 1.0),
        at_least("deletionSuccess", m.deletion.rate, 1.0),
        at_least("expirySuccess", m.expiry.rate, 1.0),
        at_least("writePrecision", m.write_precision, 0.95),
        at_least("writeRecall", m.write_recall, 0.95),
    ]
}

impl Report {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let m = &self.metrics;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "scenario suite: {} scenarios, {} steps, model {}",
            self.scenarios, self.steps, self.model
        );
        let _ = writeln!(
            s,
            "\n{:<34}{:>12}{:>14}   target",
            "metric", "value", "counts"
        );
        let row = |s: &mut String, name: &str, v: String, c: String, t: &str| {
            let _ = writeln!(s, "{name:<34}{v:>12}{c:>14}   {t}");
        };
        let pct = |r: &Ratio| format!("{:.1}%", r.rate * 100.0);
        let cnt = |r: &Ratio| format!("{}/{}", r.ok, r.checked);
        let o = &m.observe;
        row(
            &mut s,
            "event-write precision",
            format!("{:.3}", m.write_precision),
            format!("{}/{}", o.true_store, o.predicted_store),
            ">= 0.95",
        );
        row(
            &mut s,
            "event-write recall",
            format!("{:.3}", m.write_recall),
            format!("{}/{}", o.true_store, o.labelled_store),
            ">= 0.95",
        );
        row(
            &mut s,
            "observe event-type accuracy",
            pct(&o.type_accuracy),
            cnt(&o.type_accuracy),
            "",
        );
        row(
            &mut s,
            "attribution accuracy",
            pct(&m.attribution),
            cnt(&m.attribution),
            "",
        );
        row(
            &mut s,
            "stale-event recall (returned)",
            m.stale_recall.failures.to_string(),
            format!("of {}", m.stale_recall.checked),
            "= 0",
        );
        row(
            &mut s,
            "correction success",
            pct(&m.correction),
            cnt(&m.correction),
            "100%",
        );
        row(
            &mut s,
            "deletion success",
            pct(&m.deletion),
            cnt(&m.deletion),
            "100%",
        );
        row(
            &mut s,
            "expiry success",
            pct(&m.expiry),
            cnt(&m.expiry),
            "100%",
        );
        row(
            &mut s,
            "tenant-isolation failures",
            m.tenant_isolation_failures.to_string(),
            format!("{} reads", m.reads_checked),
            "= 0",
        );
        row(
            &mut s,
            "user-isolation failures",
            m.user_isolation_failures.to_string(),
            String::new(),
            "= 0",
        );
        let r = &m.relevance;
        row(
            &mut s,
            "retrieval recall@1 / @3 / @5",
            format!("{:.3}", r.recall_at_5),
            format!("{:.2}/{:.2}", r.recall_at_1, r.recall_at_3),
            &format!("{} queries (value is @5)", r.queries),
        );
        row(
            &mut s,
            "retrieval nDCG@5 / MRR",
            format!("{:.3}", r.ndcg_at_5),
            format!("{:.3}", r.mrr),
            "",
        );
        row(
            &mut s,
            "unsafe writes",
            m.unsafe_writes.failures.to_string(),
            format!("of {}", m.unsafe_writes.checked),
            "= 0",
        );
        row(
            &mut s,
            "policy decisions as labelled",
            pct(&m.policy_decisions),
            cnt(&m.policy_decisions),
            "",
        );
        row(
            &mut s,
            "timeline order",
            pct(&m.timeline_order),
            cnt(&m.timeline_order),
            "",
        );
        row(
            &mut s,
            "evidence framing",
            pct(&m.evidence_framing),
            cnt(&m.evidence_framing),
            "",
        );
        row(
            &mut s,
            "review bypass (pending returned)",
            m.review_bypass.to_string(),
            String::new(),
            "= 0",
        );
        let _ = writeln!(
            s,
            "\n{:<22}{:>6}{:>8}{:>8}{:>9}  failures",
            "family", "n", "passed", "R@5", "nDCG@5"
        );
        for (name, f) in &self.families {
            let kinds: Vec<String> = f.failures.iter().map(|(k, n)| format!("{k}:{n}")).collect();
            let _ = writeln!(
                s,
                "{name:<22}{:>6}{:>8}{:>8.3}{:>9.3}  {}",
                f.scenarios,
                f.passed,
                f.relevance.recall_at_5,
                f.relevance.ndcg_at_5,
                if kinds.is_empty() {
                    "-".to_string()
                } else {
                    kinds.join(" ")
                }
            );
        }
        let missed: Vec<&TargetCheck> = self.targets.iter().filter(|t| !t.met).collect();
        if missed.is_empty() {
            let _ = writeln!(s, "\nall targets met");
        } else {
            let _ = writeln!(s, "\ntargets missed:");
            for t in missed {
                let _ = writeln!(s, "  {} = {} (target {})", t.metric, t.value, t.target);
            }
        }
        if !self.failures.is_empty() {
            let _ = writeln!(s, "\nfailures ({}):", self.failures.len());
            for f in &self.failures {
                let _ = writeln!(s, "  [{}] {} {}: {}", f.kind, f.scenario, f.at, f.detail);
            }
        }
        if !self.relevance_misses.is_empty() {
            let _ = writeln!(
                s,
                "\nmisses ({}; not target failures: an expected event outside the top 5, or an observed event typed differently from its label):",
                self.relevance_misses.len()
            );
            for f in &self.relevance_misses {
                let _ = writeln!(s, "  {} {}: {}", f.scenario, f.at, f.detail);
            }
        }
        let _ = writeln!(s, "\nwall time {:.1} s", self.wall_seconds);
        s
    }
}

/// `x` rounded to 4 decimals.
pub fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relevance_figures() {
        let mut r = Relevance::default();
        let gold = vec!["a".to_string(), "b".to_string()];
        r.add(&gold, &["x".into(), "a".into(), "b".into()]);
        assert_eq!(r.scored, 1);
        assert_eq!(r.recall1, 0.0);
        assert_eq!(r.recall3, 1.0);
        assert!((r.mrr - 0.5).abs() < 1e-9);
        let ideal = 1.0 + 1.0 / 3f64.log2();
        let dcg = 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((r.ndcg5 - dcg / ideal).abs() < 1e-9);
        r.add(&[], &["a".into()]);
        assert_eq!(r.scored, 1);
    }
}
