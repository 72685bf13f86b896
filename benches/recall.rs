//! Recall end to end in process (scope filter → exact or HNSW scoring → ranking → evidence)
//! on seeded synthetic corpora with clustered vectors, at 10k and 100k events, and on one
//! tenant whose 20k events are a single episode (one source, a minute apart).
//!
//! Run: `cargo bench --bench recall` (sizes via `EPISODIC_BENCH_SIZES=10000,100000` and
//! `EPISODIC_BENCH_EPISODE_SIZES=20000`).
//! The query vector is precomputed, so this measures the engine, not the embedder.

use std::sync::Arc;
use std::time::Instant;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig};
use episodic::model::validate::validate_event;
use episodic::model::Timestamp;
use episodic::retrieve::{RecallRequest, Scope};

const DIM: usize = 384;
const CLUSTERS: usize = 64;
const TENANTS: usize = 31;
const ACTORS: usize = 20;
const TYPES: [&str; 6] = [
    "user_preference_stated",
    "correction_received",
    "task_milestone",
    "human_approval",
    "tool_observed_event",
    "incident_or_failure",
];

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.gen_range(1e-7..1.0);
    let u2: f32 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

struct Corpus {
    centroids: Vec<Vec<f32>>,
}

impl Corpus {
    fn new(rng: &mut StdRng) -> Self {
        let centroids = (0..CLUSTERS)
            .map(|_| {
                let mut c: Vec<f32> = (0..DIM).map(|_| gaussian(rng)).collect();
                normalize(&mut c);
                c
            })
            .collect();
        Corpus { centroids }
    }

    fn vector(&self, rng: &mut StdRng) -> Vec<f32> {
        let c = &self.centroids[rng.gen_range(0..CLUSTERS)];
        let mut v: Vec<f32> = c.iter().map(|x| x + 0.06 * gaussian(rng)).collect();
        normalize(&mut v);
        v
    }
}

/// Tenant 0 holds about 10% of events; the rest share the remainder evenly.
fn tenant_of(rng: &mut StdRng) -> usize {
    if rng.gen_bool(0.10) {
        0
    } else {
        rng.gen_range(1..TENANTS)
    }
}

fn event_body(i: usize, rng: &mut StdRng) -> serde_json::Value {
    let day = rng.gen_range(1..28);
    let month = rng.gen_range(1..13);
    json!({
        "eventType": TYPES[rng.gen_range(0..TYPES.len())],
        "occurredAt": format!("2025-{month:02}-{day:02}T12:00:00Z"),
        "actorId": format!("actor-{}", rng.gen_range(0..ACTORS)),
        "projectId": format!("project-{}", rng.gen_range(0..5)),
        "resourceRefs": [format!("res-{}", rng.gen_range(0..50))],
        "summary": format!("synthetic event {i}"),
        "sourceRefs": [format!("bench-session-{}", i / 20)],
        "sourceTrust": "tool_result",
        "confidence": "medium",
        "privacyClass": "internal",
        "retention": {"deleteOnRequest": true}
    })
}

/// Event `i` of one long episode: one tenant, one project, one source, a minute apart.
fn long_episode_body(i: usize, rng: &mut StdRng) -> (String, serde_json::Value) {
    assert!(i < 31 * 1440, "one long episode fits in January");
    let mut body = event_body(i, rng);
    let at = format!(
        "2025-01-{:02}T{:02}:{:02}:00Z",
        1 + i / 1440,
        i / 60 % 24,
        i % 60
    );
    body["occurredAt"] = json!(at);
    body["projectId"] = json!("project-0");
    body["sourceRefs"] = json!(["bench-marathon"]);
    ("tenant-long".into(), body)
}

/// Event `i` of the skewed multi-tenant corpus.
fn skewed_body(i: usize, rng: &mut StdRng) -> (String, serde_json::Value) {
    let tenant = format!("tenant-{}", tenant_of(rng));
    (tenant, event_body(i, rng))
}

fn build(
    rt: &tokio::runtime::Runtime,
    n: usize,
    corpus: &Corpus,
    dir: &std::path::Path,
    make: fn(usize, &mut StdRng) -> (String, serde_json::Value),
) -> Engine {
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.writer.hnsw_save_every = usize::MAX;
    let engine = Engine::open(config, Arc::new(HashingEmbedder::new())).expect("engine");
    let mut rng = StdRng::seed_from_u64(7);
    let started = Instant::now();
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let (tenant, body) = make(i, &mut rng);
            let vector = corpus.vector(&mut rng);
            let engine = engine.clone();
            set.spawn(async move {
                let grant = TenantGrant::internal(&tenant, "bench");
                let input = validate_event(&body, &engine.config().limits, Timestamp::now())
                    .expect("a valid event");
                engine
                    .write_embedded(&grant, input, vector, false)
                    .await
                    .map(|_| ())
            });
            if set.len() >= 512 {
                while let Some(r) = set.join_next().await {
                    r.expect("join").expect("write");
                }
            }
        }
        while let Some(r) = set.join_next().await {
            r.expect("join").expect("write");
        }
        engine.refresh().await.expect("refresh");
    });
    eprintln!(
        "ingested {n} events in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    engine
}

/// Benchmarks recall over `engine` for `tenant`, one criterion id per scope, named
/// `<prefix><scope>/<n>`.
fn bench_scopes(
    group: &mut BenchmarkGroup<'_, WallTime>,
    engine: &Engine,
    queries: &[Vec<f32>],
    (tenant, prefix, n): (&str, &str, usize),
    scopes: Vec<(&str, Scope)>,
) {
    let grant = TenantGrant::internal(tenant, "bench");
    for (name, scope) in scopes {
        let req = RecallRequest {
            // Every summary shares two words with it (BM25 scores every candidate) and it
            // names one actor: the most work the lexical and actor signals can cost.
            query: "synthetic event 4242 for actor-3".into(),
            scope,
            limit: 10,
            include_superseded: false,
            include_stale: false,
            exact: false,
            as_of: None,
        };
        let probe = engine
            .recall_with_vector(&grant, &req, &queries[0])
            .expect("recall");
        eprintln!(
            "n={n} scope={prefix}{name}: {} candidates, path {:?}",
            probe.stats.candidates, probe.stats.path
        );
        let mut qi = 0;
        let id = BenchmarkId::new(format!("{prefix}{name}"), n);
        group.bench_with_input(id, &req, |b, req| {
            b.iter(|| {
                qi = (qi + 1) % queries.len();
                engine
                    .recall_with_vector(&grant, req, &queries[qi])
                    .expect("recall")
            })
        });
    }
}

fn sizes(var: &str, default: &str) -> Vec<usize> {
    std::env::var(var)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn bench_recall(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rng = StdRng::seed_from_u64(42);
    let corpus = Corpus::new(&mut rng);
    let mut group = c.benchmark_group("recall");
    group.sample_size(50);
    for n in sizes("EPISODIC_BENCH_SIZES", "10000,100000") {
        let dir = tempfile::tempdir().expect("tmp");
        let engine = build(&rt, n, &corpus, dir.path(), skewed_body);
        let queries: Vec<Vec<f32>> = (0..64).map(|_| corpus.vector(&mut rng)).collect();
        let actor = || vec!["actor-3".to_string()];
        let scopes = vec![
            ("tenant", Scope::default()),
            (
                "tenant+actor",
                Scope {
                    actor_ids: actor(),
                    ..Scope::default()
                },
            ),
            (
                "tenant+actor+type",
                Scope {
                    actor_ids: actor(),
                    event_types: vec!["task_milestone".into()],
                    ..Scope::default()
                },
            ),
        ];
        bench_scopes(&mut group, &engine, &queries, ("tenant-0", "", n), scopes);
        rt.block_on(engine.shutdown());
    }
    // One tenant whose events are all one episode: the episode signal's worst case.
    for n in sizes("EPISODIC_BENCH_EPISODE_SIZES", "20000") {
        let dir = tempfile::tempdir().expect("tmp");
        let engine = build(&rt, n, &corpus, dir.path(), long_episode_body);
        let queries: Vec<Vec<f32>> = (0..64).map(|_| corpus.vector(&mut rng)).collect();
        let scopes = vec![("tenant", Scope::default())];
        let label = ("tenant-long", "one-episode-", n);
        bench_scopes(&mut group, &engine, &queries, label, scopes);
        rt.block_on(engine.shutdown());
    }
    group.finish();
}

criterion_group!(benches, bench_recall);
criterion_main!(benches);
