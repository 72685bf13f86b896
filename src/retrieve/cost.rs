//! The planner's cost model: what the exact path and a partition probe are expected to cost
//! a recall, in CPU nanoseconds, from the counts the planner has before it reads a vector.
//!
//! The constants are measured, not derived: each is the CPU time per unit of the path's
//! work on the 1M-event grid (`GRID_N=1000000 cargo bench --bench grid`, the `cpu ms/q`
//! column divided by the row's candidates or probed members; see the benchmarks doc). Only
//! their ratio decides a plan, and it holds across machines far better than their values.
//!
//! Invariant: the model only ever chooses between paths that return the same scope; it
//! never makes an answer hold fewer than k when k exist (the partition source still falls
//! back to exact when its lists hold fewer).

/// CPU per in-scope candidate on the exact path (code bounds, heads, ranking): 29.8 ms for
/// 100,000 candidates at the 1M grid's 10% row.
pub const EXACT_NS_PER_CANDIDATE: u64 = 300;

/// CPU per tenant member of a probed partition list that is in scope (its head copied and
/// checked, its code bounds, then ranked if it survives the bounds).
pub const PARTITION_NS_PER_MEMBER: u64 = 200;

/// CPU per tenant member of a probed partition list that is out of scope (its head copied
/// and checked, nothing more): the single-tenant 1M grid's actor+project 1% row reads about
/// 13,000 members, keeps 130 and answers in 0.26 ms.
pub const PARTITION_NS_PER_MEMBER_READ: u64 = 20;

/// CPU per in-scope id read by id (listed from the index and looked up in the partition;
/// only the ids in a probed list have their heads read): the single-tenant 1M grid's
/// actor+project 1% row spends 1.13 ms on 10,000 ids.
pub const PARTITION_NS_PER_ID: u64 = 110;

/// CPU per in-scope id read by id when the ids were listed already (to count the scope):
/// its list looked up, and its head read only when that list is probed.
pub const PARTITION_NS_PER_LISTED_ID: u64 = 10;

/// CPU per partition list to order the lists by the query (one 384-d dot product each).
pub const PARTITION_NS_PER_LIST: u64 = 60;

/// CPU per unit of a tenant graph search's width, the rest of the recall included: 0.84 ms
/// at width 160 on a single tenant of 100,000 clustered vectors (the grid's whole-tenant
/// row), 0.71 ms on a tenant of 10,000. The walk reads each graph's read-only copy
/// ([`crate::index::vector::FrozenGraph`]), so its cost grows little with the graph's size;
/// a scope that is `share` of its tenant is searched `1 / share` as wide.
pub const GRAPH_NS_PER_EF: u64 = 5_000;

/// CPU per unit of a walk within a scope's width ([`crate::index::vector::FrozenGraph::search_within`]),
/// the rest of the recall included: each point it expands brings up to 64 in-scope
/// neighbours, found through out-of-scope ones, so a unit costs about twice a plain
/// search's (the raw walk took 0.45–1.1 ms at widths 64–160 on a 10% scope of the clustered
/// 100,000-event grid tenant, 1.5 ms at 96 on real-model embeddings).
pub const GRAPH_WITHIN_NS_PER_EF: u64 = 10_000;

/// CPU per in-scope point to mark it in the set a walk within the scope reads (its node
/// read from the graph's keys under the filter's narrowest list and checked on its other
/// fields; the scope is not listed from the index).
pub const GRAPH_NS_PER_ID: u64 = 10;

/// The default floor below which recall stays exact whatever the partitions would cost:
/// about 0.6 ms of CPU, where proof of exactness is cheap enough to always have.
pub const EXACT_CHEAP_CANDIDATES: usize = 2_048;

/// The exact path's expected CPU for `candidates` in scope.
pub fn exact_ns(candidates: usize) -> u64 {
    candidates as u64 * EXACT_NS_PER_CANDIDATE
}

/// The members a probe reads from its lists: how many of its tenant's, and the expected
/// share of them in scope (the scope's share of its tenant).
#[derive(Debug, Clone, Copy)]
pub struct Members {
    /// Tenant members of the probed lists.
    pub probed: usize,
    /// The share of them expected in scope, in [0, 1].
    pub in_scope: f64,
}

impl Members {
    /// `probed` members of a tenant of `tenant_events`, `candidates` of them in scope.
    pub fn of(probed: usize, candidates: usize, tenant_events: usize) -> Self {
        let in_scope = (candidates as f64 / tenant_events.max(1) as f64).clamp(0.0, 1.0);
        Members { probed, in_scope }
    }

    /// Reading them: every one's head checked, those in scope bounded and ranked.
    fn read_ns(self) -> u64 {
        // `in_scope` is at most 1, so `kept` is at most `probed`.
        let kept = (self.probed as f64 * self.in_scope) as u64;
        let out = self.probed as u64 - kept;
        kept * PARTITION_NS_PER_MEMBER + out * PARTITION_NS_PER_MEMBER_READ
    }
}

/// A partition probe's expected CPU: ordering `lists`, then reading either the `members`
/// of the probed lists or, `by_id`, each of `candidates` by its id.
pub fn partition_ns(lists: usize, members: Members, candidates: usize, by_id: bool) -> u64 {
    let read = if by_id {
        candidates as u64 * PARTITION_NS_PER_ID
    } else {
        members.read_ns()
    };
    lists as u64 * PARTITION_NS_PER_LIST + read
}

/// Whether a probe whose scope's `candidates` ids are listed already reads them by id
/// rather than reading the `members` of the probed lists, and what it then costs.
pub fn listed_by_id(lists: usize, members: Members, candidates: usize) -> Option<u64> {
    let by_id = candidates as u64 * PARTITION_NS_PER_LISTED_ID;
    (by_id <= members.read_ns()).then_some(lists as u64 * PARTITION_NS_PER_LIST + by_id)
}

/// A tenant graph search's expected CPU at width `ef` for a scope that is `share` of its
/// tenant.
pub fn graph_ns(ef: usize, share: f64) -> u64 {
    let share = share.clamp(1e-6, 1.0);
    ((ef as u64 * GRAPH_NS_PER_EF) as f64 / share) as u64
}

/// A walk within a scope of `ids` points in its tenant's graph at width `ef`, marking
/// them first.
pub fn graph_within_ns(ef: usize, ids: usize) -> u64 {
    ef as u64 * GRAPH_WITHIN_NS_PER_EF + ids as u64 * GRAPH_NS_PER_ID
}

/// Whether a probe of `lists` lists for a scope of `count` events in a tenant of
/// `tenant_events` is sure to cost at least `ceiling` (another source's estimate), before
/// the lists are ordered: reading the scope by id costs at least `ceiling`, and reading the
/// lists' members, were the tenant spread evenly over them (`share` of them probed, at most
/// `budget` members), would cost twice `ceiling` or more. Closer calls are left to the
/// exact count.
pub fn probe_surely_dearer(
    (lists, count, tenant_events): (usize, usize, usize),
    (share, budget): (f64, usize),
    ceiling: u64,
) -> bool {
    let by_id = partition_ns(lists, Members::of(0, count, tenant_events), count, true);
    let probed = ((tenant_events as f64 * share) as usize).min(budget);
    let by_lists = partition_ns(
        lists,
        Members::of(probed, count, tenant_events),
        count,
        false,
    );
    by_id >= ceiling && by_lists >= ceiling.saturating_mul(2)
}

/// Whether a probe is expected to cost less than the exact path. Both estimates are of the
/// candidate stage alone; ranking what survives costs the two paths alike.
pub fn partition_pays(candidates: usize, partition: u64) -> bool {
    partition < exact_ns(candidates)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_pays_only_when_it_reads_less_than_the_scope() {
        // A 10% tenant of 1M (100,000 in scope) probed to the member budget: pays.
        let probe = partition_ns(500, Members::of(16_384, 100_000, 100_000), 100_000, false);
        assert!(partition_pays(100_000, probe));
        // 5,000 in scope of a 1M tenant whose probe reads a fifth of it: exact.
        let probe = partition_ns(500, Members::of(200_000, 5_000, 1_000_000), 5_000, false);
        assert!(!partition_pays(5_000, probe));
        // The same scope where the probe reads 16,384 members: most are only checked.
        let probe = partition_ns(500, Members::of(16_384, 5_000, 1_000_000), 5_000, false);
        assert!(partition_pays(5_000, probe));
        // Read by id, a probe skips the heads outside its lists: pays at any size.
        let probe = partition_ns(16, Members::of(0, 5_000, 5_000), 5_000, true);
        assert!(partition_pays(5_000, probe));
    }

    #[test]
    fn members_out_of_scope_cost_their_check_alone() {
        let whole = Members::of(10_000, 100_000, 100_000);
        assert_eq!(
            partition_ns(0, whole, 100_000, false),
            10_000 * PARTITION_NS_PER_MEMBER
        );
        // The single-tenant 1M grid's 1% row: 10,000 in scope, about 13,000 members read.
        let narrow = Members::of(13_000, 10_000, 1_000_000);
        assert_eq!(
            partition_ns(0, narrow, 10_000, false),
            130 * PARTITION_NS_PER_MEMBER + 12_870 * PARTITION_NS_PER_MEMBER_READ
        );
        assert!(partition_pays(
            10_000,
            partition_ns(500, narrow, 10_000, false)
        ));
    }

    #[test]
    fn listed_ids_are_read_by_id_while_that_reads_less_than_the_lists() {
        // The single-tenant 1M grid's 1% row, had its 10,000 ids been listed to count the
        // scope, against about 14,000 members of the probed lists.
        let members = Members::of(14_000, 10_000, 1_000_000);
        let cost = listed_by_id(500, members, 10_000).expect("by id");
        assert!(cost < partition_ns(500, members, 10_000, false));
        assert!(
            cost < partition_ns(500, members, 10_000, true),
            "cheaper than listing them"
        );
        // Half a million listed ids against the same lists: the lists.
        let half = Members::of(14_000, 500_000, 1_000_000);
        assert_eq!(listed_by_id(500, half, 500_000), None);
    }

    #[test]
    fn a_probe_is_skipped_unordered_only_when_both_of_its_reads_lose_clearly() {
        let share = (0.625, 1 << 20);
        // The 1M grid's 1% row: 10,000 of a 100,000-event tenant in 500 lists, against a
        // walk within at width 96. Read by id it costs more; its lists far more.
        let within = graph_within_ns(96, 10_000);
        assert!(probe_surely_dearer((500, 10_000, 100_000), share, within));
        // A ceiling above reading by id: the probe could win, so it is counted.
        let by_id = partition_ns(500, Members::of(0, 10_000, 100_000), 10_000, true);
        assert!(!probe_surely_dearer(
            (500, 10_000, 100_000),
            share,
            by_id + 1
        ));
        // A tenant so small that its lists' members cost less than twice the ceiling.
        assert!(!probe_surely_dearer((500, 10_000, 12_000), share, within));
        // A member budget that binds makes reading the lists cheap: counted.
        assert!(!probe_surely_dearer(
            (500, 10_000, 100_000),
            (0.625, 4_096),
            within
        ));
    }

    #[test]
    fn a_graph_search_costs_more_for_a_narrower_share_of_its_tenant() {
        let whole = graph_ns(160, 1.0);
        assert_eq!(whole, 160 * GRAPH_NS_PER_EF);
        assert_eq!(graph_ns(160, 0.5), 2 * whole);
        assert!(
            graph_ns(160, 0.0) > whole,
            "a zero share is clamped, not divided by"
        );
        // At the defaults a whole tenant pays from about 2,700 candidates.
        assert!(whole > exact_ns(2_048) && whole < exact_ns(4_096));
    }

    #[test]
    fn a_walk_within_a_scope_costs_its_width_and_its_ids() {
        // The 1M grid's 1% row: 10,000 ids of a 100,000-event tenant, a tenth of it. A
        // plain search would be ten times as wide; the walk within costs about its width.
        let within = graph_within_ns(96, 10_000);
        assert_eq!(
            within,
            96 * GRAPH_WITHIN_NS_PER_EF + 10_000 * GRAPH_NS_PER_ID
        );
        assert!(within < exact_ns(10_000) && within < graph_ns(160, 0.1));
        // 2,048 ids (the exact floor): scoring them costs less.
        assert!(graph_within_ns(96, 2_048) > exact_ns(2_048));
    }
}
