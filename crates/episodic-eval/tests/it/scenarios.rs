//! The labelled scenario suite (`data/scenarios/`) run end to end with the real model: the
//! seed's targets are asserted so a regression in isolation, deletion, correction, review or
//! write quality fails CI.
//!
//! The suite is honest: where the engine misses a target today, the test pins the exact
//! known failures (scenario ids below, described in the report) instead of weakening the
//! data, so any new failure breaks the build and a fix shows up as a list to shorten.

use std::collections::BTreeSet;
use std::path::PathBuf;

use episodic_eval::scenarios::{evaluate, load, Options};

use crate::common::{model_dir, repo_root};

fn suite_dir() -> PathBuf {
    repo_root().join("data/scenarios")
}

/// Failures the engine has today, by kind and scenario: none.
///
/// Resolved (no longer pinned): `unsafe_write` ev-02/ev-03/ev-10 and `observe_false_store`
/// ev-02/ev-10 (credentials are now denied by the write policy and ignored by the observer,
/// `episodic::credentials`), `observe_false_store` un-06 (a bare `ping` from a tool), and
/// `stale` st-07 (subjects no longer include the actor, so a customer's own newer statement
/// outdates an agent's older note about the same customer).
const KNOWN: [(&str, &str); 0] = [];

#[test]
fn scenario_suite_meets_the_seed_targets() {
    let report = evaluate(&Options {
        path: suite_dir(),
        model_dir: model_dir(),
        only: None,
    })
    .expect("scenario suite runs");
    assert!(report.scenarios >= 100, "{} scenarios", report.scenarios);
    let m = &report.metrics;
    let table = report.table();
    assert_eq!(m.tenant_isolation_failures, 0, "{table}");
    assert_eq!(m.user_isolation_failures, 0, "{table}");
    assert_eq!(m.review_bypass, 0, "{table}");
    assert_eq!(m.correction.rate, 1.0, "{table}");
    assert_eq!(m.deletion.rate, 1.0, "{table}");
    assert_eq!(m.expiry.rate, 1.0, "{table}");
    assert_eq!(m.attribution.rate, 1.0, "{table}");
    assert_eq!(m.evidence_framing.rate, 1.0, "{table}");
    assert_eq!(m.policy_decisions.rate, 1.0, "{table}");
    assert_eq!(m.timeline_order.rate, 1.0, "{table}");
    assert!(m.write_recall >= 0.95, "{table}");
    assert!(m.write_precision >= 0.95, "{table}");
    assert_eq!(m.unsafe_writes.failures, 0, "{table}");
    assert_eq!(m.stale_recall.failures, 0, "{table}");
    // Relevance floors slightly below the measured figures (the run is deterministic).
    assert!(m.relevance.recall_at_5 >= 0.94, "{table}");
    assert!(m.relevance.ndcg_at_5 >= 0.94, "{table}");
    let known: BTreeSet<(String, String)> = KNOWN
        .iter()
        .map(|(k, s)| (k.to_string(), s.to_string()))
        .collect();
    let new: Vec<String> = report
        .failures
        .iter()
        .filter(|f| !known.contains(&(f.kind.clone(), f.scenario.clone())))
        .map(|f| format!("[{}] {} {}: {}", f.kind, f.scenario, f.at, f.detail))
        .collect();
    assert!(new.is_empty(), "new failures:\n{}", new.join("\n"));
}

#[test]
fn loader_rejects_a_malformed_scenario_naming_file_and_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("broken.jsonl");
    let text = concat!(
        "# a story\n",
        "{\"scenario\": \"x-1\", \"family\": \"f\", \"title\": \"t\", \"now\": \"2026-06-30T12:00:00Z\", \"tenants\": [\"a\", \"b\"]}\n",
        "{\"write\": {\"tenant\": \"a\", \"id\": \"e1\", \"type\": \"task_milestone\", \"at\": \"2026-06-01T10:00:00Z\", \"actor\": \"u\", \"summary\": \"s\", \"source\": [\"s\"], \"trust\": \"tool_result\"}}\n",
        "{\"recall\": {\"tenant\": \"b\", \"query\": \"q\"}, \"expect\": [], \"stail\": [\"e1\"]}\n",
    );
    std::fs::write(&file, text).expect("write");
    let err = load(dir.path()).expect_err("malformed");
    let msg = format!("{err:#}");
    let at = format!("{}:4:", file.display());
    assert!(msg.starts_with(&at), "{msg}");
    assert!(msg.contains("stail"), "{msg}");

    let valid = text.replace("stail", "stale");
    let unknown_tenant = valid.replace("\"tenant\": \"b\"", "\"tenant\": \"c\"");
    std::fs::write(&file, unknown_tenant).expect("write");
    let msg = format!("{:#}", load(dir.path()).expect_err("unknown tenant"));
    assert!(msg.starts_with(&at) && msg.contains("tenant c"), "{msg}");

    let bad_json = valid.replace("\"summary\": \"s\",", "\"summary\": \"s\"");
    std::fs::write(&file, bad_json).expect("write");
    let msg = format!("{:#}", load(dir.path()).expect_err("bad json"));
    assert!(msg.starts_with(&format!("{}:3:", file.display())), "{msg}");
}
