//! Stale suppression over a broad scope (more candidates than one thread looks through):
//! every older event of a subject with a newer one is left out, or with `includeStale`
//! returned and marked with the newer event's id.

use std::collections::HashMap;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::Scope;

/// Subjects (one resource each), each written twice: in June, then in August. Each subject
/// has its own source, so that no episode spans many subjects and the ranking stays close to
/// cosine over random vectors (about half of any top k is June's).
const SUBJECTS: usize = 750;

fn body(subject: usize, month: &str) -> serde_json::Value {
    json!({
        "eventType": "user_preference_stated", "actorId": "u",
        "occurredAt": format!("2026-{month}-01T{:02}:{:02}:00Z", subject / 60, subject % 60),
        "resourceRefs": [format!("r{subject}")], "summary": format!("{month} {subject}"),
        "sourceRefs": [format!("s{subject}")], "sourceTrust": "user_provided", "confidence": "high",
        "privacyClass": "internal", "retention": {"deleteOnRequest": true}
    })
}

fn unit(rng: &mut StdRng) -> Vec<f32> {
    let v: Vec<f32> = (0..384).map(|_| rng.gen_range(-1.0..1.0)).collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

#[tokio::test]
async fn a_broad_scope_leaves_out_or_marks_every_older_event_of_a_subject() {
    let dir = tempfile::tempdir().expect("tmp");
    let config = EngineConfig::new(dir.path().to_path_buf());
    let e = Engine::open(config, Arc::new(HashingEmbedder::new())).expect("engine");
    let acme = TenantGrant::internal("acme", "test");
    let mut rng = StdRng::seed_from_u64(41);
    let mut august_ids = HashMap::new();
    for month in ["06", "08"] {
        for subject in 0..SUBJECTS {
            let out = e
                .write_embedded(
                    &acme,
                    crate::common::input(&body(subject, month)),
                    unit(&mut rng),
                    false,
                )
                .await
                .expect("write");
            if month == "08" {
                august_ids.insert(format!("08 {subject}"), out.event.event_id);
            }
        }
    }
    e.refresh().await.expect("refresh");
    let query = unit(&mut rng);
    let mut req = crate::common::recall_request(Scope::default(), 200);

    let r = e.recall_with_vector(&acme, &req, &query).expect("recall");
    assert_eq!(r.results.len(), 200);
    for h in &r.results {
        assert!(
            h.event.summary.starts_with("08 "),
            "{} is stale",
            h.event.summary
        );
        assert!(!h.stale);
    }

    req.include_stale = true;
    let r = e.recall_with_vector(&acme, &req, &query).expect("recall");
    let mut marked = 0;
    for h in &r.results {
        let (month, subject) = h.event.summary.split_once(' ').expect("summary");
        if month == "06" {
            let newer = &august_ids[&format!("08 {subject}")];
            assert!(h.stale, "{} not marked", h.event.summary);
            assert_eq!(h.stale_by.as_ref(), Some(newer), "{}", h.event.summary);
            marked += 1;
        } else {
            assert!(!h.stale && h.stale_by.is_none(), "{}", h.event.summary);
        }
    }
    assert!(marked > 50, "about half of 200 are June's: {marked}");
    e.shutdown().await;
}
