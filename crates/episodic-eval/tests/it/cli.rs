//! The `episodic-eval` binary, run from the repository root as documented: its datasets,
//! default paths relative to the working directory, the printed summary and the JSON report.

use std::process::{Command, Output};

use serde_json::Value;

use crate::common::repo_root;

/// Runs `episodic-eval args...` from the repository root.
fn eval(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_episodic-eval"))
        .args(args)
        .current_dir(repo_root())
        .env_remove("EPISODIC_MODEL_DIR")
        .env_remove("EPISODIC_LOG_FORMAT")
        .output()
        .expect("run episodic-eval")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_lists_every_dataset() {
    let out = eval(&["--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    for dataset in ["locomo", "madial", "observe", "scenarios"] {
        assert!(help.contains(dataset), "{dataset} missing from:\n{help}");
    }
}

/// `scenarios --help` names every family the suite of `data/scenarios/` holds (each word of
/// its name: `deletion_expiry` as deletion and expiry).
#[test]
fn scenarios_help_names_every_family_of_the_suite() {
    let out = eval(&["scenarios", "--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let mut families = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(repo_root().join("data/scenarios")).expect("scenarios") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "jsonl") {
            for line in std::fs::read_to_string(&path).expect("read").lines() {
                if let Ok(v) = serde_json::from_str::<Value>(line) {
                    if let Some(f) = v["family"].as_str() {
                        families.insert(f.to_string());
                    }
                }
            }
        }
    }
    assert!(families.len() >= 9, "{families:?}");
    for family in &families {
        for word in family.split('_') {
            assert!(help.contains(word), "family {family} missing from:\n{help}");
        }
    }
}

#[test]
fn observe_prints_the_summary_and_writes_every_miss() {
    let dir = tempfile::tempdir().expect("tmp");
    let report = dir.path().join("observe.json");
    let report_arg = report.to_str().expect("utf-8 path");
    let out = eval(&[
        "observe",
        "--path",
        "data/observe/heldout.jsonl",
        "--out",
        report_arg,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).expect("a JSON summary on stdout");
    let full: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON report");
    assert_eq!(summary["items"], 85, "{summary}");
    assert_eq!(summary["items"], full["items"]);
    let misses = full["misses"].as_array().expect("every miss in the report");
    assert_eq!(summary["misses"], misses.len(), "{summary}");
    assert_eq!(summary["precision"], full["precision"]);
}

#[test]
fn scenarios_prints_the_table_and_writes_the_report_where_asked() {
    let dir = tempfile::tempdir().expect("tmp");
    let report = dir.path().join("nested/scenarios.json");
    let report_arg = report.to_str().expect("utf-8 path");
    let out = eval(&["scenarios", "--only", "iso-01", "--out", report_arg]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.starts_with("scenario suite: 1 scenarios"), "{table}");
    assert!(
        table.ends_with(&format!("report written to {}\n", report.display())),
        "{table}"
    );
    let full: Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("JSON report");
    assert_eq!(full["scenarios"], 1, "{full}");
    assert_eq!(full["path"], "data/scenarios", "{full}");
}

#[test]
fn a_missing_benchmark_fails_naming_the_path_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("locomo10.json");
    let report = dir.path().join("locomo.json");
    let out = eval(&[
        "locomo",
        "--path",
        missing.to_str().expect("utf-8 path"),
        "--out",
        report.to_str().expect("utf-8 path"),
    ]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("error: reading the LoCoMo data at"), "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(!report.exists());
}
