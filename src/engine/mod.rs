//! The engine: owns the writer thread (which owns the event log and the audit appender), the
//! in-memory table, the scope (tantivy) and vector (exact + HNSW) indexes and the embedder,
//! and exposes write, get, recall, timeline and the lifecycle operations to the API.
//!
//! Layout: this file is the [`Engine`] handle (reads, and the requests it sends the
//! writer), `write` its write path (validation, policy, idempotent retries, embedding),
//! `export`, `import`, `backup` and `observe` more entry points; [`writer`] is the write half, in one folder
//! (see its docs for the vocabulary of apply, catch-up, re-evaluation and idempotent retry);
//! `open` starts it all and `recovery` proves nothing acknowledged is missing; `shared`,
//! `logged`, `partitions` and `scope_health` are leaves the others use. Dependencies point
//! one way: the handle → `open`, `recovery` → `writer` → the leaves; nothing in `writer`
//! imports from the handle.
//!
//! Invariants:
//! - every call takes a [`TenantGrant`]; the tenant is never read from a request body;
//! - the log is the source of truth: on open the table catches up with it, and each index
//!   catches up from the last log sequence it recorded (or is rebuilt when missing/corrupt);
//! - vectors come from the log, so a restart never re-embeds;
//! - embedding, scoring and index searches run on the CPU pool, never on async threads;
//! - events with internal id ≥ `watermark` are not yet committed in tantivy and are matched
//!   in memory with the same predicate, so acknowledged writes are recallable at once;
//! - the audit trail is read from its log file (through a sparse block index), never kept
//!   whole in memory, so reads — each of which is audited — do not grow memory.

mod backup;
mod batch;
mod draft;
mod error;
mod export;
mod gauges;
mod graph_files;
mod graphs;
mod import;
mod logged;
mod moving;
mod observe;
mod open;
mod partitions;
mod recovery;
mod reembed;
mod scope_health;
mod shared;
mod write;
mod writer;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::oneshot;

pub use crate::read::SubjectRule;
pub use backup::{restore, verify_backup, BackupError, BackupFile, BackupReport, RestoreReport};
pub use error::Error;
pub use export::{ExportSnapshot, ExportedEvent};
pub use graphs::{GRAPH_BATCH, GRAPH_EF_CONSTRUCTION, GRAPH_M};
pub use import::{ImportLine, ImportedBatch, LineResult};
pub use observe::Observation;
pub use recovery::{recover, DataLoss, RecoveryReport, TenantRecovery};
pub use reembed::{ModelStatus, ReembedState, ReembedStatus};
pub use scope_health::ScopeHealth;
pub use shared::{DataDirLock, Paths, Serving, Shared, ALL_TENANTS};
pub use write::WriteOutcome;
pub use writer::{
    CompactReport, Conflict, ErasureReceipt, Kept, Receipt, ReevaluationReport, ReviewOutcome,
    Verdict, WriterConfig,
};

use crate::audit::{AuditAction, AuditEntry, AuditQuery};
use crate::auth::TenantGrant;
use crate::cpu::CpuPool;
use crate::embed::{Embedder, PassageText};
use crate::index::vector::HnswParams;
use crate::model::validate::Limits;
use crate::model::{Decision, EventStatus, StoredEvent, Timestamp};
use crate::policy::WritePolicy;
use crate::rank::RankConfig;
use crate::read::{Seen, Table, Visible};
use crate::retrieve::{
    QueryRead, Reading, RecallConfig, RecallRequest, RecallResponse, TimelinePage, TimelineQuery,
};
use writer::{Command, DeleteReply};

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
    /// Which fields define a subject for stale suppression.
    pub stale: SubjectRule,
    /// Where the event log lives: the file under `data_dir` (the default) or a stream.
    pub log: crate::store::LogLocation,
    /// Where the audit trail's source of truth lives: only the file under `data_dir` (the
    /// default), or a stream the file copies (cluster mode).
    pub audit_log: crate::store::LogLocation,
    /// The secret of the audit trail's keyed hashes, when it is not the data directory's
    /// own (cluster mode: the same on every node, so a shard's hashes do not change with its
    /// owner).
    pub audit_secret: Option<crate::audit::Keyed>,
    /// Open as a standby (cluster mode): catch up with a log another node writes, follow it
    /// ([`Engine::follow`]) and append nothing until [`Engine::promote`].
    pub follower: bool,
    /// A CPU pool to share instead of building one of `cpu_threads` (a cluster node's
    /// shards share the node's pool).
    pub cpu_pool: Option<CpuPool>,
    /// Where online backups are written (`POST /v1/admin/backup`), each in a directory of
    /// its own; by default `<data_dir>/backups`.
    pub backup_dir: PathBuf,
    /// The longest a single text (a recall query, a write) waits for others to share its
    /// model call while requests arrive concurrently ([`crate::embed::coalesce`]).
    pub embed_max_wait: Duration,
    /// A coalescer to share instead of starting one (a cluster node's shards share the
    /// node's, over the same embedder).
    pub coalescer: Option<crate::embed::Coalescer>,
    /// The text a stored event's vector is embedded from ([`PassageText`]: the summary
    /// alone, or with its actor's label). Changing it changes new vectors only.
    pub passage: PassageText,
    /// A model to re-embed every stored event with, online, and to switch to once done
    /// (`--reembed-to`; see the engine's `reembed` module). Once the log holds its vectors
    /// it is the model that serves, whatever the configured one.
    pub reembed_to: Option<ReembedTarget>,
}

/// The model of [`EngineConfig::reembed_to`].
#[derive(Clone)]
pub struct ReembedTarget(pub Arc<dyn Embedder>);

impl std::fmt::Debug for ReembedTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ReembedTarget")
            .field(&self.0.model_id())
            .finish()
    }
}

impl EngineConfig {
    /// Defaults rooted at `data_dir`.
    pub fn new(data_dir: PathBuf) -> Self {
        EngineConfig {
            backup_dir: data_dir.join("backups"),
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
                sweep_interval: Duration::from_secs(60),
            },
            cpu_threads: 2,
            stale: SubjectRule::default(),
            log: crate::store::LogLocation::Local,
            audit_log: crate::store::LogLocation::Local,
            audit_secret: None,
            follower: false,
            cpu_pool: None,
            embed_max_wait: crate::embed::coalesce::DEFAULT_MAX_WAIT,
            coalescer: None,
            passage: PassageText::default(),
            reembed_to: None,
        }
    }
}

impl EngineConfig {
    /// The coalescer to share, or a new one over `embedder` waiting at most `embed_max_wait`.
    pub fn coalescer_for(
        &self,
        embedder: &Arc<dyn Embedder>,
    ) -> anyhow::Result<crate::embed::Coalescer> {
        match &self.coalescer {
            Some(c) => Ok(c.clone()),
            None => crate::embed::Coalescer::start(
                Arc::clone(embedder),
                self.embed_max_wait,
                crate::embed::coalesce::DEFAULT_MAX_BATCH,
            )
            .map_err(|e| anyhow::anyhow!("starting the embedding worker: {e}")),
        }
    }
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
    /// Ids covered by the vector partitions (0 when none are built).
    pub partitioned: usize,
    /// Whether a build of the vector partitions runs or is due (the vectors they do not
    /// cover reached an eighth of those they do).
    pub partitions_pending: bool,
    /// Tenants with their own HNSW graph.
    pub tenant_graphs: usize,
    /// Points held by the tenant graphs.
    pub graph_points: usize,
    /// Ids below this are in their tenant's graph when it has one (see
    /// [`crate::read::TenantGraphs`]).
    pub graphs_upto: usize,
    /// Whether a background update of the tenant graphs runs (building, extending,
    /// measuring or saving them).
    pub graphs_building: bool,
    /// Points of the tenant graphs read back from disk at the start, instead of built.
    pub graphs_read_back: usize,
    /// Tenant graphs whose search widths were measured, and how many of those no width
    /// reached the recall target for (never searched plainly).
    pub graphs_measured: (usize, usize),
    /// Scope densities at which the partition's probe share was measured (0: none, so every
    /// probe reads `partition_probe_share`).
    pub probe_densities_measured: usize,
}

/// The engine handle; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
    tx: std::sync::mpsc::Sender<Command>,
    cpu: CpuPool,
    config: Arc<EngineConfig>,
    writer_thread: Arc<parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>>,
    /// Tells a re-embedding's thread to stop (at shutdown).
    reembed_stop: Arc<std::sync::atomic::AtomicBool>,
    /// A re-embedding's thread, joined at shutdown.
    reembed_thread: Arc<parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl Engine {
    /// Opens (recovering from the log) or creates the engine. Blocking; call off async threads.
    pub fn open(config: EngineConfig, embedder: Arc<dyn Embedder>) -> anyhow::Result<Engine> {
        open::open(config, embedder, None)
    }

    /// [`Engine::open`] under a lock of the data directory the caller took first (to read
    /// its key store before the engine opens); the engine holds it from then on.
    pub fn open_locked(
        config: EngineConfig,
        embedder: Arc<dyn Embedder>,
        lock: DataDirLock,
    ) -> anyhow::Result<Engine> {
        open::open(config, embedder, Some(lock))
    }

    /// The configuration in force.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The embedder every write and recall uses (the observer classifies with the same
    /// model so its prototype similarities match the stored vectors' space).
    pub fn embedder(&self) -> Arc<dyn Embedder> {
        Arc::clone(&self.shared.serving.load().embedder)
    }

    /// The model id of [`Engine::embedder`], taken before a write prepares and embeds its
    /// text: the writer refuses the vector if the store's model changed since.
    pub(super) fn serving_model(&self) -> Arc<str> {
        Arc::from(self.shared.serving.load().embedder.model_id())
    }

    /// The model that made the stored vectors: the embedder's for a serving engine; for
    /// offline maintenance the one the log records (`None` while the log records none).
    pub fn vector_model(&self) -> Option<String> {
        self.shared.vectors.load().model().map(str::to_string)
    }

    /// Current counters.
    pub fn stats(&self) -> EngineStats {
        let graphs = self.shared.graphs.load();
        EngineStats {
            events: self.shared.table.read().live(),
            hnsw_len: self.shared.hnsw.load().len(),
            scope_docs: self.shared.scope.num_docs(),
            partitioned: self
                .shared
                .partition
                .load()
                .as_ref()
                .map_or(0, |p| p.index.upto() as usize),
            partitions_pending: partitions::pending(&self.shared),
            tenant_graphs: graphs.graphs().len(),
            graph_points: graphs.points(),
            graphs_upto: graphs.upto() as usize,
            graphs_building: self
                .shared
                .graph_building
                .load(std::sync::atomic::Ordering::Acquire),
            graphs_read_back: self.shared.graph_disk.loaded(),
            graphs_measured: graphs.measured(),
            probe_densities_measured: self
                .shared
                .partition
                .load()
                .as_ref()
                .map_or(0, |p| p.curve().buckets().len()),
        }
    }

    /// Whether the scope index is in step with the log (`/readyz`, `/metrics`).
    pub fn scope_health(&self) -> &ScopeHealth {
        &self.shared.scope_health
    }

    /// Makes every acknowledged write searchable in the scope index.
    pub async fn refresh(&self) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Command::Refresh(tx))
            .map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())
    }

    /// A standby's step: applies what its log gained since the last step; the log's next
    /// sequence after it.
    pub async fn follow(&self) -> Result<u64, Error> {
        self.ask(Command::Follow)
            .await?
            .map_err(|e| Error::Storage(writer::WriterError::Following(e)))
    }

    /// Makes a standby the writer: it follows to the end, audits what the trail lacks, and
    /// accepts writes from then on.
    pub async fn promote(&self) -> Result<u64, Error> {
        self.ask(Command::Promote)
            .await?
            .map_err(|e| Error::Storage(writer::WriterError::Following(e)))
    }

    /// Flushes indexes and stops the writer; later writes fail with 503. Returns after the
    /// writer thread has exited (so the index files are released).
    pub async fn shutdown(&self) {
        self.reembed_stop
            .store(true, std::sync::atomic::Ordering::Release);
        let walk = self.reembed_thread.lock().take();
        if let Some(walk) = walk {
            let _ = tokio::task::spawn_blocking(move || walk.join()).await;
        }
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Command::Shutdown(tx)).is_ok() {
            let _ = rx.await;
        }
        let handle = self.writer_thread.lock().take();
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
        // A tenant graph being saved finishes; none is written after.
        let shared = Arc::clone(&self.shared);
        let _ = tokio::task::spawn_blocking(move || shared.graph_disk.stop()).await;
    }

    /// Whether every sealed chunk of vectors has its 8-bit code block (coded in the
    /// background after appends and on start; until then broad scopes score those vectors
    /// in full, with the same answers).
    pub fn vectors_coded(&self) -> bool {
        self.shared.vectors.load().coded()
    }

    /// The serving model, and a re-embedding's progress since this engine opened.
    pub fn model_status(&self) -> ModelStatus {
        let vectors = self.shared.vectors.load();
        ModelStatus {
            model: self.embedder().model_id().to_string(),
            dim: vectors.dim(),
            reembed: self.shared.reembed.read().clone(),
        }
    }

    /// The text a stored event of `actor_id` with `summary` is embedded from, under the
    /// configured rule ([`EngineConfig::passage`]) and after the model's passage prefix. Every stored vector is made from this
    /// text; callers that embed events themselves for [`Engine::write_embedded`] embed it to
    /// store what [`Engine::write`] would.
    pub fn passage_text(&self, actor_id: &str, summary: &str) -> String {
        crate::embed::as_passage(
            &*self.embedder(),
            &self.config.passage.text(actor_id, summary),
        )
    }

    /// Embeds one text on the CPU pool.
    pub async fn embed_one(&self, text: String) -> Result<Vec<f32>, Error> {
        Ok(self.embed_made(move || ((), text)).await?.1)
    }

    /// Runs `make` on the CPU pool and embeds the text it returns in one model call with
    /// whatever other texts are queued ([`crate::embed::coalesce`]); gives back what it set
    /// aside with the vector.
    pub(super) async fn embed_made<T: Send + 'static>(
        &self,
        make: impl FnOnce() -> (T, String) + Send + 'static,
    ) -> Result<(T, Vec<f32>), Error> {
        let (aside, mut vectors) = self
            .embed_made_all(move || {
                let (aside, text) = make();
                (aside, vec![text])
            })
            .await?;
        let vector = vectors
            .pop()
            .ok_or_else(|| Error::Internal("the embedder returned no vector".into()))?;
        Ok((aside, vector))
    }

    /// Like [`Engine::embed_made`] for the few texts `make` returns, embedded together in one
    /// model call; one vector per text, in order.
    pub(super) async fn embed_made_all<T: Send + 'static>(
        &self,
        make: impl FnOnce() -> (T, Vec<String>) + Send + 'static,
    ) -> Result<(T, Vec<Vec<f32>>), Error> {
        let (aside, texts) = self.cpu.run(make).await.map_err(Error::Internal)?;
        let coalescer = self.shared.serving.load().coalescer.clone();
        let vectors = coalescer
            .embed_all(texts)
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        Ok((aside, vectors))
    }

    /// The grant's view of `table` now (see [`visible`]).
    fn view<'a>(&'a self, grant: &'a TenantGrant, table: &'a Table) -> Visible<'a> {
        Visible::new(grant, table, &self.shared.keyed, Timestamp::now())
    }

    /// One event of the grant's tenant, or 404 (also for other tenants' ids).
    pub fn get(&self, grant: &TenantGrant, event_id: &str) -> Result<StoredEvent, Error> {
        let event = {
            let table = self.shared.table.read();
            let view = self.view(grant, &table);
            match view.live(event_id) {
                Some(e) => view.present(&e.event),
                None => return Err(Error::NotFound(event_id.to_string())),
            }
        };
        self.audit(read_audit(
            grant,
            AuditAction::Get,
            vec![event.event_id.clone()],
            Value::Null,
        ));
        Ok(event)
    }

    /// Scope-first recall.
    pub async fn recall(
        &self,
        grant: &TenantGrant,
        req: RecallRequest,
    ) -> Result<RecallResponse, Error> {
        let detail = serde_json::json!({
            "scope": req.scope,
            "queryHash": self.shared.keyed.content_hash(grant.tenant(), &req.query),
            "limit": req.limit,
            "asOf": req.as_of,
        });
        let req = Arc::new(req);
        // A query embedded just before a re-embedding switched models is embedded again
        // with the new one: vectors of two models are never compared.
        let mut tries = 0;
        let resp = loop {
            tries += 1;
            match self.recall_once(grant, Arc::clone(&req)).await? {
                Some(resp) => break resp,
                None if tries < 3 => continue,
                None => return Err(Error::Internal("the embedding model kept changing".into())),
            }
        };
        let ids = resp
            .results
            .iter()
            .map(|h| h.event.event_id.clone())
            .collect();
        self.audit(read_audit(grant, AuditAction::Recall, ids, detail));
        Ok(resp)
    }

    /// One recall under the serving model; `None` when the snapshot's vectors turned out to
    /// be another model's (a re-embedding switched models meanwhile).
    async fn recall_once(
        &self,
        grant: &TenantGrant,
        req: Arc<RecallRequest>,
    ) -> Result<Option<RecallResponse>, Error> {
        let shared = Arc::clone(&self.shared);
        let config = Arc::clone(&self.config);
        let serving = self.shared.serving.load_full();
        let model: Arc<str> = Arc::from(serving.embedder.model_id());
        // The query's words are read under the table's lock: on the CPU pool, not here, once
        // for both the text embedded and the ranking.
        let (s, c, g, query) = (
            Arc::clone(&shared),
            Arc::clone(&config),
            grant.clone(),
            req.query.clone(),
        );
        let (read, query_vector) = self
            .embed_made(move || {
                let read = QueryRead::new(&s.table.read(), &g, &query, &c.rank);
                let text = crate::embed::as_query(&*serving.embedder, &read.words.semantic);
                (read, text)
            })
            .await?;
        let grant2 = grant.clone();
        self.cpu
            .run(move || {
                let snap = shared.snapshot();
                if snap.vectors.model() != Some(&*model) {
                    return Ok(None);
                }
                let reading = Reading {
                    snap: &snap,
                    now: Timestamp::now(),
                    read: &read,
                    query: &query_vector,
                };
                crate::retrieve::recall(&reading, &config.recall, &config.rank, &grant2, &req)
                    .map(Some)
            })
            .await
            .map_err(Error::Internal)?
            .map_err(Error::from)
    }

    /// Recall with a precomputed query vector (benchmarks, eval); the vector is L2-normalised.
    pub fn recall_with_vector(
        &self,
        grant: &TenantGrant,
        req: &RecallRequest,
        query_vector: &[f32],
    ) -> Result<RecallResponse, Error> {
        // Cosine scoring (and HNSW's 1 - dot distance) assume a unit query, as stored vectors are.
        self.recall_ranked(
            grant,
            req,
            query_vector,
            &self.config.rank,
            Timestamp::now(),
        )
    }

    /// The text a recall's query vector is embedded from: the model's query prefix and the
    /// query less the names of the tenant's actors it names, when `rank` has an actor signal
    /// (see [`crate::retrieve::QueryWords`]). Callers that embed queries themselves for
    /// [`Engine::recall_with_vector`] embed this text to rank as [`Engine::recall`] does.
    pub fn semantic_query(
        &self,
        grant: &TenantGrant,
        query: &str,
        rank: &crate::rank::RankConfig,
    ) -> String {
        let words = QueryRead::new(&self.shared.table.read(), grant, query, rank).words;
        crate::embed::as_query(&*self.embedder(), &words.semantic)
    }

    /// Like [`Engine::recall_with_vector`], ranked with `rank` instead of the configured
    /// ranking (ablations: the same data and scope under other weights) and read at `now`
    /// (a fixed read time makes recency and expiry, hence rankings, reproducible). A
    /// diagnostics surface for offline evaluation (`episodic-eval`); the server never ranks
    /// under another configuration, and always reads at the current time.
    pub fn recall_ranked(
        &self,
        grant: &TenantGrant,
        req: &RecallRequest,
        query_vector: &[f32],
        rank: &crate::rank::RankConfig,
        now: Timestamp,
    ) -> Result<RecallResponse, Error> {
        let query = normalized(query_vector.to_vec(), self.embedder().dim())?;
        let snap = self.shared.snapshot();
        if snap.vectors.dim() != query.len() {
            // A re-embedding switched to a model of another dimension meanwhile.
            return Err(Error::BadVector {
                dim: snap.vectors.dim(),
            });
        }
        let run = || {
            let read = QueryRead::new(&snap.table, grant, &req.query, rank);
            let reading = Reading {
                snap: &snap,
                now,
                read: &read,
                query: &query,
            };
            crate::retrieve::recall(&reading, &self.config.recall, rank, grant, req)
                .map_err(Error::from)
        };
        // A recall whose scope is surely small has nothing to split among threads (every
        // parallel section stays on one below `ALONE_MAX_CANDIDATES`): it runs on the calling
        // thread, which spares waking a pool thread and waiting for it, most of such a
        // recall's time (a scope that matches nothing answers in a few microseconds). Any
        // other runs on the engine's pool, as the async recall does: the caller waits once,
        // and the scoring's parallel sections split work among pool threads instead of each
        // one waking another pool from outside it.
        let filter = crate::retrieve::scope_filter(grant.tenant(), &req.scope);
        if crate::retrieve::surely_small(&snap, &filter) {
            run()
        } else {
            self.cpu.install(run)
        }
    }

    /// One page of the timeline, ordered by `occurredAt`.
    pub async fn timeline(
        &self,
        grant: &TenantGrant,
        query: TimelineQuery,
    ) -> Result<TimelinePage, Error> {
        let shared = Arc::clone(&self.shared);
        let grant2 = grant.clone();
        let detail = serde_json::json!({"scope": query.scope, "asOf": query.as_of});
        let config = self.config.recall.clone();
        let page = self
            .cpu
            .run(move || crate::retrieve::timeline(&shared.snapshot(), &config, &grant2, &query))
            .await
            .map_err(Error::Internal)??;
        let ids = page.events.iter().map(|e| e.event_id.clone()).collect();
        self.audit(read_audit(grant, AuditAction::Timeline, ids, detail));
        Ok(page)
    }

    /// Sends a command built around a reply channel and awaits the writer's answer.
    pub(super) async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        let _queued = crate::telemetry::QueueGuard::enter();
        self.tx.send(make(tx)).map_err(|_| writer_gone())?;
        rx.await.map_err(|_| writer_gone())
    }

    /// Queues an audit entry (reads, denials); durable with the writer's next flush.
    pub fn audit(&self, entry: AuditEntry) {
        let _ = self.tx.send(Command::Audit(Box::new(entry)));
    }

    /// Deletes one event of the grant's tenant; idempotent (a second call returns the receipt).
    pub async fn delete(&self, grant: &TenantGrant, event_id: &str) -> Result<Receipt, Error> {
        let reply = self
            .ask(|reply| Command::Delete {
                grant: grant.clone(),
                tenant: grant.tenant().to_string(),
                event_ids: vec![event_id.to_string()],
                key_id: grant.key_id().to_string(),
                reply,
            })
            .await?;
        match reply {
            DeleteReply::Deleted(mut receipts) => receipts
                .pop()
                .ok_or_else(|| Error::NotFound(event_id.to_string())),
            DeleteReply::NotFound(id) => Err(Error::NotFound(id)),
            DeleteReply::NeedsOperator => {
                Err(Error::MissingRole(crate::auth::roles::OPERATOR.to_string()))
            }
            DeleteReply::Unavailable(e) => Err(e.into()),
        }
    }

    /// Erases every event of `actor_id` in the grant's tenant whose retention allows it.
    pub async fn erase(
        &self,
        grant: &TenantGrant,
        actor_id: &str,
    ) -> Result<ErasureReceipt, Error> {
        if !grant.allows_actor(actor_id) {
            return Err(Error::ActorNotAllowed(actor_id.to_string()));
        }
        // An erasure deletes every event of the actor, whatever its class: only a key that
        // could read them all may ask for it, so that what it learns (ids erased and kept)
        // never reaches past its grant. Decided from the grant alone, never from the data.
        if grant.max_privacy_class() != crate::model::PrivacyClass::Sensitive {
            return Err(Error::ErasureNeedsSensitive);
        }
        self.ask(|reply| Command::Erase {
            tenant: grant.tenant().to_string(),
            actor_id: actor_id.to_string(),
            key_id: grant.key_id().to_string(),
            reply,
        })
        .await?
        .map_err(Error::from)
    }

    /// Approves or rejects a pending event (the key needs the event's approver role and must
    /// not be the key that wrote it).
    pub async fn review(
        &self,
        grant: &TenantGrant,
        event_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<ReviewOutcome, Error> {
        self.ask(|reply| Command::Review {
            grant: grant.clone(),
            event_id: event_id.to_string(),
            approve,
            note,
            reply,
        })
        .await?
        .map_err(Error::from)
    }

    /// Re-evaluates every stored event under `policy` (all tenants; admin only at the API,
    /// `POST /v1/admin/policy/replay`).
    pub async fn reevaluate_policy(
        &self,
        policy: WritePolicy,
        dry_run: bool,
        key_id: &str,
    ) -> Result<ReevaluationReport, Error> {
        self.ask(|reply| Command::Reevaluate {
            policy: Box::new(policy),
            dry_run,
            key_id: key_id.to_string(),
            reply,
        })
        .await?
        .map_err(Error::Storage)
    }

    /// Pending events of the tenant that this key may decide, oldest recorded first.
    pub fn pending_reviews(
        &self,
        grant: &TenantGrant,
        limit: usize,
    ) -> Vec<(StoredEvent, Decision)> {
        let table = self.shared.table.read();
        let view = self.view(grant, &table);
        table
            .live_from(0)
            .filter(|e| e.event.status == EventStatus::PendingReview && view.sees(&e.event))
            .filter(|e| match &e.decision {
                Decision::Review { approver_role, .. } => grant.has_role(approver_role),
                Decision::Allow { .. } | Decision::Deny { .. } => false,
            })
            .take(limit)
            .map(|e| (StoredEvent::clone(&e.event), e.decision.clone()))
            .collect()
    }

    /// The approver roles in use: the policy's, and each role an event awaiting review names
    /// (a replayed policy may have sent events to another). Role names only, of every
    /// tenant: what a new tenant key may hold beyond the built-in roles. Scans the table on
    /// the CPU pool.
    pub async fn approver_roles(&self) -> Result<BTreeSet<String>, Error> {
        let shared = Arc::clone(&self.shared);
        let mut roles = self
            .cpu
            .run(move || {
                let table = shared.table.read();
                table
                    .live_from(0)
                    .filter(|e| e.event.status == EventStatus::PendingReview)
                    .filter_map(|e| match &e.decision {
                        Decision::Review { approver_role, .. } => Some(approver_role.clone()),
                        Decision::Allow { .. } | Decision::Deny { .. } => None,
                    })
                    .collect::<BTreeSet<String>>()
            })
            .await
            .map_err(Error::Internal)?;
        roles.insert(self.config.policy.approver_role.clone());
        Ok(roles)
    }

    /// Physically purges deleted content of every tenant from every file (blocks writes
    /// while it runs). Store-wide: the API allows it to the admin only.
    pub async fn compact(&self, key_id: &str) -> Result<CompactReport, Error> {
        self.ask(|reply| Command::Compact {
            key_id: key_id.to_string(),
            reply,
        })
        .await?
        .map_err(Error::Storage)
    }

    /// One page of the grant's tenant's audit trail.
    pub async fn audit_page(
        &self,
        grant: &TenantGrant,
        q: &AuditQuery,
    ) -> Result<Vec<AuditEntry>, Error> {
        self.refresh().await?;
        let shared = Arc::clone(&self.shared);
        let grant = grant.clone();
        let q = q.clone();
        tokio::task::spawn_blocking(move || {
            // Each entry is judged against the table as it is when read (a short lock per
            // entry: the file reads do not hold up the writer).
            let keep = |e: AuditEntry| {
                let table = shared.table.read();
                Visible::new(&grant, &table, &shared.keyed, Timestamp::now()).audit(e, &q)
            };
            shared.audit.query_kept(grant.tenant(), &q, keep)
        })
        .await
        .map_err(|e| Error::Internal(e.to_string()))?
        .map_err(|e| {
            tracing::error!(error = %e, "reading the audit log failed");
            Error::AuditUnreadable
        })
    }

    /// The life of one event: its current state (if live) and every audit entry naming it,
    /// oldest first; 404 if it never existed in the tenant. Audited as a `history` read.
    pub async fn history(
        &self,
        grant: &TenantGrant,
        event_id: &str,
    ) -> Result<(Option<StoredEvent>, Vec<AuditEntry>), Error> {
        let (id, current) = {
            let table = self.shared.table.read();
            let view = self.view(grant, &table);
            match view.lookup(event_id) {
                Seen::Live(e) => (e.event.event_id.clone(), Some(view.present(&e.event))),
                Seen::Deleted(t) => (t.event_id.clone(), None),
                Seen::Absent => return Err(Error::NotFound(event_id.to_string())),
            }
        };
        let q = AuditQuery {
            event_id: Some(id.clone()),
            limit: usize::MAX,
            ..AuditQuery::default()
        };
        let entries = self.audit_page(grant, &q).await?;
        self.audit(read_audit(
            grant,
            AuditAction::History,
            vec![id],
            Value::Null,
        ));
        Ok((current, entries))
    }
}

fn read_audit(
    grant: &TenantGrant,
    action: AuditAction,
    ids: Vec<String>,
    detail: Value,
) -> AuditEntry {
    AuditEntry::new(grant.tenant(), grant.key_id(), action, ids, detail)
}

fn normalized(mut v: Vec<f32>, dim: usize) -> Result<Vec<f32>, Error> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if v.len() != dim || !norm.is_finite() || norm == 0.0 {
        return Err(Error::BadVector { dim });
    }
    v.iter_mut().for_each(|x| *x /= norm);
    Ok(v)
}

fn writer_gone() -> Error {
    Error::WriterStopped
}
