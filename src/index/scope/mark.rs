//! What each commit records and what proves the committed ids right: the commit payload
//! ([`CommitMark`]) and an order-free digest of a set of internal ids ([`Fingerprint`]).

use super::*;

/// What a commit records about the logs it reflects (its payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommitMark {
    /// The last event-log sequence applied to the index.
    pub last_seq: u64,
    /// The last audit-log sequence that was durable when the commit was made (`None` for an
    /// index committed before audit sequences were recorded).
    pub audit_seq: Option<u64>,
}

impl CommitMark {
    /// The payload text: `{"lastSeq":N,"auditSeq":M}`.
    pub(super) fn payload(&self) -> String {
        match self.audit_seq {
            Some(a) => format!("{{\"lastSeq\":{},\"auditSeq\":{a}}}", self.last_seq),
            None => format!("{{\"lastSeq\":{}}}", self.last_seq),
        }
    }

    /// Reads a payload: the JSON form, or the bare decimal sequence of older indexes.
    pub(super) fn parse(text: &str) -> Option<CommitMark> {
        let text = text.trim();
        if let Ok(last_seq) = text.parse::<u64>() {
            return Some(CommitMark {
                last_seq,
                audit_seq: None,
            });
        }
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(CommitMark {
            last_seq: v.get("lastSeq")?.as_u64()?,
            audit_seq: match v.get("auditSeq") {
                None => None,
                Some(a) => Some(a.as_u64()?),
            },
        })
    }
}

/// The committed documents in brief: how many, and an order-free hash of their internal
/// ids ([`fingerprint_of`]). Two sets of ids with equal fingerprints are equal but with
/// negligible probability, so comparing the index's with the table's detects any event the
/// index lacks, holds twice, or holds after its deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fingerprint {
    /// Documents.
    pub docs: u64,
    /// Wrapping sum of each id's mix.
    pub hash: u64,
}

impl Fingerprint {
    /// Adds one internal id.
    pub fn add(&mut self, doc: u32) {
        self.docs += 1;
        self.hash = self.hash.wrapping_add(mix(doc));
    }
}

/// The fingerprint of a set of internal ids.
pub fn fingerprint_of(docs: impl IntoIterator<Item = u32>) -> Fingerprint {
    let mut f = Fingerprint::default();
    docs.into_iter().for_each(|d| f.add(d));
    f
}

/// A 64-bit mix of an id (splitmix64's finalizer), so sums of distinct sets rarely collide.
pub(super) fn mix(doc: u32) -> u64 {
    let mut z = u64::from(doc).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Reads the latest commit payload.
pub(super) fn read_payload(
    index: &Index,
    path: &str,
) -> Result<Option<CommitMark>, ScopeIndexError> {
    let metas = index.load_metas().map_err(|e| index_error(path, e))?;
    match metas.payload {
        None => Ok(None),
        Some(payload) => CommitMark::parse(&payload)
            .map(Some)
            .ok_or_else(|| index_error(path, format!("bad commit payload {payload:?}"))),
    }
}
