//! The engine: owns the log writer, the in-memory table, the scope (tantivy) and vector
//! (exact + HNSW) indexes and the embedder, and exposes write, get, recall and timeline to
//! the API.
//!
//! Invariants:
//! - every call takes a [`TenantGrant`]; the tenant is never read from a request body;
//! - the log is the source of truth: on open it is replayed into the table, and each index
//!   catches up from the last log sequence it recorded (or is rebuilt when missing/corrupt);
//! - vectors come from the log, so a restart never re-embeds;
//! - embedding, scoring and index searches run on the CPU pool, never on async threads;
//! - events with internal id ≥ `watermark` are not yet committed in tantivy and are matched
//!   in memory with the same predicate, so acknowledged writes are recallable at once.

mod lexical;
mod open;
mod table;
mod writer;

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

pub use table::{Entry, Table};
pub use writer::WriterConfig;

use crate::auth::TenantGrant;
use crate::cpu::CpuPool;
use crate::embed::Embedder;
use crate::error::{ErrorCode, Problem};
use crate::index::scope::ScopeIndex;
use crate::index::vector::{HnswIndex, HnswParams, VectorStore};
use crate::model::validate::{validate_event, Limits};
use crate::model::{Decision, EventStatus, StoredEvent, Timestamp};
use crate::policy::WritePolicy;
use crate::rank::RankConfig;
use crate::retrieve::{RecallConfig, RecallRequest, RecallResponse, TimelinePage, TimelineQuery};
use crate::store::record::PutRecord;
use writer::{Command, PendingPut, PutReply};

/// Everything the engine is configured with.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Root of all durable state.
    pub data_dir: PathBuf,
    /// Write validation bounds.
    pub limits: Limits,
    /// Write policy in force.
    pub policy: WritePolicy,
    /// Ranking weights.
    pub rank: RankConfig,
    /// Recall path selection.
    pub recall: RecallConfig,
    /// HNSW graph parameters.
    pub hnsw: HnswParams,
    /// Writer tuning.
    pub writer: WriterConfig,
    /// Threads of the CPU pool.
    pub cpu_threads: usize,
}

impl EngineConfig {
    /// Defaults rooted at `data_dir`.
    pub fn new(data_dir: PathBuf) -> Self {
        EngineConfig {
            data_dir,
            limits: Limits::default(),
            policy: WritePolicy::default(),
            rank: RankConfig::default(),
            recall: RecallConfig::default(),
            hnsw: HnswParams {
                m: 16,
                ef_construction: 100,
                ef_search: 64,
                max_elements: 1_000_000,
            },
            writer: WriterConfig {
                refresh_interval: Duration::from_millis(500),
                max_batch: 256,
                hnsw_save_every: 20_000,
            },
            cpu_threads: 2,
        }
    }
}

/// File locations under the data directory.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The event log file.
    pub log: PathBuf,
    /// The tantivy directory.
    pub scope: PathBuf,
    /// The HNSW snapshot directory.
    pub hnsw: PathBuf,
}

impl Paths {
    /// Paths under `data_dir`.
    pub fn new(data_dir: &std::path::Path) -> Self {
        Paths {
            log: data_dir.join("log").join("events.log"),
            scope: data_dir.join("index").join("scope"),
            hnsw: data_dir.join("index").join("hnsw"),
        }
    }
}

/// State shared by the writer thread and readers.
pub struct Shared {
    /// All events.
    pub table: RwLock<Table>,
    /// All vectors, by internal id.
    pub vectors: VectorStore,
    /// The HNSW graph over all vectors.
    pub hnsw: HnswIndex,
    /// The tantivy scope index.
    pub scope: ScopeIndex,
    /// Internal ids below this are committed in `scope`.
    pub watermark: AtomicUsize,
    /// File locations.
    pub paths: Paths,
}

/// Counters exposed for tests and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineStats {
    /// Events in the table.
    pub events: usize,
    /// Vectors in the HNSW graph.
    pub hnsw_len: usize,
    /// Committed docs in the scope index.
    pub scope_docs: u64,
}

/// The engine handle; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
    tx: std::sync::mpsc::Sender<Command>,
    embedder: Arc<dyn Embedder>,
    cpu: CpuPool,
    config: Arc<EngineConfig>,
    writer_thread: Arc<parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>>,
}

/// The result of an accepted write.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The event as stored.
    pub event: StoredEvent,
    /// The decision that admitted it.
    pub decision: Decision,
    /// Whether this was an idempotent replay of an earlier write.
    pub replayed: bool,
}

/// Applies one logged put to the table, vectors and (optionally) the indexes.
pub(crate) fn apply_put(
    shared: &Shared,
    seq: u64,
    put: PutRecord,
    index: bool,
) -> Result<(), String> {
    let mut table = shared.table.write();
    let doc = table.len() as u32;
    shared
        .vectors
        .push(doc, &put.vector)
        .map_err(|e| e.to_string())?;
    if matches!(put.decision, Decision::Allow { .. }) {
        for old in &put.event.supersedes_event_ids {
            table.mark_superseded(&put.event.tenant_id, old, &put.event.event_id);
        }
    }
    let entry = Entry {
        doc,
        seq,
        occurred_ms: put.event.occurred_at.unix_millis(),
        event: put.event,
        input_hash: put.input_hash,
        key_id: put.key_id,
        decision: put.decision,
    };
    if index {
        shared
            .scope
            .add(&entry.scope_doc())
            .map_err(|e| e.to_string())?;
        shared
            .hnsw
            .insert(doc, &put.vector)
            .map_err(|e| e.to_string())?;
    }
    table.push(entry);
    Ok(())
}

fn hash_input(input: &crate::model::EventInput) -> String {
    let bytes = serde_json::to_vec(input).unwrap_or_default();
    hex::encode(Sha256::digest(bytes))
}

impl Engine {
    /// Opens (recovering from the log) or creates the engine. Blocking; call off async threads.
    pub fn open(config: EngineConfig, embedder: Arc<dyn Embedder>) -> anyhow::Result<Engine> {
        open::open(config, embedder)
    }

    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Current counters.
    pub fn stats(&self) -> EngineStats {
        EngineStats {
            events: self.shared.table.read().len(),
            hnsw_len: self.shared.hnsw.len(),
            scope_docs: self.shared.scope.num_docs(),
        }
    }

    /// Validates, decides, embeds and durably stores one event.
    pub async fn write(
        &self,
        grant: &TenantGrant,
        body: &Value,
        wait_for: bool,
    ) -> Result<WriteOutcome, Problem> {
        self.write_inner(grant, body, wait_for, None).await
    }

    /// Like [`Engine::write`] with a precomputed summary embedding (bulk loads, benchmarks).
    /// The vector must have the embedder's dimension; it is L2-normalised here.
    pub async fn write_embedded(
        &self,
        grant: &TenantGrant,
        body: &Value,
        vector: Vec<f32>,
        wait_for: bool,
    ) -> Result<WriteOutcome, Problem> {
        self.write_inner(grant, body, wait_for, Some(vector)).await
    }

    async fn write_inner(
        &self,
        grant: &TenantGrant,
        body: &Value,
        wait_for: bool,
        vector: Option<Vec<f32>>,
    ) -> Result<WriteOutcome, Problem> {
        check_body_tenant(grant, body)?;
        let now = Timestamp::now();
        let input = validate_event(body, &self.config.limits, now).map_err(Problem::validation)?;
        let decision = self.config.policy.decide(&input);
        if let Decision::Deny { reason } = &decision {
            let detail = format!(
                "write policy {} denied the event: {reason}",
                self.config.policy.version
            );
            let decision_json = serde_json::to_value(&decision).unwrap_or(Value::Null);
            return Err(
                Problem::new(ErrorCode::PolicyDenied, detail).with_extra("decision", decision_json)
            );
        }
        let input_hash = hash_input(&input);
        if let Some(done) = self.replay_without_embedding(grant, &input, &input_hash)? {
            return Ok(done);
        }
        let vector = match vector {
            Some(v) => normalized(v, self.embedder.dim())?,
            None => self.embed_one(input.summary.clone()).await?,
        };
        let pending = PendingPut {
            tenant: grant.tenant().to_string(),
            key_id: grant.key_id().to_string(),
            input,
            input_hash,
            decision,
            policy_version: self.config.policy.version.clone(),
            vector,
        };
        let outcome = self.send_put(pending).await?;
        if wait_for {
            self.refresh().await?;
        }
        Ok(outcome)
    }

    fn replay_without_embedding(
        &self,
        grant: &TenantGrant,
        input: &crate::model::EventInput,
        hash: &str,
    ) -> Result<Option<WriteOutcome>, Problem> {
        let Some(id) = &input.event_id else {
            return Ok(None);
        };
        let table = self.shared.table.read();
        let Some(entry) = table.find(grant.tenant(), id) else {
            return Ok(None);
        };
        if entry.input_hash != hash {
            return Err(Problem::new(
                ErrorCode::Conflict,
                format!("event {id} already exists with different content"),
            ));
        }
        Ok(Some(WriteOutcome {
            event: entry.event.clone(),
            decision: entry.decision.clone(),
            replayed: true,
        }))
    }

    async fn send_put(&self, pending: PendingPut) -> Result<WriteOutcome, Problem> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Put(Box::new(pending), tx))
            .map_err(|_| writer_gone())?;
        match rx.await.map_err(|_| writer_gone())? {
            PutReply::Stored(event, decision) => Ok(WriteOutcome {
                event: *event,
                decision,
                replayed: false,
            }),
            PutReply::Replayed(event, decision) => Ok(WriteOutcome {
                event: *event,
                decision,
                replayed: true,
            }),
            PutReply::NotFound(id) => Err(Problem::event_not_found(&id)),
            PutReply::Conflict(msg) => Err(Problem::new(ErrorCode::Conflict, msg)),
            PutReply::Unavailable(msg) => Err(Problem::new(
                ErrorCode::StorageUnavailable,
                format!("the event log cannot accept writes: {msg}"),
            )),
        }
    }

    /// Makes every acknowledged write searchable in the scope index.
    pub async fn refresh(&self) -> Result<(), Problem> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Refresh(tx))
            .map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())
    }

    /// Flushes indexes and stops the writer; later writes fail with 503. Returns after the
    /// writer thread has exited (so the index files are released).
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
        let handle = self.writer_thread.lock().take();
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }

    /// Embeds one text on the CPU pool.
    pub async fn embed_one(&self, text: String) -> Result<Vec<f32>, Problem> {
        let embedder = Arc::clone(&self.embedder);
        let vectors = self
            .cpu
            .run(move || embedder.embed(&[text.as_str()]))
            .await
            .map_err(|e| Problem::new(ErrorCode::Internal, e))?
            .map_err(|e| Problem::new(ErrorCode::Internal, e.to_string()))?;
        vectors
            .into_iter()
            .next()
            .ok_or_else(|| Problem::new(ErrorCode::Internal, "embedder returned no vector"))
    }

    /// One event of the grant's tenant, or 404 (also for other tenants' ids).
    pub fn get(&self, grant: &TenantGrant, event_id: &str) -> Result<StoredEvent, Problem> {
        let table = self.shared.table.read();
        match table.find(grant.tenant(), event_id) {
            Some(e) if e.event.tenant_id == grant.tenant() && !e.is_expired(Timestamp::now()) => {
                Ok(e.event.clone())
            }
            _ => Err(Problem::event_not_found(event_id)),
        }
    }

    /// Scope-first recall.
    pub async fn recall(
        &self,
        grant: &TenantGrant,
        req: RecallRequest,
    ) -> Result<RecallResponse, Problem> {
        let query_vector = self.embed_one(req.query.clone()).await?;
        let shared = Arc::clone(&self.shared);
        let config = Arc::clone(&self.config);
        let grant = grant.clone();
        self.cpu
            .run(move || crate::retrieve::recall(&shared, &config, &grant, &req, &query_vector))
            .await
            .map_err(|e| Problem::new(ErrorCode::Internal, e))?
    }

    /// Recall with a precomputed query vector (benchmarks, eval).
    pub fn recall_with_vector(
        &self,
        grant: &TenantGrant,
        req: &RecallRequest,
        query_vector: &[f32],
    ) -> Result<RecallResponse, Problem> {
        crate::retrieve::recall(&self.shared, &self.config, grant, req, query_vector)
    }

    /// One page of the timeline, ordered by `occurredAt`.
    pub async fn timeline(
        &self,
        grant: &TenantGrant,
        query: TimelineQuery,
    ) -> Result<TimelinePage, Problem> {
        let shared = Arc::clone(&self.shared);
        let grant = grant.clone();
        self.cpu
            .run(move || crate::retrieve::timeline(&shared, &grant, &query))
            .await
            .map_err(|e| Problem::new(ErrorCode::Internal, e))?
    }

    /// Whether an event's status makes it visible to recall and timeline by default.
    pub fn is_default_visible(status: EventStatus) -> bool {
        status == EventStatus::Active
    }
}

fn normalized(mut v: Vec<f32>, dim: usize) -> Result<Vec<f32>, Problem> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if v.len() != dim || !norm.is_finite() || norm == 0.0 {
        return Err(Problem::new(
            ErrorCode::ValidationFailed,
            format!("a precomputed vector must have {dim} finite components, not all zero"),
        ));
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(v)
}

fn writer_gone() -> Problem {
    Problem::new(ErrorCode::StorageUnavailable, "the writer has stopped")
}

fn check_body_tenant(grant: &TenantGrant, body: &Value) -> Result<(), Problem> {
    match body.get("tenantId") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(t)) if t == grant.tenant() => Ok(()),
        Some(_) => Err(Problem::new(
            ErrorCode::TenantMismatch,
            "tenantId in the body differs from the key's tenant",
        )),
    }
}
