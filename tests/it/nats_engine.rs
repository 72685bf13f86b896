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

#[test]
fn a_new_data_dir_is_rebuilt_from_the_stream_without_embedding() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let name = unique_stream("ENGINE");
    let log = LogLocation::Stream {
        conn: conn.clone(),
        name: name.clone(),
        replicas: 3,
        lease: None,
        generations: None,
    };
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
