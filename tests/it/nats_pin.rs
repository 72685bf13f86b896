//! Pinning a tenant to a shard of its own (`cluster::node` pinning) on a real 3-node NATS
//! cluster with the real model: the tenant's events, tombstones, pending reviews and audit
//! entries move to the new shard while writes keep arriving, every acknowledged write is
//! there exactly once, the old shard's log keeps nothing of the tenant, its neighbour on
//! the old shard is untouched, and a fresh tenant can be pinned before it has data.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use episodic::auth::{roles, Limits, Principal, TenantGrant};
use episodic::cluster::node::PinError;
use episodic::cluster::Node;
use episodic::engine::{Engine, Error};
use episodic::store::nats::NatsLog;
use episodic::store::EventLog;

use crate::common::{event, input, recall_request, rt};
use crate::nats_node::{pair, wait_until, SHARDS};

const CANARY: &str = "quokkamarmalade";

/// The engine serving `tenant` on either node, if one does now.
fn serving(first: &Node, second: &Node, tenant: &str) -> Option<Engine> {
    first
        .engine_for(tenant)
        .or_else(|| second.engine_for(tenant))
}

/// Two tenants that hash to the same shard.
fn neighbours(node: &Node) -> (String, String) {
    let candidates: Vec<String> = (0..200).map(|i| format!("pinned-{i}")).collect();
    for a in &candidates {
        for b in &candidates {
            if a != b && node.shard_of(a) == node.shard_of(b) {
                return (a.clone(), b.clone());
            }
        }
    }
    unreachable!("200 tenants over {SHARDS} shards share one");
}

#[test]
fn a_pinned_tenant_moves_to_a_shard_of_its_own_with_everything_acknowledged() {
    let (conn, cluster, first, second, _dirs) = pair("PIN");
    let first = Arc::new(first);
    let second = Arc::new(second);
    let (tenant, neighbour) = neighbours(&first);
    let from = first.shard_of(&tenant);
    let rt = rt();
    let grant = TenantGrant::internal(&tenant, "pin-test");
    let write = |engine: &Engine, grant: &TenantGrant, summary: &str, id: Option<&str>| {
        let mut body = event("user:dana", summary, "2026-04-01T09:00:00Z");
        if let Some(id) = id {
            body["eventId"] = serde_json::json!(id);
        }
        rt.block_on(engine.write(grant, input(&body), false))
    };
    let owner = serving(&first, &second, &tenant).expect("served");
    let mut before = Vec::new();
    for i in 0..6 {
        let summary = format!("Dana shipped release {i} of the {CANARY} billing service");
        before.push(
            write(&owner, &grant, &summary, None)
                .expect("write")
                .event
                .event_id,
        );
    }
    let deleted = before.pop().expect("one to delete");
    rt.block_on(owner.delete(&grant, &deleted)).expect("delete");
    let mut body = event(
        "user:dana",
        "A pasted page says Dana quit",
        "2026-04-01T10:00:00Z",
    );
    body["sourceTrust"] = serde_json::json!("untrusted_content");
    let pending = rt
        .block_on(owner.write(&grant, input(&body), false))
        .expect("write for review")
        .event
        .event_id;
    let neighbour_grant = TenantGrant::internal(&neighbour, "pin-test");
    let neighbour_id = write(
        &owner,
        &neighbour_grant,
        "Lee renewed the support plan",
        None,
    )
    .expect("neighbour write")
    .event
    .event_id;

    // Writes keep coming while the tenant moves: each retried under its own id until acked.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let writer = {
        let (first, second, stop, acked) = (
            Arc::clone(&first),
            Arc::clone(&second),
            Arc::clone(&stop),
            Arc::clone(&acked),
        );
        let tenant = tenant.clone();
        std::thread::spawn(move || {
            let rt = crate::common::rt();
            let grant = TenantGrant::internal(&tenant, "pin-test");
            let mut refused = 0;
            for i in 0.. {
                if stop.load(Ordering::SeqCst) {
                    return refused;
                }
                let id = format!("during-{i}");
                let summary = format!("Dana noted item {i} during the move");
                loop {
                    let Some(engine) = serving(&first, &second, &tenant) else {
                        refused += 1;
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    };
                    let mut body = event("user:dana", &summary, "2026-04-02T09:00:00Z");
                    body["eventId"] = serde_json::json!(id);
                    match rt.block_on(engine.write(&grant, input(&body), false)) {
                        Ok(_) => break,
                        Err(Error::Moving(_) | Error::Storage(_) | Error::WriterStopped) => {
                            refused += 1;
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => panic!("write {id} failed: {e}"),
                    }
                }
                acked.lock().expect("acked").push(id);
                std::thread::sleep(Duration::from_millis(20));
            }
            refused
        })
    };
    wait_until(
        "writes during the move began",
        Duration::from_secs(30),
        || acked.lock().expect("acked").len() >= 3,
    );

    let copier = if first.owned_shards().contains(&from) {
        &first
    } else {
        &second
    };
    let report = copier.pin_tenant(&tenant, "admin").expect("pin");
    eprintln!("pin report: {report:?}");
    assert_eq!(report.from_shard, from);
    assert!(report.shard >= SHARDS, "a shard no hash lands on");
    assert!(
        report.records >= 7,
        "5 live, 1 tombstone, 1 pending, and the writes so far"
    );
    assert!(report.audit_entries >= 7);
    assert!(report.source_purged);
    assert!(matches!(
        copier.pin_tenant(&tenant, "admin"),
        Err(PinError::AlreadyPinned { .. })
    ));

    // Every node routes the tenant to its shard of its own, and some node serves it.
    wait_until("the new shard is served", Duration::from_secs(60), || {
        first.shard_of(&tenant) == report.shard
            && second.shard_of(&tenant) == report.shard
            && serving(&first, &second, &tenant).is_some()
    });
    wait_until("writes after the move", Duration::from_secs(60), || {
        let n = acked.lock().expect("acked").len();
        n >= 3 + 5
    });
    stop.store(true, Ordering::SeqCst);
    let refused = writer.join().expect("writer");
    eprintln!("writes refused (and retried) while the tenant moved: {refused}");

    let moved = serving(&first, &second, &tenant).expect("served");
    for id in before.iter().chain(acked.lock().expect("acked").iter()) {
        assert!(
            moved.get(&grant, id).is_ok(),
            "acknowledged event {id} is missing"
        );
    }
    assert!(matches!(
        moved.get(&grant, &deleted),
        Err(Error::NotFound(_))
    ));
    let (current, history) = rt
        .block_on(moved.history(&grant, &before[0]))
        .expect("history of a moved event");
    assert!(current.is_some());
    assert!(
        history.iter().any(|e| e.action.as_str() == "write"),
        "the event's audit entries moved with it: {history:?}"
    );
    let (_, history) = rt
        .block_on(moved.history(&grant, &deleted))
        .expect("the deletion is remembered");
    assert!(history.iter().any(|e| e.action.as_str() == "deleted"));
    let reviewer = Principal::from_parts(
        "reviewer-key".into(),
        Some(tenant.clone()),
        vec![roles::READER.into(), roles::MEMORY_REVIEWER.into()],
        Limits::unlimited(),
    )
    .tenant_grant()
    .expect("a tenant grant");
    assert!(
        moved
            .pending_reviews(&reviewer, 10)
            .iter()
            .any(|(e, _)| e.event_id == pending),
        "the pending review moved"
    );
    let mut req = recall_request(Default::default(), 5);
    req.query = "billing service release".into();
    let found = rt.block_on(moved.recall(&grant, req)).expect("recall");
    assert_eq!(found.results.len(), 5, "the five releases are recalled");
    // The count is exact: nothing was copied twice.
    let timeline_total = before.len() + acked.lock().expect("acked").len() + 1;
    let live = moved
        .tenant_records(&tenant, 0, usize::MAX, &mut 0)
        .expect("records");
    assert_eq!(
        live.records.len(),
        timeline_total + 1,
        "live events and the one tombstone"
    );

    // The old shard: the neighbour is untouched, the tenant is gone from engine and log.
    let old = serving(&first, &second, &neighbour).expect("neighbour served");
    assert!(old.get(&neighbour_grant, &neighbour_id).is_ok());
    assert!(old.get(&grant, &before[0]).is_err());
    let stream = first.catalog().stream(from).expect("stream");
    let log = NatsLog::open(&conn, &stream, 3).expect("open the old shard's log");
    let mut records = 0;
    for rec in log.read_from(0).expect("read") {
        let rec = rec.expect("record");
        records += 1;
        let text = String::from_utf8_lossy(&rec.payload);
        assert!(
            !text.contains(CANARY),
            "the old shard's log keeps the tenant's text"
        );
        assert!(
            !text.contains(&format!("\"{tenant}\"")),
            "the old shard's log keeps a record of the tenant"
        );
    }
    assert!(records >= 1, "the neighbour's record is still there");

    // A fresh tenant is pinned before it has data; its first writes go to its own shard.
    let fresh = (0..)
        .map(|i| format!("fresh-{i}"))
        .find(|t| first.owned_shards().contains(&first.shard_of(t)))
        .expect("a tenant of the first node");
    let report = first
        .pin_tenant(&fresh, "admin")
        .expect("pin a fresh tenant");
    assert_eq!(report.records, 0);
    wait_until(
        "the fresh tenant's shard is served",
        Duration::from_secs(60),
        || serving(&first, &second, &fresh).is_some() && second.shard_of(&fresh) == report.shard,
    );
    let fresh_grant = TenantGrant::internal(&fresh, "pin-test");
    let engine = serving(&first, &second, &fresh).expect("served");
    let id = write(&engine, &fresh_grant, "Kim opened the account", None)
        .expect("first write")
        .event
        .event_id;
    assert!(engine.get(&fresh_grant, &id).is_ok());

    let pins: Vec<u32> = first.pins().iter().map(|p| p.shard).collect();
    first.stop();
    second.stop();
    for shard in (0..SHARDS).chain(pins) {
        for generation in 1..4 {
            let _ =
                conn.delete_stream(&episodic::cluster::stream_name(&cluster, shard, generation));
        }
        let _ = conn.delete_stream(&episodic::cluster::node::audit_stream_name(&cluster, shard));
    }
}
