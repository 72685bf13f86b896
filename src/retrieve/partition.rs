//! The partition-list candidate source (approximate ranking, exact scope): the members of
//! the lists nearest the query, every id the partition does not cover and, when BM25 ranks,
//! the scope's best word matches, each checked on its head like any candidate.

use rayon::prelude::*;

use super::config::RecallConfig;
use super::cost;
use super::lexical::Bm25;
use super::plan::KnownBounds;
use super::scope::{index_error, InScope, SearchError};
use crate::index::vector::{block_bounds, Partition, QueryCode};
use crate::read::{Access, Head, Partitioned, Snapshot, Table, View, Visibility};

/// Default [`RecallConfig::partition_probe_max_members`]: high enough that the default
/// probe share decides for any tenant below two million events. A budget that binds reads
/// a smaller share of a large tenant's lists, which the clustered grid does not notice but
/// real sentence embeddings do (recall@10 0.95 instead of 0.996 on a tenant of 160,000 real
/// embeddings with a budget of 16,384, at a probe share of 1/2; see the benchmarks doc).
pub const PARTITION_PROBE_MAX_MEMBERS: usize = 1 << 20;

/// Default [`RecallConfig::partition_probe_share`]: the smallest share measured to give
/// recall@10 of at least 0.99 against exact on every partitioned row of real-model
/// embeddings of real text (160,000 events: 0.996 at a 10% tenant, 0.991 at half of it;
/// 1/16 gave 0.87 there, 1/8 0.92, 1/4 0.96, 1/2 0.990 and 0.987).
pub const PARTITION_PROBE_SHARE: f64 = 0.625;

/// BM25 matches added to a partitioned candidate set, per result asked for.
pub(super) const PARTITION_LEXICAL_DEPTH: usize = 4;

/// A scope of at most this share (1/n) of the tenant members the probed lists hold is read
/// by its ids (each looked up in the partition) rather than by the lists' members: listing
/// an id from the index and reading its head from the table costs about four times reading
/// a member's head from its list, which holds a copy in member order.
pub(super) const PARTITION_BY_ID_DIVISOR: usize = 4;

/// The visible in-scope heads among the members of the partition lists nearest `query`
/// (the nearest share of them measured for the scope's size ([`probe_share`]), fewer past
/// the member budget: see [`probe_count`]), among the ids the partition does not
/// cover, and, when `lexical` is given (BM25 has a share of the ranking), among the scope's
/// [`PARTITION_LEXICAL_DEPTH`]·k best BM25 matches, in id order. A scope that is a large
/// part of its tenant is read from the probed lists' members, more lists while fewer than
/// `k` were found; a narrower one from the index's ids, those in a probed list kept, and so
/// is one whose ids were listed already to count it, while looking each up costs less than
/// reading the lists ([`cost::listed_by_id`]).
/// `None` (the caller takes the exact path) unless partitioned recall is on, a partition
/// is built, heads can decide the filter, the index counts more than
/// `exact_max_candidates` events in scope and the probe is expected to cost less than
/// scoring them all ([`cost`]) and less than `ceiling_ns` (another source's estimate), or when a narrow scope's probed lists hold fewer than `k`
/// of its events.
pub(super) fn partition_scope(
    snap: &Snapshot<'_>,
    (cfg, ceiling_ns): (&RecallConfig, Option<u64>),
    access: &Access,
    in_scope: &InScope<'_>,
    (query, lexical): (&[f32], Option<&Bm25<'_>>),
    vis: &Visibility,
    k: usize,
) -> Result<Option<(Vec<Head>, KnownBounds)>, SearchError> {
    if !cfg.partitioned || k == 0 {
        return Ok(None);
    }
    let Some(partitioned) = snap.partition.clone() else {
        return Ok(None);
    };
    let partition = &partitioned.index;
    let Some(scope) = snap.table.head_filter(in_scope.filter) else {
        return Ok(None);
    };
    let Some(count) = broad_count(snap, in_scope, cfg.exact_max_candidates)? else {
        return Ok(None);
    };
    let share = probe_share(&partitioned, cfg, count);
    if let Some(ceiling) = ceiling_ns {
        if surely_dearer(
            snap,
            partition,
            (cfg, share, ceiling),
            &in_scope.filter.tenant,
            count,
        ) {
            return Ok(None);
        }
    }
    let order = partition.order(query);
    if order.is_empty() {
        return Ok(None);
    }
    let (probes, probed_members) = probe_count(partition, &order, scope.tenant, (cfg, share));
    let tenant_events = snap.table.tenant_ids(&in_scope.filter.tenant);
    let members = cost::Members::of(probed_members, count, tenant_events);
    // Ids listed already (to count the scope) cost little more than their list's look-up.
    let listed = in_scope
        .ids
        .get()
        .and_then(|_| cost::listed_by_id(order.len(), members, count));
    let read_by_id =
        listed.is_some() || count.saturating_mul(PARTITION_BY_ID_DIVISOR) <= probed_members;
    let probe_cost =
        listed.unwrap_or_else(|| cost::partition_ns(order.len(), members, count, read_by_id));
    if !cost::partition_pays(count, probe_cost) || ceiling_ns.is_some_and(|c| probe_cost >= c) {
        return Ok(None);
    }
    let view = View::new(vis);
    let keep = |t: &Table, h: &Head| scope.matches(h) && access.shows(t, &view, h);
    let probe = Probe {
        partitioned: &partitioned,
        order: &order,
        probes,
    };
    let mut probed = if read_by_id {
        let heads = probe_by_id(snap, in_scope.ids()?, &probe, keep);
        if heads.len() < k {
            return Ok(None);
        }
        Probed {
            held: heads,
            ..Probed::default()
        }
    } else {
        let code = QueryCode::new(query);
        probe_lists(snap, &probe, (scope.tenant, k), code.as_ref(), keep)
    };
    if let Some(bm25) = lexical {
        // Events the query names by their words, wherever their vectors lie.
        let hits = bm25.best(k.saturating_mul(PARTITION_LEXICAL_DEPTH))?;
        let table: &Table = &snap.table;
        probed.held.extend(
            hits.iter()
                .map(|(d, _)| table.head(*d))
                .filter(|h| keep(table, h)),
        );
    }
    Ok(Some(probed.by_id(&snap.table, &partitioned)))
}

/// Whether a probe is sure to cost more than `ceiling` (another source's estimate), told
/// before the lists are ordered by the query and their members counted (about a tenth of
/// a graph recall's time at 1M): see [`cost::probe_surely_dearer`], with the tenant's
/// event count as its size.
fn surely_dearer(
    snap: &Snapshot<'_>,
    partition: &Partition,
    (cfg, share, ceiling): (&RecallConfig, f64, u64),
    tenant: &str,
    count: usize,
) -> bool {
    cost::probe_surely_dearer(
        (partition.lists(), count, snap.table.tenant_ids(tenant)),
        (share, cfg.partition_probe_max_members),
        ceiling,
    )
}

/// The share of lists a probe of a scope of `count` events reads: the share measured to
/// reach the recall target at its density ([`crate::index::vector::calibrate::ProbeCurve`]),
/// unless `calibrated_probes` is off or the scope is sparser than any measured, when it is
/// `partition_probe_share`.
pub(super) fn probe_share(partitioned: &Partitioned, cfg: &RecallConfig, count: usize) -> f64 {
    let measured = cfg
        .calibrated_probes
        .then(|| partitioned.curve().share(count))
        .flatten();
    measured.unwrap_or(cfg.partition_probe_share)
}

/// How many of the lists in `order` a probe reads, and how many of `tenant`'s members they
/// hold: the nearest `share` of the lists (at least one), or fewer once the nearest hold
/// `partition_probe_max_members` of the tenant's members, so that a probe's cost stops
/// growing with its tenant.
pub(super) fn probe_count(
    partition: &Partition,
    order: &[u32],
    tenant: u32,
    (cfg, share): (&RecallConfig, f64),
) -> (usize, usize) {
    let share = (order.len() as f64 * share).ceil().max(1.0) as usize;
    let mut members = 0;
    for (read, &list) in order.iter().take(share).enumerate() {
        if read > 0 && members >= cfg.partition_probe_max_members {
            return (read, members);
        }
        members += partition.members(list, tenant).len();
    }
    (share.min(order.len()), members)
}

/// How many events are in scope (an upper bound, when term statistics tell that more
/// than `exact_max` do, which spares counting a broad scope's postings); `None` when at
/// most `exact_max` do. A filter with a narrowest clause is counted by listing its ids,
/// which the exact path or the read by id then reuses; any other by the index alone.
pub(super) fn broad_count(
    snap: &Snapshot<'_>,
    in_scope: &InScope<'_>,
    exact_max: usize,
) -> Result<Option<usize>, SearchError> {
    if let Some(known) = in_scope.broad.get() {
        return Ok(*known);
    }
    // Every event in scope is one of its tenant's: a tenant of at most `exact_max` events
    // is narrow whatever the filter, told without the index.
    if snap.table.tenant_ids(&in_scope.filter.tenant) <= exact_max {
        return Ok(*in_scope.broad.get_or_init(|| None));
    }
    let counted = count_broad(snap, in_scope, exact_max)?;
    Ok(*in_scope.broad.get_or_init(|| counted))
}

/// [`broad_count`] without its memo.
fn count_broad(
    snap: &Snapshot<'_>,
    in_scope: &InScope<'_>,
    exact_max: usize,
) -> Result<Option<usize>, SearchError> {
    let filter = in_scope.filter;
    let count = match snap.scope.count_bounds(filter) {
        Some((_, upper)) if upper <= exact_max => return Ok(None),
        Some((lower, upper)) if lower > exact_max => return Ok(Some(upper)),
        _ if filter.narrows_twice() => in_scope.ids()?.len(),
        _ => snap.scope.count(filter).map_err(index_error)?,
    };
    Ok((count > exact_max).then_some(count))
}

/// The partition lists a recall reads: the first `probes` of `order`.
pub(super) struct Probe<'a> {
    pub(super) partitioned: &'a Partitioned,
    pub(super) order: &'a [u32],
    pub(super) probes: usize,
}

/// The kept heads among the scope's ids (from the index) that lie in a probed list or in
/// none (written after the build).
pub(super) fn probe_by_id(
    snap: &Snapshot<'_>,
    ids: &[u32],
    probe: &Probe<'_>,
    keep: impl Fn(&Table, &Head) -> bool,
) -> Vec<Head> {
    let mut probed = vec![false; probe.order.len()];
    for &list in probe.order.iter().take(probe.probes) {
        probed[list as usize] = true;
    }
    let in_probed = |d: &&u32| {
        probe
            .partitioned
            .index
            .list_of(**d)
            .is_none_or(|l| probed[l as usize])
    };
    let table: &Table = &snap.table;
    ids.iter()
        .filter(in_probed)
        .map(|&d| table.head(d))
        .filter(|h| keep(table, h))
        .collect()
}

/// A probe's kept candidates, before they are put in id order: members of the probed lists,
/// by list and row (their heads left in the lists' copies until then), with their code
/// bounds when the query was coded, then heads held by value (ids the partition does not
/// cover, BM25 matches, or every candidate of a read by id), without bounds.
#[derive(Debug, Default)]
pub(super) struct Probed {
    /// `(id, list, row)` of each kept list member, in probe order.
    pub(super) members: Vec<(u32, u32, u32)>,
    /// `bounds[i]` bounds `members[i]`; empty without a coded query.
    pub(super) bounds: Vec<(f32, f32)>,
    /// Candidates held by value.
    pub(super) held: Vec<Head>,
}

impl Probed {
    /// Adds another list's members after these.
    fn append(&mut self, part: Probed) {
        self.members.extend(part.members);
        self.bounds.extend(part.bounds);
    }

    /// The candidates in id order without repeats, and the code bounds of those that have
    /// them, by id. A repeated id keeps its first occurrence: a list member's, with bounds,
    /// before a held head. Sorts 8-byte keys rather than 72-byte heads, and copies each
    /// member's head out of its list once, in id order.
    pub(super) fn by_id(
        &self,
        table: &Table,
        partitioned: &Partitioned,
    ) -> (Vec<Head>, KnownBounds) {
        let listed = self.members.len();
        let mut keys: Vec<u64> = self
            .members
            .iter()
            .map(|m| m.0)
            .chain(self.held.iter().map(|h| h.doc))
            .enumerate()
            .map(|(i, doc)| (u64::from(doc) << 32) | i as u64)
            .collect();
        sort_by_id(&mut keys);
        // The first of a repeated id has the lowest position: the one with bounds, if any.
        keys.dedup_by_key(|key| *key >> 32);
        let position = |key: &u64| (key & u64::from(u32::MAX)) as usize;
        let known = keys
            .iter()
            .filter_map(|key| {
                let b = self.bounds.get(position(key))?;
                Some(((key >> 32) as u32, *b))
            })
            .collect();
        let heads = keys
            .iter()
            .map(|key| match position(key) {
                i if i < listed => {
                    let (_, list, row) = self.members[i];
                    partitioned.head(table, list, row)
                }
                i => self.held[i - listed],
            })
            .collect();
        (heads, known)
    }
}

/// Below this many keys, [`sort_by_id`] merges by comparison.
const RADIX_MIN_KEYS: usize = 2_048;

/// Sorts `keys` by their upper 32 bits (an id), keeping the order of keys with equal ids.
/// A probe hands its lists' members over as ascending runs, but merging them by comparison
/// mispredicts a branch on about every other key, as the runs interleave at random: a
/// broad probe's keys are sorted by a stable radix sort instead, in 11-bit digits from the
/// lowest, each digit that every key shares skipped (two passes below four million ids).
fn sort_by_id(keys: &mut Vec<u64>) {
    const BITS: u32 = 11;
    const BUCKETS: usize = 1 << BITS;
    if keys.len() < RADIX_MIN_KEYS {
        // A merging sort only merges ascending runs (`sort_unstable` would partition them).
        keys.sort();
        return;
    }
    let mut scratch = vec![0u64; keys.len()];
    let mut counts = vec![0usize; BUCKETS];
    for shift in (32..64).step_by(BITS as usize) {
        let digit = |key: u64| (key >> shift) as usize & (BUCKETS - 1);
        counts.fill(0);
        for &key in keys.iter() {
            counts[digit(key)] += 1;
        }
        if counts.contains(&keys.len()) {
            continue;
        }
        let mut start = 0;
        for count in counts.iter_mut() {
            (*count, start) = (start, start + *count);
        }
        for &key in keys.iter() {
            let d = digit(key);
            scratch[counts[d]] = key;
            counts[d] += 1;
        }
        std::mem::swap(keys, &mut scratch);
    }
}

/// The kept members of `tenant` in the probed lists (more lists, in order, while fewer than
/// `k` were kept), then the kept heads among the ids the partition does not cover; with
/// `code`, also the kept members' code bounds, read from the lists' own codes. The probed
/// lists are read on both cores.
pub(super) fn probe_lists(
    snap: &Snapshot<'_>,
    probe: &Probe<'_>,
    (tenant, k): (u32, usize),
    code: Option<&QueryCode>,
    keep: impl Fn(&Table, &Head) -> bool + Sync,
) -> Probed {
    let table: &Table = &snap.table;
    let read = |list: &u32| -> Probed {
        let Some(m) = probe.partitioned.index.coded_members(*list, tenant) else {
            return Probed::default();
        };
        let heads = probe.partitioned.heads(table, *list, m.rows.clone());
        let mut rows = Vec::with_capacity(m.rows.len());
        let mut members = Vec::with_capacity(m.rows.len());
        for (row, h) in (m.rows.start as u32..).zip(heads) {
            if keep(table, &h) {
                rows.push(row);
                members.push((h.doc, *list, row));
            }
        }
        let bounds = code.map_or_else(Vec::new, |c| block_bounds(c, m.codes, &rows));
        Probed {
            members,
            bounds,
            held: Vec::new(),
        }
    };
    let first = probe.probes.min(probe.order.len());
    let parts: Vec<Probed> = probe.order[..first].par_iter().map(read).collect();
    // One copy into place (a pairwise reduce would copy each once per level).
    let mut probed = Probed {
        members: Vec::with_capacity(parts.iter().map(|p| p.members.len()).sum()),
        bounds: Vec::with_capacity(parts.iter().map(|p| p.bounds.len()).sum()),
        held: Vec::new(),
    };
    for part in parts {
        probed.append(part);
    }
    for list in &probe.order[first..] {
        if probed.members.len() >= k {
            break;
        }
        probed.append(read(list));
    }
    let uncovered = (probe.partitioned.index.upto()..table.next_doc()).map(|d| table.head(d));
    probed.held = uncovered.filter(|h| keep(table, h)).collect();
    probed
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::{probe_count, sort_by_id, Partition, RecallConfig};

    #[test]
    fn keys_sort_by_id_keeping_the_order_of_equal_ids() {
        let mut rng = StdRng::seed_from_u64(3);
        for (n, ids) in [
            (10, 5u64),
            (5_000, 1_000),
            (20_000, 4_000_000),
            (9_000, 1 << 32),
        ] {
            // Ascending runs that interleave, as a probe's lists hand them over, and repeats.
            let mut keys: Vec<u64> = (0..n)
                .map(|i| (rng.gen_range(0..ids) << 32) | i as u64)
                .collect();
            for run in keys.chunks_mut(1_500) {
                run.sort();
            }
            let mut want = keys.clone();
            want.sort_by_key(|k| k >> 32);
            sort_by_id(&mut keys);
            assert_eq!(keys, want, "{n} keys below id {ids}");
        }
    }
    use crate::index::vector::VectorStore;

    #[test]
    pub(super) fn a_probe_takes_no_list_past_its_member_budget_and_always_one() {
        let (dim, n) = (8, 2_000);
        let mut rng = StdRng::seed_from_u64(7);
        let store = VectorStore::new(dim);
        let unit = |v: Vec<f32>| {
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.into_iter().map(|x| x / norm).collect::<Vec<f32>>()
        };
        for id in 0..n {
            let v = unit((0..dim).map(|_| rng.gen_range(-1.0..1.0)).collect());
            store.push(id as u32, &v).expect("push");
        }
        let tenants: Vec<u32> = (0..n as u32).map(|i| u32::from(i % 10 == 0)).collect();
        let p = Partition::build(&store, &tenants, 20).expect("built");
        let order = p.order(&unit(vec![1.0; dim]));
        let sizes: Vec<usize> = order.iter().map(|&l| p.members(l, 0).len()).collect();
        let mut cfg = RecallConfig {
            partition_probe_max_members: usize::MAX,
            ..RecallConfig::default()
        };
        let first_ten: usize = sizes[..10].iter().sum();
        assert_eq!(probe_count(&p, &order, 0, (&cfg, 0.5)), (10, first_ten));
        cfg.partition_probe_max_members = sizes[0] + 1;
        assert_eq!(
            probe_count(&p, &order, 0, (&cfg, 0.5)),
            (2, sizes[0] + sizes[1]),
            "the list that reaches the budget is the last one taken"
        );
        cfg.partition_probe_max_members = 0;
        assert_eq!(
            probe_count(&p, &order, 0, (&cfg, 0.5)),
            (1, sizes[0]),
            "one at least"
        );
        cfg.partition_probe_max_members = 1_000;
        let of_small: usize = order[..10].iter().map(|&l| p.members(l, 1).len()).sum();
        assert!(of_small < 1_000);
        assert_eq!(
            probe_count(&p, &order, 1, (&cfg, 0.5)),
            (10, of_small),
            "a tenant below the budget reads its share"
        );
    }
}
