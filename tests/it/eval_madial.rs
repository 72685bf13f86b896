//! The MADial-Bench English eval with the real model: a regression floor on retrieval quality
//! for a second dataset, scored with the same configuration as LoCoMo. Floors sit slightly
//! below the measured figures (the run is deterministic), and the default ranking must beat
//! its dense-only ablation arm.

use episodic::eval::madial::{evaluate, Options};
use episodic::eval::metrics::OVERALL;

use crate::common::{model_dir, shared_data};

#[test]
fn madial_english_meets_recall_floor() {
    let report = evaluate(&Options {
        path: shared_data("madial_bench/en")
            .parent()
            .expect("madial_bench")
            .to_path_buf(),
        model_dir: model_dir(),
        ablation: true,
        partition_probe_share: None,
    })
    .expect("MADial-Bench eval runs");
    assert_eq!(report.counts.memories, 160);
    assert_eq!(report.counts.scored, 160);

    // Measured: 34.8 / 56.7 / 65.6 / 80.4.
    let ranking = &report.ranking[OVERALL].recall;
    for (k, floor) in [(1, 0.33), (3, 0.55), (5, 0.64), (10, 0.79)] {
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
        .groups[OVERALL]
        .recall;
    for k in [1, 3, 5, 10] {
        assert!(
            ranking[&k] > dense[&k],
            "the default ranking ({:.3}) must beat dense alone ({:.3}) at {k}",
            ranking[&k],
            dense[&k]
        );
    }
}
