//! The failed-authentication limit per client address: a token bucket per address that
//! every presented key draws from and that only a key that authenticates pays back.
//!
//! Invariants:
//! - A request presenting a key takes one token from its address's bucket before the key is
//!   looked at, and returns it only when the key authenticates; so failures, and only
//!   failures, use up the bucket, and concurrent attempts cannot overdraw it. A bucket holds
//!   at most `burst` tokens and refills at `per_minute / 60` tokens a second.
//! - While a bucket is empty, every request presenting a key from that address is answered
//!   429 `too_many_requests` with `Retry-After`, without checking the key: a valid key from
//!   that address is refused too until a token has grown back (the same as a wrong one, so
//!   the answer says nothing about the key). Requests without a key (401) do not count.
//! - The address is the TCP peer's: IPv4 as is, IPv6 by its /64 prefix (one host usually
//!   owns a whole /64), IPv4-mapped IPv6 as IPv4. Clients behind one proxy or NAT share a
//!   bucket; `X-Forwarded-For` is not trusted.
//! - Requests that carry no peer address (the router used in process, as the tests do) are
//!   not limited: the listener always supplies the address.
//! - Memory is bounded: at most [`MAX_TRACKED`] addresses are tracked; a full bucket holds
//!   no information and is dropped (at once after a success, in bulk when the table fills);
//!   if the table is still full, the fullest bucket is evicted. More failing addresses than
//!   that at once each regain up to `burst` attempts when evicted.
//! - The table lock is never held across an `.await` (the whole decision is synchronous).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::time::Instant;

use parking_lot::Mutex;

/// Most addresses tracked at once.
pub const MAX_TRACKED: usize = 16_384;

/// The limit's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthFailureLimit {
    /// Failed authentications an address may make per minute, sustained (0: no limit).
    pub per_minute: u32,
    /// Failed authentications an address may make at once (the bucket size).
    pub burst: u32,
}

impl Default for AuthFailureLimit {
    fn default() -> Self {
        AuthFailureLimit {
            per_minute: 20,
            burst: 10,
        }
    }
}

/// Refusal: the address's bucket is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    /// Whole seconds until one token has grown back (at least 1).
    pub retry_after_secs: u64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// The per-address buckets.
pub struct AuthLimiter {
    rate_per_sec: f64,
    burst: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

/// One authentication attempt holding a token; [`Attempt::succeeded`] gives it back, dropping
/// the attempt keeps it spent.
#[must_use]
pub struct Attempt<'a> {
    limiter: &'a AuthLimiter,
    addr: Option<IpAddr>,
}

impl Attempt<'_> {
    /// The key authenticated: the token is returned.
    pub fn succeeded(self) {
        if let Some(addr) = self.addr {
            self.limiter.refund(addr, Instant::now());
        }
    }
}

impl AuthLimiter {
    /// A limiter with `limit`'s settings.
    pub fn new(limit: AuthFailureLimit) -> AuthLimiter {
        AuthLimiter {
            rate_per_sec: f64::from(limit.per_minute) / 60.0,
            burst: f64::from(limit.burst.max(1)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for an attempt from `peer` (no limit without a peer address or with a
    /// rate of 0).
    pub fn attempt(&self, peer: Option<IpAddr>) -> Result<Attempt<'_>, Limited> {
        self.attempt_at(peer, Instant::now())
    }

    /// Whether an attempt from `peer` would be allowed now (takes nothing).
    pub fn allows(&self, peer: Option<IpAddr>) -> bool {
        let Some(addr) = peer.filter(|_| self.rate_per_sec > 0.0).map(bucket_key) else {
            return true;
        };
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        match buckets.get_mut(&addr) {
            Some(bucket) => {
                self.refill(bucket, now);
                bucket.tokens >= 1.0
            }
            None => true,
        }
    }

    fn attempt_at(&self, peer: Option<IpAddr>, now: Instant) -> Result<Attempt<'_>, Limited> {
        let addr = peer.filter(|_| self.rate_per_sec > 0.0).map(bucket_key);
        if let Some(addr) = addr {
            self.take(addr, now)?;
        }
        Ok(Attempt {
            limiter: self,
            addr,
        })
    }

    fn take(&self, addr: IpAddr, now: Instant) -> Result<(), Limited> {
        let mut buckets = self.buckets.lock();
        if !buckets.contains_key(&addr) && buckets.len() >= MAX_TRACKED {
            self.make_room(&mut buckets, now);
        }
        let bucket = buckets.entry(addr).or_insert(Bucket {
            tokens: self.burst,
            updated: now,
        });
        self.refill(bucket, now);
        if bucket.tokens < 1.0 {
            let secs = ((1.0 - bucket.tokens) / self.rate_per_sec).ceil();
            return Err(Limited {
                retry_after_secs: (secs as u64).max(1),
            });
        }
        bucket.tokens -= 1.0;
        Ok(())
    }

    fn refund(&self, addr: IpAddr, now: Instant) {
        let mut buckets = self.buckets.lock();
        let Some(bucket) = buckets.get_mut(&addr) else {
            return;
        };
        self.refill(bucket, now);
        bucket.tokens = (bucket.tokens + 1.0).min(self.burst);
        if bucket.tokens >= self.burst {
            buckets.remove(&addr);
        }
    }

    fn refill(&self, bucket: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.rate_per_sec).min(self.burst);
        bucket.updated = now;
    }

    /// Drops full buckets; if none was full, evicts the fullest one.
    fn make_room(&self, buckets: &mut HashMap<IpAddr, Bucket>, now: Instant) {
        buckets.retain(|_, b| {
            self.refill(b, now);
            b.tokens < self.burst
        });
        if buckets.len() < MAX_TRACKED {
            return;
        }
        let fullest = buckets
            .iter()
            .max_by(|a, b| a.1.tokens.total_cmp(&b.1.tokens))
            .map(|(addr, _)| *addr);
        if let Some(addr) = fullest {
            buckets.remove(&addr);
        }
    }

    /// Addresses tracked now.
    pub fn tracked(&self) -> usize {
        self.buckets.lock().len()
    }
}

/// The bucket an address counts against: IPv4 itself, IPv6 its /64.
fn bucket_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;
    use std::time::Duration;

    use super::*;

    fn limiter() -> AuthLimiter {
        AuthLimiter::new(AuthFailureLimit {
            per_minute: 60,
            burst: 3,
        })
    }

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn failures_use_up_the_burst_then_refill_at_the_rate() {
        let l = limiter();
        let t0 = Instant::now();
        for _ in 0..3 {
            drop(l.attempt_at(Some(A), t0).expect("within burst"));
        }
        let refused = l.attempt_at(Some(A), t0).err().expect("exhausted");
        assert_eq!(refused.retry_after_secs, 1);
        assert!(
            l.attempt_at(Some(B), t0).is_ok(),
            "another address is unaffected"
        );
        let later = t0 + Duration::from_millis(1100);
        drop(l.attempt_at(Some(A), later).expect("one token grew back"));
        assert!(l.attempt_at(Some(A), later).is_err());
    }

    #[test]
    fn successes_give_their_token_back_and_leave_no_entry() {
        let l = limiter();
        for _ in 0..10 {
            l.attempt(Some(A))
                .expect("valid keys never run out")
                .succeeded();
        }
        assert_eq!(l.tracked(), 0);
        drop(l.attempt(Some(A)).expect("fail once"));
        assert_eq!(l.tracked(), 1);
    }

    #[test]
    fn no_peer_or_zero_rate_means_no_limit() {
        let l = limiter();
        for _ in 0..100 {
            drop(l.attempt(None).expect("no peer, no limit"));
        }
        let off = AuthLimiter::new(AuthFailureLimit {
            per_minute: 0,
            burst: 1,
        });
        for _ in 0..100 {
            drop(off.attempt(Some(A)).expect("off"));
        }
        assert_eq!(l.tracked() + off.tracked(), 0);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let l = limiter();
        let t0 = Instant::now();
        let host = |last: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 1, 2, 0, 0, 0, last));
        for i in 0..3 {
            drop(l.attempt_at(Some(host(i)), t0).expect("burst"));
        }
        assert!(l.attempt_at(Some(host(99)), t0).is_err(), "same /64");
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        for _ in 0..3 {
            drop(l.attempt_at(Some(A), t0).expect("burst"));
        }
        assert!(
            l.attempt_at(Some(mapped), t0).is_err(),
            "mapped is the same"
        );
    }

    #[test]
    fn the_table_stays_bounded() {
        let l = limiter();
        let t0 = Instant::now();
        for i in 0..(MAX_TRACKED as u32 + 100) {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            drop(l.attempt_at(Some(ip), t0));
        }
        assert!(l.tracked() <= MAX_TRACKED);
        let much_later = t0 + Duration::from_secs(60);
        drop(l.attempt_at(Some(B), much_later));
        assert!(l.tracked() <= MAX_TRACKED);
    }
}
