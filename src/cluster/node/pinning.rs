//! Pinning a tenant to a shard of its own: its records move from its hashed shard's log to
//! the log of a new shard, which nodes then hold like any other.
//!
//! The owner of the tenant's hashed shard runs the move:
//! 1. reserves a pinned shard number and records the pin as `copying`;
//! 2. stops routing the tenant (503, retryable) and freezes it in the shard's engine, so
//!    every change queued before is applied and every later one refused;
//! 3. copies the tenant's records, in compacted form at their log sequences, to the new
//!    shard's first stream, then a marker at the old log's last sequence (the audit trail
//!    may name any sequence up to it), and the tenant's audit entries to the new shard's
//!    audit stream;
//! 4. marks the pin `active` by compare-and-set: from then on every node routes the tenant
//!    to the new shard, which some node takes on its next round;
//! 5. evicts the tenant from the old shard: its read model at once, its records by a
//!    rotation that keeps none of them, and marks the source purged.
//!
//! Invariants: nothing acknowledged is lost: the freeze makes the copy complete, and the
//! tenant is never served by two shards (routing by an active pin starts only after the
//! copy, and the old shard refuses the tenant from the freeze on); a move that fails before
//! step 4 is undone (the tenant thawed, the new streams and the pin removed); a failed purge
//! is retried every coordination round by the old shard's owner until the source is
//! purged; the tenant's audit entries made by reads still in flight at the freeze stay in
//! the old shard's trail only (entries hold ids and hashes, never content).

use std::time::Instant;

use serde::Serialize;

use super::{audit_stream_name, Inner, Node};
use crate::audit::AuditStamp;
use crate::cluster::lease::LeaseError;
use crate::cluster::pins::{Pin, PinState};
use crate::cluster::shards::{shard_of, stream_name};
use crate::engine::Engine;
use crate::store::nats::NatsLog;
use crate::store::record::{encode, Record};
use crate::store::{EventLog, LogError, LogRecord};

/// Records per chunk of the copy.
const COPY_CHUNK: usize = 1024;

/// What a pin did.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PinReport {
    /// The tenant.
    pub tenant: String,
    /// The shard it lived on.
    pub from_shard: u32,
    /// Its shard of its own.
    pub shard: u32,
    /// Log records copied (live events and tombstones).
    pub records: u64,
    /// Audit entries copied.
    pub audit_entries: u64,
    /// Whether the old shard's log no longer holds any of its records.
    pub source_purged: bool,
    /// Milliseconds from the freeze to the pin's activation (the tenant's unavailability,
    /// until a node serves the new shard).
    pub frozen_ms: u64,
    /// Milliseconds in all.
    pub took_ms: u64,
}

/// Why a pin was not made.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The tenant is pinned already.
    #[error("tenant {tenant} is pinned to shard {shard} already")]
    AlreadyPinned {
        /// The tenant.
        tenant: String,
        /// Its shard.
        shard: u32,
    },
    /// Another move of the tenant is under way.
    #[error("tenant {0} is being moved already")]
    InProgress(String),
    /// This node does not serve the tenant's shard (the caller forwards to its owner).
    #[error("this node does not serve shard {0}")]
    NotHere(u32),
    /// The coordination bucket failed.
    #[error(transparent)]
    Cluster(#[from] LeaseError),
    /// A stream failed.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] crate::engine::Error),
    /// The audit trail held an unreadable entry.
    #[error("audit entry {seq} of shard {shard} is unreadable: {reason}")]
    Audit {
        /// The shard.
        shard: u32,
        /// The audit stream's sequence.
        seq: u64,
        /// Why.
        reason: String,
    },
}

impl Node {
    /// Pins `tenant` to a shard of its own, moving its records there (see the module
    /// docs). Runs on the owner of the tenant's hashed shard; blocking.
    pub fn pin_tenant(&self, tenant: &str, key_id: &str) -> Result<PinReport, PinError> {
        let inner = &self.inner;
        let started = Instant::now();
        let existing = inner.catalog.pin(tenant)?;
        if let Some((pin, _)) = &existing {
            if pin.state == PinState::Active {
                return Err(PinError::AlreadyPinned {
                    tenant: tenant.to_string(),
                    shard: pin.shard,
                });
            }
        }
        let from = shard_of(tenant, inner.config.shards);
        let (engine, epoch) = match inner.held.read().get(&from) {
            Some(h) => match &h.engine {
                Some(engine) => (engine.clone(), h.lease.epoch),
                None => return Err(PinError::NotHere(from)),
            },
            None => return Err(PinError::NotHere(from)),
        };
        if !inner.moving.lock().insert(tenant.to_string()) {
            return Err(PinError::InProgress(tenant.to_string()));
        }
        // A `copying` record left by a move that stopped (its node died or lost the shard)
        // is taken over, with its shard number.
        let (shard, revision) = match existing {
            Some((pin, revision)) => (pin.shard, Some(revision)),
            None => match inner.catalog.reserve_shard(inner.config.shards, tenant) {
                Ok(shard) => (shard, None),
                Err(e) => {
                    inner.moving.lock().remove(tenant);
                    return Err(e.into());
                }
            },
        };
        let mut pin = Pin {
            tenant: tenant.to_string(),
            shard,
            from,
            state: PinState::Copying,
            node: inner.config.node_id.clone(),
            epoch,
            source_purged: false,
        };
        let revision = match inner.catalog.write_pin(&pin, revision) {
            Ok(Some(revision)) => revision,
            Ok(None) => {
                inner.moving.lock().remove(tenant);
                return Err(PinError::InProgress(tenant.to_string()));
            }
            Err(e) => {
                inner.moving.lock().remove(tenant);
                return Err(e.into());
            }
        };
        let frozen_at = Instant::now();
        let copied = inner.copy_tenant(&engine, &pin);
        let (records, audit_entries) = match copied {
            Ok(counts) => counts,
            Err(e) => {
                inner.abandon(&engine, &pin, revision);
                return Err(e);
            }
        };
        pin.state = PinState::Active;
        let revision = match inner.activate(&pin, revision) {
            Activation::Done(revision) => revision,
            Activation::Refused => {
                inner.abandon(&engine, &pin, revision);
                return Err(PinError::InProgress(tenant.to_string()));
            }
            Activation::Unknown(e) => {
                // The record may say active: the tenant stays frozen and unrouted here
                // until a round reads the record and settles the move.
                tracing::warn!(tenant, error = %e, "activating the pin: outcome unknown");
                inner
                    .unsettled
                    .lock()
                    .insert(tenant.to_string(), (pin, revision));
                return Err(e.into());
            }
        };
        inner.pins.write().insert(tenant.to_string(), shard);
        inner.moving.lock().remove(tenant);
        let frozen_ms = frozen_at.elapsed().as_millis() as u64;
        tracing::info!(
            tenant,
            from,
            shard,
            records,
            audit_entries,
            frozen_ms,
            "pinned the tenant"
        );
        let source_purged = inner.purge_source(&engine, &pin, revision, key_id);
        Ok(PinReport {
            tenant: tenant.to_string(),
            from_shard: from,
            shard,
            records,
            audit_entries,
            source_purged,
            frozen_ms,
            took_ms: started.elapsed().as_millis() as u64,
        })
    }
}

/// How a pin's activation ended.
enum Activation {
    /// Active, at this revision.
    Done(u64),
    /// Another write changed the record first.
    Refused,
    /// NATS did not answer within the deadline.
    Unknown(LeaseError),
}

/// How long an activation keeps trying while NATS cannot answer.
const ACTIVATE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

impl Inner {
    /// Marks `pin` (already `active`) over the copier's `revision`, retrying what NATS does
    /// not answer and recognising a write whose answer was lost.
    fn activate(&self, pin: &Pin, revision: u64) -> Activation {
        let deadline = Instant::now() + ACTIVATE_DEADLINE;
        loop {
            let error = match self.catalog.write_pin(pin, Some(revision)) {
                Ok(Some(revision)) => return Activation::Done(revision),
                Ok(None) => match self.catalog.pin(&pin.tenant) {
                    Ok(Some((now, rev))) if now == *pin => return Activation::Done(rev),
                    Ok(_) => return Activation::Refused,
                    Err(e) => e,
                },
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Activation::Unknown(error);
            }
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    }

    /// Settles moves whose activation was left unknown: active now (routed by the pin), or
    /// still copying (undone).
    fn settle(&self) {
        let unsettled: Vec<(String, (Pin, u64))> = self
            .unsettled
            .lock()
            .iter()
            .map(|(t, p)| (t.clone(), p.clone()))
            .collect();
        for (tenant, (pin, revision)) in unsettled {
            match self.catalog.pin(&tenant) {
                Ok(Some((now, _))) if now.state == PinState::Active => {
                    self.pins.write().insert(tenant.clone(), now.shard);
                    self.moving.lock().remove(&tenant);
                    self.unsettled.lock().remove(&tenant);
                }
                Ok(_) => {
                    let engine = self
                        .held
                        .read()
                        .get(&pin.from)
                        .and_then(|h| h.engine.clone());
                    if let Some(engine) = engine {
                        self.abandon(&engine, &pin, revision);
                    } else {
                        // The shard left this node: its new owner never froze the tenant.
                        self.moving.lock().remove(&tenant);
                    }
                    self.unsettled.lock().remove(&tenant);
                }
                Err(e) => {
                    tracing::warn!(tenant, error = %e, "settling the move: reading the pin failed")
                }
            }
        }
    }

    /// Freezes the tenant in `engine` and copies its records and audit entries to the
    /// streams of `pin.shard`; counts of both.
    fn copy_tenant(&self, engine: &Engine, pin: &Pin) -> Result<(u64, u64), PinError> {
        let tenant = pin.tenant.as_str();
        let next_seq = self.runtime.block_on(engine.freeze_tenant(tenant))?;
        let writable = match self.held.read().get(&pin.from) {
            Some(h) if h.lease.epoch == pin.epoch => h.writable.clone(),
            _ => return Err(PinError::NotHere(pin.from)),
        };
        let log_name = stream_name(&self.config.cluster, pin.shard, 1);
        let audit_name = audit_stream_name(&self.config.cluster, pin.shard);
        // What an abandoned move may have left.
        self.conn.delete_stream(&log_name)?;
        self.conn.delete_stream(&audit_name)?;
        let mut log = NatsLog::open(&self.conn, &log_name, self.config.replicas)?;
        log.set_lease(Some(writable.clone()));
        let (mut from_doc, mut next_doc, mut records, mut last) = (0u32, 0u32, 0u64, 0u64);
        loop {
            let chunk = engine.tenant_records(tenant, from_doc, COPY_CHUNK, &mut next_doc)?;
            log.append_records(&chunk.records)?;
            records += chunk.records.len() as u64;
            last = chunk.records.last().map_or(last, |r| r.seq);
            match chunk.next {
                Some(next) => from_doc = next,
                None => break,
            }
        }
        let mark = next_seq.saturating_sub(1);
        if mark > last {
            log.append_records(&[LogRecord {
                seq: mark,
                payload: encode(&Record::Marker),
            }])?;
        }
        let source = NatsLog::open(
            &self.conn,
            &audit_stream_name(&self.config.cluster, pin.from),
            self.config.replicas,
        )?;
        let mut audit = NatsLog::open(&self.conn, &audit_name, self.config.replicas)?;
        audit.set_lease(Some(writable));
        let mut batch: Vec<Vec<u8>> = Vec::new();
        let mut copied = 0u64;
        let mut flush = |batch: &mut Vec<Vec<u8>>| -> Result<(), PinError> {
            let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
            audit.append_batch(&refs)?;
            copied += batch.len() as u64;
            batch.clear();
            Ok(())
        };
        for rec in source.read_from(1)? {
            let rec = rec?;
            let stamp: AuditStamp<'_> =
                serde_json::from_slice(&rec.payload).map_err(|e| PinError::Audit {
                    shard: pin.from,
                    seq: rec.seq,
                    reason: e.to_string(),
                })?;
            if stamp.tenant_id == tenant {
                batch.push(rec.payload.clone());
                if batch.len() >= COPY_CHUNK {
                    flush(&mut batch)?;
                }
            }
        }
        if !batch.is_empty() {
            flush(&mut batch)?;
        }
        Ok((records, copied))
    }

    /// Undoes a move that failed before its pin was active.
    fn abandon(&self, engine: &Engine, pin: &Pin, revision: u64) {
        tracing::warn!(tenant = %pin.tenant, shard = pin.shard, "abandoning the tenant's move");
        for name in [
            stream_name(&self.config.cluster, pin.shard, 1),
            audit_stream_name(&self.config.cluster, pin.shard),
        ] {
            if let Err(e) = self.conn.delete_stream(&name) {
                tracing::warn!(stream = %name, error = %e, "removing an abandoned copy failed");
            }
        }
        if let Err(e) = self.catalog.drop_pin(pin, revision) {
            tracing::warn!(tenant = %pin.tenant, error = %e, "removing the abandoned pin failed");
        }
        if let Err(e) = self.runtime.block_on(engine.thaw_tenant(&pin.tenant)) {
            tracing::warn!(tenant = %pin.tenant, error = %e, "thawing the tenant failed");
        }
        self.moving.lock().remove(&pin.tenant);
    }

    /// Evicts the pinned tenant from its former shard's engine and log, then records the
    /// source as purged; whether both happened.
    fn purge_source(&self, engine: &Engine, pin: &Pin, revision: u64, key_id: &str) -> bool {
        let tenant = pin.tenant.as_str();
        let evicted = self.runtime.block_on(async {
            engine.freeze_tenant(tenant).await?;
            engine.evict_tenant(tenant, key_id).await
        });
        if let Err(e) = evicted {
            tracing::warn!(tenant, shard = pin.from, error = %e, "purging the moved tenant failed; retrying next round");
            return false;
        }
        let purged = Pin {
            source_purged: true,
            ..pin.clone()
        };
        match self.catalog.write_pin(&purged, Some(revision)) {
            Ok(Some(_)) => true,
            Ok(None) | Err(_) => {
                tracing::warn!(tenant, "recording the purge failed; retrying next round");
                false
            }
        }
    }

    /// Every round: settles moves this node left unknown, and queues the purge of every
    /// active pin whose former shard this node serves and still holds the tenant.
    pub(super) fn purge_moved(&self) {
        if !self.unsettled.lock().is_empty() {
            self.settle();
        }
        let records = self.pin_records.read().clone();
        for pin in &records {
            if pin.state != PinState::Active || pin.source_purged {
                continue;
            }
            let serves = self
                .held
                .read()
                .get(&pin.from)
                .is_some_and(|h| h.engine.is_some());
            if !serves || !self.purging.lock().insert(pin.tenant.clone()) {
                continue;
            }
            let sent = self
                .opener
                .lock()
                .as_ref()
                .is_some_and(|tx| tx.send(super::Job::Purge(pin.clone())).is_ok());
            if !sent {
                self.purging.lock().remove(&pin.tenant);
            }
        }
    }

    /// The opener thread's purge of `pin`'s tenant from its former shard.
    pub(super) fn purge(&self, pin: &Pin) {
        let engine = self
            .held
            .read()
            .get(&pin.from)
            .and_then(|h| h.engine.clone());
        if let Some(engine) = engine {
            match self.catalog.pin(&pin.tenant) {
                Ok(Some((current, revision)))
                    if current.state == PinState::Active && !current.source_purged =>
                {
                    if self.purge_source(&engine, &current, revision, "system") {
                        tracing::info!(tenant = %pin.tenant, shard = pin.from, "purged the moved tenant from its former shard");
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reading the pin failed"),
            }
        }
        self.purging.lock().remove(&pin.tenant);
    }
}
