//! A read-only, compact copy of an hnsw_rs graph for searching: the same points, links and
//! layers, laid out as flat arrays (vectors node after node, layer-0 links in one array
//! with offsets) and searched without locks, reference counts or hashing.
//!
//! hnsw_rs builds and extends the graph (its inserts are parallel and tested); its search
//! walks `Arc`-shared points behind read locks and a hashed visited set, about 0.5 µs per
//! distance on this machine where the dot product itself takes a tenth of that. A tenant
//! graph is frozen after each update ([`super::HnswIndex::freeze`]) and recall searches the
//! frozen copy.
//!
//! Invariants:
//! - the copy holds exactly the points, links and distance ([`super::CosineDist`]) the
//!   graph had when it was frozen; later inserts into the graph do not reach it;
//! - a search is the standard HNSW walk: greedy descent through the upper layers from a
//!   point of the top layer, then a best-first walk of layer 0 that stops when the nearest
//!   unexpanded point is farther than the worst of the `ef` best found;
//! - a filtered search expands points the filter rejects but keeps only those it accepts,
//!   and does not stop before `ef` accepted points are found (or the graph is exhausted);
//! - results are best first, ties by id, each id once.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use hnsw_rs::prelude::PointId;

use super::super::exact::dispatched_code_dot;
use super::super::quant::encode_into;

/// A point's distance to the query and its node number, ordered by distance, then node.
#[derive(Clone, Copy, Debug)]
struct Near {
    dist: f32,
    node: u32,
}

impl PartialEq for Near {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Near {}

impl PartialOrd for Near {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Near {
    fn cmp(&self, other: &Self) -> Ordering {
        self.dist
            .total_cmp(&other.dist)
            .then(self.node.cmp(&other.node))
    }
}

/// One point as hnsw_rs holds it, read out for [`FrozenGraph::from_points`].
pub(super) struct PointCopy {
    /// hnsw_rs's identity of the point (its layer and rank in it).
    pub(super) pid: PointId,
    /// The id the point was inserted under.
    pub(super) id: u32,
    /// The point's 8-bit codes (empty for a vector of another dimension) and their scale
    /// ([`PointCopy::encode`]).
    pub(super) codes: Vec<i8>,
    pub(super) scale: f32,
    /// The point's links, per layer from 0, as hnsw_rs identities.
    pub(super) links: Vec<Vec<PointId>>,
}

impl PointCopy {
    /// The codes of `vector` for a graph of `dim` dimensions and their scale: a vector of
    /// another dimension gets no codes and a NaN scale, so it is never nearer than any other.
    pub(super) fn encode(vector: &[f32], dim: usize) -> (Vec<i8>, f32) {
        let mut codes = Vec::with_capacity(dim);
        if vector.len() == dim {
            let scale = encode_into(vector, &mut codes)[0];
            (codes, scale)
        } else {
            (codes, f32::NAN)
        }
    }
}

/// See the module docs.
#[derive(Default)]
pub struct FrozenGraph {
    dim: usize,
    /// The id of each node.
    ids: Vec<u32>,
    /// Node `i`'s vector is about `scales[i] · codes[i * dim..(i + 1) * dim]` (8-bit codes,
    /// [`super::super::quant`]): a quarter of the memory a walk reads, close enough to
    /// order the walk; callers rescore what it finds.
    codes: Vec<i8>,
    scales: Vec<f32>,
    /// Node `i`'s layer-0 links are `links[offsets[i]..offsets[i + 1]]`.
    offsets: Vec<u32>,
    links: Vec<u32>,
    /// `upper[l - 1]`: the links at layer `l` of each node that reaches it.
    upper: Vec<HashMap<u32, Box<[u32]>>>,
    /// A node of the top layer, and that layer.
    entry: Option<(u32, usize)>,
}

impl std::fmt::Debug for FrozenGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrozenGraph")
            .field("points", &self.len())
            .field("layers", &(self.upper.len() + 1))
            .finish()
    }
}

impl FrozenGraph {
    /// The copy of a graph of `dim`-dimensional points; links to a point not among `points`
    /// are dropped.
    pub(super) fn from_points(dim: usize, points: Vec<PointCopy>) -> Self {
        let node_of: HashMap<PointId, u32> = points
            .iter()
            .enumerate()
            .map(|(i, p)| (p.pid, i as u32))
            .collect();
        let mut graph = FrozenGraph {
            dim,
            ids: Vec::with_capacity(points.len()),
            codes: Vec::with_capacity(points.len() * dim),
            scales: Vec::with_capacity(points.len()),
            offsets: Vec::with_capacity(points.len() + 1),
            links: Vec::new(),
            upper: Vec::new(),
            entry: None,
        };
        graph.offsets.push(0);
        for (node, p) in points.into_iter().enumerate() {
            let node = node as u32;
            graph.ids.push(p.id);
            let at = graph.codes.len();
            graph.codes.extend_from_slice(&p.codes);
            graph.codes.resize(at + dim, 0);
            graph.scales.push(p.scale);
            for (layer, links) in p.links.iter().enumerate() {
                let nodes = links.iter().filter_map(|l| node_of.get(l).copied());
                if layer == 0 {
                    graph.links.extend(nodes);
                } else if !links.is_empty() {
                    if graph.upper.len() < layer {
                        graph.upper.resize_with(layer, HashMap::new);
                    }
                    graph.upper[layer - 1].insert(node, nodes.collect());
                }
            }
            graph.offsets.push(graph.links.len() as u32);
            let level = usize::from(p.pid.0);
            if graph.entry.is_none_or(|(_, top)| level > top) {
                graph.entry = Some((node, level));
            }
        }
        graph
    }

    /// The node searches start from.
    #[cfg(test)]
    pub(super) fn entry_node(&self) -> Option<u32> {
        self.entry.map(|(node, _)| node)
    }

    /// The internal id of each point, in node order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Points in the copy.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True when the copy holds no point.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Heap bytes the copy holds (its codes and links).
    pub fn bytes(&self) -> usize {
        let upper: usize = self
            .upper
            .iter()
            .flat_map(|layer| layer.values())
            .map(|links| links.len() * 4 + 16)
            .sum();
        self.ids.len() * 4
            + self.codes.len()
            + self.scales.len() * 4
            + self.offsets.len() * 4
            + self.links.len() * 4
            + upper
    }

    /// Nearest `k` over all points, best first, as `(id, cosine estimated from the codes)`;
    /// `ef` is raised to `k`.
    pub fn search(&self, query: &[f32], k: usize, ef: usize) -> Vec<(u32, f32)> {
        self.search_where(query, k, ef, |_| true)
    }

    fn dist(&self, query: &[f32], node: u32) -> f32 {
        let at = node as usize * self.dim;
        let d = 1.0
            - self.scales[node as usize]
                * dispatched_code_dot(query, &self.codes[at..at + self.dim]);
        if d.is_nan() {
            2.0
        } else {
            d.clamp(0.0, 2.0)
        }
    }

    /// Nearest `k` among the ids `allow` accepts, best first, as `(id, cosine estimated
    /// from the codes)`; `ef` is raised to `k`. May return fewer than `k`.
    pub fn search_where(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        self.search_skipping(query, (k, ef), None, |n| allow(self.ids[n as usize]))
    }

    /// [`FrozenGraph::search`] as if node `out` were not in the graph: the walk never
    /// measures, keeps or passes through it. A search for a point's own vector with its node
    /// held out stands in for a query the graph was not built around (its own node and links
    /// would lead a search straight to its neighbours), which is how calibration measures a
    /// width ([`super::super::calibrate`]).
    pub fn search_held_out(&self, query: &[f32], k: usize, ef: usize, out: u32) -> Vec<(u32, f32)> {
        self.search_skipping(query, (k, ef), Some(out), |_| true)
    }

    fn search_skipping(
        &self,
        query: &[f32],
        (k, ef): (usize, usize),
        skip: Option<u32>,
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let Some(mut walk) = self.walk(query, (k, ef), skip, &allow) else {
            return Vec::new();
        };
        let mut fresh = Fresh::default();
        while let Some(near) = walk.next() {
            fresh.clear();
            for &next in self.links_of(near.node) {
                if walk.visit(next) {
                    fresh.nodes.push(next);
                }
            }
            self.measure(query, &mut fresh);
            for near in fresh.nears() {
                walk.consider(near, || allow(near.node));
            }
        }
        self.hits(walk, k)
    }

    /// Nearest `k` among the ids `allow` accepts, like [`FrozenGraph::search_where`], but
    /// for a narrow filter: distances are computed for accepted points only. A rejected
    /// neighbour of an expanded point is a bridge: its own accepted neighbours are taken in
    /// its place (two hops, as ACORN walks a graph under a predicate), until `fanout`
    /// accepted neighbours were taken for the point. So the walk moves through the
    /// accepted points' own neighbourhood, and its cost follows what the filter accepts,
    /// not what it rejects. May return fewer than `k` (a filter whose points are not
    /// connected within two hops); callers then fall back.
    pub fn search_within(
        &self,
        query: &[f32],
        width: (usize, usize, usize),
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        self.search_within_nodes(query, width, |n| allow(self.ids[n as usize]))
    }

    /// [`FrozenGraph::search_within`] with the scope told by node number (the position of
    /// a point in [`FrozenGraph::ids`]), which spares looking up each point's id.
    pub fn search_within_nodes(
        &self,
        query: &[f32],
        width: (usize, usize, usize),
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        self.within_skipping(query, width, None, allow)
    }

    /// [`FrozenGraph::search_within_nodes`] as if node `out` were not in the graph (see
    /// [`FrozenGraph::search_held_out`]).
    pub fn search_within_held_out(
        &self,
        query: &[f32],
        width: (usize, usize, usize),
        out: u32,
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        self.within_skipping(query, width, Some(out), allow)
    }

    fn within_skipping(
        &self,
        query: &[f32],
        (k, ef, fanout): (usize, usize, usize),
        skip: Option<u32>,
        allow: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let Some(mut walk) = self.walk(query, (k, ef), skip, &allow) else {
            return Vec::new();
        };
        let mut bridged = vec![0u64; self.ids.len().div_ceil(64)];
        if let Some(out) = skip {
            mark(&mut bridged, out);
        }
        let mut bridges: Vec<u32> = Vec::with_capacity(64);
        let mut fresh = Fresh::default();
        // Takes in-scope `next` (its distance measured below); true once `fanout` were
        // taken.
        let reach = |walk: &mut Walk, fresh: &mut Fresh, next: u32, taken: &mut usize| {
            *taken += 1;
            if walk.visit(next) {
                fresh.nodes.push(next);
            }
            *taken >= fanout
        };
        while let Some(near) = walk.next() {
            let mut taken = 0usize;
            bridges.clear();
            fresh.clear();
            for &next in self.links_of(near.node) {
                if !allow(next) {
                    bridges.push(next);
                } else if reach(&mut walk, &mut fresh, next, &mut taken) {
                    break;
                }
            }
            for &bridge in bridges.iter().take(BRIDGES_TOUCHED) {
                for link in self.links_of(bridge).iter().step_by(CACHE_LINE / 4) {
                    std::hint::black_box(*link);
                }
            }
            for &bridge in &bridges {
                if taken >= fanout {
                    break;
                }
                if !mark(&mut bridged, bridge) {
                    continue;
                }
                let beyond = self.links_of(bridge).iter();
                for &next in beyond.filter(|&&n| allow(n)) {
                    if reach(&mut walk, &mut fresh, next, &mut taken) {
                        break;
                    }
                }
            }
            self.measure(query, &mut fresh);
            for near in fresh.nears() {
                walk.consider(near, || true);
            }
        }
        self.hits(walk, k)
    }

    fn links_of(&self, node: u32) -> &[u32] {
        let (from, to) = (
            self.offsets[node as usize] as usize,
            self.offsets[node as usize + 1] as usize,
        );
        &self.links[from..to]
    }

    /// The distances of `fresh`'s nodes to the query: every row's cache lines are read
    /// first, so that the scattered rows arrive together rather than one after another
    /// (on a graph of 100,000 points a plain search at width 160 took a fifth less time).
    fn measure(&self, query: &[f32], fresh: &mut Fresh) {
        fresh.dists.clear();
        for &node in &fresh.nodes {
            self.touch(node);
        }
        for &node in &fresh.nodes {
            fresh.dists.push(self.dist(query, node));
        }
    }

    /// Reads one byte of each cache line of `node`'s codes, so that they are on their way
    /// to the cache before its distance is computed (the crate has no `unsafe`, so no
    /// prefetch instruction).
    fn touch(&self, node: u32) {
        let at = node as usize * self.dim;
        if let Some(row) = self.codes.get(at..at + self.dim) {
            for line in row.iter().step_by(CACHE_LINE) {
                std::hint::black_box(*line);
            }
        }
    }

    fn near(&self, query: &[f32], node: u32) -> Near {
        Near {
            dist: self.dist(query, node),
            node,
        }
    }

    /// A layer-0 walk from the point the greedy descent through the upper layers reaches
    /// (among the best if `allow` accepts its node), or `None` when there is nothing to
    /// search.
    /// `skip`: a node the walk treats as absent (never measured, kept or expanded; an
    /// entry point it is stands in only until the descent leaves it).
    fn walk(
        &self,
        query: &[f32],
        (k, ef): (usize, usize),
        skip: Option<u32>,
        allow: impl Fn(u32) -> bool,
    ) -> Option<Walk> {
        let (entry, top) = self.entry?;
        if k == 0 || query.len() != self.dim {
            return None;
        }
        let mut cur = self.near(query, entry);
        if skip == Some(entry) {
            // Held out: no nearer than any other point, so the descent moves on from it.
            cur.dist = f32::INFINITY;
        }
        for layer in (1..=top.min(self.upper.len())).rev() {
            let links = &self.upper[layer - 1];
            loop {
                let mut moved = false;
                for &next in links.get(&cur.node).map_or(&[][..], |l| &l[..]) {
                    if skip == Some(next) {
                        continue;
                    }
                    let near = self.near(query, next);
                    if near < cur {
                        cur = near;
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        let ef = ef.max(k);
        let mut walk = Walk {
            ef,
            visited: vec![0u64; self.ids.len().div_ceil(64)],
            frontier: BinaryHeap::with_capacity(ef * 2),
            best: BinaryHeap::with_capacity(ef + 1),
        };
        if let Some(out) = skip {
            walk.visit(out);
        }
        if skip == Some(cur.node) {
            // The held-out entry never left (a graph of one layer-0 neighbourhood): expand
            // it, but keep nothing of it.
            walk.frontier.push(Reverse(cur));
        } else {
            walk.visit(cur.node);
            walk.frontier.push(Reverse(cur));
            if allow(cur.node) {
                walk.best.push(cur);
            }
        }
        Some(walk)
    }

    /// The walk's best `k`, best first, ties by id, each id once.
    fn hits(&self, walk: Walk, k: usize) -> Vec<(u32, f32)> {
        let mut hits: Vec<(u32, f32)> = walk
            .best
            .into_sorted_vec()
            .into_iter()
            .map(|n| (self.ids[n.node as usize], 1.0 - n.dist))
            .collect();
        hits.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut seen = std::collections::HashSet::with_capacity(hits.len());
        hits.retain(|(id, _)| seen.insert(*id));
        hits.truncate(k);
        hits
    }
}

/// Bridges whose links a walk within a scope starts reading together.
const BRIDGES_TOUCHED: usize = 12;

/// Bytes per cache line.
const CACHE_LINE: usize = 64;

/// The newly visited neighbours of an expanded point and their distances.
#[derive(Default)]
struct Fresh {
    nodes: Vec<u32>,
    dists: Vec<f32>,
}

impl Fresh {
    fn clear(&mut self) {
        self.nodes.clear();
        self.dists.clear();
    }

    fn nears(&self) -> impl Iterator<Item = Near> + '_ {
        self.nodes
            .iter()
            .zip(&self.dists)
            .map(|(&node, &dist)| Near { dist, node })
    }
}

/// Sets `node`'s bit; true when it was clear.
fn mark(bits: &mut [u64], node: u32) -> bool {
    let (word, bit) = (node as usize / 64, 1u64 << (node % 64));
    let fresh = bits[word] & bit == 0;
    bits[word] |= bit;
    fresh
}

/// A best-first walk of layer 0: the points to expand, nearest first, and the `ef` best
/// accepted points found.
struct Walk {
    ef: usize,
    visited: Vec<u64>,
    frontier: BinaryHeap<Reverse<Near>>,
    best: BinaryHeap<Near>,
}

impl Walk {
    /// Marks `node` visited; true the first time.
    fn visit(&mut self, node: u32) -> bool {
        mark(&mut self.visited, node)
    }

    /// The next point to expand, or `None` once the nearest left is farther than the worst
    /// of `ef` best.
    fn next(&mut self) -> Option<Near> {
        let Reverse(near) = self.frontier.pop()?;
        let done = self.best.len() >= self.ef && self.best.peek().is_some_and(|w| near > *w);
        (!done).then_some(near)
    }

    /// A newly visited point: expanded later unless `ef` better ones are known, and kept
    /// among the best if `accepted` (asked only then).
    fn consider(&mut self, candidate: Near, accepted: impl FnOnce() -> bool) {
        let full = self.best.len() >= self.ef;
        if full && self.best.peek().is_some_and(|worst| candidate >= *worst) {
            return;
        }
        self.frontier.push(Reverse(candidate));
        if accepted() {
            self.best.push(candidate);
            if self.best.len() > self.ef {
                self.best.pop();
            }
        }
    }
}
