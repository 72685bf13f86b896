//! The MADial-Bench English eval with the real model: a regression floor on retrieval quality
//! for a second dataset, scored with the same configuration as LoCoMo. Floors sit slightly
//! below the measured figures (the run is deterministic), and the default ranking must beat
//! its dense-only ablation arm.

use episodic_eval::madial::{evaluate, Options};
use episodic_eval::metrics::OVERALL;

use crate::common::{arm_recall, assert_floors, assert_lifts, model_dir, shared_data};

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
        rankings: None,
        passage: None,
        compare_passage: false,
    })
    .expect("MADial-Bench eval runs");
    assert_eq!(report.counts.memories, 160);
    assert_eq!(report.counts.scored, 160);

    // Measured: 34.8 / 56.7 / 65.6 / 80.4.
    let ranking = &report.ranking[OVERALL].recall;
    assert_floors(ranking, &[(1, 0.33), (3, 0.55), (5, 0.64), (10, 0.79)]);
    let arms = report.ablation.as_deref().expect("ablation requested");
    assert_lifts(
        "the default ranking over dense alone",
        ranking,
        arm_recall(arms, "dense"),
        &[1, 3, 5, 10],
    );
}
