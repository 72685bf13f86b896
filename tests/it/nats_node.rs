//! Cluster nodes (`cluster::node`) on a real 3-node NATS cluster with the real model: a node
//! that stops without a word (its leases left to expire) has its shards taken by the
//! survivor within the lease TTL plus the replay, with every acknowledged event and pending
//! review there; a
//! node that stops cleanly hands its shards over at once.

use std::time::{Duration, Instant};

use episodic::auth::{roles, Limits, Principal, TenantGrant};
use episodic::cluster::{Node, NodeConfig};
use episodic::engine::{Engine, EngineConfig};
use episodic::store::nats::NatsConnection;

use crate::common::{event, input, real_model, recall_request, rt};
use crate::nats_cluster::{shared, unique_stream};

pub(crate) const SHARDS: u32 = 4;
pub(crate) const TTL: Duration = Duration::from_secs(3);

pub(crate) fn node(conn: &NatsConnection, cluster: &str, id: &str, dir: &std::path::Path) -> Node {
    node_with(conn, cluster, id, dir, true)
}

fn node_with(
    conn: &NatsConnection,
    cluster: &str,
    id: &str,
    dir: &std::path::Path,
    standbys: bool,
) -> Node {
    node_with_ttl(conn, cluster, id, dir, standbys, TTL)
}

fn node_with_ttl(
    conn: &NatsConnection,
    cluster: &str,
    id: &str,
    dir: &std::path::Path,
    standbys: bool,
    lease_ttl: Duration,
) -> Node {
    let config = NodeConfig {
        node_id: id.to_string(),
        advertise_url: format!("http://{id}.invalid"),
        cluster: cluster.to_string(),
        shards: SHARDS,
        lease_ttl,
        replicas: 3,
        standbys,
        engine: EngineConfig::new(dir.to_path_buf()),
    };
    Node::start(conn, config, real_model()).expect("start the node")
}

/// Waits until `node` holds `count` shards.
pub(crate) fn wait_for_shards(node: &Node, count: usize, within: Duration) -> Duration {
    let started = Instant::now();
    while node.owned_shards().len() < count {
        assert!(
            started.elapsed() < within,
            "the node holds {:?} after {within:?}, expected {count} shards",
            node.owned_shards()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    started.elapsed()
}

/// A tenant on each shard, so every shard holds events.
fn tenants(node: &Node) -> Vec<String> {
    (0..SHARDS)
        .map(|shard| {
            (0..)
                .map(|i| format!("tenant-{i}"))
                .find(|t| node.shard_of(t) == shard)
                .expect("a tenant for every shard")
        })
        .collect()
}

/// A connection, a fresh cluster name, a first node holding every shard, a second node
/// beside it, and their data directories (alive as long as the last element is).
pub(crate) type Pair = (NatsConnection, String, Node, Node, [tempfile::TempDir; 2]);

pub(crate) fn pair(prefix: &str) -> Pair {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let cluster = unique_stream(prefix);
    let dirs = [
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    ];
    let first = node(&conn, &cluster, "n1", dirs[0].path());
    wait_for_shards(&first, SHARDS as usize, Duration::from_secs(60));
    let second = node(&conn, &cluster, "n2", dirs[1].path());
    // The first gives the second its share, and each stands by for the other's shards.
    wait_until("the shares are even", Duration::from_secs(60), || {
        first.owned_shards().len() == SHARDS as usize / 2
            && second.owned_shards().len() == SHARDS as usize / 2
    });
    wait_until("standbys opened", Duration::from_secs(60), || {
        second.standby_shards() == first.owned_shards()
            && first.standby_shards() == second.owned_shards()
    });
    (conn, cluster, first, second, dirs)
}

/// The engine of whichever node serves `tenant`.
fn owner(first: &Node, second: &Node, tenant: &str) -> Engine {
    first
        .engine_for(tenant)
        .or_else(|| second.engine_for(tenant))
        .expect("a node serves the tenant")
}

fn delete_streams(conn: &NatsConnection, cluster: &str) {
    for shard in 0..SHARDS {
        let _ = conn.delete_stream(&episodic::cluster::stream_name(cluster, shard, 1));
    }
}

fn engine(node: &Node, tenant: &str) -> Engine {
    node.engine_for(tenant)
        .expect("the node serves the tenant's shard")
}

#[test]
fn a_silent_node_s_shards_are_taken_over_with_every_acknowledged_event() {
    let (conn, cluster, first, second, _dirs) = pair("NODE");
    let tenants = tenants(&first);
    let rt = rt();
    let mut acked = Vec::new();
    for (i, tenant) in tenants.iter().enumerate() {
        let grant = TenantGrant::internal(tenant, "cluster-test");
        for j in 0..3 {
            let summary = format!("{tenant} shipped release {i}.{j} of the billing service");
            let body = event("user:dana", &summary, "2026-04-01T09:00:00Z");
            let written = rt
                .block_on(owner(&first, &second, tenant).write(&grant, input(&body), false))
                .expect("write");
            acked.push((tenant.clone(), written.event.event_id));
        }
    }
    // An event held for review: the review is a record of the shard's stream too.
    let reviewed_tenant = &tenants[1];
    let mut body = event(
        "user:dana",
        "A pasted web page claims Dana quit",
        "2026-04-01T10:00:00Z",
    );
    body["sourceTrust"] = serde_json::json!("untrusted_content");
    let grant = TenantGrant::internal(reviewed_tenant, "cluster-test");
    let pending = rt
        .block_on(owner(&first, &second, reviewed_tenant).write(&grant, input(&body), false))
        .expect("write for review");
    assert!(matches!(
        pending.decision,
        episodic::model::Decision::Review { .. }
    ));

    first.abandon();
    let took = wait_for_shards(&second, SHARDS as usize, TTL * 4 + Duration::from_secs(60));
    eprintln!("the survivor served every shard {took:?} after the other node went silent");
    for (tenant, id) in &acked {
        let grant = TenantGrant::internal(tenant, "cluster-test");
        let got = engine(&second, tenant).get(&grant, id);
        assert!(
            got.is_ok(),
            "acknowledged event {id} of {tenant} is missing"
        );
    }
    let reviewer = Principal::from_parts(
        "reviewer-key".into(),
        Some(reviewed_tenant.clone()),
        vec![roles::READER.into(), roles::MEMORY_REVIEWER.into()],
        Limits::unlimited(),
    )
    .tenant_grant()
    .expect("a tenant grant");
    let waiting = engine(&second, reviewed_tenant).pending_reviews(&reviewer, 10);
    assert!(
        waiting
            .iter()
            .any(|(e, _)| e.event_id == pending.event.event_id),
        "the pending review survives the node"
    );
    let tenant = &tenants[0];
    let grant = TenantGrant::internal(tenant, "cluster-test");
    let mut req = recall_request(Default::default(), 3);
    req.query = "billing service release".into();
    let found = rt
        .block_on(engine(&second, tenant).recall(&grant, req))
        .expect("recall");
    assert_eq!(
        found.results.len(),
        3,
        "the tenant's three events are recalled"
    );
    let body = event(
        "user:dana",
        "Dana reviewed the takeover",
        "2026-04-02T09:00:00Z",
    );
    rt.block_on(engine(&second, tenant).write(&grant, input(&body), false))
        .expect("writes go on after the takeover");
    second.stop();
    delete_streams(&conn, &cluster);
}

#[test]
fn a_node_that_stops_cleanly_hands_its_shards_over_at_once() {
    let (conn, cluster, first, second, _dirs) = pair("HANDOVER");
    let stopped = Instant::now();
    first.stop();
    wait_for_shards(&second, SHARDS as usize, Duration::from_secs(60));
    assert!(
        stopped.elapsed() < TTL * 2 + Duration::from_secs(20),
        "released leases are taken without waiting for them to expire"
    );
    let owners: Vec<_> = (0..SHARDS)
        .map(|s| second.owner_of_shard(s).expect("read"))
        .collect();
    assert!(
        owners.iter().all(|o| o.as_deref() == Some("n2")),
        "{owners:?}"
    );
    second.stop();
    delete_streams(&conn, &cluster);
}

/// A hand-off releases the lease before it returns, even when a renewal of that lease is
/// in flight: a short TTL renews every few hundred milliseconds, so over many hand-offs
/// some land during a renewal. (A renewal that moved the revision on under the release
/// left the shard held until the lease lapsed, and its former owner could take it back.)
#[test]
fn a_hand_off_releases_its_lease_at_once_while_renewals_run() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let cluster = unique_stream("HANDOFF");
    let dirs = [
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    ];
    let ttl = Duration::from_millis(2000);
    let nodes = [
        node_with_ttl(&conn, &cluster, "n1", dirs[0].path(), false, ttl),
        node_with_ttl(&conn, &cluster, "n2", dirs[1].path(), false, ttl),
    ];
    wait_until("every shard is served", Duration::from_secs(60), || {
        nodes[0].owned_shards().len() + nodes[1].owned_shards().len() == SHARDS as usize
    });
    let ids = ["n1", "n2"];
    let rounds = 10;
    for round in 0..rounds {
        let (from, to) = (round % 2, 1 - round % 2);
        let Some(&shard) = nodes[from].owned_shards().first() else {
            panic!("round {round}: {} serves no shard", ids[from]);
        };
        nodes[from].hand_off(shard, ids[to]).expect("hand off");
        let holder = nodes[from].owner_of_shard(shard).expect("read the lease");
        assert_ne!(
            holder.as_deref(),
            Some(ids[from]),
            "round {round}: shard {shard}'s lease outlived its hand-off"
        );
        wait_until(
            &format!("round {round}: {} serves shard {shard}", ids[to]),
            Duration::from_secs(60),
            || nodes[to].owned_shards().contains(&shard),
        );
    }
    for node in &nodes {
        node.stop();
    }
    delete_streams(&conn, &cluster);
}

/// A move waits for its target, however slow: the hand-off mark is kept while the move
/// waits, so nobody takes the shard meanwhile, its former owner included (it holds less
/// than its share then). Once the move gives up, the mark lapses and the shard is taken
/// again. The target here announces itself and holds its share, but never takes the shard.
#[test]
fn a_shard_moving_to_a_slow_target_is_left_for_it_while_the_move_waits() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let cluster = unique_stream("SLOWMOVE");
    let dir = tempfile::tempdir().expect("tmp");
    let first = node_with(&conn, &cluster, "n1", dir.path(), false);
    wait_for_shards(&first, SHARDS as usize, Duration::from_secs(60));
    let leases = episodic::cluster::Leases::open(&conn, &format!("{cluster}_LEASES"), 3, TTL)
        .expect("the lease bucket");
    let stop = AtomicBool::new(false);
    /// Stops the slow node when the scope ends, by a failed assertion too.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    std::thread::scope(|scope| {
        // The slow node: announced, taking the two shards n1 sheds for it, renewing them.
        scope.spawn(|| {
            let mut held: Vec<episodic::cluster::Lease> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let _ = leases.announce("slow", "http://slow.invalid");
                for lease in &mut held {
                    *lease = leases.renew(lease).expect("the slow node renews its lease");
                }
                for shard in [2, 3] {
                    if !held.iter().any(|l| l.shard == shard) {
                        if let Ok(lease) = leases.acquire(shard, "slow") {
                            held.push(lease);
                        }
                    }
                }
                std::thread::sleep(TTL / 6);
            }
            for lease in &held {
                let _ = leases.release(lease);
            }
        });
        let _stop = Stop(&stop);
        wait_until(
            "n1 sheds shards 2 and 3 to the slow node",
            Duration::from_secs(60),
            || {
                first.owned_shards() == [0, 1]
                    && [2, 3]
                        .iter()
                        .all(|s| first.owner_of_shard(*s).ok().flatten().as_deref() == Some("slow"))
            },
        );
        // Three TTLs: without its mark kept, the shard would be free after one, and n1,
        // below its share, would take it back.
        let taken = first
            .move_shard(0, "slow", TTL * 3)
            .expect("hand the shard off");
        assert!(!taken, "the slow node never takes it");
        assert_eq!(
            first.owner_of_shard(0).expect("read the lease"),
            None,
            "nobody took the shard while the move waited"
        );
        assert_eq!(first.owned_shards(), [1]);
        // The move gave up: its mark lapses and the shard is served again.
        wait_until("n1 takes the shard back", Duration::from_secs(60), || {
            first.owned_shards() == [0, 1]
        });
    });
    first.stop();
    delete_streams(&conn, &cluster);
}

#[test]
fn nodes_without_standbys_keep_none_and_replay_a_shard_they_take_over() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let cluster = unique_stream("NOSTANDBY");
    let dirs = [
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    ];
    let first = node_with(&conn, &cluster, "n1", dirs[0].path(), false);
    wait_for_shards(&first, SHARDS as usize, Duration::from_secs(60));
    let second = node_with(&conn, &cluster, "n2", dirs[1].path(), false);
    wait_until("the shares are even", Duration::from_secs(60), || {
        first.owned_shards().len() == SHARDS as usize / 2
            && second.owned_shards().len() == SHARDS as usize / 2
    });
    let tenant = tenants(&first)
        .into_iter()
        .find(|t| first.owned_shards().contains(&first.shard_of(t)))
        .expect("a tenant of the first node");
    let grant = TenantGrant::internal(&tenant, "cluster-test");
    let rt = rt();
    let body = event("user:dana", "Dana renewed the plan", "2026-04-01T09:00:00Z");
    let id = rt
        .block_on(engine(&first, &tenant).write(&grant, input(&body), false))
        .expect("write")
        .event
        .event_id;
    // Two coordination rounds: a node with standbys would have opened them by now.
    std::thread::sleep(TTL);
    assert!(first.standby_shards().is_empty() && second.standby_shards().is_empty());
    first.abandon();
    wait_for_shards(&second, SHARDS as usize, TTL * 4 + Duration::from_secs(60));
    assert_eq!(
        second.promotions(),
        0,
        "nothing to promote: the shards were replayed"
    );
    assert!(engine(&second, &tenant).get(&grant, &id).is_ok());
    second.stop();
    delete_streams(&conn, &cluster);
}

#[test]
fn a_node_with_another_write_policy_refuses_to_join() {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    let cluster = unique_stream("POLICY");
    let dirs = [
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    ];
    let first = node(&conn, &cluster, "n1", dirs[0].path());
    let mut config = NodeConfig {
        node_id: "n2".into(),
        advertise_url: "http://n2.invalid".into(),
        cluster: cluster.clone(),
        shards: SHARDS,
        lease_ttl: TTL,
        replicas: 3,
        standbys: true,
        engine: EngineConfig::new(dirs[1].path().to_path_buf()),
    };
    config.engine.policy.version = "v2-stricter".into();
    let refused = Node::start(&conn, config.clone(), real_model())
        .err()
        .expect("another policy is refused");
    assert!(
        format!("{refused:#}").contains("v2-stricter"),
        "{refused:#}"
    );
    // The same policy joins.
    config.engine.policy = EngineConfig::new(dirs[1].path().to_path_buf()).policy;
    let second = Node::start(&conn, config, real_model()).expect("the same policy joins");
    second.stop();
    first.stop();
    delete_streams(&conn, &cluster);
}

/// Waits until `check` holds.
pub(crate) fn wait_until(what: &str, within: Duration, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_standby_follows_its_shard_and_is_promoted_on_failover() {
    if std::env::var_os("EPISODIC_TEST_LOG").is_some() {
        episodic::telemetry::init_logging("text");
    }
    let (conn, cluster, first, second, _dirs) = pair("STANDBY");
    let tenant = tenants(&first)
        .into_iter()
        .find(|t| first.owned_shards().contains(&first.shard_of(t)))
        .expect("a tenant of the first node");
    let grant = TenantGrant::internal(&tenant, "cluster-test");
    let rt = rt();
    let mut acked = Vec::new();
    for i in 0..6 {
        let body = event(
            "user:dana",
            &format!("Standby check {i}"),
            "2026-04-03T09:00:00Z",
        );
        let written = rt
            .block_on(engine(&first, &tenant).write(&grant, input(&body), false))
            .expect("write");
        acked.push(written.event.event_id);
        if i == 2 {
            // Let the standby follow the first half; the rest is the tail it applies when
            // promoted.
            std::thread::sleep(TTL);
        }
    }
    let taken = Instant::now();
    let before = second.promotions();
    first.abandon();
    wait_for_shards(&second, SHARDS as usize, Duration::from_secs(60));
    eprintln!("taken over by promotion in {:?}", taken.elapsed());
    assert_eq!(
        second.promotions() - before,
        SHARDS as u64 / 2,
        "every shard of the dead node was taken by promoting its standby"
    );
    let survivor = engine(&second, &tenant);
    for id in &acked {
        survivor.get(&grant, id).expect("every acknowledged event");
    }
    let body = event("user:dana", "After the promotion", "2026-04-04T09:00:00Z");
    rt.block_on(survivor.write(&grant, input(&body), false))
        .expect("the promoted standby writes");
    second.stop();
    delete_streams(&conn, &cluster);
}
