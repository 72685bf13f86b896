//! Bounding broad scopes from the 8-bit codes changes nothing in the answer: with the full
//! ranking (BM25, episode context and best, a named actor, trust and confidence), recall
//! returns the same events, in the same order, with bit-identical scores, whether every
//! candidate is scored from its full vector or only those the code bounds cannot rule out,
//! over short episodes and one of 1,200 events.

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::{RecallRequest, RecallResponse, Scope};

/// More than one chunk of the vector store (4,096 vectors), so a code block exists.
const EVENTS: usize = 4_500;
const WORDS: [&str; 12] = [
    "pottery", "hiking", "budget", "deploy", "invoice", "garden", "concert", "flight", "recipe",
    "review", "lawyer", "piano",
];
const TRUST: [&str; 4] = [
    "user_provided",
    "tool_result",
    "operator_entered",
    "approved_source",
];
const CONFIDENCE: [&str; 3] = ["low", "medium", "high"];

fn engine(dir: &std::path::Path, code_min_candidates: usize) -> Engine {
    let mut c = EngineConfig::new(dir.to_path_buf());
    // Recency is judged at each call's own clock; without it the two engines' scores can be
    // compared bit for bit.
    c.rank.half_life_days = 0.0;
    c.recall.code_min_candidates = code_min_candidates;
    Engine::open(c, Arc::new(HashingEmbedder::new())).expect("engine")
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.into_iter().map(|x| x / n).collect()
}

/// A vector near one of `centers`; every fifth one repeats an earlier vector exactly, so
/// equal cosines (ties) occur.
fn vector(rng: &mut StdRng, centers: &[Vec<f32>], written: &[Vec<f32>]) -> Vec<f32> {
    if !written.is_empty() && rng.gen_range(0..5) == 0 {
        return written[rng.gen_range(0..written.len())].clone();
    }
    let c = &centers[rng.gen_range(0..centers.len())];
    unit(c.iter().map(|x| x + rng.gen_range(-0.3..0.3)).collect())
}

/// The first events form one long episode (one source, a minute apart), the rest sessions
/// of seven.
const LONG_EPISODE: usize = 1_200;

/// When, in which project and from which source event `i` happened.
fn placement(i: usize) -> (String, String, String) {
    if i < LONG_EPISODE {
        let at = format!(
            "2025-12-{:02}T{:02}:{:02}:00Z",
            1 + i / 1440,
            i / 60 % 24,
            i % 60
        );
        return (at, "p0".into(), "marathon".into());
    }
    let session = i / 7;
    let minute = (i % 7) * 3 + (session % 3) * 45;
    let at = format!(
        "2026-0{}-{:02}T{:02}:{:02}:00Z",
        1 + session % 9,
        1 + session % 28,
        8 + minute / 60,
        minute % 60
    );
    (
        at,
        format!("p{}", session % 3),
        format!("session-{session}"),
    )
}

fn body(rng: &mut StdRng, i: usize) -> serde_json::Value {
    let (occurred_at, project, source) = placement(i);
    let event_type = ["user_preference_stated", "task_milestone", "human_approval"][i % 3];
    let actor = ["Caroline", "Melanie", "agent-7", "user-42"][rng.gen_range(0..4)];
    json!({
        "eventType": event_type,
        "occurredAt": occurred_at,
        "actorId": actor,
        "projectId": project,
        "resourceRefs": [format!("r{i}")],
        // Every fourth asks, so the bounds carry the question penalty too.
        "summary": format!("{} and {} note {i}{}", WORDS[rng.gen_range(0..WORDS.len())], WORDS[rng.gen_range(0..WORDS.len())], if i.is_multiple_of(4) { "?" } else { "" }),
        "sourceRefs": [source],
        "sourceTrust": TRUST[rng.gen_range(0..TRUST.len())],
        "confidence": CONFIDENCE[rng.gen_range(0..CONFIDENCE.len())],
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    })
}

fn same(a: &RecallResponse, b: &RecallResponse, what: &str) {
    assert_eq!(a.stats.candidates, b.stats.candidates, "{what}");
    let rows = |r: &RecallResponse| {
        r.results
            .iter()
            .map(|h| {
                (
                    h.event.event_id.clone(),
                    h.score.to_bits(),
                    h.score_breakdown,
                    h.stale,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(rows(a), rows(b), "{what}");
}

/// The recall requests and query vectors of the comparison.
fn queries(
    rng: &mut StdRng,
    centers: &[Vec<f32>],
    written: &[Vec<f32>],
) -> Vec<(RecallRequest, Vec<f32>)> {
    (0..48)
        .map(|q| {
            let scope = match q % 4 {
                0 => Scope::default(),
                1 => Scope {
                    actor_ids: vec!["Caroline".into()],
                    ..Scope::default()
                },
                2 => Scope {
                    project_ids: vec!["p1".into(), "p2".into()],
                    ..Scope::default()
                },
                _ => Scope {
                    event_types: vec!["human_approval".into()],
                    ..Scope::default()
                },
            };
            let query = format!(
                "What did Caroline say about {} and {}?",
                WORDS[q % WORDS.len()],
                WORDS[(q * 5 + 1) % WORDS.len()]
            );
            let req = RecallRequest {
                query,
                scope,
                limit: [1, 5, 10, 40][(q / 4) % 4],
                include_superseded: false,
                include_stale: q % 3 == 0,
                exact: false,
                as_of: None,
            };
            let v = if q % 6 == 5 {
                written[q * 31 % written.len()].clone()
            } else {
                vector(rng, centers, &[])
            };
            (req, v)
        })
        .collect()
}

/// Answers every query with the engine on `dir` opened with `code_min_candidates`.
async fn answers(
    dir: &std::path::Path,
    code_min_candidates: usize,
    qs: &[(RecallRequest, Vec<f32>)],
) -> Vec<RecallResponse> {
    let e = engine(dir, code_min_candidates);
    while !e.vectors_coded() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let grant = TenantGrant::internal("acme", "test");
    let out = qs
        .iter()
        .map(|(req, v)| e.recall_with_vector(&grant, req, v).expect("recall"))
        .collect();
    e.shutdown().await;
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn coded_bounds_return_the_exact_top_k() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut rng = StdRng::seed_from_u64(23);
    let centers: Vec<Vec<f32>> = (0..6)
        .map(|_| unit((0..384).map(|_| rng.gen_range(-1.0..1.0)).collect()))
        .collect();
    let grant = TenantGrant::internal("acme", "test");
    let mut written = Vec::new();
    {
        let e = engine(dir.path(), usize::MAX);
        for i in 0..EVENTS {
            let b = body(&mut rng, i);
            let v = vector(&mut rng, &centers, &written);
            e.write_embedded(&grant, crate::common::input(&b), v.clone(), false)
                .await
                .expect("write");
            written.push(v);
        }
        e.refresh().await.expect("refresh");
        e.shutdown().await;
    }
    let qs = queries(&mut rng, &centers, &written);
    // The same directory, reopened: the same scope index, so the same BM25 statistics.
    let coded = answers(dir.path(), 0, &qs).await;
    let full = answers(dir.path(), usize::MAX, &qs).await;
    for (q, (a, b)) in coded.iter().zip(&full).enumerate() {
        assert!(!a.results.is_empty(), "query {q}");
        same(a, b, &format!("query {q}"));
    }
}
