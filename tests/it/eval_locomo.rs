//! The LoCoMo eval on its first conversation (conv-26) with the real model: a regression
//! floor on retrieval quality. Floors sit slightly below the measured figures (the run is
//! deterministic), so a ranking or ingestion regression fails CI; the default ranking must also
//! beat its dense-only ablation arm.

use std::path::{Path, PathBuf};

use episodic::eval::locomo::{evaluate, Options};
use episodic::eval::metrics::OVERALL;

use crate::common::model_dir;

fn locomo_path() -> PathBuf {
    let path = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../shared/data/locomo/locomo10.json"
    ))
    .to_path_buf();
    assert!(
        path.is_file(),
        "LoCoMo data not found at {}: the eval test needs the shared benchmark data \
         (locomo/locomo10.json) beside the repository clone",
        path.display()
    );
    path
}

#[test]
fn locomo_first_conversation_meets_recall_floor() {
    let report = evaluate(&Options {
        path: locomo_path(),
        conversations: Some(1),
        model_dir: model_dir(),
        ablation: true,
        partition_probe_share: None,
    })
    .expect("LoCoMo eval runs");
    assert_eq!(report.counts.conversations, 1);
    assert_eq!(report.counts.turns, 419);
    assert_eq!(report.counts.questions, 199);
    assert_eq!(report.counts.scored, 197);

    let ranking = &report.ranking[OVERALL].recall;
    let floors = [(5, 0.60), (10, 0.72), (25, 0.82), (50, 0.89)];
    for (k, floor) in floors {
        assert!(
            ranking[&k] >= floor,
            "recall@{k} {:.3} fell below {floor}",
            ranking[&k]
        );
    }
    let arms = report.ablation.as_ref().expect("ablation requested");
    let dense = &arms
        .iter()
        .find(|a| a.name == "dense")
        .expect("dense arm")
        .groups;
    let dense = &dense[OVERALL].recall;
    for k in [5, 10, 25, 50] {
        assert!(
            ranking[&k] > dense[&k],
            "the default ranking ({:.3}) must beat dense alone ({:.3}) at {k}",
            ranking[&k],
            dense[&k]
        );
    }
    // Questions naming a date (conv-26: 61.4 / 73.6 against 59.3 / 72.0 without the signal).
    let undated = &arms
        .iter()
        .find(|a| a.name == "dense+bm25+actor+context")
        .expect("arm without the date signal")
        .groups[OVERALL]
        .recall;
    for k in [5, 10] {
        assert!(
            ranking[&k] > undated[&k],
            "the date signal must lift recall@{k}: {:.3} against {:.3} without it",
            ranking[&k],
            undated[&k]
        );
    }
}
