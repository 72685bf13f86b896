//! Tenant graphs on disk, so that a restart loads them instead of rebuilding them (about
//! 500 vectors per second of both cores: minutes for a large tenant).
//!
//! Under `index/graphs/`, each saved graph is two things, named by the hex of its tenant id:
//! `<hex>/`, an [`HnswIndex`] snapshot (generations, checksummed manifest, `CURRENT`), and
//! `<hex>.points`, its witness, written after it: the model of its vectors, the id bound it
//! covers, and the internal id and log sequence of each of its points, sealed by a sha256.
//!
//! Invariants: a graph is loaded only if its witness verifies, names the serving vectors'
//! model, covers the same bound as the snapshot's manifest, lists exactly the snapshot's
//! points, and each point's internal id still holds the same log record of the same tenant,
//! live or deleted but not purged (an id that a compaction renumbered, or a record it
//! purged, fails). Anything else is removed and the graph built again. These files are
//! derived data: losing them costs a rebuild, never an answer.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::index::vector::{FrozenGraph, HnswIndex, HnswParams, VectorError};
use crate::read::{Slot, Table};

/// The first bytes of a witness (its format).
const MAGIC: &[u8] = b"EPGW1\n";

/// What a witness says of its graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Witness {
    /// The model that made the graph's vectors.
    pub(super) model: String,
    /// The graph holds its tenant's vectors below this internal id.
    pub(super) upto: u32,
    /// `(internal id, log sequence)` of each point, by id.
    pub(super) points: Vec<(u32, u64)>,
}

impl Witness {
    /// The witness of `frozen`, a copy of a graph of `tenant` covering the ids below
    /// `upto`, its sequences read from `table`; `None` when a point's id holds no record
    /// of the tenant any more (the graph is then not saved).
    pub(super) fn of(
        frozen: &FrozenGraph,
        (tenant, upto): (&str, u32),
        model: &str,
        table: &Table,
    ) -> Option<Witness> {
        let mut points: Vec<(u32, u64)> = frozen
            .ids()
            .iter()
            .map(|&d| Some((d, record_of(table, d, tenant)?)))
            .collect::<Option<_>>()?;
        points.sort_unstable();
        Some(Witness {
            model: model.to_string(),
            upto,
            points,
        })
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.points.len() * 12);
        out.extend_from_slice(MAGIC);
        let model = self.model.as_bytes();
        out.extend_from_slice(&(model.len() as u32).to_le_bytes());
        out.extend_from_slice(model);
        out.extend_from_slice(&self.upto.to_le_bytes());
        out.extend_from_slice(&(self.points.len() as u64).to_le_bytes());
        for (doc, seq) in &self.points {
            out.extend_from_slice(&doc.to_le_bytes());
            out.extend_from_slice(&seq.to_le_bytes());
        }
        let seal = Sha256::digest(&out);
        out.extend_from_slice(&seal);
        out
    }

    fn decode(bytes: &[u8]) -> Option<Witness> {
        let (body, seal) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
        if Sha256::digest(body).as_slice() != seal {
            return None;
        }
        let mut r = Reader(body.strip_prefix(MAGIC)?);
        let model_len = r.u32()? as usize;
        let model = String::from_utf8(r.take(model_len)?.to_vec()).ok()?;
        let upto = r.u32()?;
        let n = usize::try_from(r.u64()?).ok()?;
        if r.0.len() != n.checked_mul(12)? {
            return None;
        }
        let points = (0..n)
            .map(|_| Some((r.u32()?, r.u64()?)))
            .collect::<Option<Vec<_>>>()?;
        Some(Witness {
            model,
            upto,
            points,
        })
    }
}

/// Little-endian fields read off the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

/// The log sequence of the record internal id `doc` holds, when it is one of `tenant`'s,
/// live or deleted but not purged (its vector still stored).
fn record_of(table: &Table, doc: u32, tenant: &str) -> Option<u64> {
    match table.slots().get(doc as usize)? {
        Slot::Live(e) if e.event.tenant_id == tenant => Some(e.seq),
        Slot::Deleted(t) if t.unpurged && t.tenant_id == tenant => Some(t.seq),
        Slot::Live(_) | Slot::Deleted(_) | Slot::Empty => None,
    }
}

/// The snapshot directory and witness file of `tenant`'s graph under `dir`.
fn files(dir: &Path, tenant: &str) -> (PathBuf, PathBuf) {
    let name = hex::encode(tenant.as_bytes());
    (dir.join(&name), dir.join(format!("{name}.points")))
}

/// Saves `graph` (whose copy `frozen` covers the ids below `witness.upto`) as `tenant`'s:
/// the snapshot first, then its witness, which makes it loadable.
pub(super) fn save(
    dir: &Path,
    tenant: &str,
    graph: &HnswIndex,
    witness: &Witness,
) -> Result<(), VectorError> {
    crate::fsutil::create_private_dir_all(dir).map_err(|e| VectorError::io(dir, e))?;
    let (snapshot, points) = files(dir, tenant);
    // A stale witness must not vouch for the new snapshot while it is written.
    remove_file(&points);
    graph.save(&snapshot, u64::from(witness.upto))?;
    crate::fsutil::write_atomic(&points, &witness.encode(), crate::fsutil::PRIVATE_FILE)
        .map_err(|e| VectorError::io(&points, e))
}

/// Removes `tenant`'s saved graph, if any.
pub(super) fn remove(dir: &Path, tenant: &str) {
    let (snapshot, points) = files(dir, tenant);
    remove_file(&points);
    let _ = std::fs::remove_dir_all(snapshot);
}

fn remove_file(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a tenant graph file");
        }
    }
}

/// A graph read back from disk, not yet checked against the table.
pub(super) struct Read {
    /// Its tenant's id.
    pub(super) tenant: String,
    pub(super) witness: Witness,
    pub(super) graph: HnswIndex,
    /// Its read-only copy.
    pub(super) frozen: FrozenGraph,
}

/// Every graph saved under `dir` whose files verify, whose witness names `model` and lists
/// exactly its snapshot's points; any other is removed. Reads no table: the caller then
/// checks each against one ([`check`]).
pub(super) fn read_all(dir: &Path, params: HnswParams, model: &str) -> Vec<Read> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut read = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".points"))
        else {
            continue;
        };
        let Some(tenant) = hex::decode(name)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        else {
            remove_file(&path);
            continue;
        };
        match read_one(dir, &tenant, params, model) {
            Ok((witness, graph, frozen)) => read.push(Read {
                tenant,
                witness,
                graph,
                frozen,
            }),
            Err(reason) => rejected(dir, &tenant, &reason),
        }
    }
    read
}

/// Removes `tenant`'s saved graph, saying why it is not used.
pub(super) fn rejected(dir: &Path, tenant: &str, reason: &str) {
    tracing::warn!(tenant = %tenant, %reason, "saved tenant graph not used; it will be built again");
    remove(dir, tenant);
}

fn read_one(
    dir: &Path,
    tenant: &str,
    params: HnswParams,
    model: &str,
) -> Result<(Witness, HnswIndex, FrozenGraph), String> {
    let (snapshot, points) = files(dir, tenant);
    let bytes = std::fs::read(&points).map_err(|e| e.to_string())?;
    let witness = Witness::decode(&bytes).ok_or("its witness does not verify")?;
    if witness.model != model {
        return Err(format!("its vectors are of model {}", witness.model));
    }
    let params = HnswParams {
        max_elements: witness.points.len().saturating_mul(2),
        ..params
    };
    let (graph, covered) = HnswIndex::load(&snapshot, params)
        .map_err(|e| e.to_string())?
        .ok_or("no snapshot")?;
    if covered != u64::from(witness.upto) {
        return Err("the snapshot and its witness disagree".into());
    }
    let frozen = graph.freeze();
    let mut ids = frozen.ids().to_vec();
    ids.sort_unstable();
    if !ids.iter().copied().eq(witness.points.iter().map(|p| p.0)) {
        return Err("the snapshot's points are not its witness's".into());
    }
    Ok((witness, graph, frozen))
}

/// `read`'s tenant number, when every point of its graph is below `upto` (the ids whose
/// vectors are stored) and its id still holds the record the witness names (see the module
/// invariants); otherwise why not.
pub(super) fn check(read: &Read, table: &Table, upto: u32) -> Result<u32, String> {
    let witness = &read.witness;
    if witness.upto > upto {
        return Err("it covers ids the log does not hold".into());
    }
    let number = table
        .tenant_number(&read.tenant)
        .ok_or("the tenant holds no event")?;
    for &(doc, seq) in &witness.points {
        if doc >= witness.upto || record_of(table, doc, &read.tenant) != Some(seq) {
            return Err(format!("internal id {doc} holds another record now"));
        }
    }
    Ok(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_witness_reads_back_and_any_changed_byte_is_refused() {
        let w = Witness {
            model: "m".into(),
            upto: 9,
            points: vec![(1, 10), (4, 12), (8, 20)],
        };
        let bytes = w.encode();
        assert_eq!(Witness::decode(&bytes), Some(w));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert_eq!(Witness::decode(&bad), None, "byte {i}");
        }
        assert_eq!(Witness::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Witness::decode(&[]), None);
    }
}
