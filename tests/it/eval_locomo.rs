//! The LoCoMo eval on its first conversation (conv-26) with the real model: a regression
//! floor on retrieval quality. Floors sit slightly below the measured figures (the run is
//! deterministic), so a ranking or ingestion regression fails CI.

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
        hybrid: true,
        relevance_only: false,
    })
    .expect("LoCoMo eval runs");
    assert_eq!(report.counts.conversations, 1);
    assert_eq!(report.counts.turns, 419);
    assert_eq!(report.counts.questions, 199);
    assert_eq!(report.counts.scored, 197);

    let dense = &report.dense[OVERALL].recall;
    let floors = [(5, 0.17), (10, 0.26), (25, 0.45), (50, 0.57)];
    for (k, floor) in floors {
        assert!(
            dense[&k] >= floor,
            "dense recall@{k} {:.3} fell below {floor}",
            dense[&k]
        );
    }
    let hybrid = &report.hybrid.as_ref().expect("hybrid requested")[OVERALL].recall;
    let floors = [(5, 0.33), (10, 0.45), (25, 0.59), (50, 0.71)];
    for (k, floor) in floors {
        assert!(
            hybrid[&k] >= floor,
            "hybrid recall@{k} {:.3} fell below {floor}",
            hybrid[&k]
        );
    }
}
