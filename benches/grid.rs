//! Filter-selectivity grid: Episodic recall (precomputed 384-d query vectors) over a seeded,
//! tenant-skewed synthetic corpus, at a grid of scope selectivities, with recall@10 against
//! exact cosine over the same filtered set. The corpus and queries are written to files so
//! that the peer harness (`benches/peers/`) loads exactly the same data.
//!
//! Modes (arguments after `--`; cargo's own `--bench` flag is ignored):
//! * no mode: generate (or reuse) the corpus, ingest it, measure every row, print a table;
//! * `gen`: only write the corpus files;
//! * `serve`: ingest, print `ready`, then answer `measure <row> <clients> <rounds>` lines on
//!   stdin with one JSON line each (the peer driver interleaves Episodic with its peers).
//!
//! Environment: `GRID_N` (events, default 100000), `GRID_QUERIES` (per row, default 100),
//! `GRID_DIR` (default `$CARGO_TARGET_DIR/grid` or `target/grid`), `GRID_ENGINE_DIR` (keep
//! and reopen the ingested engine), `GRID_ROWS` (rows of the standalone table),
//! `GRID_EXACT_MAX_CANDIDATES` / `GRID_HNSW_MIN_FRACTION` / `GRID_HNSW_OVERSAMPLE` (override
//! the engine's exact-vs-HNSW path selection).
//!
//! Files in `$GRID_DIR/n<N>/`: `vectors.f32` (N×384 little-endian f32), `attrs.u16`
//! (N×4 u16: tenant, actor, type, project), `queries.f32` (Q×384), `grid.json` (rows with
//! per-query filters, match counts and exact top 10).

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::HashingEmbedder;
use episodic::engine::{Engine, EngineConfig, SubjectRule};
use episodic::rank::Weights;
use episodic::retrieve::{RecallRequest, Scope};

const DIM: usize = 384;
const CLUSTERS: usize = 100;
const ACTORS: usize = 20;
const TYPES: usize = 8;
const PROJECTS: usize = 5;
const K: usize = 10;
/// Actor id that no event has: the filter that matches nothing.
const NO_ACTOR: u16 = 999;

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.gen_range(1e-7..1.0);
    let u2: f32 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Clustered unit vectors: a random centroid plus isotropic noise (cosine ≈ 0.65 to it).
fn clustered(centroids: &[Vec<f32>], rng: &mut StdRng) -> Vec<f32> {
    let c = &centroids[rng.gen_range(0..centroids.len())];
    let mut v: Vec<f32> = c.iter().map(|x| x + 0.06 * gaussian(rng)).collect();
    normalize(&mut v);
    v
}

/// Tenant sizes: tenant 0 holds 10%, tenants 1.. decay geometrically (×0.9) down to 3 events.
fn tenant_sizes(n: usize) -> Vec<usize> {
    let mut sizes = vec![n / 10];
    let mut next = n as f64 * 0.09;
    let mut rest = n - sizes[0];
    while rest > 0 && next >= 3.0 {
        let s = (next as usize).min(rest);
        sizes.push(s);
        rest -= s;
        next *= 0.9;
    }
    if rest > 0 {
        sizes[1] += rest;
    }
    sizes
}

/// One grid query: a scope filter, how many events match it, and the exact top k.
#[derive(Serialize, Deserialize, Clone)]
struct GridQuery {
    tenant: u16,
    actors: Vec<u16>,
    types: Vec<u16>,
    projects: Vec<u16>,
    matches: usize,
    /// Exact top k as `(event index, cosine)`, best first.
    truth: Vec<(u32, f32)>,
}

#[derive(Serialize, Deserialize)]
struct GridRow {
    name: String,
    /// Intended share of all events.
    target: f64,
    /// Mean matching share of all events over the row's queries.
    selectivity: f64,
    /// Mean matching share of the tenant.
    tenant_share: f64,
    queries: Vec<GridQuery>,
}

#[derive(Serialize, Deserialize)]
struct GridMeta {
    n: usize,
    dim: usize,
    k: usize,
    tenants: usize,
    tenant_sizes: Vec<usize>,
    rows: Vec<GridRow>,
}

struct Corpus {
    n: usize,
    vectors: Vec<f32>,
    /// tenant, actor, type, project per event.
    attrs: Vec<[u16; 4]>,
    queries: Vec<f32>,
    meta: GridMeta,
}

impl GridQuery {
    fn accepts(&self, a: &[u16; 4]) -> bool {
        a[0] == self.tenant
            && (self.actors.is_empty() || self.actors.contains(&a[1]))
            && (self.types.is_empty() || self.types.contains(&a[2]))
            && (self.projects.is_empty() || self.projects.contains(&a[3]))
    }
}

fn pick(rng: &mut StdRng, of: usize, count: usize) -> Vec<u16> {
    let mut all: Vec<u16> = (0..of as u16).collect();
    all.shuffle(rng);
    all.truncate(count);
    all.sort_unstable();
    all
}

fn generate(n: usize, q: usize) -> Corpus {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(20_261_202);
    let centroids: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIM).map(|_| gaussian(&mut rng)).collect();
            normalize(&mut c);
            c
        })
        .collect();
    const CHUNK: usize = 8192;
    let vectors: Vec<f32> = (0..n.div_ceil(CHUNK))
        .into_par_iter()
        .flat_map_iter(|c| {
            let mut r = StdRng::seed_from_u64(1_000 + c as u64);
            let len = CHUNK.min(n - c * CHUNK);
            (0..len)
                .flat_map(|_| clustered(&centroids, &mut r))
                .collect::<Vec<_>>()
        })
        .collect();
    let sizes = tenant_sizes(n);
    let mut tenants: Vec<u16> = sizes
        .iter()
        .enumerate()
        .flat_map(|(t, s)| std::iter::repeat_n(t as u16, *s))
        .collect();
    tenants.shuffle(&mut rng);
    let attrs: Vec<[u16; 4]> = tenants
        .iter()
        .map(|t| {
            [
                *t,
                rng.gen_range(0..ACTORS as u16),
                rng.gen_range(0..TYPES as u16),
                rng.gen_range(0..PROJECTS as u16),
            ]
        })
        .collect();
    let queries: Vec<f32> = (0..q)
        .flat_map(|_| clustered(&centroids, &mut rng))
        .collect();
    let smallest = (sizes.len() - 1) as u16;
    // (name, target share, how to draw one filter)
    type Draw = fn(&mut StdRng, u16) -> (u16, Vec<u16>, Vec<u16>, Vec<u16>);
    let rows: [(&str, f64, Draw); 7] = [
        ("tenant_10%", 0.10, |_, _| (0, vec![], vec![], vec![])),
        ("half_tenant_5%", 0.05, |r, _| {
            (0, pick(r, ACTORS, ACTORS / 2), vec![], vec![])
        }),
        ("2actors_1%", 0.01, |r, _| {
            (0, pick(r, ACTORS, 2), vec![], vec![])
        }),
        ("actor+project_0.1%", 0.001, |r, _| {
            (0, pick(r, ACTORS, 1), vec![], pick(r, PROJECTS, 1))
        }),
        ("actor+type+project_0.01%", 0.0001, |r, _| {
            (
                0,
                pick(r, ACTORS, 1),
                pick(r, TYPES, 1),
                pick(r, PROJECTS, 1),
            )
        }),
        ("smallest_tenant", 0.0, |_, s| (s, vec![], vec![], vec![])),
        ("matches_nothing", 0.0, |_, _| {
            (0, vec![NO_ACTOR], vec![], vec![])
        }),
    ];
    let mut meta_rows = Vec::new();
    for (name, target, draw) in rows {
        let mut qs: Vec<GridQuery> = (0..q)
            .map(|_| {
                let (tenant, actors, types, projects) = draw(&mut rng, smallest);
                GridQuery {
                    tenant,
                    actors,
                    types,
                    projects,
                    matches: 0,
                    truth: Vec::new(),
                }
            })
            .collect();
        qs.par_iter_mut().enumerate().for_each(|(qi, gq)| {
            let qv = &queries[qi * DIM..(qi + 1) * DIM];
            let mut scored: Vec<(u32, f32)> = attrs
                .iter()
                .enumerate()
                .filter(|(_, a)| gq.accepts(a))
                .map(|(i, _)| (i as u32, dot(qv, &vectors[i * DIM..(i + 1) * DIM])))
                .collect();
            gq.matches = scored.len();
            scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            scored.truncate(K);
            gq.truth = scored;
        });
        let mean = qs.iter().map(|g| g.matches as f64).sum::<f64>() / q.max(1) as f64;
        let tsize = sizes[qs.first().map_or(0, |g| g.tenant as usize)] as f64;
        meta_rows.push(GridRow {
            name: name.to_string(),
            target,
            selectivity: mean / n as f64,
            tenant_share: mean / tsize,
            queries: qs,
        });
    }
    eprintln!(
        "generated n={n} ({} tenants, largest {}, smallest {}) in {:.1}s",
        sizes.len(),
        sizes[0],
        sizes[sizes.len() - 1],
        started.elapsed().as_secs_f64()
    );
    let meta = GridMeta {
        n,
        dim: DIM,
        k: K,
        tenants: sizes.len(),
        tenant_sizes: sizes,
        rows: meta_rows,
    };
    Corpus {
        n,
        vectors,
        attrs,
        queries,
        meta,
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).expect("read f32 file");
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn save(c: &Corpus, dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    std::fs::write(dir.join("vectors.f32"), f32_bytes(&c.vectors)).expect("write vectors");
    let attrs: Vec<u8> = c
        .attrs
        .iter()
        .flat_map(|a| a.iter().flat_map(|x| x.to_le_bytes()))
        .collect();
    std::fs::write(dir.join("attrs.u16"), attrs).expect("write attrs");
    std::fs::write(dir.join("queries.f32"), f32_bytes(&c.queries)).expect("write queries");
    let meta = serde_json::to_vec(&c.meta).expect("json");
    // Written last: its presence marks a complete corpus.
    std::fs::write(dir.join("grid.json"), meta).expect("write grid.json");
}

fn load(dir: &Path) -> Option<Corpus> {
    let meta: GridMeta =
        serde_json::from_slice(&std::fs::read(dir.join("grid.json")).ok()?).ok()?;
    let vectors = read_f32(&dir.join("vectors.f32"));
    let queries = read_f32(&dir.join("queries.f32"));
    let raw = std::fs::read(dir.join("attrs.u16")).ok()?;
    let attrs: Vec<[u16; 4]> = raw
        .chunks_exact(8)
        .map(|b| {
            [
                u16::from_le_bytes([b[0], b[1]]),
                u16::from_le_bytes([b[2], b[3]]),
                u16::from_le_bytes([b[4], b[5]]),
                u16::from_le_bytes([b[6], b[7]]),
            ]
        })
        .collect();
    (vectors.len() == meta.n * DIM && attrs.len() == meta.n).then_some(Corpus {
        n: meta.n,
        vectors,
        attrs,
        queries,
        meta,
    })
}

fn grid_dir(n: usize) -> PathBuf {
    let base = std::env::var_os("GRID_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| PathBuf::from("target"), PathBuf::from)
                .join("grid")
        });
    base.join(format!("n{n}"))
}

fn corpus(n: usize, q: usize) -> Corpus {
    let dir = grid_dir(n);
    if let Some(c) = load(&dir) {
        if c.meta.rows.first().is_some_and(|r| r.queries.len() == q) {
            eprintln!("reusing corpus in {}", dir.display());
            return c;
        }
    }
    let c = generate(n, q);
    save(&c, &dir);
    eprintln!("corpus written to {}", dir.display());
    c
}

fn type_name(t: u16) -> String {
    format!("type-{t}")
}

fn engine_config(dir: &Path) -> EngineConfig {
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.writer.hnsw_save_every = usize::MAX;
    config.limits.event_types = (0..TYPES as u16).map(type_name).collect();
    // Pure cosine ranking and no stale suppression: the question every peer answers too.
    config.rank.weights = Weights {
        relevance: 1.0,
        recency: 0.0,
        trust: 0.0,
        confidence: 0.0,
    };
    config.stale = SubjectRule::OFF;
    // Path-selection knobs, to compare the default exact/HNSW split with alternatives.
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    if let Some(v) = knob("GRID_EXACT_MAX_CANDIDATES") {
        config.recall.exact_max_candidates = v as usize;
    }
    if let Some(v) = knob("GRID_HNSW_MIN_FRACTION") {
        config.recall.hnsw_min_fraction = v;
    }
    if let Some(v) = knob("GRID_HNSW_OVERSAMPLE") {
        config.recall.hnsw_oversample = v as usize;
    }
    config
}

fn ingest(rt: &tokio::runtime::Runtime, c: &Corpus, dir: &Path) -> Engine {
    let engine =
        Engine::open(engine_config(dir), Arc::new(HashingEmbedder::new())).expect("engine");
    let started = Instant::now();
    rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..c.n {
            let a = c.attrs[i];
            let body = json!({
                "eventType": type_name(a[2]),
                "occurredAt": "2025-06-01T12:00:00Z",
                "actorId": format!("a{}", a[1]),
                "projectId": format!("p{}", a[3]),
                "resourceRefs": [format!("r{i}")],
                "summary": format!("e{i}"),
                "sourceRefs": [format!("bench-{i}")],
                "sourceTrust": "tool_result",
                "confidence": "medium",
                "privacyClass": "internal",
                "retention": {"deleteOnRequest": true}
            });
            let vector = c.vectors[i * DIM..(i + 1) * DIM].to_vec();
            let engine = engine.clone();
            let tenant = format!("t{}", a[0]);
            set.spawn(async move {
                let grant = TenantGrant::internal(&tenant, "bench");
                let out = engine.write_embedded(&grant, &body, vector, false).await;
                out.map(|o| o.decision)
            });
            if set.len() >= 1024 {
                while let Some(r) = set.join_next().await {
                    let d = r.expect("join").expect("write");
                    assert!(
                        matches!(d, episodic::model::Decision::Allow { .. }),
                        "{d:?}"
                    );
                }
            }
            if i > 0 && i % 100_000 == 0 {
                eprintln!("  {i} events, {:.0}s", started.elapsed().as_secs_f64());
            }
        }
        while let Some(r) = set.join_next().await {
            r.expect("join").expect("write");
        }
        engine.refresh().await.expect("refresh");
    });
    eprintln!(
        "ingested {} events in {:.1}s",
        c.n,
        started.elapsed().as_secs_f64()
    );
    engine
}

/// With `GRID_ENGINE_DIR`, the ingested engine is kept there and reopened by later runs
/// (the log is replayed, HNSW rebuilt or loaded); otherwise a temporary directory is used.
fn open_or_ingest(rt: &tokio::runtime::Runtime, c: &Corpus, tmp: &Path) -> Engine {
    let Some(base) = std::env::var_os("GRID_ENGINE_DIR").map(PathBuf::from) else {
        return ingest(rt, c, tmp);
    };
    let dir = base.join(format!("n{}", c.n));
    let marker = dir.join("grid-ingested");
    if marker.exists() {
        let started = Instant::now();
        let engine =
            Engine::open(engine_config(&dir), Arc::new(HashingEmbedder::new())).expect("reopen");
        eprintln!(
            "reopened {} in {:.1}s",
            dir.display(),
            started.elapsed().as_secs_f64()
        );
        return engine;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("engine dir");
    let engine = ingest(rt, c, &dir);
    std::fs::write(&marker, "ok").expect("marker");
    engine
}

fn request(gq: &GridQuery) -> (TenantGrant, RecallRequest) {
    let scope = Scope {
        actor_ids: gq.actors.iter().map(|a| format!("a{a}")).collect(),
        event_types: gq.types.iter().map(|t| type_name(*t)).collect(),
        project_ids: gq.projects.iter().map(|p| format!("p{p}")).collect(),
        ..Scope::default()
    };
    let req = RecallRequest {
        query: "grid".into(),
        scope,
        limit: K,
        include_superseded: false,
        include_stale: false,
        as_of: None,
    };
    (
        TenantGrant::internal(&format!("t{}", gq.tenant), "bench"),
        req,
    )
}

/// Event index from the summary `e<i>`.
fn event_index(summary: &str) -> u32 {
    summary[1..].parse().expect("summary index")
}

#[derive(Serialize)]
struct Measured {
    system: &'static str,
    row: String,
    clients: usize,
    /// Per-call latencies in microseconds.
    lat_us: Vec<f64>,
    wall_s: f64,
    /// Process CPU time (user + system) over the measurement, in seconds.
    cpu_s: f64,
    calls: usize,
    /// Result event indexes per query (client 0, first round only).
    ids: Vec<Vec<u32>>,
    /// Vector path per query (first round).
    paths: Vec<String>,
}

fn measure(engine: &Engine, c: &Corpus, row: &GridRow, clients: usize, rounds: usize) -> Measured {
    let reqs: Vec<(TenantGrant, RecallRequest)> = row.queries.iter().map(request).collect();
    let q = reqs.len();
    let run = |client: usize| {
        let mut lat = Vec::with_capacity(q * rounds);
        let mut ids = Vec::new();
        let mut paths = Vec::new();
        for round in 0..rounds {
            for j in 0..q {
                let qi = (j + client * q / clients.max(1)) % q;
                let (grant, req) = &reqs[qi];
                let qv = &c.queries[qi * DIM..(qi + 1) * DIM];
                let t = Instant::now();
                let resp = engine.recall_with_vector(grant, req, qv).expect("recall");
                lat.push(t.elapsed().as_secs_f64() * 1e6);
                if client == 0 && round == 0 {
                    ids.push(
                        resp.results
                            .iter()
                            .map(|h| event_index(&h.event.summary))
                            .collect(),
                    );
                    paths.push(format!("{:?}", resp.stats.path));
                }
            }
        }
        (lat, ids, paths)
    };
    let cpu0 = process_cpu_s();
    let started = Instant::now();
    // One client runs on this thread, whose CPU time stays countable after the run.
    let outs: Vec<_> = if clients <= 1 {
        vec![run(0)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..clients).map(|cl| s.spawn(move || run(cl))).collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("client"))
                .collect()
        })
    };
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = process_cpu_s() - cpu0;
    let mut lat_us = Vec::new();
    let mut ids = Vec::new();
    let mut paths = Vec::new();
    for (i, (l, d, p)) in outs.into_iter().enumerate() {
        lat_us.extend(l);
        if i == 0 {
            ids = d;
            paths = p;
        }
    }
    Measured {
        system: "episodic",
        row: row.name.clone(),
        clients,
        calls: lat_us.len(),
        lat_us,
        wall_s,
        cpu_s,
        ids,
        paths,
    }
}

/// CPU seconds consumed so far by this process's live threads (first field of each
/// `/proc/self/task/*/schedstat`, in ns; NaN where unavailable). On a shared machine this is
/// steadier than wall time. Threads that exited are not counted: measure the 1-client run.
fn process_cpu_s() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    let ns: u64 = tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e9
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// recall@k (a hit counts when its true cosine reaches the k-th exact cosine, so ties are
/// not penalised; both clamped at 0 as Episodic's relevance is, so the order among
/// non-positive cosines is free) and how many queries got fewer than min(k, matches) results.
fn quality(c: &Corpus, row: &GridRow, ids: &[Vec<u32>]) -> (f64, usize) {
    let mut found = 0usize;
    let mut wanted = 0usize;
    let mut short = 0usize;
    for (qi, (gq, got)) in row.queries.iter().zip(ids).enumerate() {
        let want = gq.truth.len();
        if got.len() < want {
            short += 1;
        }
        let Some(kth) = gq.truth.last().map(|t| t.1) else {
            continue;
        };
        let qv = &c.queries[qi * DIM..(qi + 1) * DIM];
        let unique: HashSet<u32> = got.iter().copied().collect();
        found += unique
            .iter()
            .filter(|i| gq.accepts(&c.attrs[**i as usize]))
            .filter(|i| {
                let i = **i as usize;
                dot(qv, &c.vectors[i * DIM..(i + 1) * DIM]).max(0.0) >= kth.max(0.0) - 1e-5
            })
            .count()
            .min(want);
        wanted += want;
    }
    let recall = if wanted == 0 {
        1.0
    } else {
        found as f64 / wanted as f64
    };
    (recall, short)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mode = args.first().map_or("all", String::as_str);
    let n: usize = std::env::var("GRID_N")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let q: usize = std::env::var("GRID_QUERIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let c = corpus(n, q);
    if mode == "gen" {
        println!("{}", grid_dir(n).display());
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let tmp = tempfile::tempdir().expect("tmp");
    let engine = open_or_ingest(&rt, &c, tmp.path());
    match mode {
        "serve" => serve(&engine, &c),
        "profile" => {
            // `profile <row> <seconds>`: loop one row single-client (attach perf to the pid).
            let row = args.get(1).map_or("tenant_10%", String::as_str);
            let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20.0);
            let row = c.meta.rows.iter().find(|r| r.name == row).expect("row");
            eprintln!(
                "profiling row {} for {secs}s, pid {}",
                row.name,
                std::process::id()
            );
            let started = Instant::now();
            let mut calls = 0;
            while started.elapsed().as_secs_f64() < secs {
                calls += measure(&engine, &c, row, 1, 1).calls;
            }
            eprintln!("{calls} calls, {:.0}/s", calls as f64 / secs);
        }
        _ => {
            println!(
                "{:<26} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6}  path",
                "row", "select", "p50 ms", "p99 ms", "cpu ms/q", "QPS1", "QPS2", "recall", "short"
            );
            let only = std::env::var("GRID_ROWS").unwrap_or_default();
            for row in &c.meta.rows {
                if !only.is_empty() && !only.split(',').any(|r| r == row.name) {
                    continue;
                }
                let m1 = measure(&engine, &c, row, 1, 3);
                let m2 = measure(&engine, &c, row, 2, 2);
                let (recall, short) = quality(&c, row, &m1.ids);
                println!(
                    "{:<26} {:>8.4}% {:>9.3} {:>9.3} {:>9.3} {:>9.0} {:>8.0} {:>9.4} {:>6}  {}",
                    row.name,
                    row.selectivity * 100.0,
                    percentile(&m1.lat_us, 0.5) / 1e3,
                    percentile(&m1.lat_us, 0.99) / 1e3,
                    m1.cpu_s * 1e3 / m1.calls as f64,
                    m1.calls as f64 / m1.wall_s,
                    m2.calls as f64 / m2.wall_s,
                    recall,
                    short,
                    m1.paths.first().map_or("", String::as_str)
                );
            }
        }
    }
    rt.block_on(engine.shutdown());
}

/// Line protocol for the peer driver: `measure <row> <clients> <rounds>` → one JSON line.
fn serve(engine: &Engine, c: &Corpus) {
    let stdout = std::io::stdout();
    writeln!(stdout.lock(), "ready").expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let parts: Vec<&str> = line.split_whitespace().collect();
        let reply = match parts.as_slice() {
            ["measure", row, clients, rounds] => {
                match c.meta.rows.iter().find(|r| r.name == *row) {
                    Some(r) => {
                        let clients = clients.parse().unwrap_or(1);
                        let rounds = rounds.parse().unwrap_or(1);
                        serde_json::to_string(&measure(engine, c, r, clients, rounds))
                            .expect("json")
                    }
                    None => json!({"error": format!("no row {row}")}).to_string(),
                }
            }
            ["quit"] => break,
            _ => json!({"error": format!("bad command {line}")}).to_string(),
        };
        let mut out = stdout.lock();
        writeln!(out, "{reply}").expect("stdout");
        out.flush().expect("flush");
    }
}
