//! Tests of `hnsw`.

use super::super::exact::{dot, exact_scores, top_k};
use super::super::store::VectorStore;
use super::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DIM: usize = 384;
const N: usize = 5000;

fn normalise(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}

/// Random normalised vectors with low intrinsic dimension, like sentence
/// embeddings: a random mix of `LATENT` fixed directions plus isotropic
/// noise. (Uniform random 384-d vectors have no neighbourhood structure;
/// hnsw_rs reaches only ~0.62 recall@10 on them at ef 64.)
fn random_vectors(n: usize, seed: u64) -> Vec<Vec<f32>> {
    const LATENT: usize = 32;
    let mut basis_rng = StdRng::seed_from_u64(12345);
    let basis: Vec<Vec<f32>> = (0..LATENT)
        .map(|_| (0..DIM).map(|_| basis_rng.gen_range(-1.0..1.0)).collect())
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let mut v: Vec<f32> = (0..DIM).map(|_| 0.2 * rng.gen_range(-1.0..1.0)).collect();
            for b in &basis {
                let c: f32 = rng.gen_range(-1.0..1.0);
                v.iter_mut().zip(b).for_each(|(x, y)| *x += c * y);
            }
            normalise(v)
        })
        .collect()
}

struct Fixture {
    store: VectorStore,
    index: HnswIndex,
    queries: Vec<Vec<f32>>,
}

/// One 5k-vector index shared by the tests (built once, in parallel).
fn fixture() -> &'static Fixture {
    static FIXTURE: std::sync::OnceLock<Fixture> = std::sync::OnceLock::new();
    FIXTURE.get_or_init(|| {
        let vectors = random_vectors(N, 7);
        let store = VectorStore::new(DIM);
        for (id, v) in vectors.iter().enumerate() {
            store.push(id as u32, v).unwrap();
        }
        let index = HnswIndex::new(HnswParams {
            max_elements: N,
            ..HnswParams::default()
        });
        let items: Vec<(u32, &[f32])> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u32, v.as_slice()))
            .collect();
        index.insert_batch(&items).unwrap();
        Fixture {
            store,
            index,
            queries: random_vectors(50, 99),
        }
    })
}

fn exact_top(store: &VectorStore, q: &[f32], ids: &[u32], k: usize) -> Vec<u32> {
    let scores = exact_scores(store, q, ids);
    top_k(ids, &scores, k).into_iter().map(|h| h.0).collect()
}

fn recall(truth: &[u32], got: &[(u32, f32)]) -> f64 {
    let hit = got.iter().filter(|(id, _)| truth.contains(id)).count();
    hit as f64 / truth.len() as f64
}

#[test]
fn send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<HnswIndex>();
    assert_send_sync::<VectorStore>();
}

#[test]
fn recall_unfiltered_and_filtered() {
    let f = fixture();
    assert_eq!(f.index.len(), N);
    let all: Vec<u32> = (0..N as u32).collect();
    let half: Vec<u32> = (0..N as u32).filter(|i| i % 2 == 0).collect();
    let allow = IdSet::from_sorted(&half, N);
    let (mut r_all, mut r_half) = (0.0, 0.0);
    for q in &f.queries {
        let hits = f.index.search(q, 10, 64);
        assert_eq!(hits.len(), 10);
        r_all += recall(&exact_top(&f.store, q, &all, 10), &hits);
        let filtered = f.index.search_filtered(q, 10, 64, &allow);
        assert!(filtered.iter().all(|(id, _)| allow.contains(*id)));
        r_half += recall(&exact_top(&f.store, q, &half, 10), &filtered);
        // Scores are cosines consistent with the exact path.
        for (id, s) in &filtered {
            let exact = f.store.with_vector(*id, |v| dot(q, v)).unwrap();
            assert!((exact - s).abs() < 1e-4);
        }
    }
    let n = f.queries.len() as f64;
    let (r_all, r_half) = (r_all / n, r_half / n);
    eprintln!("recall@10 unfiltered {r_all:.3}, 50% filtered {r_half:.3}");
    assert!(r_all >= 0.95, "unfiltered recall {r_all}");
    assert!(r_half >= 0.9, "filtered recall {r_half}");
}

/// A copy's hits, checked to hold each id once, best first, then ranked by their exact
/// vectors (the walk orders by 8-bit codes; recall ranks what it finds exactly).
fn ranked_exactly(store: &VectorStore, q: &[f32], found: &[(u32, f32)]) -> Vec<(u32, f32)> {
    let ids: Vec<u32> = found.iter().map(|h| h.0).collect();
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "each id once");
    for pair in found.windows(2) {
        assert!(pair[0].1 >= pair[1].1, "best first");
    }
    exact_top(store, q, &ids, 10)
        .into_iter()
        .map(|id| (id, 0.0))
        .collect()
}

#[test]
fn the_frozen_copy_finds_what_the_graph_finds() {
    let f = fixture();
    let frozen = f.index.freeze();
    assert_eq!(frozen.len(), N);
    let all: Vec<u32> = (0..N as u32).collect();
    let third: Vec<u32> = (0..N as u32).filter(|i| i % 3 == 0).collect();
    let (mut r_graph, mut r_frozen, mut r_third) = (0.0, 0.0, 0.0);
    for q in &f.queries {
        let truth = exact_top(&f.store, q, &all, 10);
        r_graph += recall(&truth, &f.index.search(q, 10, 64));
        // The copy orders its walk by 8-bit codes: rank what it finds exactly, as recall does.
        let found = frozen.search(q, 64, 64);
        assert_eq!(found.len(), 64);
        r_frozen += recall(&truth, &ranked_exactly(&f.store, q, &found));
        let kept = frozen.search_where(q, 10, 64, |id| id % 3 == 0);
        assert_eq!(kept.len(), 10);
        assert!(kept.iter().all(|(id, _)| id % 3 == 0), "the filter holds");
        r_third += recall(&exact_top(&f.store, q, &third, 10), &kept);
    }
    let n = f.queries.len() as f64;
    let (r_graph, r_frozen, r_third) = (r_graph / n, r_frozen / n, r_third / n);
    eprintln!("recall@10 graph {r_graph:.3}, copy {r_frozen:.3}, copy filtered {r_third:.3}");
    assert!(
        r_frozen >= r_graph - 0.01,
        "copy {r_frozen} against graph {r_graph}"
    );
    assert!(r_third >= 0.9, "filtered recall {r_third}");
    // A filter that passes nothing walks the whole graph and finds nothing.
    assert!(frozen
        .search_where(&f.queries[0], 10, 64, |_| false)
        .is_empty());
    // Edge cases: k = 0, a query of another dimension, an empty graph.
    assert!(frozen.search(&f.queries[0], 0, 64).is_empty());
    assert!(frozen.search(&f.queries[0][..10], 5, 64).is_empty());
    let empty = HnswIndex::new(HnswParams::default()).freeze();
    assert!(empty.is_empty());
    assert!(empty.search(&f.queries[0], 5, 64).is_empty());
    // A stored vector as query finds itself first.
    let own = f.store.get(42).unwrap();
    assert_eq!(frozen.search(&own, 1, 64)[0].0, 42);
}

#[test]
fn the_two_hop_walk_finds_a_narrow_filters_nearest() {
    let f = fixture();
    let frozen = f.index.freeze();
    // One id in ten, scattered over the graph, as an actor's events are over its tenant.
    let tenth = |id: u32| id.wrapping_mul(2_654_435_761).is_multiple_of(10);
    let scope: Vec<u32> = (0..N as u32).filter(|&i| tenth(i)).collect();
    let (mut r_within, mut r_where) = (0.0, 0.0);
    for q in &f.queries {
        let truth = exact_top(&f.store, q, &scope, 10);
        let found = frozen.search_within(q, (64, 64, 32), tenth);
        assert_eq!(found.len(), 64);
        assert!(found.iter().all(|(id, _)| tenth(*id)), "the filter holds");
        r_within += recall(&truth, &ranked_exactly(&f.store, q, &found));
        r_where += recall(&truth, &frozen.search_where(q, 10, 64, tenth));
    }
    let n = f.queries.len() as f64;
    let (r_within, r_where) = (r_within / n, r_where / n);
    eprintln!("recall@10 under a 10% filter: two-hop {r_within:.3}, filtered {r_where:.3}");
    assert!(r_within >= 0.95, "two-hop recall {r_within}");
    // Nothing accepted: nothing found, and no distance is needed to say so.
    assert!(frozen
        .search_within(&f.queries[0], (10, 64, 32), |_| false)
        .is_empty());
    assert!(frozen
        .search_within(&f.queries[0], (0, 64, 32), tenth)
        .is_empty());
}

#[test]
fn a_copy_is_not_reached_by_later_inserts() {
    let vectors = random_vectors(300, 5);
    let index = HnswIndex::new(HnswParams::default());
    for (id, v) in vectors.iter().enumerate().take(200) {
        index.insert(id as u32, v).unwrap();
    }
    let frozen = index.freeze();
    for (id, v) in vectors.iter().enumerate().skip(200) {
        index.insert(id as u32, v).unwrap();
    }
    assert_eq!((frozen.len(), index.len()), (200, 300));
    for v in &vectors[200..] {
        assert!(frozen.search(v, 300, 300).iter().all(|(id, _)| *id < 200));
    }
    let later = index.freeze();
    assert_eq!(later.search(&vectors[250], 1, 64)[0].0, 250);
}

#[test]
fn filter_never_leaks_and_edge_cases() {
    let f = fixture();
    let sparse: Vec<u32> = (0..N as u32).filter(|i| i % 97 == 3).collect();
    let allow = IdSet::from_sorted(&sparse, N);
    for q in f.queries.iter().take(5) {
        let hits = f.index.search_filtered(q, 10, 64, &allow);
        assert!(hits.iter().all(|(id, _)| allow.contains(*id)));
    }
    let q = &f.queries[0];
    assert!(f
        .index
        .search_filtered(q, 10, 64, &IdSet::new(N))
        .is_empty());
    assert!(f.index.search(q, 0, 64).is_empty());
    assert!(f.index.search(&q[..10], 5, 64).is_empty());
    // A stored vector as query must not trip any assertion (dot ≈ 1 + ε).
    let own = f.store.get(42).unwrap();
    assert_eq!(f.index.search(&own, 1, 64)[0].0, 42);
    assert!(matches!(
        f.index.insert(N as u32, &[0.0; 3]),
        Err(VectorError::Dim { .. })
    ));
    assert!(matches!(
        f.index.insert(N as u32, &[f32::NAN; DIM]),
        Err(VectorError::NonFinite { .. })
    ));
}

#[test]
fn concurrent_insert_and_search() {
    let vectors = random_vectors(2000, 3);
    let index = HnswIndex::new(HnswParams::default());
    std::thread::scope(|s| {
        s.spawn(|| {
            for (i, v) in vectors.iter().enumerate() {
                index.insert(i as u32, v).unwrap();
            }
        });
        s.spawn(|| {
            for v in vectors.iter().step_by(10) {
                let _ = index.search(v, 5, 32);
            }
        });
    });
    assert_eq!(index.len(), 2000);
}

#[test]
fn save_load_round_trip() {
    let f = fixture();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("hnsw");
    f.index.save(&dir, 41).unwrap();
    // A crash leftover newer than CURRENT must not confuse the next save.
    fs::create_dir(dir.join("gen-9")).unwrap();
    f.index.save(&dir, 42).unwrap();
    let gens = generations(&dir).unwrap();
    assert_eq!(gens.len(), 1, "old generations removed: {gens:?}");
    let (loaded, seq) = HnswIndex::load(&dir, HnswParams::default())
        .unwrap()
        .unwrap();
    assert_eq!(seq, 42);
    assert_eq!(loaded.len(), N);
    assert_eq!(loaded.dim(), DIM);
    let allow = IdSet::from_sorted(&(0..N as u32).step_by(3).collect::<Vec<_>>(), N);
    for q in &f.queries {
        assert_eq!(f.index.search(q, 10, 64), loaded.search(q, 10, 64));
        assert_eq!(
            f.index.search_filtered(q, 10, 64, &allow),
            loaded.search_filtered(q, 10, 64, &allow)
        );
    }
    // A loaded index keeps accepting inserts and can be saved again.
    let extra = random_vectors(1, 5).remove(0);
    loaded.insert(N as u32, &extra).unwrap();
    assert_eq!(loaded.search(&extra, 1, 64)[0].0, N as u32);
    loaded.save(&dir, 43).unwrap();
    let (again, seq) = HnswIndex::load(&dir, HnswParams::default())
        .unwrap()
        .unwrap();
    assert_eq!((again.len(), seq), (N + 1, 43));
}

#[test]
fn empty_index_round_trip_and_missing_current() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(HnswIndex::load(tmp.path(), HnswParams::default())
        .unwrap()
        .is_none());
    assert!(
        HnswIndex::load(&tmp.path().join("nope"), HnswParams::default())
            .unwrap()
            .is_none()
    );
    HnswIndex::new(HnswParams::default())
        .save(tmp.path(), 7)
        .unwrap();
    let (empty, seq) = HnswIndex::load(tmp.path(), HnswParams::default())
        .unwrap()
        .unwrap();
    assert_eq!((empty.len(), seq), (0, 7));
    assert!(empty.search(&[1.0; DIM], 3, 10).is_empty());
}

/// A fresh snapshot directory of a small (300-point) index.
fn small_saved_index() -> tempfile::TempDir {
    static SMALL: std::sync::OnceLock<HnswIndex> = std::sync::OnceLock::new();
    let index = SMALL.get_or_init(|| {
        let index = HnswIndex::new(HnswParams::default());
        for (i, v) in random_vectors(300, 11).iter().enumerate() {
            index.insert(i as u32, v).unwrap();
        }
        index
    });
    let tmp = tempfile::tempdir().unwrap();
    index.save(tmp.path(), 1).unwrap();
    tmp
}

fn current_gen_dir(dir: &Path) -> PathBuf {
    let current = fs::read_to_string(dir.join(CURRENT)).unwrap();
    dir.join(current.split(' ').next().unwrap())
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    let at = at % bytes.len();
    bytes[at] ^= 0x5a;
    fs::write(path, bytes).unwrap();
}

fn assert_corrupt(dir: &Path) {
    let res = HnswIndex::load(dir, HnswParams::default());
    assert!(matches!(res, Err(VectorError::Corrupt { .. })), "{res:?}");
}

#[test]
fn flipped_bytes_are_detected() {
    for name in dump_file_names()
        .iter()
        .map(String::as_str)
        .chain([MANIFEST])
    {
        for at in [0, 9, 1000, 77_777] {
            let tmp = small_saved_index();
            flip_byte(&current_gen_dir(tmp.path()).join(name), at);
            assert_corrupt(tmp.path());
        }
    }
    let tmp = small_saved_index();
    flip_byte(&tmp.path().join(CURRENT), 3);
    assert_corrupt(tmp.path());
}

#[test]
fn missing_or_truncated_files_are_corrupt() {
    let tmp = small_saved_index();
    let gen = current_gen_dir(tmp.path());
    fs::remove_file(gen.join("index.hnsw.data")).unwrap();
    assert_corrupt(tmp.path());

    let tmp = small_saved_index();
    let graph = current_gen_dir(tmp.path()).join("index.hnsw.graph");
    let len = fs::metadata(&graph).unwrap().len();
    File::options()
        .write(true)
        .open(&graph)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    assert_corrupt(tmp.path());

    let tmp = small_saved_index();
    fs::write(tmp.path().join(CURRENT), b"garbage").unwrap();
    assert_corrupt(tmp.path());
}

/// Files that hnsw_rs cannot parse but whose checksums match (e.g. a
/// foreign format): hnsw_rs panics inside; `load` must report Corrupt.
#[test]
fn unparsable_dump_with_valid_checksums_is_corrupt() {
    let tmp = small_saved_index();
    let gen = current_gen_dir(tmp.path());
    let mut manifest: Manifest =
        serde_json::from_slice(&fs::read(gen.join(MANIFEST)).unwrap()).unwrap();
    for entry in &mut manifest.files {
        let path = gen.join(&entry.name);
        fs::write(&path, vec![0xAB; 4096]).unwrap();
        *entry = file_entry(&path, &entry.name).unwrap();
    }
    let bytes = serde_json::to_vec(&manifest).unwrap();
    fs::write(gen.join(MANIFEST), &bytes).unwrap();
    let name = gen.file_name().unwrap().to_string_lossy().into_owned();
    let current = format!("{name} {}\n", sha256_hex(&bytes));
    fs::write(tmp.path().join(CURRENT), current).unwrap();
    assert_corrupt(tmp.path());
}

#[test]
fn parse_current_rejects_junk() {
    let sha = "a".repeat(64);
    assert_eq!(
        parse_current(format!("gen-3 {sha}\n").as_bytes()),
        Some(("gen-3", sha.as_str()))
    );
    for junk in ["", "gen-3\n", "gen- x\n", "../x aaaa\n", "gen-1 zz\n"] {
        assert!(parse_current(junk.as_bytes()).is_none(), "{junk}");
    }
}

#[test]
fn a_held_out_node_is_never_measured_kept_or_passed_through() {
    let f = fixture();
    let frozen = f.index.freeze();
    let all: Vec<u32> = (0..N as u32).collect();
    let mut found = 0;
    for node in (0..N as u32).step_by(250) {
        let id = frozen.ids()[node as usize];
        let v = f.store.get(id).expect("stored");
        // The point's own vector finds the point itself first.
        assert_eq!(frozen.search(&v, 10, 64)[0].0, id);
        let plain = frozen.search_held_out(&v, 64, 64, node);
        assert_eq!(plain.len(), 64);
        assert!(plain.iter().all(|(d, _)| *d != id), "held out");
        let within = frozen.search_within_held_out(&v, (64, 64, 32), node, |_| true);
        assert!(within.iter().all(|(d, _)| *d != id), "held out of the walk");
        let others: Vec<u32> = all.iter().copied().filter(|&d| d != id).collect();
        let truth = exact_top(&f.store, &v, &others, 10);
        found += truth
            .iter()
            .filter(|t| plain.iter().any(|(d, _)| d == *t))
            .count();
    }
    // Its neighbours are still found without it: 20 points, 10 neighbours each.
    assert!(found >= 180, "{found} of 200");
    // The entry point itself held out: the descent moves on from it.
    let entry = frozen.entry_node().expect("an entry");
    let v = f.store.get(frozen.ids()[entry as usize]).expect("stored");
    let hits = frozen.search_held_out(&v, 10, 64, entry);
    assert_eq!(hits.len(), 10);
    assert!(hits.iter().all(|(d, _)| *d != frozen.ids()[entry as usize]));
}
