//! Binary encoding of log records: a JSON head plus the raw embedding, so a restart never
//! re-embeds.
//!
//! Layout: `[u8 version=1][u8 kind][u32 LE json_len][json]`, and for puts
//! `[u32 LE dim][dim × f32 LE]` after the JSON.
//! Invariants: `decode(encode(r)) == r` bit for bit (vectors included); unknown versions or
//! kinds are reported, never guessed; delete, tombstone and marker records carry ids, times
//! and reasons only, never event content.

use serde::{Deserialize, Serialize};

use crate::model::{Decision, StoredEvent};

const VERSION: u8 = 1;
const KIND_PUT: u8 = 1;
const KIND_DELETE: u8 = 2;
const KIND_TOMBSTONE: u8 = 3;
const KIND_MARKER: u8 = 4;
const KIND_REVIEW: u8 = 5;
const KIND_REQUEUE: u8 = 6;

/// A decoded log record.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // puts dominate the log; boxing them would add an allocation per record
pub enum Record {
    /// A new event (and, when it is an allowed correction, the supersession it implies).
    Put(PutRecord),
    /// Events removed from memory (delete, erasure, expiry).
    Delete(DeleteRecord),
    /// A compacted deleted event: its id survives (so it is never resurrected), its content not.
    Tombstone(TombstoneRecord),
    /// Keeps the highest sequence number across a compaction; carries nothing.
    Marker,
    /// A review decision on a pending event.
    Review(ReviewRecord),
    /// A policy re-evaluation sent an active event back to review.
    Requeue(RequeueRecord),
}

/// An event sent back to the review queue by a policy re-evaluation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequeueRecord {
    /// Tenant.
    pub tenant_id: String,
    /// The event.
    pub event_id: String,
    /// The new policy's review decision.
    pub decision: crate::model::Decision,
    /// The new policy's version.
    pub policy_version: String,
    /// The key that ran the re-evaluation (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
}

/// A reviewer's decision as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewRecord {
    /// Tenant.
    pub tenant_id: String,
    /// The reviewed event.
    pub event_id: String,
    /// Approved (active) or rejected (deleted).
    pub approved: bool,
    /// When.
    pub decided_at: crate::model::Timestamp,
    /// The reviewer's key.
    pub key_id: String,
    /// Keyed hash of the reviewer's note, if any (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note_hash: Option<String>,
}

/// Why events were deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeleteReason {
    /// `DELETE /v1/events/{id}`.
    Deleted,
    /// An erasure request for the actor.
    Erased,
    /// `retention.expiresAt` passed.
    Expired,
    /// A reviewer rejected the pending event.
    Rejected,
    /// A policy re-evaluation denied the stored event.
    PolicyDenied,
}

impl DeleteReason {
    /// The wire string (also the audit action).
    pub fn as_str(self) -> &'static str {
        match self {
            DeleteReason::Deleted => "deleted",
            DeleteReason::Erased => "erased",
            DeleteReason::Expired => "expired",
            DeleteReason::Rejected => "rejected",
            DeleteReason::PolicyDenied => "policy_denied",
        }
    }
}

/// A deletion as logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteRecord {
    /// Tenant of every id.
    pub tenant_id: String,
    /// Deleted event ids.
    pub event_ids: Vec<String>,
    /// When.
    pub deleted_at: crate::model::Timestamp,
    /// Why.
    pub reason: DeleteReason,
    /// Acting key (`system` for the expiry sweeper).
    pub key_id: String,
    /// The actor an erasure was for (erasures only; absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor_id: Option<String>,
}

/// What compaction keeps of a deleted event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TombstoneRecord {
    /// Internal id it held.
    pub doc: u32,
    /// Tenant.
    pub tenant_id: String,
    /// Event id.
    pub event_id: String,
    /// When it was deleted.
    pub deleted_at: crate::model::Timestamp,
    /// The deleted event's actor and privacy class, so that only keys that could see the
    /// event learn of its deletion (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<crate::model::Audience>,
    /// The key that wrote the event, so that it may ask again for the receipt of an event it
    /// forgot without seeing (absent in records of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
}

/// An event write as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PutRecord {
    /// Internal id (stable across restarts and compaction).
    pub doc: u32,
    /// The event as stored (its status at write time, or its current state after compaction).
    pub event: StoredEvent,
    /// SHA-256 of the validated input, for idempotent retries.
    pub input_hash: String,
    /// Key that wrote it.
    pub key_id: String,
    /// The policy decision that admitted it.
    pub decision: Decision,
    /// The model that made `vector` (absent in records of older versions, whose vectors are
    /// taken to be the store's model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The summary's embedding.
    #[serde(skip)]
    pub vector: Vec<f32>,
}

/// Why a payload could not be decoded.
#[derive(Debug, thiserror::Error)]
#[error("undecodable log record: {0}")]
pub struct DecodeError(String);

/// Encodes a record.
pub fn encode(record: &Record) -> Vec<u8> {
    match record {
        Record::Put(put) => encode_put(put),
        Record::Delete(d) => encode_json(KIND_DELETE, d),
        Record::Tombstone(t) => encode_json(KIND_TOMBSTONE, t),
        Record::Marker => vec![VERSION, KIND_MARKER],
        Record::Review(r) => encode_json(KIND_REVIEW, r),
        Record::Requeue(r) => encode_json(KIND_REQUEUE, r),
    }
}

fn encode_json<T: Serialize>(kind: u8, value: &T) -> Vec<u8> {
    let json = serde_json::to_vec(value).unwrap_or_default();
    let mut out = Vec::with_capacity(6 + json.len());
    out.push(VERSION);
    out.push(kind);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out
}

fn decode_json<T: serde::de::DeserializeOwned>(mut buf: &[u8]) -> Result<T, DecodeError> {
    let len = take_u32(&mut buf)?;
    let json = take(&mut buf, len)?;
    if !buf.is_empty() {
        return Err(DecodeError(format!("{} trailing bytes", buf.len())));
    }
    serde_json::from_slice(json).map_err(|e| DecodeError(e.to_string()))
}

fn encode_put(put: &PutRecord) -> Vec<u8> {
    let json = serde_json::to_vec(put).unwrap_or_default();
    let mut out = Vec::with_capacity(10 + json.len() + put.vector.len() * 4);
    out.push(VERSION);
    out.push(KIND_PUT);
    out.extend_from_slice(&(json.len() as u32).to_le_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&(put.vector.len() as u32).to_le_bytes());
    for x in &put.vector {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], DecodeError> {
    if buf.len() < n {
        return Err(DecodeError(format!("need {n} bytes, have {}", buf.len())));
    }
    let (head, tail) = buf.split_at(n);
    *buf = tail;
    Ok(head)
}

fn take_u32(buf: &mut &[u8]) -> Result<usize, DecodeError> {
    let b = take(buf, 4)?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// Decodes a record.
pub fn decode(mut buf: &[u8]) -> Result<Record, DecodeError> {
    let head = take(&mut buf, 2)?;
    if head[0] != VERSION {
        return Err(DecodeError(format!("unknown version {}", head[0])));
    }
    match head[1] {
        KIND_PUT => decode_put(buf).map(Record::Put),
        KIND_DELETE => decode_json(buf).map(Record::Delete),
        KIND_TOMBSTONE => decode_json(buf).map(Record::Tombstone),
        KIND_MARKER if buf.is_empty() => Ok(Record::Marker),
        KIND_REVIEW => decode_json(buf).map(Record::Review),
        KIND_REQUEUE => decode_json(buf).map(Record::Requeue),
        kind => Err(DecodeError(format!("unknown kind {kind}"))),
    }
}

fn decode_put(mut buf: &[u8]) -> Result<PutRecord, DecodeError> {
    let json_len = take_u32(&mut buf)?;
    let json = take(&mut buf, json_len)?;
    let mut put: PutRecord =
        serde_json::from_slice(json).map_err(|e| DecodeError(e.to_string()))?;
    let dim = take_u32(&mut buf)?;
    let raw = take(&mut buf, dim.saturating_mul(4))?;
    put.vector = raw
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if !buf.is_empty() {
        return Err(DecodeError(format!("{} trailing bytes", buf.len())));
    }
    Ok(put)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Confidence, EventStatus, PrivacyClass, Retention, SourceTrust, Timestamp};

    fn put() -> PutRecord {
        PutRecord {
            doc: 3,
            event: StoredEvent {
                event_id: "e".into(),
                event_type: "task_milestone".into(),
                occurred_at: Timestamp::parse("2026-06-17T09:20:00Z").expect("t"),
                recorded_at: Timestamp::parse("2026-06-17T09:20:01.5Z").expect("t"),
                actor_id: "a".into(),
                actor_names: Vec::new(),
                tenant_id: "t".into(),
                project_id: Some("p".into()),
                resource_refs: vec!["r".into()],
                summary: "s".into(),
                source_refs: vec!["src".into()],
                source_trust: SourceTrust::ToolResult,
                confidence: Confidence::Medium,
                privacy_class: PrivacyClass::Private,
                retention: Retention {
                    expires_at: None,
                    delete_on_request: false,
                },
                supersedes_event_ids: vec![],
                correction_path: String::new(),
                policy_version: "v1".into(),
                status: EventStatus::Active,
                superseded_by: None,
                superseded_at: None,
                content_warnings: vec![],
                metadata: Default::default(),
            },
            input_hash: "h".into(),
            key_id: "k".into(),
            decision: Decision::Allow {
                reason: "episodic_write_policy_passed".into(),
            },
            model: Some("m-1".into()),
            vector: vec![0.25, -1.5, f32::MIN_POSITIVE],
        }
    }

    #[test]
    fn round_trip_is_exact() {
        let r = Record::Put(put());
        assert_eq!(decode(&encode(&r)).expect("decode"), r);
    }

    #[test]
    fn delete_tombstone_and_marker_round_trip() {
        let at = Timestamp::parse("2026-06-17T09:20:00Z").expect("t");
        let records = [
            Record::Delete(DeleteRecord {
                tenant_id: "t".into(),
                event_ids: vec!["a".into(), "b".into()],
                deleted_at: at,
                reason: DeleteReason::Erased,
                key_id: "k".into(),
                actor_id: Some("user-1".into()),
            }),
            Record::Tombstone(TombstoneRecord {
                doc: 9,
                tenant_id: "t".into(),
                event_id: "a".into(),
                deleted_at: at,
                writer: None,
                audience: Some(crate::model::Audience {
                    actor_id: "user-1".into(),
                    privacy_class: crate::model::PrivacyClass::Private,
                }),
            }),
            Record::Tombstone(TombstoneRecord {
                doc: 10,
                tenant_id: "t".into(),
                event_id: "b".into(),
                deleted_at: at,
                audience: None,
                writer: None,
            }),
            Record::Marker,
        ];
        for r in records {
            assert_eq!(decode(&encode(&r)).expect("decode"), r);
        }
    }

    #[test]
    fn rejects_truncation_and_unknown_kinds() {
        let bytes = encode(&Record::Put(put()));
        for cut in [0, 1, 5, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
        let mut bad = bytes.clone();
        bad[1] = 99;
        assert!(decode(&bad).is_err());
        bad[0] = 7;
        assert!(decode(&bad).is_err());
    }
}
