//! Criterion benches of each hot path of recall and write, one component at a time, on a
//! seeded synthetic corpus (384-d clustered unit vectors; tenants skewed as in `grid.rs`:
//! the largest holds 10%; 20 actors, 8 types, 5 projects per tenant):
//!
//! * `scope`: tantivy scope query (`ScopeIndex::search`) at three filters;
//! * `exact`: exact cosine of every candidate with rayon plus top 10 (`exact_scores`, `top_k`);
//! * `hnsw`: hnsw_rs search restricted to the candidates by an `IdSet`, and unfiltered;
//! * `rank`: ranking of scored candidates (relevance, recency, trust, confidence) plus top 10;
//! * `code_bounds`: the 8-bit code intervals of a partition list's rows (`block_bounds`), for
//!   a block that fits the CPU's caches (2,000 rows) and one that does not (200,000);
//! * `append`: durable log append with group commit (one `fdatasync` per batch, real disk).
//!
//! Recall end to end in process is `benches/recall.rs`; the selectivity grid with recall@10
//! is `benches/grid.rs`.
//!
//! Run: `cargo bench --bench hotpath`. Sizes via `HOTPATH_SIZES` (default `10000,100000`;
//! add `1000000` for the 1M corpus, which needs about 4 GB of memory and several minutes to
//! build the HNSW graph). Criterion filters work as usual, e.g. `cargo bench --bench hotpath
//! -- scope/`. Temporary files go under `$CARGO_TARGET_DIR/tmp` (or `target/tmp`), which is
//! on the same disk as the build, so `append` measures a real `fdatasync`.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use episodic::index::scope::{ScopeDoc, ScopeFilter, ScopeIndex};
use episodic::index::vector::{
    block_bounds, exact_scores, top_k, CodeBlock, HnswIndex, HnswParams, IdSet, QueryCode,
    VectorStore,
};
use episodic::model::{Confidence, SourceTrust};
use episodic::rank::{Prior, RankConfig, Signals};
use episodic::store::log::Log;

use common::status_kib;

const DIM: usize = 384;
const CLUSTERS: usize = 100;
const ACTORS: u16 = 20;
const TYPES: u16 = 8;
const PROJECTS: u16 = 5;
const K: usize = 10;
const QUERIES: usize = 64;

fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    v.iter_mut().for_each(|x| *x /= n);
}

fn gaussian(rng: &mut StdRng) -> f32 {
    let u1: f32 = rng.gen_range(1e-7..1.0);
    let u2: f32 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
}

/// `CLUSTERS` random unit centroids.
fn centroids(rng: &mut StdRng) -> Vec<Vec<f32>> {
    (0..CLUSTERS)
        .map(|_| {
            let mut c: Vec<f32> = (0..DIM).map(|_| gaussian(rng)).collect();
            normalize(&mut c);
            c
        })
        .collect()
}

fn clustered(centroids: &[Vec<f32>], rng: &mut StdRng) -> Vec<f32> {
    let c = &centroids[rng.gen_range(0..centroids.len())];
    let mut v: Vec<f32> = c.iter().map(|x| x + 0.06 * gaussian(rng)).collect();
    normalize(&mut v);
    v
}

/// Tenant 0 holds 10%, the others decay geometrically (×0.9) down to 3 events.
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

struct Corpus {
    n: usize,
    vectors: Vec<f32>,
    /// tenant, actor, type, project per event.
    attrs: Vec<[u16; 4]>,
    queries: Vec<Vec<f32>>,
}

impl Corpus {
    fn new(n: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(20_261_202);
        let centroids = centroids(&mut rng);
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
        let mut tenants: Vec<u16> = tenant_sizes(n)
            .iter()
            .enumerate()
            .flat_map(|(t, s)| std::iter::repeat_n(t as u16, *s))
            .collect();
        tenants.shuffle(&mut rng);
        let attrs = tenants
            .iter()
            .map(|t| {
                [
                    *t,
                    rng.gen_range(0..ACTORS),
                    rng.gen_range(0..TYPES),
                    rng.gen_range(0..PROJECTS),
                ]
            })
            .collect();
        let queries = (0..QUERIES)
            .map(|_| clustered(&centroids, &mut rng))
            .collect();
        Corpus {
            n,
            vectors,
            attrs,
            queries,
        }
    }

    fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * DIM..(i + 1) * DIM]
    }
}

/// The filters measured: (name, filter). Shares are of the whole corpus.
fn filters() -> Vec<(&'static str, ScopeFilter)> {
    let tenant = |actors: &[&str], types: &[&str], projects: &[&str]| ScopeFilter {
        tenant: "t0".into(),
        actor_ids: actors.iter().map(|s| s.to_string()).collect(),
        event_types: types.iter().map(|s| s.to_string()).collect(),
        project_ids: projects.iter().map(|s| s.to_string()).collect(),
        ..ScopeFilter::default()
    };
    vec![
        ("tenant_10%", tenant(&[], &[], &[])),
        ("tenant+actor_0.5%", tenant(&["a3"], &[], &[])),
        (
            "actor+type+project_0.01%",
            tenant(&["a3"], &["type-2"], &["p1"]),
        ),
    ]
}

fn tmp_base() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| PathBuf::from("target"), PathBuf::from)
        .join("tmp")
}

fn build_scope(c: &Corpus, dir: &Path) -> ScopeIndex {
    let started = Instant::now();
    let (scope, _) = ScopeIndex::open(dir).expect("scope index");
    let no_metadata = episodic::model::Metadata::default();
    for (i, a) in c.attrs.iter().enumerate() {
        let tenant = format!("t{}", a[0]);
        let actor = format!("a{}", a[1]);
        let project = format!("p{}", a[3]);
        let event_type = format!("type-{}", a[2]);
        let resources = [format!("r{}", i % 500)];
        let text = format!("synthetic event {i} about r{}", i % 500);
        scope
            .add(&ScopeDoc {
                doc: i as u32,
                tenant: &tenant,
                actor: &actor,
                project: Some(&project),
                event_type: &event_type,
                resource_refs: &resources,
                occurred_at_ms: 1_700_000_000_000 + i as i64 * 1000,
                text: &text,
                metadata: &no_metadata,
            })
            .expect("add");
    }
    scope.commit(c.n as u64).expect("commit");
    eprintln!(
        "n={}: scope index built in {:.1}s",
        c.n,
        started.elapsed().as_secs_f64()
    );
    scope
}

/// This process's `VmRSS` in KiB (0 where unavailable).
fn rss_kib() -> u64 {
    status_kib("self", "VmRSS")
}

/// Resident bytes per event added while `build` ran (allocator slack included).
fn per_event<T>(n: usize, what: &str, build: impl FnOnce() -> T) -> T {
    let before = rss_kib();
    let out = build();
    let after = rss_kib();
    eprintln!(
        "n={n}: {what} resident {:.0} B/event",
        (after as f64 - before as f64) * 1024.0 / n as f64
    );
    out
}

fn build_store(c: &Corpus) -> VectorStore {
    let store = VectorStore::new(DIM);
    for i in 0..c.n {
        store.push(i as u32, c.vector(i)).expect("push");
    }
    store
}

fn build_hnsw(c: &Corpus) -> HnswIndex {
    let started = Instant::now();
    let hnsw = HnswIndex::new(HnswParams {
        m: 16,
        ef_construction: 100,
        ef_search: 64,
        max_elements: c.n,
    });
    let items: Vec<(u32, &[f32])> = (0..c.n).map(|i| (i as u32, c.vector(i))).collect();
    hnsw.insert_batch(&items).expect("insert");
    eprintln!(
        "n={}: hnsw built in {:.1}s ({:.0} inserts/s)",
        c.n,
        started.elapsed().as_secs_f64(),
        c.n as f64 / started.elapsed().as_secs_f64()
    );
    hnsw
}

/// Mean recall@10 of filtered HNSW (depth `k`, `ef`) against exact scoring of `ids`.
fn hnsw_recall(c: &Corpus, store: &VectorStore, hnsw: &HnswIndex, ids: &[u32], ef: usize) -> f64 {
    let allow = IdSet::from_sorted(ids, c.n);
    let mut found = 0usize;
    let mut wanted = 0usize;
    for q in &c.queries {
        let truth = top_k(ids, &exact_scores(store, q, ids), K);
        let got: Vec<u32> = hnsw
            .search_filtered(q, K, ef, &allow)
            .iter()
            .map(|h| h.0)
            .collect();
        found += truth.iter().filter(|t| got.contains(&t.0)).count();
        wanted += truth.len();
    }
    if wanted == 0 {
        1.0
    } else {
        found as f64 / wanted as f64
    }
}

fn sizes() -> Vec<usize> {
    std::env::var("HOTPATH_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

fn bench_read_paths(cr: &mut Criterion) {
    for n in sizes() {
        let c = Corpus::new(n);
        std::fs::create_dir_all(tmp_base()).expect("tmp base");
        let dir = tempfile::tempdir_in(tmp_base()).expect("tmp");
        let scope = per_event(n, "scope index", || build_scope(&c, dir.path()));
        let store = per_event(n, "vector store", || build_store(&c));
        let hnsw = per_event(n, "hnsw graph", || build_hnsw(&c));
        let filters = filters();
        let candidates: Vec<Vec<u32>> = filters
            .iter()
            .map(|(_, f)| scope.view().search(f).expect("search"))
            .collect();

        let mut g = cr.benchmark_group("scope");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        for ((name, f), ids) in filters.iter().zip(&candidates) {
            eprintln!("n={n} {name}: {} candidates", ids.len());
            g.bench_with_input(BenchmarkId::new(*name, n), f, |b, f| {
                b.iter(|| scope.view().search(f).expect("search"))
            });
        }
        g.finish();

        let mut g = cr.benchmark_group("exact");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        for ((name, _), ids) in filters.iter().zip(&candidates) {
            let mut qi = 0;
            g.throughput(Throughput::Elements(ids.len() as u64));
            g.bench_with_input(BenchmarkId::new(*name, n), ids, |b, ids| {
                b.iter(|| {
                    qi = (qi + 1) % QUERIES;
                    let scores = exact_scores(&store, &c.queries[qi], ids);
                    top_k(ids, &scores, K)
                })
            });
        }
        let all: Vec<u32> = (0..n as u32).collect();
        g.throughput(Throughput::Elements(n as u64));
        let mut qi = 0;
        g.bench_with_input(BenchmarkId::new("unfiltered_100%", n), &all, |b, ids| {
            b.iter(|| {
                qi = (qi + 1) % QUERIES;
                let scores = exact_scores(&store, &c.queries[qi], ids);
                top_k(ids, &scores, K)
            })
        });
        g.finish();

        let mut g = cr.benchmark_group("hnsw");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        for ((name, _), ids) in filters.iter().zip(&candidates) {
            let allow = IdSet::from_sorted(ids, n);
            eprintln!(
                "n={n} hnsw {name}: recall@10 {:.3} at ef 64",
                hnsw_recall(&c, &store, &hnsw, ids, 64)
            );
            let mut qi = 0;
            g.bench_with_input(BenchmarkId::new(*name, n), &allow, |b, allow| {
                b.iter(|| {
                    qi = (qi + 1) % QUERIES;
                    hnsw.search_filtered(&c.queries[qi], K, 64, allow)
                })
            });
        }
        let mut qi = 0;
        g.bench_function(BenchmarkId::new("unfiltered_100%", n), |b| {
            b.iter(|| {
                qi = (qi + 1) % QUERIES;
                hnsw.search(&c.queries[qi], K, 64)
            })
        });
        g.finish();
    }
}

/// Ranking of already-scored candidates: the weighted sum of clamped cosine, recency,
/// trust and confidence per candidate, then the top 10 (what recall does after scoring).
fn bench_rank(cr: &mut Criterion) {
    let rank = RankConfig::default();
    let mut rng = StdRng::seed_from_u64(5);
    let now_ms = 1_780_000_000_000i64;
    let mut g = cr.benchmark_group("rank");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    for m in [1_000usize, 10_000, 100_000] {
        let ids: Vec<u32> = (0..m as u32).collect();
        let cosines: Vec<f32> = (0..m).map(|_| rng.gen_range(-0.2..1.0)).collect();
        let priors: Vec<Prior> = (0..m)
            .map(|_| Prior {
                occurred_ms: now_ms - rng.gen_range(0..400 * 86_400_000i64),
                trust: SourceTrust::ALL[rng.gen_range(0..SourceTrust::ALL.len())],
                confidence: Confidence::ALL[rng.gen_range(0..Confidence::ALL.len())],
                asks: rng.gen_bool(0.25),
            })
            .collect();
        g.throughput(Throughput::Elements(m as u64));
        g.bench_function(BenchmarkId::new("score+top10", m), |b| {
            b.iter(|| {
                let totals: Vec<f32> = priors
                    .par_iter()
                    .zip(cosines.par_iter())
                    .map(|(p, cos)| rank.score(&Signals::cosine(*cos), p, now_ms))
                    .collect();
                top_k(&ids, &totals, K)
            })
        });
    }
    g.finish();
}

/// The code intervals of every row of a block of `rows` clustered unit vectors' codes, in
/// memory order, as a partition probe reads its lists.
fn bench_code_bounds(cr: &mut Criterion) {
    let mut rng = StdRng::seed_from_u64(13);
    let centroids = centroids(&mut rng);
    let mut g = cr.benchmark_group("code_bounds");
    g.sample_size(30).measurement_time(Duration::from_secs(3));
    for rows in [2_000usize, 200_000] {
        let vectors: Vec<f32> = (0..rows)
            .flat_map(|_| clustered(&centroids, &mut rng))
            .collect();
        let block = CodeBlock::encode(&vectors, DIM);
        let query = QueryCode::new(&clustered(&centroids, &mut rng)).expect("finite");
        let all: Vec<u32> = (0..rows as u32).collect();
        g.throughput(Throughput::Elements(rows as u64));
        g.bench_function(BenchmarkId::new("block_bounds", rows), |b| {
            b.iter(|| block_bounds(&query, &block, &all))
        });
    }
    g.finish();
}

/// Log appends of `batch` records of about an event's size (JSON plus a 384-d vector) with
/// one `fdatasync` per batch, as the writer's group commit does. The log is started afresh
/// (outside the timing) whenever it passes 64 MiB.
fn bench_append(cr: &mut Criterion) {
    const RECORD_BYTES: usize = 2_300;
    std::fs::create_dir_all(tmp_base()).expect("tmp base");
    let dir = tempfile::tempdir_in(tmp_base()).expect("tmp");
    let mut rng = StdRng::seed_from_u64(9);
    let payload: Vec<u8> = (0..RECORD_BYTES).map(|_| rng.gen()).collect();
    let mut g = cr.benchmark_group("append");
    g.sample_size(20).measurement_time(Duration::from_secs(4));
    for batch in [1usize, 16, 256] {
        let payloads: Vec<&[u8]> = vec![payload.as_slice(); batch];
        g.throughput(Throughput::Elements(batch as u64));
        g.bench_function(BenchmarkId::new("fdatasync_per_batch", batch), |b| {
            b.iter_custom(|iters| {
                let path = dir.path().join(format!("events-{batch}.log"));
                let _ = std::fs::remove_file(&path);
                let (mut log, _) = Log::open(&path).expect("log");
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    if log.len_bytes() > 64 << 20 {
                        drop(log);
                        std::fs::remove_file(&path).expect("rm");
                        log = Log::open(&path).expect("log").0;
                    }
                    let t = Instant::now();
                    log.append_batch(&payloads).expect("append");
                    total += t.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_read_paths,
    bench_rank,
    bench_code_bounds,
    bench_append
);
criterion_main!(benches);
