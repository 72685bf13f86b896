//! Shard leases (`cluster::lease`) on a real 3-node NATS cluster: one winner of a race,
//! compare-and-set renewal, release, expiry after the TTL, and increasing epochs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use episodic::cluster::{LeaseError, Leases};
use episodic::store::nats::NatsConnection;

use crate::nats_cluster::{shared, unique_stream};

fn leases(ttl: Duration) -> Leases {
    let conn = NatsConnection::connect(&shared().urls).expect("connect");
    Leases::open(&conn, &unique_stream("LEASES"), 3, ttl).expect("bucket")
}

#[test]
fn of_nodes_racing_for_a_shard_exactly_one_wins() {
    let leases = Arc::new(leases(Duration::from_secs(30)));
    let racers: Vec<_> = (0..6)
        .map(|i| {
            let leases = Arc::clone(&leases);
            std::thread::spawn(move || leases.acquire(3, &format!("n{i}")))
        })
        .collect();
    let results: Vec<_> = racers
        .into_iter()
        .map(|r| r.join().expect("join"))
        .collect();
    let winners: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    let winner = winners[0].node.clone();
    for r in &results {
        match r {
            Ok(_) => {}
            Err(LeaseError::Held { shard: 3, node }) => assert_eq!(node, &winner),
            Err(e) => panic!("a loser learns who holds the shard, got {e}"),
        }
    }
    assert_eq!(
        leases.holder(3).expect("read").map(|(n, _)| n),
        Some(winner)
    );
}

#[test]
fn a_lease_is_renewed_by_compare_and_set_and_released() {
    let leases = leases(Duration::from_secs(30));
    let first = leases.acquire(1, "n1").expect("take");
    let renewed = leases.renew(&first).expect("renew");
    assert_eq!(renewed.epoch, first.epoch, "a renewal keeps the epoch");
    assert!(
        matches!(leases.renew(&first), Err(LeaseError::Lost { shard: 1 })),
        "a renewal from a stale copy is refused"
    );
    assert!(matches!(
        leases.acquire(1, "n2"),
        Err(LeaseError::Held { .. })
    ));
    leases.release(&renewed).expect("release");
    assert!(
        matches!(leases.release(&renewed), Err(LeaseError::Lost { shard: 1 })),
        "a lease released once is lost to its holder"
    );
    let second = leases.acquire(1, "n2").expect("taken after the release");
    assert!(second.epoch > first.epoch, "epochs grow with every take");
}

#[test]
fn an_unrenewed_lease_expires_and_its_holder_learns_it_lost() {
    let ttl = Duration::from_secs(2);
    let leases = leases(ttl);
    let old = leases.acquire(5, "n1").expect("take");
    assert!(matches!(
        leases.acquire(5, "n2"),
        Err(LeaseError::Held { .. })
    ));
    let started = Instant::now();
    let taken = loop {
        match leases.acquire(5, "n2") {
            Ok(lease) => break lease,
            Err(LeaseError::Held { .. }) if started.elapsed() < ttl * 5 => {
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("the lease did not expire: {e}"),
        }
    };
    assert!(
        started.elapsed() + Duration::from_millis(300) >= ttl,
        "not before the TTL"
    );
    assert!(taken.epoch > old.epoch);
    assert!(matches!(
        leases.renew(&old),
        Err(LeaseError::Lost { shard: 5 })
    ));
}
