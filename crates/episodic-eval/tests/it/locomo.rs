//! The LoCoMo eval on its first conversation (conv-26) with the real model: a regression
//! floor on retrieval quality. Floors sit slightly below the measured figures (the run is
//! deterministic), so a ranking or ingestion regression fails CI; the default ranking must also
//! beat its dense-only ablation arm, the episode signal must lift its arm above the one without
//! it, the date signal must lift its arm above the episode arm, and the question penalty must
//! lift the default above the date arm.

use episodic_eval::locomo::{evaluate, Options};
use episodic_eval::metrics::OVERALL;

use crate::common::{arm_recall, assert_floors, assert_lifts, model_dir, shared_data};

#[test]
fn locomo_first_conversation_meets_recall_floor() {
    let report = evaluate(&Options {
        path: shared_data("locomo/locomo10.json"),
        conversations: Some(1),
        model_dir: model_dir(),
        ablation: true,
        partition_probe_share: None,
        rankings: None,
        passage: None,
        compare_passage: false,
        opaque_actors: false,
    })
    .expect("LoCoMo eval runs");
    assert_eq!(report.counts.conversations, 1);
    assert_eq!(report.counts.turns, 419);
    assert_eq!(report.counts.questions, 199);
    assert_eq!(report.counts.scored, 197);

    let ranking = &report.ranking[OVERALL].recall;
    assert_floors(ranking, &[(5, 0.69), (10, 0.81), (25, 0.90), (50, 0.95)]);
    let arms = report.ablation.as_deref().expect("ablation requested");
    let arm = |name: &str| arm_recall(arms, name);
    assert_lifts(
        "the default ranking over dense alone",
        ranking,
        arm("dense"),
        &[5, 10, 25, 50],
    );
    // The episode-best signal (conv-26: 80.8 / 91.4 / 95.9 against 79.1 / 89.1 / 94.1 without it).
    let episode = arm("dense+bm25+actor+context+episode");
    let context = arm("dense+bm25+actor+context");
    assert_lifts("the episode signal", episode, context, &[10, 25, 50]);
    // Questions naming a date (conv-26: 70.7 / 82.4 against 69.7 / 80.8 without the signal).
    let date = arm("dense+bm25+actor+context+episode+date");
    assert_lifts("the date signal", date, episode, &[5, 10]);
    // Turns that ask (conv-26: 71.1 / 83.1 / 91.9 / 96.2 against 70.7 / 82.4 / 91.4 / 95.9
    // without the penalty).
    assert_lifts("the question penalty", ranking, date, &[5, 10, 25, 50]);
}

/// Opaque actor ids with the speakers' names in `actorNames` rank every question of conv-26
/// exactly as the names used as ids do.
#[test]
fn opaque_ids_with_actor_names_rank_as_names_do() {
    let dir = tempfile::tempdir().expect("tmp");
    let run = |opaque_actors: bool, file: &str| {
        let path = dir.path().join(file);
        evaluate(&Options {
            path: shared_data("locomo/locomo10.json"),
            conversations: Some(1),
            model_dir: model_dir(),
            ablation: false,
            partition_probe_share: None,
            rankings: Some(path.clone()),
            passage: None,
            compare_passage: false,
            opaque_actors,
        })
        .expect("LoCoMo eval runs");
        let rankings: Vec<serde_json::Value> = std::fs::read_to_string(&path)
            .expect("rankings")
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json")["ranking"].clone())
            .collect();
        rankings
    };
    let names = run(false, "names.jsonl");
    let opaque = run(true, "opaque.jsonl");
    assert_eq!(names.len(), 199);
    assert_eq!(names, opaque);
}
