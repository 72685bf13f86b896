//! Binary encoding of log records: a JSON head plus the raw embedding, so a restart never
//! re-embeds.
//!
//! Layout: `[u8 version=1][u8 kind][u32 LE json_len][json][u32 LE dim][dim × f32 LE]`.
//! Invariants: `decode(encode(r)) == r` bit for bit (vectors included); unknown versions or
//! kinds are reported, never guessed.

use serde::{Deserialize, Serialize};

use crate::model::{Decision, StoredEvent};

const VERSION: u8 = 1;
const KIND_PUT: u8 = 1;

/// A decoded log record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// A new event (and, when it is an allowed correction, the supersession it implies).
    Put(PutRecord),
}

/// An event write as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PutRecord {
    /// The event as stored (status at write time).
    pub event: StoredEvent,
    /// SHA-256 of the validated input, for idempotent retries.
    pub input_hash: String,
    /// Key that wrote it.
    pub key_id: String,
    /// The policy decision that admitted it.
    pub decision: Decision,
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
    }
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
            event: StoredEvent {
                event_id: "e".into(),
                event_type: "task_milestone".into(),
                occurred_at: Timestamp::parse("2026-06-17T09:20:00Z").expect("t"),
                recorded_at: Timestamp::parse("2026-06-17T09:20:01.5Z").expect("t"),
                actor_id: "a".into(),
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
            },
            input_hash: "h".into(),
            key_id: "k".into(),
            decision: Decision::Allow {
                reason: "episodic_write_policy_passed".into(),
            },
            vector: vec![0.25, -1.5, f32::MIN_POSITIVE],
        }
    }

    #[test]
    fn round_trip_is_exact() {
        let r = Record::Put(put());
        assert_eq!(decode(&encode(&r)).expect("decode"), r);
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
