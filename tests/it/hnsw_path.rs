//! Recall is exact by default even for scopes large enough for HNSW; the opt-in approximate
//! path stays in scope and close to the exact answer.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::{Scope, VectorPath};

fn vector(rng: &mut StdRng, centers: &[Vec<f32>]) -> Vec<f32> {
    let c = &centers[rng.gen_range(0..centers.len())];
    c.iter().map(|x| x + rng.gen_range(-0.15..0.15)).collect()
}

async fn engine(dir: &std::path::Path, approximate: bool) -> Engine {
    let mut c = EngineConfig::new(dir.to_path_buf());
    // Cosine alone (priors are equal here), so brute force over the vectors is the truth.
    c.rank.lexical_share = 0.0;
    c.rank.context_weight = 0.0;
    c.rank.episode_weight = 0.0;
    c.rank.actor_boost = 0.0;
    c.recall.approximate = approximate;
    c.recall.exact_max_candidates = 10;
    c.recall.hnsw_min_fraction = 0.0;
    Engine::open(c, Arc::new(HashingEmbedder::new())).expect("engine")
}

/// The 10 best cosines, by brute force over every vector written.
fn brute_force(written: &[(String, Vec<f32>, String)], q: &[f32], actor: Option<&str>) -> Vec<f32> {
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let mut scored: Vec<f32> = written
        .iter()
        .filter(|(_, _, a)| actor.is_none_or(|want| a == want))
        .map(|(_, v, _)| {
            let dot: f32 = v.iter().zip(q).map(|(a, b)| a * b).sum();
            dot / (norm(v) * norm(q))
        })
        .collect();
    scored.sort_by(|a, b| b.total_cmp(a));
    scored.truncate(10);
    scored
}

#[tokio::test]
async fn recall_is_exact_by_default_and_hnsw_only_when_opted_in() {
    let (d1, d2) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let (exact, hnsw) = (
        engine(d1.path(), false).await,
        engine(d2.path(), true).await,
    );
    let mut rng = StdRng::seed_from_u64(11);
    let centers: Vec<Vec<f32>> = (0..8)
        .map(|_| (0..384).map(|_| rng.gen_range(-1.0..1.0)).collect())
        .collect();
    let grant = TenantGrant::internal("acme", "test");
    let mut written = Vec::new();
    for i in 0..600 {
        let actor = format!("a{}", i % 3);
        let body = json!({
            "eventType": "task_milestone", "occurredAt": "2026-06-17T09:20:00Z", "actorId": actor,
            "resourceRefs": [format!("r{i}")], "summary": format!("event {i}"), "sourceRefs": ["s"],
            "sourceTrust": "tool_result", "confidence": "medium", "privacyClass": "internal",
            "retention": {"deleteOnRequest": true}
        });
        let v = vector(&mut rng, &centers);
        exact
            .write_embedded(&grant, crate::common::input(&body), v.clone(), false)
            .await
            .expect("write");
        hnsw.write_embedded(&grant, crate::common::input(&body), v.clone(), false)
            .await
            .expect("write");
        written.push((format!("event {i}"), v, actor));
    }
    let mut overlap = 0;
    for q in 0..20 {
        let scope = if q % 2 == 0 {
            Scope::default()
        } else {
            Scope {
                actor_ids: vec!["a1".into()],
                ..Scope::default()
            }
        };
        let req = crate::common::recall_request(scope, 10);
        let v: Vec<f32> = vector(&mut rng, &centers);
        let a = exact.recall_with_vector(&grant, &req, &v).expect("exact");
        let b = hnsw.recall_with_vector(&grant, &req, &v).expect("hnsw");
        assert_eq!(
            a.stats.path,
            VectorPath::Exact,
            "exact unless approximate is on"
        );
        assert_ne!(b.stats.path, VectorPath::Exact, "the HNSW path ran");
        let ids = |r: &episodic::retrieve::RecallResponse| {
            r.results
                .iter()
                .map(|h| h.event.summary.clone())
                .collect::<Vec<_>>()
        };
        let actor = (q % 2 == 1).then_some("a1");
        let cosines: Vec<f32> = a.results.iter().map(|h| h.score_breakdown.cosine).collect();
        let truth = brute_force(&written, &v, actor);
        assert_eq!(cosines.len(), truth.len(), "query {q}");
        for (got, want) in cosines.iter().zip(&truth) {
            // Equal up to rounding (ties may come back in either order).
            assert!(
                (got - want).abs() < 1e-5,
                "query {q}: {cosines:?} vs {truth:?}"
            );
        }
        overlap += ids(&b).iter().filter(|s| ids(&a).contains(s)).count();
        if let Some(actor) = actor {
            assert!(b.results.iter().all(|h| h.event.actor_id == actor));
        }
    }
    assert!(overlap >= 180, "approximate recall@10 {overlap}/200");
    exact.shutdown().await;
    hnsw.shutdown().await;
}

#[tokio::test]
async fn turning_approximate_recall_off_removes_the_graph_and_on_rebuilds_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let grant = TenantGrant::internal("acme", "test");
    let mut rng = StdRng::seed_from_u64(5);
    let centers: Vec<Vec<f32>> = vec![(0..384).map(|_| rng.gen_range(-1.0..1.0)).collect()];
    let on = engine(dir.path(), true).await;
    for i in 0..30 {
        let body = json!({
            "eventType": "task_milestone", "occurredAt": "2026-06-17T09:20:00Z", "actorId": "a",
            "resourceRefs": [format!("r{i}")], "summary": format!("event {i}"), "sourceRefs": ["s"],
            "sourceTrust": "tool_result", "confidence": "medium", "privacyClass": "internal",
            "retention": {"deleteOnRequest": true}
        });
        on.write_embedded(
            &grant,
            crate::common::input(&body),
            vector(&mut rng, &centers),
            false,
        )
        .await
        .expect("write");
    }
    assert_eq!(on.stats().hnsw_len, 30);
    on.shutdown().await;
    let snapshot = dir.path().join("index").join("hnsw");
    assert!(snapshot.exists(), "approximate recall keeps a snapshot");

    let off = engine(dir.path(), false).await;
    assert_eq!((off.stats().events, off.stats().hnsw_len), (30, 0));
    off.shutdown().await;
    assert!(!snapshot.exists(), "a graph nobody maintains is not kept");

    let on = engine(dir.path(), true).await;
    assert_eq!(on.stats().hnsw_len, 30, "rebuilt from the stored vectors");
    on.shutdown().await;
}
