//! The HNSW path of recall returns exactly what the exact path returns for the same data,
//! scope and query (the bound-and-deepen rule), and never an out-of-scope event.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::{RecallRequest, Scope, VectorPath};

fn vector(rng: &mut StdRng, centers: &[Vec<f32>]) -> Vec<f32> {
    let c = &centers[rng.gen_range(0..centers.len())];
    c.iter().map(|x| x + rng.gen_range(-0.15..0.15)).collect()
}

async fn engine(dir: &std::path::Path, hnsw: bool) -> Engine {
    let mut c = EngineConfig::new(dir.to_path_buf());
    if hnsw {
        c.recall.exact_max_candidates = 10;
        c.recall.hnsw_min_fraction = 0.0;
    }
    Engine::open(c, Arc::new(HashingEmbedder::new())).expect("engine")
}

#[tokio::test]
async fn hnsw_and_exact_paths_agree() {
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
            .write_embedded(&grant, &body, v.clone(), false)
            .await
            .expect("write");
        hnsw.write_embedded(&grant, &body, v, false)
            .await
            .expect("write");
    }
    for q in 0..20 {
        let scope = if q % 2 == 0 {
            Scope::default()
        } else {
            Scope {
                actor_ids: vec!["a1".into()],
                ..Scope::default()
            }
        };
        let req = RecallRequest {
            query: "q".into(),
            scope,
            limit: 10,
            include_superseded: false,
            include_stale: false,
            as_of: None,
        };
        let v: Vec<f32> = vector(&mut rng, &centers);
        let a = exact.recall_with_vector(&grant, &req, &v).expect("exact");
        let b = hnsw.recall_with_vector(&grant, &req, &v).expect("hnsw");
        assert_eq!(a.stats.path, VectorPath::Exact);
        assert_ne!(b.stats.path, VectorPath::Exact, "the HNSW path ran");
        let ids = |r: &episodic::retrieve::RecallResponse| {
            r.results
                .iter()
                .map(|h| h.event.summary.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(&a), ids(&b), "query {q}");
        if q % 2 == 1 {
            assert!(b.results.iter().all(|h| h.event.actor_id == "a1"));
        }
    }
    exact.shutdown().await;
    hnsw.shutdown().await;
}
