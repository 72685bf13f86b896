//! An engine whose event log is a NATS JetStream stream (a real 3-node cluster, the real
//! model): what it acknowledged survives the loss of its data directory, because another
//! data directory is rebuilt from the stream alone, without embedding anything again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;

use episodic::auth::TenantGrant;
use episodic::engine::{Engine, EngineConfig};
use episodic::retrieve::Scope;
use episodic::store::nats::NatsConnection;
use episodic::store::LogLocation;

use crate::common::{event, input, real_model, recall_request, rt, Counting};
use crate::nats_cluster::{shared, unique_stream};

fn config(dir: &std::path::Path, log: &LogLocation) -> EngineConfig {
    let mut config = EngineConfig::new(dir.to_path_buf());
    config.log = log.clone();
    config
}

/// A stream log of 3 replicas, without a lease.
fn stream_log(conn: &NatsConnection, name: &str) -> LogLocation {
    LogLocation::Stream {
        conn: conn.clone(),
        name: name.to_string(),
        replicas: 3,
        lease: None,
        generations: None,
    }
}

#[test]
fn a_new_data_dir_is_rebuilt_from_the_stream_without_embedding() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let name = unique_stream("ENGINE");
    let log = stream_log(&conn, &name);
    let grant = TenantGrant::internal("acme", "cluster-test");
    let rt = rt();
    let summaries = [
        "Dana moved the quarterly review to Thursday afternoon",
        "The staging database ran out of disk during the nightly import",
        "Priya approved the new onboarding checklist",
        "Dana prefers written summaries over meetings",
    ];
    let first_dir = tempfile::tempdir().expect("tmp");
    let engine = Engine::open(config(first_dir.path(), &log), real_model()).expect("open");
    let mut ids = Vec::new();
    for (i, summary) in summaries.iter().enumerate() {
        let mut body = event("user:dana", summary, "2026-03-02T10:00:00Z");
        body["eventId"] = json!(format!("ev-{i}"));
        let written = rt
            .block_on(engine.write(&grant, input(&body), false))
            .expect("write");
        ids.push(written.event.event_id);
    }
    rt.block_on(engine.delete(&grant, &ids[1])).expect("delete");
    rt.block_on(engine.shutdown());
    drop(engine);
    drop(first_dir);

    let counting = Arc::new(Counting {
        inner: real_model(),
        texts: AtomicUsize::new(0),
    });
    let second_dir = tempfile::tempdir().expect("tmp");
    let engine = Engine::open(config(second_dir.path(), &log), counting.clone()).expect("reopen");
    assert_eq!(
        counting.texts.load(Ordering::SeqCst),
        0,
        "catching up from the stream embeds nothing"
    );
    assert_eq!(
        engine.stats().events,
        3,
        "three live events, the deleted one gone"
    );
    let mut req = recall_request(Scope::default(), 3);
    req.query = "when is the quarterly review".into();
    let found = rt.block_on(engine.recall(&grant, req)).expect("recall");
    let got: Vec<&str> = found
        .results
        .iter()
        .map(|h| h.event.event_id.as_str())
        .collect();
    assert_eq!(got.first(), Some(&"ev-0"), "{got:?}");
    assert!(!got.contains(&"ev-1"), "the deleted event stays deleted");
    // The stream goes on from where the first engine left it.
    let body = event(
        "user:dana",
        "Dana booked the offsite venue",
        "2026-03-03T10:00:00Z",
    );
    rt.block_on(engine.write(&grant, input(&body), false))
        .expect("write after the move");
    rt.block_on(engine.shutdown());
    conn.delete_stream(&name).expect("delete the stream");
}

/// A standby keeps the derived indexes as it follows: once it has applied a tenant large
/// enough, it builds the vector partitions and the tenant's graph itself, so that a
/// promoted standby answers from them at once instead of from the exact path while it
/// builds them. (A test embedder: what is checked is the standby's upkeep, not ranking.)
#[test]
fn a_standby_builds_partitions_and_tenant_graphs_while_it_follows() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let name = unique_stream("STANDBY_INDEXES");
    let log = stream_log(&conn, &name);
    const EVENTS: usize = 2_400;
    let small = |dir: &std::path::Path, follower: bool| {
        let mut c = config(dir, &log);
        c.follower = follower;
        c.recall.partition_min_vectors = 2_000;
        c.recall.graph_min_vectors = 2_000;
        c
    };
    let embedder = || Arc::new(episodic::embed::HashingEmbedder::new());
    let rt = rt();
    let (owner_dir, standby_dir) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let owner = Engine::open(small(owner_dir.path(), false), embedder()).expect("open the owner");
    let standby =
        Engine::open(small(standby_dir.path(), true), embedder()).expect("open the standby");
    assert_eq!(
        standby.stats().partitioned,
        0,
        "nothing to build at its open"
    );
    let grant = TenantGrant::internal("acme", "cluster-test");
    for chunk in (0..EVENTS).collect::<Vec<_>>().chunks(200) {
        let writes: Vec<_> = chunk
            .iter()
            .map(|i| {
                let (owner, grant) = (owner.clone(), grant.clone());
                let body = event(
                    "user:dana",
                    &format!("Standby upkeep {i}"),
                    "2026-03-02T10:00:00Z",
                );
                rt.spawn(async move { owner.write(&grant, input(&body), false).await })
            })
            .collect();
        for w in writes {
            rt.block_on(w).expect("joined").expect("write");
        }
    }
    let started = std::time::Instant::now();
    loop {
        rt.block_on(standby.follow()).expect("follow");
        let stats = standby.stats();
        if stats.events == EVENTS && stats.partitioned >= EVENTS && stats.tenant_graphs == 1 {
            assert!(stats.graph_points >= 2_000, "{stats:?}");
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the standby built no partitions or graph: {stats:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    rt.block_on(owner.shutdown());
    rt.block_on(standby.shutdown());
}
