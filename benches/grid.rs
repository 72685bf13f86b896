//! Filter-selectivity grid: Episodic recall (precomputed 384-d query vectors) over a seeded,
//! tenant-skewed synthetic corpus, at a grid of scope selectivities, with recall@10 against
//! exact cosine over the same filtered set. The corpus and queries are written to files so
//! that the peer harness (`benches/peers/`) loads exactly the same data.
//!
//! Modes (arguments after `--`; cargo's own `--bench` flag is ignored):
//! * no mode: generate (or reuse) the corpus, ingest it (events/s, resident memory added),
//!   shut the engine down and reopen it in a child process (restart to ready, resident memory
//!   and on-disk bytes per event), measure every row on the reopened engine, print a table and
//!   write `figures.json` next to the corpus;
//! * `gen`: only write the corpus files;
//! * `serve`: ingest, print `ready`, then answer `measure <row> <clients> <rounds>` lines on
//!   stdin with one JSON line each (the peer driver interleaves Episodic with its peers);
//! * `profile <row> <secs>`: loop one row single-client (attach `perf -p`);
//! * `reopen <dir>`: open an ingested engine and print time to ready and memory (used by the
//!   default mode, in a child process so that the resident memory is the engine's alone);
//! * `ingest-model`: ingest with the real model: the embedder alone on a sample, then the
//!   same sample end to end through `import` (`GRID_MODEL_SAMPLE`, default 2000);
//! * `graph-sweep [ef ...]`: build one hnsw_rs graph over tenant 0's vectors as the engine
//!   builds a tenant graph (parameters, parallel inserts) and print, per search width `ef`,
//!   recall@10 against exact over the tenant and the search's p50/p99 on one thread, plain
//!   and through a filter closure that reads a per-id array (the engine's head check);
//!   `GRID_GRAPH_M` and `GRID_GRAPH_EF_CONSTRUCTION` change the graph's shape;
//! * `embed-real <dir>`: embed `<dir>/texts.txt` and `<dir>/queries.txt` (one text per line,
//!   written by `benches/real/texts.py`) with the real model into `<dir>/vectors.f32` and
//!   `<dir>/queries.f32`, the real-model corpus `GRID_REAL=<dir>` reads.
//!
//! Environment: `RUST_LOG` (the engine's log on stderr), `GRID_N` (events, default 100000), `GRID_QUERIES` (per row, default 100),
//! `GRID_DIR` (default `$CARGO_TARGET_DIR/grid` or `target/grid`), `GRID_ENGINE_DIR` (keep
//! and reopen the ingested engine), `GRID_ROWS` (rows of the standalone table),
//! `GRID_RESTART=0` (skip the restart measurement), `GRID_LARGEST` (share of the largest
//! tenant, default 0.10; `1` gives a single-tenant corpus whose half-tenant row is 50% of all
//! events), `GRID_TENANTS` (the number of tenants: the others share what the largest leaves
//! by Zipf's law; default: a geometric decay, about 100 tenants at 1M), `GRID_EXACT=1` (every recall exact, the engine's `--exact-recall`; default: the
//! planner, which builds partitions and chooses per query; runs wait for the partitions),
//! `GRID_PARTITION_MIN_VECTORS`, `GRID_APPROXIMATE=1` (also allow the opt-in global HNSW path),
//! `GRID_EXACT_MAX_CANDIDATES` / `GRID_HNSW_MIN_FRACTION` / `GRID_HNSW_OVERSAMPLE` (its path
//! selection), `GRID_CODE_MIN` (candidates from which scores are first bounded from the
//! 8-bit vector codes; a huge value turns the bounding off), `GRID_PROBE_SHARE` (a fixed share
//! of partition lists probed, in place of the measured one), `GRID_PROBE_MAX_MEMBERS` (the tenant members after which a
//! probe takes no further lists), `GRID_GRAPHS=0` (no per-tenant graphs),
//! `GRID_GRAPH_MIN_VECTORS`, `GRID_GRAPH_EF` (a fixed width in place of the
//! measured ones) and `GRID_GRAPH_MIN_SHARE` (their knobs).
//!
//! Files in `$GRID_DIR/n<N>/` (`n<N>-largest<pct>/` with `GRID_LARGEST`, `-t<T>` with `GRID_TENANTS`): `vectors.f32`
//! (N×384 little-endian f32), `attrs.u16` (N×4 u16: tenant, actor, type, project),
//! `queries.f32` (Q×384), `grid.json` (rows with per-query filters, match counts and exact
//! top 10), `figures.json` (the last standalone run's measurements).

mod common;

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
use episodic::model::validate::validate_event;
use episodic::model::Timestamp;
use episodic::rank::Weights;
use episodic::retrieve::{RecallRequest, Scope};

use common::{dir_bytes, status_kib};

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

/// Share of all events held by tenant 0: `GRID_LARGEST` (default 0.10). `1` makes a
/// single-tenant corpus, where the half-tenant row is 50% of all events.
fn largest_share() -> f64 {
    std::env::var("GRID_LARGEST")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|v| *v > 0.0 && *v <= 1.0)
        .unwrap_or(0.10)
}

/// `GRID_TENANTS`: the number of tenants (at least 2), or `None` for the default decay.
fn tenant_count() -> Option<usize> {
    std::env::var("GRID_TENANTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|t| *t >= 2)
}

/// Tenant sizes: tenant 0 holds `largest_share()` (10%); with `GRID_TENANTS=T`, tenants
/// 1..T share the rest by Zipf's law (tenant i's size proportional to 1/(i+1), at least
/// one event each); otherwise tenants 1.. decay geometrically (×0.9, starting at 90% of
/// the remaining share's tenth) down to 3 events.
fn tenant_sizes(n: usize) -> Vec<usize> {
    let share = largest_share();
    let mut sizes = vec![((n as f64 * share + 1e-6).floor() as usize).min(n)];
    if let Some(t) = tenant_count().filter(|_| sizes[0] < n) {
        let rest = n - sizes[0];
        let harmonic: f64 = (2..=t).map(|i| 1.0 / i as f64).sum();
        sizes.extend((2..=t).map(|i| ((rest as f64 / i as f64 / harmonic) as usize).max(1)));
        let given: usize = sizes[1..].iter().sum();
        if given <= rest {
            sizes[1] += rest - given;
        } else {
            // Only when n is too small for one event per tenant: trim from the largest.
            let mut over = given - rest;
            for s in sizes[1..].iter_mut() {
                let cut = over.min(*s - 1);
                *s -= cut;
                over -= cut;
            }
        }
        return sizes;
    }
    let mut next = n as f64 * (1.0 - share) * 0.1;
    let mut rest = n - sizes[0];
    while rest > 0 && next >= 3.0 {
        let s = (next as usize).min(rest);
        sizes.push(s);
        rest -= s;
        next *= 0.9;
    }
    if rest > 0 && sizes.len() > 1 {
        sizes[1] += rest;
    } else if rest > 0 {
        sizes[0] += rest;
    }
    sizes
}

/// A share as a row-name percentage: `0.1` → `10%`, `0.0125` → `0.0125%`.
fn pct(share: f64) -> String {
    let p = share * 100.0;
    let text = format!("{p:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}%")
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
    let real = real_source().map(|dir| {
        (
            real_rows(&dir.join("vectors.f32"), n, 11),
            real_rows(&dir.join("queries.f32"), q, 12),
        )
    });
    let vectors: Vec<f32> = match &real {
        Some((v, _)) => v.clone(),
        None => (0..n.div_ceil(CHUNK))
            .into_par_iter()
            .flat_map_iter(|c| {
                let mut r = StdRng::seed_from_u64(1_000 + c as u64);
                let len = CHUNK.min(n - c * CHUNK);
                (0..len)
                    .flat_map(|_| clustered(&centroids, &mut r))
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
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
    let queries: Vec<f32> = match real {
        Some((_, qs)) => qs,
        None => (0..q)
            .flat_map(|_| clustered(&centroids, &mut rng))
            .collect(),
    };
    let smallest = (sizes.len() - 1) as u16;
    // (name, target share, how to draw one filter)
    type Draw = fn(&mut StdRng, u16) -> (u16, Vec<u16>, Vec<u16>, Vec<u16>);
    // Shares scale with the largest tenant (names are those of the default 10%).
    let l = largest_share();
    let rows: [(String, f64, Draw); 7] = [
        (format!("tenant_{}", pct(l)), l, |_, _| {
            (0, vec![], vec![], vec![])
        }),
        (format!("half_tenant_{}", pct(l / 2.0)), l / 2.0, |r, _| {
            (0, pick(r, ACTORS, ACTORS / 2), vec![], vec![])
        }),
        (format!("2actors_{}", pct(l / 10.0)), l / 10.0, |r, _| {
            (0, pick(r, ACTORS, 2), vec![], vec![])
        }),
        (
            format!("actor+project_{}", pct(l / 100.0)),
            l / 100.0,
            |r, _| (0, pick(r, ACTORS, 1), vec![], pick(r, PROJECTS, 1)),
        ),
        (
            format!("actor+type+project_{}", pct(l / 1000.0)),
            l / 1000.0,
            |r, _| {
                (
                    0,
                    pick(r, ACTORS, 1),
                    pick(r, TYPES, 1),
                    pick(r, PROJECTS, 1),
                )
            },
        ),
        ("smallest_tenant".into(), 0.0, |_, s| {
            (s, vec![], vec![], vec![])
        }),
        ("matches_nothing".into(), 0.0, |_, _| {
            (0, vec![NO_ACTOR], vec![], vec![])
        }),
    ];
    let mut meta_rows = Vec::new();
    for (name, target, draw) in rows {
        if name == "smallest_tenant" && smallest == 0 {
            continue; // single-tenant corpus: no small tenant
        }
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
            name,
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

/// `GRID_REAL`: the directory of a real-model corpus (see `embed-real`).
fn real_source() -> Option<PathBuf> {
    std::env::var_os("GRID_REAL").map(PathBuf::from)
}

/// `count` rows of the `DIM`-wide f32 file `path`, drawn without repeats in an order seeded
/// by `seed` (texts are stored by source; a draw mixes them).
fn real_rows(path: &Path, count: usize, seed: u64) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run `cargo bench --bench grid -- embed-real <dir>`)",
            path.display()
        )
    });
    let rows = bytes.len() / (DIM * 4);
    assert!(
        count <= rows,
        "{} holds {rows} vectors, fewer than the {count} asked for",
        path.display()
    );
    let mut order: Vec<usize> = (0..rows).collect();
    order.shuffle(&mut StdRng::seed_from_u64(seed));
    order[..count]
        .iter()
        .flat_map(|&r| {
            bytes[r * DIM * 4..(r + 1) * DIM * 4]
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        })
        .collect()
}

fn grid_dir(n: usize) -> PathBuf {
    let l = largest_share();
    let mut name = if (l - 0.10).abs() < 1e-9 {
        format!("n{n}")
    } else {
        format!("n{n}-largest{}", pct(l).trim_end_matches('%'))
    };
    if let Some(t) = tenant_count() {
        name.push_str(&format!("-t{t}"));
    }
    if real_source().is_some() {
        name.push_str("-real");
    }
    let base = std::env::var_os("GRID_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map_or_else(|| PathBuf::from("target"), PathBuf::from)
                .join("grid")
        });
    base.join(name)
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
    config.rank.lexical_share = 0.0;
    config.rank.short_lexical_share = 0.0;
    config.rank.context_weight = 0.0;
    config.rank.episode_weight = 0.0;
    config.rank.actor_boost = 0.0;
    config.stale = SubjectRule::OFF;
    // Path-selection knobs, to compare the default exact path with opt-in approximate HNSW.
    let knob = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    config.recall.approximate = knob("GRID_APPROXIMATE").is_some_and(|v| v != 0.0);
    if let Some(v) = knob("GRID_EXACT_MAX_CANDIDATES") {
        config.recall.exact_max_candidates = v as usize;
    }
    if let Some(v) = knob("GRID_HNSW_MIN_FRACTION") {
        config.recall.hnsw_min_fraction = v;
    }
    if let Some(v) = knob("GRID_HNSW_OVERSAMPLE") {
        config.recall.hnsw_oversample = v as usize;
    }
    if let Some(v) = knob("GRID_CODE_MIN") {
        config.recall.code_min_candidates = v as usize;
    }
    // The default planner (partitions built and chosen by cost); `GRID_EXACT=1` is the
    // engine's `--exact-recall`, `GRID_PARTITIONED=0` the same for older command lines.
    if knob("GRID_EXACT").is_some_and(|v| v != 0.0)
        || knob("GRID_PARTITIONED").is_some_and(|v| v == 0.0)
    {
        config.recall.exact_only();
    }
    if let Some(v) = knob("GRID_PARTITION_MIN_VECTORS") {
        config.recall.partition_min_vectors = v as usize;
    }
    if let Some(v) = knob("GRID_PROBE_SHARE") {
        config.recall.partition_probe_share = v;
        config.recall.calibrated_probes = false;
    }
    if let Some(v) = knob("GRID_PROBE_MAX_MEMBERS") {
        config.recall.partition_probe_max_members = v as usize;
    }
    if knob("GRID_GRAPHS").is_some_and(|v| v == 0.0) {
        config.recall.graphs = false;
    }
    if let Some(v) = knob("GRID_GRAPH_MIN_VECTORS") {
        config.recall.graph_min_vectors = v as usize;
    }
    if let Some(v) = knob("GRID_GRAPH_EF") {
        config.recall.graph_ef = v as usize;
        config.recall.calibrated_graphs = false;
    }
    if let Some(v) = knob("GRID_GRAPH_MIN_SHARE") {
        config.recall.graph_min_share = v;
    }
    config
}

/// Waits until every sealed vector chunk has its 8-bit codes, with partitioned recall until
/// the vector partitions are built and no rebuild runs or is due (one that started during
/// the ingest covers only part of it), and with tenant graphs until they cover every event
/// and no update of them runs (one after a start builds the graphs not read back, and
/// saves them); returns the seconds waited.
fn wait_for_codes(engine: &Engine) -> f64 {
    let started = Instant::now();
    let recall = engine_config(Path::new(".")).recall;
    let events = engine.stats().events;
    let partitions = recall.partitioned && events >= recall.partition_min_vectors;
    let graphs = recall.graphs && events >= recall.graph_min_vectors;
    let pending = || {
        let s = engine.stats();
        !engine.vectors_coded()
            || (partitions && (s.partitioned == 0 || s.partitions_pending))
            || (graphs
                && (s.graphs_building || s.graphs_upto + episodic::engine::GRAPH_BATCH <= events))
    };
    while pending() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    started.elapsed().as_secs_f64()
}

/// `VmRSS` and `RssAnon` of this process, in KiB.
fn rss_kib() -> (u64, u64) {
    (status_kib("self", "VmRSS"), status_kib("self", "RssAnon"))
}

/// Ingest with precomputed vectors through the engine's write path (validation, policy,
/// group commit, table, tantivy, HNSW insert on the writer thread); returns the engine and
/// the ingest figures.
fn ingest(rt: &tokio::runtime::Runtime, c: &Corpus, dir: &Path) -> (Engine, serde_json::Value) {
    let rss0 = rss_kib();
    let engine =
        Engine::open(engine_config(dir), Arc::new(HashingEmbedder::new())).expect("engine");
    let started = Instant::now();
    let mut last = (Instant::now(), 0usize);
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
                let input = validate_event(&body, &engine.config().limits, Timestamp::now())
                    .expect("a valid event");
                let out = engine.write_embedded(&grant, input, vector, false).await;
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
                let rate = (i - last.1) as f64 / last.0.elapsed().as_secs_f64();
                last = (Instant::now(), i);
                eprintln!(
                    "  {i} events, {:.0}s ({rate:.0} events/s over the last 100k)",
                    started.elapsed().as_secs_f64()
                );
            }
        }
        while let Some(r) = set.join_next().await {
            r.expect("join").expect("write");
        }
        engine.refresh().await.expect("refresh");
    });
    let secs = started.elapsed().as_secs_f64();
    let rss1 = rss_kib();
    eprintln!(
        "ingested {} events in {secs:.1}s ({:.0} events/s); VmRSS +{:.1} MiB",
        c.n,
        c.n as f64 / secs,
        (rss1.0 as f64 - rss0.0 as f64) / 1024.0
    );
    // Partitions and tenant graphs are built in the background; measure only once they are.
    let background = wait_for_codes(&engine);
    eprintln!("partitions, tenant graphs and vector codes ready {background:.1}s after ingest");
    let figures = json!({
        "events": c.n,
        "backgroundReadySeconds": background,
        "ingestSeconds": secs,
        "ingestEventsPerSecond": c.n as f64 / secs,
        "rssBeforeKiB": rss0.0,
        "rssAfterIngestKiB": rss1.0,
        "rssAnonBeforeKiB": rss0.1,
        "rssAnonAfterIngestKiB": rss1.1,
    });
    (engine, figures)
}

/// With `GRID_ENGINE_DIR`, the ingested engine is kept there and reopened by later runs
/// (the log is replayed, HNSW rebuilt or loaded); otherwise a temporary directory is used.
fn open_or_ingest(
    rt: &tokio::runtime::Runtime,
    c: &Corpus,
    tmp: &Path,
) -> (Engine, PathBuf, Option<serde_json::Value>) {
    let Some(base) = std::env::var_os("GRID_ENGINE_DIR").map(PathBuf::from) else {
        let (engine, figures) = ingest(rt, c, tmp);
        return (engine, tmp.to_path_buf(), Some(figures));
    };
    let dir = base.join(grid_dir(c.n).file_name().expect("grid dir name"));
    let marker = dir.join("grid-ingested");
    if marker.exists() {
        let started = Instant::now();
        let engine =
            Engine::open(engine_config(&dir), Arc::new(HashingEmbedder::new())).expect("reopen");
        let ready = started.elapsed().as_secs_f64();
        let coded = wait_for_codes(&engine);
        eprintln!(
            "reopened {} in {ready:.1}s (vector codes {coded:.2}s later)",
            dir.display(),
        );
        return (engine, dir, None);
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("engine dir");
    let (engine, figures) = ingest(rt, c, &dir);
    std::fs::write(&marker, "ok").expect("marker");
    (engine, dir, Some(figures))
}

/// `reopen <dir>` (a child process, so that its resident memory holds nothing but the
/// engine): opens the ingested engine (log replay into the table and vector store, tantivy
/// open, HNSW snapshot load; nothing re-embedded) and prints one JSON line with the time to
/// ready and the resident memory it added.
fn reopen_child(dir: &Path) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let rss0 = rss_kib();
    let started = Instant::now();
    let engine =
        Engine::open(engine_config(dir), Arc::new(HashingEmbedder::new())).expect("reopen");
    let ready_s = started.elapsed().as_secs_f64();
    let codes_s = wait_for_codes(&engine);
    let rss1 = rss_kib();
    let stats = engine.stats();
    println!(
        "{}",
        json!({
            "readySeconds": ready_s,
            "codesAfterReadySeconds": codes_s,
            "rssBeforeKiB": rss0.0,
            "rssReadyKiB": rss1.0,
            "rssAnonBeforeKiB": rss0.1,
            "rssAnonReadyKiB": rss1.1,
            "hnswVectors": stats.hnsw_len,
        })
    );
    rt.block_on(engine.shutdown());
}

/// Restart to ready and memory per event: shuts `engine` down, measures the data directory
/// on disk, reopens it in a child process (twice; the median-free pair shows page-cache
/// effects), and reopens it here for the measurements that follow.
fn restart(
    rt: &tokio::runtime::Runtime,
    engine: Engine,
    dir: &Path,
    n: usize,
) -> (Engine, serde_json::Value) {
    rt.block_on(engine.shutdown());
    drop(engine);
    let disk = dir_bytes(dir);
    let exe = std::env::current_exe().expect("current exe");
    let mut runs = Vec::new();
    for _ in 0..2 {
        let out = std::process::Command::new(&exe)
            .arg("reopen")
            .arg(dir)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("reopen child");
        assert!(out.status.success(), "reopen child failed");
        let line = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = line
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .expect("reopen json");
        runs.push(v);
    }
    let best = runs
        .iter()
        .min_by(|a, b| {
            let s = |v: &serde_json::Value| v["readySeconds"].as_f64().unwrap_or(f64::MAX);
            s(a).total_cmp(&s(b))
        })
        .cloned()
        .unwrap_or_default();
    let kib = |v: &serde_json::Value, a: &str, b: &str| {
        v[a].as_f64().unwrap_or(0.0) - v[b].as_f64().unwrap_or(0.0)
    };
    let rss_per_event = kib(&best, "rssReadyKiB", "rssBeforeKiB") * 1024.0 / n as f64;
    let anon_per_event = kib(&best, "rssAnonReadyKiB", "rssAnonBeforeKiB") * 1024.0 / n as f64;
    let vector_bytes = (DIM * 4) as f64;
    eprintln!(
        "restart to ready: {} s (first {:.2} s); RSS {:.0} B/event ({:.0} B beyond one copy \
         of the vector), anonymous {:.0} B/event; on disk {:.0} B/event",
        runs.iter()
            .map(|r| format!("{:.2}", r["readySeconds"].as_f64().unwrap_or(f64::NAN)))
            .collect::<Vec<_>>()
            .join(" / "),
        runs[0]["readySeconds"].as_f64().unwrap_or(f64::NAN),
        rss_per_event,
        rss_per_event - vector_bytes,
        anon_per_event,
        disk as f64 / n as f64
    );
    let engine =
        Engine::open(engine_config(dir), Arc::new(HashingEmbedder::new())).expect("reopen");
    wait_for_codes(&engine);
    let figures = json!({
        "reopenRuns": runs,
        "readySeconds": best["readySeconds"],
        "rssBytesPerEvent": rss_per_event,
        "rssBytesPerEventBeyondVector": rss_per_event - vector_bytes,
        "rssAnonBytesPerEvent": anon_per_event,
        "diskBytes": disk,
        "diskBytesPerEvent": disk as f64 / n as f64,
    });
    (engine, figures)
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
        exact: false,
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
    // One pass over the row's queries, unmeasured, as the peer driver gives every system:
    // the timed rounds then measure a warm engine, not the first touch of its memory.
    for (qi, (grant, req)) in reqs.iter().enumerate() {
        engine
            .recall_with_vector(grant, req, &c.queries[qi * DIM..(qi + 1) * DIM])
            .expect("recall");
    }
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
    // `RUST_LOG=episodic=info` shows the engine's log (background builds, saved graphs).
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mode = args.first().map_or("all", String::as_str);
    if mode == "reopen" {
        reopen_child(Path::new(args.get(1).expect("reopen <dir>")));
        return;
    }
    if mode == "ingest-model" {
        ingest_model();
        return;
    }
    if mode == "embed-real" {
        embed_real(Path::new(args.get(1).expect("embed-real <dir>")));
        return;
    }
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
    if mode == "graph-sweep" {
        graph_sweep(&c, &args[1..]);
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let tmp = tempfile::tempdir().expect("tmp");
    let (mut engine, engine_dir, ingest_figures) = open_or_ingest(&rt, &c, tmp.path());
    let mut figures = json!({"n": n, "ingest": ingest_figures});
    if mode == "all" && std::env::var("GRID_RESTART").map_or(true, |v| v != "0") {
        let (reopened, restart_figures) = restart(&rt, engine, &engine_dir, n);
        engine = reopened;
        figures["restart"] = restart_figures;
    }
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
            let mut table = Vec::new();
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
                table.push(json!({
                    "row": row.name, "selectivity": row.selectivity,
                    "tenantShare": row.tenant_share,
                    "p50Ms": percentile(&m1.lat_us, 0.5) / 1e3,
                    "p99Ms": percentile(&m1.lat_us, 0.99) / 1e3,
                    "cpuMsPerQuery": m1.cpu_s * 1e3 / m1.calls as f64,
                    "qps1": m1.calls as f64 / m1.wall_s, "qps2": m2.calls as f64 / m2.wall_s,
                    "recallAt10": recall, "fewerThanK": short,
                    "path": m1.paths.first(),
                }));
            }
            figures["rows"] = json!(table);
            let out = grid_dir(n).join("figures.json");
            std::fs::write(&out, serde_json::to_vec_pretty(&figures).expect("json"))
                .expect("write figures");
            eprintln!("figures written to {}", out.display());
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

/// `import` arguments, parsed the way the binary parses them.
#[derive(clap::Parser)]
struct ImportCli {
    #[command(flatten)]
    args: episodic::transfer::ImportArgs,
}

/// A one-sentence event summary of realistic length (10 to 25 words).
fn sentence(rng: &mut StdRng, i: usize) -> String {
    const WHO: [&str; 5] = [
        "The customer",
        "User",
        "The on-call engineer",
        "Support",
        "The admin",
    ];
    const DID: [&str; 8] = [
        "asked to change",
        "confirmed the new settings for",
        "reported a failure in",
        "approved the rollout of",
        "corrected the details of",
        "requested weekly updates about",
        "finished the migration of",
        "complained twice about",
    ];
    const WHAT: [&str; 8] = [
        "renewal notices sent by email",
        "the invoice format used for the European accounts",
        "the staging deployment of the billing service",
        "password reset emails that arrive late",
        "the nightly data export to the warehouse",
        "the dashboard's dark mode and font size",
        "the API rate limit on the search endpoint",
        "refund requests older than thirty days",
    ];
    const WHY: [&str; 5] = [
        "",
        " because the previous setting caused confusion",
        " after the incident review on Tuesday",
        " so that the team can plan the next quarter",
        " as discussed in ticket",
    ];
    format!(
        "{} {} {}{} {i}.",
        WHO[rng.gen_range(0..WHO.len())],
        DID[rng.gen_range(0..DID.len())],
        WHAT[rng.gen_range(0..WHAT.len())],
        WHY[rng.gen_range(0..WHY.len())]
    )
}

/// `ingest-model`: ingest with the real model on a sample of `GRID_MODEL_SAMPLE` (default
/// 2000) realistic summaries: the embedder alone (one call over the whole sample, so its
/// length-sorted batching applies), then end to end through `import` (validation, policy,
/// batched embedding, group commit, indexes) into a fresh data directory. Needs
/// `bash models/fetch.sh`.
fn ingest_model() {
    use clap::Parser;
    use episodic::embed::{Embedder, FastEmbedder};
    let n: usize = std::env::var("GRID_MODEL_SAMPLE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let models = std::env::var_os("EPISODIC_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
    let mut rng = StdRng::seed_from_u64(77);
    let texts: Vec<String> = (0..n).map(|i| sentence(&mut rng, i)).collect();
    let t = Instant::now();
    let embedder = FastEmbedder::load(&models).expect("model (run bash models/fetch.sh)");
    let load_s = t.elapsed().as_secs_f64();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // Warm-up on a few texts, then the whole sample in one call.
    embedder.embed(&refs[..refs.len().min(32)]).expect("embed");
    let t = Instant::now();
    let vectors = embedder.embed(&refs).expect("embed");
    let embed_s = t.elapsed().as_secs_f64();
    assert_eq!(vectors.len(), n);
    drop(embedder);

    let tmp = tempfile::tempdir().expect("tmp");
    let file = tmp.path().join("events.jsonl");
    let lines: String = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let body = json!({
                "eventType": "task_milestone",
                "occurredAt": "2025-06-01T12:00:00Z",
                "actorId": format!("a{}", i % ACTORS),
                "projectId": format!("p{}", i % PROJECTS),
                "resourceRefs": [format!("r{}", i % 50)],
                "summary": text,
                "sourceRefs": [format!("bench-{i}")],
                "sourceTrust": "tool_result",
                "confidence": "medium",
                "privacyClass": "internal",
                "retention": {"deleteOnRequest": true}
            });
            format!("{body}\n")
        })
        .collect();
    std::fs::write(&file, lines).expect("jsonl");
    let cli = ImportCli::try_parse_from([
        "import".into(),
        "--tenant".into(),
        "t0".into(),
        "--file".into(),
        file.display().to_string(),
        "--data-dir".into(),
        tmp.path().join("data").display().to_string(),
        "--model-dir".into(),
        models.display().to_string(),
    ])
    .expect("import args");
    let t = Instant::now();
    let summary = episodic::transfer::import(&cli.args).expect("import");
    let import_s = t.elapsed().as_secs_f64();
    assert_eq!(summary.allowed, n, "every line allowed");
    let embed_rate = n as f64 / embed_s;
    let import_rate = n as f64 / (import_s - load_s).max(1e-9);
    println!(
        "model load {load_s:.2} s; embedder alone {embed_rate:.1} texts/s; import end to end \
         {:.1} s = {import_rate:.1} events/s without the model load ({:.0}% of the embedder)",
        import_s,
        100.0 * import_rate / embed_rate
    );
    let out = grid_dir(0).with_file_name("ingest-model.json");
    let _ = std::fs::create_dir_all(out.parent().expect("parent"));
    let v = json!({
        "sample": n, "modelLoadSeconds": load_s, "embedSeconds": embed_s,
        "embedTextsPerSecond": embed_rate, "importSeconds": import_s,
        "importEventsPerSecondWithoutLoad": import_rate,
        "ratio": import_rate / embed_rate,
    });
    std::fs::write(&out, serde_json::to_vec_pretty(&v).expect("json")).expect("write");
    eprintln!("written {}", out.display());
}

/// `embed-real <dir>`: embeds `texts.txt` and `queries.txt` of `dir` with the real model into
/// `vectors.f32` and `queries.f32` (little-endian, one `DIM`-wide row per line, in line
/// order), 4096 texts per model call (the embedder sorts each call's texts by length).
/// Each file is written whole under a temporary name and then renamed.
fn embed_real(dir: &Path) {
    use episodic::embed::{Embedder, FastEmbedder};
    let models = std::env::var_os("EPISODIC_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("models"));
    let embedder = FastEmbedder::load(&models).expect("model (run bash models/fetch.sh)");
    for (input, output) in [("queries.txt", "queries.f32"), ("texts.txt", "vectors.f32")] {
        let text = std::fs::read_to_string(dir.join(input))
            .unwrap_or_else(|e| panic!("{}: {e} (run benches/real/texts.py)", input));
        let lines: Vec<&str> = text.lines().collect();
        let started = Instant::now();
        let mut bytes = Vec::with_capacity(lines.len() * DIM * 4);
        for (i, chunk) in lines.chunks(4096).enumerate() {
            for v in embedder.embed(chunk).expect("embed") {
                assert_eq!(v.len(), DIM, "the grid's vectors are {DIM}-d");
                bytes.extend(v.iter().flat_map(|x| x.to_le_bytes()));
            }
            eprintln!(
                "{input}: {} of {} in {:.0} s",
                ((i + 1) * 4096).min(lines.len()),
                lines.len(),
                started.elapsed().as_secs_f64()
            );
        }
        let part = dir.join(format!("{output}.part"));
        std::fs::write(&part, &bytes).expect("write");
        std::fs::rename(&part, dir.join(output)).expect("rename");
        eprintln!(
            "{output}: {} vectors, {:.1} texts/s",
            lines.len(),
            lines.len() as f64 / started.elapsed().as_secs_f64()
        );
    }
}

/// `graph-sweep [ef ...]`: see the module docs.
fn graph_sweep(c: &Corpus, efs: &[String]) {
    use episodic::engine::{GRAPH_EF_CONSTRUCTION, GRAPH_M};
    use episodic::index::vector::{HnswIndex, HnswParams};
    let docs: Vec<u32> = (0..c.n as u32)
        .filter(|d| c.attrs[*d as usize][0] == 0)
        .collect();
    let knob = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (m, ef_construction) = (
        knob("GRID_GRAPH_M", GRAPH_M),
        knob("GRID_GRAPH_EF_CONSTRUCTION", GRAPH_EF_CONSTRUCTION),
    );
    let graph = HnswIndex::new(HnswParams {
        m,
        ef_construction,
        ef_search: ef_construction,
        max_elements: docs.len() * 2,
    });
    let started = Instant::now();
    let items: Vec<(u32, &[f32])> = docs
        .iter()
        .map(|&d| (d, &c.vectors[d as usize * DIM..(d as usize + 1) * DIM]))
        .collect();
    graph.insert_batch(&items).expect("insert");
    let build_s = started.elapsed().as_secs_f64();
    println!(
        "tenant 0: {} vectors, graph built in {build_s:.1}s (m {m}, ef_construction {ef_construction})",
        docs.len()
    );
    let started = Instant::now();
    let frozen = graph.freeze();
    println!(
        "frozen in {:.2}s ({} bytes per point)",
        started.elapsed().as_secs_f64(),
        frozen.bytes() / frozen.len().max(1)
    );
    let row = &c.meta.rows[0];
    let tenant: Vec<u32> = c.attrs.iter().map(|a| u32::from(a[0])).collect();
    let efs: Vec<usize> = if efs.is_empty() {
        vec![32, 64, 96, 128, 160, 200, 256, 384]
    } else {
        efs.iter().filter_map(|e| e.parse().ok()).collect()
    };
    println!(
        "{:>5} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9}",
        "ef",
        "recall",
        "p50 us",
        "p99 us",
        "filt p50",
        "filt p99",
        "frozen",
        "p50 us",
        "p99 us",
        "filt p50"
    );
    for &ef in &efs {
        let (mut plain, mut filtered, mut found) = (Vec::new(), Vec::new(), 0usize);
        let (mut fplain, mut ffiltered, mut ffound) = (Vec::new(), Vec::new(), 0usize);
        for (qi, gq) in row.queries.iter().enumerate() {
            let qv = &c.queries[qi * DIM..(qi + 1) * DIM];
            let t = Instant::now();
            let hits = graph.search(qv, ef, ef);
            plain.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let kept = graph.search_where(qv, ef, ef, |d| tenant.get(d as usize) == Some(&0));
            filtered.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(kept.len(), hits.len());
            let top: HashSet<u32> = hits.iter().take(K).map(|h| h.0).collect();
            found += gq.truth.iter().filter(|(d, _)| top.contains(d)).count();
        }
        // The copy in its own loop, so that neither search finds the cache the other warmed.
        for (qi, gq) in row.queries.iter().enumerate() {
            let qv = &c.queries[qi * DIM..(qi + 1) * DIM];
            let t = Instant::now();
            let hits = frozen.search(qv, ef, ef);
            fplain.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            let kept = frozen.search_where(qv, ef, ef, |d| tenant.get(d as usize) == Some(&0));
            ffiltered.push(t.elapsed().as_secs_f64() * 1e6);
            assert_eq!(kept.len(), hits.len());
            ffound += found_of_truth(c, qv, &hits, gq);
        }
        let p = |v: &mut Vec<f64>, q: f64| {
            v.sort_by(f64::total_cmp);
            v[((v.len() as f64 - 1.0) * q).round() as usize]
        };
        println!(
            "{ef:>5} {:>8.4} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>8.4} {:>9.0} {:>9.0} {:>9.0}",
            found as f64 / (row.queries.len() * K) as f64,
            p(&mut plain, 0.5),
            p(&mut plain, 0.99),
            p(&mut filtered, 0.5),
            p(&mut filtered, 0.99),
            ffound as f64 / (row.queries.len() * K) as f64,
            p(&mut fplain, 0.5),
            p(&mut fplain, 0.99),
            p(&mut ffiltered, 0.5),
        );
    }
    scoped_sweep(c, &frozen, &efs);
}

/// How many of `gq`'s exact top k are among the top k of a walk's `hits` once ranked by
/// their exact vectors, as the engine ranks what a walk found.
fn found_of_truth(c: &Corpus, qv: &[f32], hits: &[(u32, f32)], gq: &GridQuery) -> usize {
    let mut hits: Vec<(u32, f32)> = hits
        .iter()
        .map(|(d, _)| {
            let v = &c.vectors[*d as usize * DIM..(*d as usize + 1) * DIM];
            (*d, episodic::index::vector::dot(qv, v))
        })
        .collect();
    hits.sort_by(|a, b| b.1.total_cmp(&a.1));
    let top: HashSet<u32> = hits.iter().take(K).map(|h| h.0).collect();
    gq.truth.iter().filter(|(d, _)| top.contains(d)).count()
}

/// The copy under the narrow rows' scopes (tenant 0's rows below half of it): a filtered
/// walk and the two-hop walk ([`FrozenGraph::search_within`]) at each width and fan-out,
/// with the scope as a bitset over event ids built per query (its time included), their
/// hits ranked by exact vectors against the row's exact top k.
fn scoped_sweep(c: &Corpus, frozen: &episodic::index::vector::FrozenGraph, efs: &[usize]) {
    let fanouts: Vec<usize> = std::env::var("GRID_FANOUTS")
        .ok()
        .map(|v| v.split(',').filter_map(|f| f.parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 32, 64]);
    for row in c.meta.rows.iter().skip(2).take(2) {
        println!(
            "{}: {} queries, ~{} in scope; scoped walks (recall@10, p50 / p99 us)",
            row.name,
            row.queries.len(),
            row.queries.iter().map(|q| q.matches).sum::<usize>() / row.queries.len().max(1)
        );
        for &ef in efs {
            let mut line = format!("{ef:>5}");
            for fanout in std::iter::once(0).chain(fanouts.iter().copied()) {
                let (mut times, mut found) = (Vec::new(), 0usize);
                for (qi, gq) in row.queries.iter().enumerate() {
                    let qv = &c.queries[qi * DIM..(qi + 1) * DIM];
                    // The engine lists the scope's ids from the index; the bitset made of
                    // them is timed with the walk.
                    let ids: Vec<u32> = (0..c.n as u32)
                        .filter(|&d| gq.accepts(&c.attrs[d as usize]))
                        .collect();
                    let t = Instant::now();
                    let mut bits = vec![0u64; c.n.div_ceil(64)];
                    for &d in &ids {
                        bits[d as usize / 64] |= 1 << (d % 64);
                    }
                    let allow = |d: u32| bits[d as usize / 64] & (1 << (d % 64)) != 0;
                    let hits = if fanout == 0 {
                        frozen.search_where(qv, ef, ef, allow)
                    } else {
                        frozen.search_within(qv, (ef, ef, fanout), allow)
                    };
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                    found += found_of_truth(c, qv, &hits, gq);
                }
                times.sort_by(f64::total_cmp);
                let at = |q: f64| times[((times.len() as f64 - 1.0) * q).round() as usize];
                let name = if fanout == 0 {
                    "filtered".to_string()
                } else {
                    format!("2-hop {fanout}")
                };
                line += &format!(
                    "  {name}: {:.3} {:.0}/{:.0}",
                    found as f64 / (row.queries.len() * K) as f64,
                    at(0.5),
                    at(0.99)
                );
            }
            println!("{line}");
        }
    }
}
