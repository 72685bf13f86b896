//! Models recorded with the vectors, and online re-embedding (`--reembed-to`): a store
//! refuses an embedder of another model; a re-embedding serves with the old model while it
//! walks, takes the writes that come meanwhile, switches once, resumes from its side file
//! after a stop (a torn tail included), starts again after a compaction, and afterwards the
//! store is served by the new model only. Every stored vector is checked against the target
//! model's vector of the event's passage.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::embed::{EmbedError, Embedder, HashingEmbedder};
use episodic::engine::{Engine, EngineConfig, ReembedState, ReembedTarget};
use episodic::retrieve::Scope;

use crate::common::{input, recall_request, rt};

const TENANTS: [&str; 2] = ["acme", "beta"];

/// A test model that takes `delay` per call, so that a walk can be caught half way.
struct Slow {
    inner: HashingEmbedder,
    delay: Duration,
    calls: AtomicUsize,
}

impl Embedder for Slow {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(self.delay);
        self.inner.embed(texts)
    }
    fn query_prefix(&self) -> &str {
        self.inner.query_prefix()
    }
    fn passage_prefix(&self) -> &str {
        self.inner.passage_prefix()
    }
}

/// The model re-embedded to: another dimension, and prefixes, as a manifest may give.
fn target_model() -> HashingEmbedder {
    HashingEmbedder::with_dim(256).with_prefixes("query: ", "passage: ")
}

fn slow_target(delay_ms: u64) -> Arc<Slow> {
    Arc::new(Slow {
        inner: target_model(),
        delay: Duration::from_millis(delay_ms),
        calls: AtomicUsize::new(0),
    })
}

fn open(dir: &Path, model: HashingEmbedder, target: Option<Arc<Slow>>) -> anyhow::Result<Engine> {
    let mut c = EngineConfig::new(dir.to_path_buf());
    c.reembed_to = target.map(|t| ReembedTarget(t as Arc<dyn Embedder>));
    Engine::open(c, Arc::new(model))
}

fn body(i: usize) -> serde_json::Value {
    json!({
        "eventType": "task_milestone", "occurredAt": "2026-06-17T09:20:00Z",
        "actorId": format!("user:{}", ["dana", "ravi", "mei"][i % 3]),
        "resourceRefs": [format!("r{i}")],
        "summary": format!("milestone {i}: the {} migration reached step {}", ["billing", "search", "auth"][i % 3], i % 7),
        "sourceRefs": ["s"], "sourceTrust": "tool_result", "confidence": "medium",
        "privacyClass": "internal", "retention": {"deleteOnRequest": true}
    })
}

fn grant(tenant: &str) -> TenantGrant {
    TenantGrant::internal(tenant, "test")
}

/// Writes events `from..to`, alternating tenants; their ids.
async fn write(e: &Engine, from: usize, to: usize) -> Vec<(String, String)> {
    let mut ids = Vec::new();
    for i in from..to {
        let tenant = TENANTS[i % 2];
        let out = e
            .write(&grant(tenant), input(&body(i)), false)
            .await
            .expect("write");
        ids.push((tenant.to_string(), out.event.event_id));
    }
    ids
}

/// Every live event's stored vector is `model`'s vector of its passage; how many there are.
fn assert_vectors_are(e: &Engine, model: &dyn Embedder) -> usize {
    let mut checked = 0;
    for tenant in TENANTS {
        let snapshot = e.export_now(&grant(tenant), true);
        for ev in snapshot.events() {
            let passage = format!("{}{}", model.passage_prefix(), ev.event.summary);
            let want = model.embed(&[&passage]).expect("embeds").remove(0);
            let have = snapshot.vector(ev).expect("a vector");
            assert_eq!(have.len(), model.dim(), "{}", ev.event.event_id);
            let cos: f32 = have.iter().zip(&want).map(|(a, b)| a * b).sum();
            assert!(
                cos > 0.9999,
                "{}: cosine {cos} to {passage:?}",
                ev.event.summary
            );
            checked += 1;
        }
    }
    checked
}

async fn wait_complete(e: &Engine) {
    let started = Instant::now();
    loop {
        let status = e.model_status();
        let r = status.reembed.expect("a re-embedding");
        if r.state == ReembedState::Complete {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "re-embedding did not complete: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_done(e: &Engine, at_least: usize) {
    let started = Instant::now();
    while e.model_status().reembed.expect("a re-embedding").done < at_least {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the walk did not move"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// How many results a recall of `query` finds in `tenant`.
async fn recalled(e: &Engine, tenant: &str, query: &str) -> usize {
    let mut req = recall_request(Scope::default(), 10);
    req.query = query.to_string();
    e.recall(&grant(tenant), req)
        .await
        .expect("recall")
        .results
        .len()
}

#[test]
fn a_store_refuses_an_embedder_of_another_model_and_names_both() {
    let dir = tempfile::tempdir().expect("tmp");
    rt().block_on(async {
        let e = open(dir.path(), HashingEmbedder::new(), None).expect("open");
        write(&e, 0, 5).await;
        e.shutdown().await;
    });
    let err = open(dir.path(), HashingEmbedder::with_dim(256), None)
        .err()
        .expect("another model is refused")
        .to_string();
    for part in [
        "hashing-test (384 dimensions)",
        "hashing-test-256 (256 dimensions)",
        "--reembed-to",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    // The same model opens it, and says so.
    rt().block_on(async {
        let e = open(dir.path(), HashingEmbedder::new(), None).expect("reopens");
        let status = e.model_status();
        assert_eq!((status.model.as_str(), status.dim), ("hashing-test", 384));
        assert!(status.reembed.is_none());
        e.shutdown().await;
    });
}

#[test]
fn prefixes_from_the_model_reach_stored_vectors_and_queries() {
    let dir = tempfile::tempdir().expect("tmp");
    rt().block_on(async {
        let e = open(dir.path(), target_model(), None).expect("open");
        write(&e, 0, 6).await;
        assert_eq!(assert_vectors_are(&e, &target_model()), 6);
        let q = e.semantic_query(&grant("acme"), "billing migration", &e.config().rank);
        assert!(q.starts_with("query: "), "{q}");
        assert!(recalled(&e, "acme", "billing migration").await > 0);
        e.shutdown().await;
    });
}

#[test]
fn reembedding_switches_models_online_taking_writes_made_meanwhile() {
    let dir = tempfile::tempdir().expect("tmp");
    let old = HashingEmbedder::new();
    let live = rt().block_on(async {
        let e = open(dir.path(), old.clone(), None).expect("open");
        let ids = write(&e, 0, 400).await;
        // Two deleted events: their vectors are not re-embedded and they stay gone.
        for (tenant, id) in &ids[..2] {
            e.delete(&grant(tenant), id).await.expect("delete");
        }
        e.shutdown().await;

        let e = open(dir.path(), old.clone(), Some(slow_target(15))).expect("open");
        // While it walks, the old model serves: writes and recalls go on.
        let status = e.model_status();
        assert_eq!(status.model, "hashing-test");
        assert_eq!(
            status.reembed.as_ref().expect("walking").to,
            "hashing-test-256"
        );
        let mut written = 400;
        while e.model_status().reembed.expect("walking").state != ReembedState::Complete {
            write(&e, written, written + 3).await;
            written += 3;
            assert!(recalled(&e, "acme", "billing migration").await > 0);
            assert!(
                written < 3_000,
                "the walk never caught up: {:?}",
                e.model_status()
            );
            // Writes at a few hundred a second: the walk (64 per 15 ms) is faster.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Writes after the switch embed with the new model.
        write(&e, written, written + 5).await;
        written += 5;
        let status = e.model_status();
        assert_eq!(
            (status.model.as_str(), status.dim),
            ("hashing-test-256", 256)
        );
        let live = assert_vectors_are(&e, &target_model());
        assert_eq!(live, written - 2);
        for (tenant, id) in &ids[..2] {
            assert!(e.get(&grant(tenant), id).is_err(), "{id} came back");
        }
        assert!(recalled(&e, "acme", "billing migration").await > 0);
        // A precomputed query vector now has the new dimension.
        let mut req = recall_request(Scope::default(), 5);
        req.query = "search".into();
        let q = target_model()
            .embed(&["query: search"])
            .expect("embeds")
            .remove(0);
        assert_eq!(
            e.recall_with_vector(&grant("beta"), &req, &q)
                .expect("recall")
                .results
                .len(),
            5
        );
        assert!(e
            .recall_with_vector(&grant("beta"), &req, &vec![0.1; 384])
            .is_err());
        assert!(
            !dir.path()
                .join("index/reembed/hashing-test-256.vectors")
                .exists(),
            "the side file outlived the switch"
        );
        e.shutdown().await;

        // Restarted with the same flags: the new model serves, nothing is walked again.
        let e = open(dir.path(), old.clone(), Some(slow_target(0))).expect("reopen");
        let status = e.model_status();
        assert_eq!(status.model, "hashing-test-256");
        assert!(status.reembed.is_none());
        assert_eq!(assert_vectors_are(&e, &target_model()), written - 2);
        e.shutdown().await;
        written - 2
    });
    // The log holds the new model's vectors now: the old model alone is refused...
    let err = open(dir.path(), old, None)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("hashing-test-256"), "{err}");
    // ...and the new one opens it.
    rt().block_on(async {
        let e = open(dir.path(), target_model(), None).expect("the new model opens it");
        assert_eq!(assert_vectors_are(&e, &target_model()), live);
        e.shutdown().await;
    });
}

#[test]
fn a_stopped_reembedding_resumes_from_its_side_file_and_a_torn_tail_is_dropped() {
    let dir = tempfile::tempdir().expect("tmp");
    let old = HashingEmbedder::new();
    let side = dir.path().join("index/reembed/hashing-test-256.vectors");
    rt().block_on(async {
        let e = open(dir.path(), old.clone(), None).expect("open");
        write(&e, 0, 1_000).await;
        e.shutdown().await;

        let e = open(dir.path(), old.clone(), Some(slow_target(40))).expect("open");
        wait_done(&e, 256).await;
        e.shutdown().await;
        let done = {
            let len = std::fs::metadata(&side).expect("a side file").len();
            assert!(len > 0);
            len
        };
        // A crash mid-append leaves a torn record: cut three bytes off the end.
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&side)
            .expect("open");
        f.set_len(done - 3).expect("truncate");
        drop(f);

        let e = open(dir.path(), old.clone(), Some(slow_target(0))).expect("reopen");
        wait_complete(&e).await;
        let r = e.model_status().reembed.expect("a re-embedding");
        assert!(r.resumed >= 255, "resumed only {}", r.resumed);
        assert!(
            r.resumed < 1_000,
            "resumed {} of a walk that was stopped",
            r.resumed
        );
        assert_eq!(assert_vectors_are(&e, &target_model()), 1_000);
        e.shutdown().await;
    });
}

#[test]
fn a_compaction_during_a_reembedding_drops_its_vectors_and_it_starts_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let old = HashingEmbedder::new();
    let side = dir.path().join("index/reembed/hashing-test-256.vectors");
    rt().block_on(async {
        let e = open(dir.path(), old.clone(), None).expect("open");
        let ids = write(&e, 0, 600).await;
        e.shutdown().await;

        let target = slow_target(25);
        let e = open(dir.path(), old.clone(), Some(Arc::clone(&target))).expect("open");
        wait_done(&e, 128).await;
        // Erase-like purge of one event whose vector the walk already made.
        let (tenant, id) = &ids[1];
        e.delete(&grant(tenant), id).await.expect("delete");
        e.compact("test").await.expect("compact");
        wait_complete(&e).await;
        // The walk started again from nothing: 10 batches of 64 for 600 ids, after at least
        // the 2 it had made.
        let calls = target.calls.load(Ordering::Relaxed);
        assert!(
            calls >= 12,
            "{calls} model calls: the walk kept its vectors"
        );
        assert!(!side.exists());
        assert_eq!(assert_vectors_are(&e, &target_model()), 599);
        assert!(e.get(&grant(tenant), id).is_err());
        e.shutdown().await;
    });
}

#[test]
fn the_admin_route_names_the_serving_model_and_only_the_admin_sees_it() {
    rt().block_on(async {
        let app = crate::common::App::new();
        let (status, body) = app
            .call("GET", "/v1/admin/reembed", Some(crate::common::ADMIN), None)
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["model"], "all-MiniLM-L6-v2-int8");
        assert_eq!(body["dim"], 384);
        assert!(body["reembed"].is_null(), "{body}");
        let key = app.key("acme").await;
        let (status, body) = app.call("GET", "/v1/admin/reembed", Some(&key), None).await;
        assert_eq!(status, 403, "{body}");
        let (status, _) = app.call("GET", "/v1/admin/reembed", None, None).await;
        assert_eq!(status, 401);
    });
}

#[test]
fn a_write_embedded_with_the_old_model_across_the_switch_is_embedded_again() {
    let dir = tempfile::tempdir().expect("tmp");
    rt().block_on(async {
        let e = open(dir.path(), HashingEmbedder::new(), None).expect("open");
        write(&e, 0, 3).await;
        e.shutdown().await;
    });
    // The old model takes 600 ms per call, the walk 200 ms per batch: a write started at
    // once is embedded with the old model, and reaches the writer after the switch.
    let old_calls = {
        let mut c = EngineConfig::new(dir.path().to_path_buf());
        let target = slow_target(200);
        c.reembed_to = Some(ReembedTarget(Arc::clone(&target) as Arc<dyn Embedder>));
        let old = Arc::new(Slow {
            inner: HashingEmbedder::new(),
            delay: Duration::from_millis(600),
            calls: AtomicUsize::new(0),
        });
        let e = Engine::open(c, Arc::clone(&old) as Arc<dyn Embedder>).expect("open");
        rt().block_on(async {
            let out = e
                .write(&grant("acme"), input(&body(3)), false)
                .await
                .expect("write");
            wait_complete(&e).await;
            assert_eq!(e.model_status().model, "hashing-test-256");
            assert_eq!(assert_vectors_are(&e, &target_model()), 4);
            assert!(e.get(&grant("acme"), &out.event.event_id).is_ok());
            e.shutdown().await;
        });
        old.calls.load(Ordering::Relaxed)
    };
    assert_eq!(
        old_calls, 1,
        "the write was not embedded with the old model first"
    );
}

/// The second model (`models/mpnet`, `bash models/mpnet/fetch.sh`), loaded once.
fn mpnet() -> Arc<dyn Embedder> {
    static MODEL: std::sync::OnceLock<Arc<dyn Embedder>> = std::sync::OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = crate::common::model_dir().join("mpnet");
            Arc::new(
                episodic::embed::FastEmbedder::load(&dir)
                    .expect("model files present: run bash models/mpnet/fetch.sh"),
            )
        })
        .clone()
}

#[test]
fn the_second_model_gives_a_text_the_same_vector_alone_and_in_a_batch() {
    let m = mpnet();
    assert_eq!((m.model_id(), m.dim()), ("all-mpnet-base-v2", 768));
    let texts = [
        "Dana asked for renewal notices by email instead of post.",
        "ok",
        "The quarterly review covered churn, renewals, pricing and the billing migration.",
        "Melanie painted a sunset over the lake last weekend and wants to show it at the fair.",
    ];
    let batch = m.embed(&texts).expect("embeds");
    for (t, v) in texts.iter().zip(&batch) {
        let alone = m.embed(&[t]).expect("embeds").remove(0);
        let cos: f32 = alone.iter().zip(v).map(|(a, b)| a * b).sum();
        assert!(
            cos > 0.99999,
            "{t:?}: cosine {cos} alone against in a batch"
        );
    }
    // A paraphrase is closer than an unrelated sentence.
    let v = m
        .embed(&[
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "A man is riding a horse.",
        ])
        .expect("embeds");
    let cos = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(cos(&v[0], &v[1]) > cos(&v[0], &v[2]) + 0.2);
}

#[test]
fn a_store_moves_from_the_default_model_to_the_second_one_online() {
    let dir = tempfile::tempdir().expect("tmp");
    let minilm: Arc<dyn Embedder> = crate::common::real_model();
    let topics = [
        "renewal notices by email",
        "the billing migration",
        "a sunset painting",
        "the support backlog",
    ];
    rt().block_on(async {
        let e = Engine::open(
            EngineConfig::new(dir.path().to_path_buf()),
            Arc::clone(&minilm),
        )
        .expect("open");
        for i in 0..40 {
            let mut b = body(i);
            b["summary"] = json!(format!("Note {i}: the team discussed {}", topics[i % 4]));
            e.write(&grant(TENANTS[i % 2]), input(&b), false)
                .await
                .expect("write");
        }
        e.shutdown().await;

        let mut c = EngineConfig::new(dir.path().to_path_buf());
        c.reembed_to = Some(ReembedTarget(mpnet()));
        let e = Engine::open(c, Arc::clone(&minilm)).expect("open with a target");
        wait_complete(&e).await;
        let status = e.model_status();
        assert_eq!(
            (status.model.as_str(), status.dim),
            ("all-mpnet-base-v2", 768)
        );
        assert_eq!(assert_vectors_are(&e, &*mpnet()), 40);
        let mut req = recall_request(Scope::default(), 5);
        req.query = "who talked about the painting of a sunset?".into();
        let hits = e.recall(&grant("acme"), req).await.expect("recall").results;
        assert!(
            hits[0].event.summary.contains("sunset"),
            "{:?}",
            hits[0].event.summary
        );
        e.shutdown().await;
    });
    // The default model alone no longer opens it.
    let err = Engine::open(EngineConfig::new(dir.path().to_path_buf()), minilm)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("all-mpnet-base-v2 (768 dimensions)"), "{err}");
}
