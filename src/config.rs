//! Command-line and environment configuration, validated into the engine's configuration.
//!
//! Invariants: defaults < config file < environment < flags. Clap resolves environment and
//! flags; a TOML config file (`--config` or `EPISODIC_CONFIG`) is applied first by setting
//! the environment variables it names that are not already set, so the same precedence holds
//! and every setting has exactly one name in each layer (`data_dir` ↔ `EPISODIC_DATA_DIR` ↔
//! `--data-dir`). Unknown keys in the file are an error. Values are checked once here, so
//! modules receive only valid settings. Secrets (`admin_key`, `api_key`, `metrics_token`) are never
//! printed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::api::auth_limit::AuthFailureLimit;
use crate::api::cors::CorsOrigins;
use crate::api::listener::{EdgeConfig, Timeouts, TlsFiles};
use crate::engine::EngineConfig;

/// Shortest and longest accepted value of each `--*-timeout-ms` and `--shutdown-grace-ms`.
const TIMEOUT_MS_RANGE: std::ops::RangeInclusive<u64> = 10..=3_600_000;
/// Largest accepted `--max-connections`.
const MAX_CONNECTIONS: usize = 1_000_000;

/// Settings of `episodic serve`.
#[derive(Debug, Clone, Args, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub struct ServeArgs {
    /// Directory holding the log, indexes and keys.
    #[arg(long, env = "EPISODIC_DATA_DIR", default_value = "./data/var")]
    pub data_dir: PathBuf,
    /// Address to listen on.
    #[arg(long, env = "EPISODIC_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory with `manifest.json` and the model files (see `models/fetch.sh`).
    #[arg(long, env = "EPISODIC_MODEL_DIR", default_value = "./models")]
    pub model_dir: PathBuf,
    /// Another model's directory (a `manifest.json` and its files): every stored event is
    /// embedded again with it in the background while the server serves with the current
    /// model, which it replaces once done (`GET /v1/admin/reembed` shows progress). A
    /// restart resumes where it stopped; once switched, the server serves with this model
    /// whatever `--model-dir` says. Single node only.
    #[arg(long, env = "EPISODIC_REEMBED_TO")]
    pub reembed_to: Option<PathBuf>,
    /// How far in the future `occurredAt` may lie, in seconds.
    #[arg(long, env = "EPISODIC_MAX_FUTURE_SKEW_SECS", default_value_t = 300)]
    pub max_future_skew_secs: u32,
    /// Maximum summary size in bytes.
    #[arg(long, env = "EPISODIC_MAX_SUMMARY_BYTES", default_value_t = 4096)]
    pub max_summary_bytes: usize,
    /// Most events in one `POST /v1/events:batch`.
    #[arg(long, env = "EPISODIC_MAX_BATCH_EVENTS", default_value_t = 256)]
    pub max_batch_events: usize,
    /// Maximum request body size in bytes.
    #[arg(long, env = "EPISODIC_MAX_BODY_BYTES", default_value_t = 256 * 1024)]
    pub max_body_bytes: usize,
    /// Maximum body of one `POST /v1/import` (NDJSON), in bytes.
    #[arg(long, env = "EPISODIC_MAX_IMPORT_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub max_import_bytes: usize,
    /// Directory `POST /v1/admin/backup` writes backups under, each in a directory of its
    /// own (default: `<data-dir>/backups`).
    #[arg(long, env = "EPISODIC_BACKUP_DIR")]
    pub backup_dir: Option<PathBuf>,
    /// Recency half-life in days.
    #[arg(long, env = "EPISODIC_RECENCY_HALF_LIFE_DAYS", default_value_t = 180.0)]
    pub recency_half_life_days: f64,
    /// Ranking weights `relevance,recency,trust,confidence`.
    #[arg(long, env = "EPISODIC_RANK_WEIGHTS", default_value = "0.7,0.1,0.1,0.1")]
    pub rank_weights: String,
    /// Share of each event's match that comes from BM25 (0: cosine only, 1: BM25 only), for
    /// queries of 64 words or more.
    #[arg(long, env = "EPISODIC_LEXICAL_SHARE", default_value_t = 0.1)]
    #[serde(serialize_with = "shortest_f32")]
    pub lexical_share: f32,
    /// BM25's share for queries of up to 32 words (linear in between).
    #[arg(
        long,
        env = "EPISODIC_SHORT_QUERY_LEXICAL_SHARE",
        default_value_t = 0.35
    )]
    #[serde(serialize_with = "shortest_f32")]
    pub short_query_lexical_share: f32,
    /// Weight of the episode neighbours' match (same project and source, adjacent in time).
    #[arg(long, env = "EPISODIC_CONTEXT_WEIGHT", default_value_t = 0.5)]
    #[serde(serialize_with = "shortest_f32")]
    pub context_weight: f32,
    /// Weight of the best match in an event's episode (itself included).
    #[arg(long, env = "EPISODIC_EPISODE_WEIGHT", default_value_t = 0.5)]
    #[serde(serialize_with = "shortest_f32")]
    pub episode_weight: f32,
    /// Bonus, relative to a full match, when the query names an event's actor.
    #[arg(long, env = "EPISODIC_ACTOR_BOOST", default_value_t = 0.2)]
    #[serde(serialize_with = "shortest_f32")]
    pub actor_boost: f32,
    /// Bonus, relative to a full match, when an event occurred on a date the query names
    /// ("in July 2023", "on October 13, 2023", "in 2022").
    #[arg(long, env = "EPISODIC_DATE_BOOST", default_value_t = 0.2)]
    #[serde(serialize_with = "shortest_f32")]
    pub date_boost: f32,
    /// Penalty, relative to a full match, for an event whose text ends in a question: it
    /// names its topic but asks rather than tells.
    #[arg(long, env = "EPISODIC_QUESTION_PENALTY", default_value_t = 0.1)]
    #[serde(serialize_with = "shortest_f32")]
    pub question_penalty: f32,
    /// Events of one source at most this many minutes apart are episode neighbours.
    #[arg(long, env = "EPISODIC_EPISODE_GAP_MINUTES", default_value_t = 30)]
    pub episode_gap_minutes: u32,
    /// Let recall also use filtered HNSW over the global graph for large scopes (approximate
    /// answers; off by default, where the planner chooses between exact scoring and the
    /// partition lists).
    #[arg(
        long,
        env = "EPISODIC_APPROXIMATE_RECALL",
        conflicts_with = "exact_recall"
    )]
    pub approximate_recall: bool,
    /// At or below this many in-scope candidates, recall is always exact; above, the planner
    /// takes the partition lists when its cost model expects them to be cheaper.
    #[arg(long, env = "EPISODIC_EXACT_MAX_CANDIDATES", default_value_t = crate::retrieve::cost::EXACT_CHEAP_CANDIDATES)]
    pub exact_max_candidates: usize,
    /// Make every recall exact: no partition lists are built or read (the planner's
    /// approximate paths off; a request's `exact: true` does this for one recall).
    #[arg(long, env = "EPISODIC_EXACT_RECALL")]
    pub exact_recall: bool,
    /// Accepted for existing command lines: partitioned recall is on by default (see
    /// `--exact-recall` to turn it off).
    #[arg(
        long,
        env = "EPISODIC_PARTITIONED_RECALL",
        conflicts_with = "exact_recall"
    )]
    pub partitioned_recall: bool,
    /// Vector partitions are built in the background once the store holds this many vectors.
    #[arg(long, env = "EPISODIC_PARTITION_MIN_VECTORS", default_value_t = crate::retrieve::PARTITION_MIN_VECTORS)]
    pub partition_min_vectors: usize,
    /// The share of partition lists every probe reads, in (0, 1]. Default: the share
    /// measured per scope size to reach recall@10 of 0.995 on the partition's own vectors
    /// (0.625 where nothing was measured).
    #[arg(long, env = "EPISODIC_PARTITION_PROBE_SHARE")]
    pub partition_probe_share: Option<f64>,
    /// A partition probe takes no further lists once those it took hold
    /// this many of the tenant's members (at least one list is read).
    #[arg(long, env = "EPISODIC_PARTITION_PROBE_MAX_MEMBERS", default_value_t = crate::retrieve::PARTITION_PROBE_MAX_MEMBERS)]
    pub partition_probe_max_members: usize,
    /// A tenant gets its own HNSW graph, built and extended in the background, once it holds
    /// this many vectors.
    #[arg(long, env = "EPISODIC_GRAPH_MIN_VECTORS", default_value_t = crate::retrieve::GRAPH_MIN_VECTORS)]
    pub graph_min_vectors: usize,
    /// The candidate list width of every tenant graph search (higher: better recall,
    /// slower). Default: the narrowest width measured on each graph's own points to reach
    /// recall@10 of 0.995 (a graph where none did is not searched).
    #[arg(long, env = "EPISODIC_GRAPH_EF")]
    pub graph_ef: Option<usize>,
    /// A scope of at least this share of its tenant, in (0, 1], is searched plainly in the
    /// tenant's graph; a narrower one (down to 5%) is walked within its own ids.
    #[arg(long, env = "EPISODIC_GRAPH_MIN_SHARE", default_value_t = crate::retrieve::GRAPH_MIN_SHARE)]
    pub graph_min_share: f64,
    /// No per-tenant graphs: broad scopes are served by the partition lists or exactly.
    #[arg(long, env = "EPISODIC_NO_TENANT_GRAPHS")]
    pub no_tenant_graphs: bool,
    /// Scope index refresh interval in milliseconds (fresh events are recallable at once regardless).
    #[arg(long, env = "EPISODIC_REFRESH_MS", default_value_t = 500)]
    pub refresh_ms: u64,
    /// Registered event types, comma-separated (default: the seed's six).
    #[arg(long, env = "EPISODIC_EVENT_TYPES")]
    pub event_types: Option<String>,
    /// How often expired events are deleted, in seconds (they are hidden at read time regardless).
    #[arg(long, env = "EPISODIC_SWEEP_INTERVAL_SECS", default_value_t = 60)]
    pub sweep_interval_secs: u64,
    /// Fields that define a subject for stale suppression: any of actor,type,resources, or `off`.
    #[arg(
        long,
        env = "EPISODIC_STALE_SUBJECT",
        default_value = "actor,type,resources"
    )]
    pub stale_subject: String,
    /// Minimum summary cosine for a newer same-subject event to make an older one stale (0: any).
    #[arg(long, env = "EPISODIC_STALE_MIN_SIMILARITY", default_value_t = 0.0)]
    #[serde(serialize_with = "shortest_f32")]
    pub stale_min_similarity: f32,
    /// Versioned write-policy file (JSON); default: the seed's rules as `v1`.
    #[arg(long, env = "EPISODIC_POLICY")]
    pub policy: Option<PathBuf>,
    /// Threads of the CPU pool (embedding, scoring).
    #[arg(long, env = "EPISODIC_CPU_THREADS", default_value_t = 2)]
    pub cpu_threads: usize,
    /// The longest, in microseconds, a single text (a recall query, a write) waits for
    /// concurrent requests' texts to share its model call; never while the server is idle.
    /// 0: texts that queue up behind a running call still share the next, but none waits.
    #[arg(long, env = "EPISODIC_EMBED_MAX_WAIT_US", default_value_t = 1_000)]
    pub embed_max_wait_us: u64,
    /// Embed each new event as `"<actor label>: <summary>"` (`on`) or its summary alone
    /// (`off`); the label is the actor id's readable last segment (`user:dana` → `dana`),
    /// and an opaque id (`user-1`) gives none. Changes how new vectors are made only: a
    /// store written under the other setting should be re-embedded.
    #[arg(long, env = "EPISODIC_EMBED_SPEAKER", default_value = "off", value_parser = ["on", "off"])]
    pub embed_speaker: String,
    /// Time a client has to send a request head, from connecting (or from the first byte of
    /// a later request on the connection), in milliseconds; then the connection is closed.
    #[arg(long, env = "EPISODIC_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    pub header_timeout_ms: u64,
    /// Time a request body has to arrive, from the server's first read of it, in
    /// milliseconds; then the request is answered 408 and the connection closed.
    #[arg(long, env = "EPISODIC_BODY_TIMEOUT_MS", default_value_t = 30_000)]
    pub body_timeout_ms: u64,
    /// Time a kept-alive connection may sit idle between requests, in milliseconds.
    #[arg(long, env = "EPISODIC_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    pub idle_timeout_ms: u64,
    /// Time a client may take no response bytes before the connection is closed, in
    /// milliseconds.
    #[arg(long, env = "EPISODIC_WRITE_TIMEOUT_MS", default_value_t = 30_000)]
    pub write_timeout_ms: u64,
    /// Time a TLS handshake may take, in milliseconds.
    #[arg(
        long,
        env = "EPISODIC_TLS_HANDSHAKE_TIMEOUT_MS",
        default_value_t = 10_000
    )]
    pub tls_handshake_timeout_ms: u64,
    /// Time in-flight requests get to finish at shutdown, in milliseconds.
    #[arg(long, env = "EPISODIC_SHUTDOWN_GRACE_MS", default_value_t = 10_000)]
    pub shutdown_grace_ms: u64,
    /// Most client connections served at once; more are answered 503 and closed (lowered at
    /// start-up if the open-file limit cannot hold them and 192 more).
    #[arg(long, env = "EPISODIC_MAX_CONNECTIONS", default_value_t = 1024)]
    pub max_connections: usize,
    /// PEM certificate chain to serve HTTPS with (with `--tls-key`; default: plain HTTP).
    #[arg(long, env = "EPISODIC_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `--tls-cert`.
    #[arg(long, env = "EPISODIC_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// Failed authentications a client address may make per minute (0: no limit); beyond
    /// them (and the burst) every request presenting a key from that address is answered
    /// 429 until the allowance grows back.
    #[arg(long, env = "EPISODIC_AUTH_FAILURES_PER_MINUTE", default_value_t = 20)]
    pub auth_failures_per_minute: u32,
    /// Failed authentications a client address may make at once.
    #[arg(long, env = "EPISODIC_AUTH_FAILURE_BURST", default_value_t = 10)]
    pub auth_failure_burst: u32,
    /// Browser origins allowed to call the API (CORS), comma-separated
    /// (`https://app.example.com,http://localhost:3000`), or `*` for any origin; default:
    /// none, and no response carries a CORS header.
    #[arg(long, env = "EPISODIC_CORS_ORIGINS")]
    pub cors_origins: Option<String>,
    /// Cluster mode: the NATS servers holding the shared log, comma-separated
    /// (`nats://127.0.0.1:4222,nats://127.0.0.1:4223`). Without it the node runs alone on
    /// its data directory.
    #[arg(long, env = "EPISODIC_CLUSTER_NATS")]
    pub cluster_nats: Option<String>,
    /// Cluster mode: this node's id, unique in the cluster (ASCII letters, digits, - and _).
    #[arg(long, env = "EPISODIC_NODE_ID")]
    pub node_id: Option<String>,
    /// Cluster mode: the URL the other nodes reach this one at (`http://host:port`).
    #[arg(long, env = "EPISODIC_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// Cluster mode: how many shards tenants are spread over (the same on every node, for
    /// the cluster's life).
    #[arg(long, env = "EPISODIC_CLUSTER_SHARDS", default_value_t = 64)]
    pub cluster_shards: u32,
    /// Cluster mode: the cluster's name, the prefix of its streams and buckets.
    #[arg(long, env = "EPISODIC_CLUSTER_NAME", default_value = "EPISODIC")]
    pub cluster_name: String,
    /// Cluster mode: copies NATS keeps of every stream and bucket (3 survives the loss of
    /// any one NATS server).
    #[arg(long, env = "EPISODIC_CLUSTER_REPLICAS", default_value_t = 3)]
    pub cluster_replicas: usize,
    /// Cluster mode: how long a shard's lease lasts without renewal, in milliseconds (longer
    /// than the worst NATS leader election; a failover takes about this long).
    #[arg(long, env = "EPISODIC_CLUSTER_LEASE_TTL_MS", default_value_t = 15_000)]
    pub cluster_lease_ttl_ms: u64,
    /// Cluster mode: keep no standby of other nodes' shards (half the memory; a failover
    /// then replays the whole shard instead of its tail).
    #[arg(long, env = "EPISODIC_CLUSTER_NO_STANDBYS")]
    pub cluster_no_standbys: bool,
}

/// Writes an `f32` setting as the shortest decimal that reads back as the same `f32` (`0.2`,
/// not the `f64` widening `0.20000000298023224`).
fn shortest_f32<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
    let shortest: f64 = v.to_string().parse().unwrap_or(f64::from(*v));
    s.serialize_f64(shortest)
}

/// Cluster mode's settings, checked.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The NATS servers.
    pub nats: String,
    /// This node's id.
    pub node_id: String,
    /// Where the other nodes reach this one.
    pub advertise_url: String,
    /// Shards in the cluster.
    pub shards: u32,
    /// The cluster's name.
    pub name: String,
    /// Copies of every stream and bucket.
    pub replicas: usize,
    /// Lease TTL.
    pub lease_ttl: Duration,
    /// Whether this node stands by for other nodes' shards.
    pub standbys: bool,
}

/// Settings of `episodic mcp --stdio`: the server's settings plus the key every tool call
/// acts as.
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// Serve MCP over stdin/stdout (required: the HTTP transport is `/mcp` on `serve`).
    #[arg(long)]
    pub stdio: bool,
    /// API key whose tenant and roles every tool call acts with.
    #[arg(long, env = "EPISODIC_API_KEY", hide_env_values = true)]
    pub api_key: String,
    /// The same settings as `serve` (`--listen` is unused).
    #[command(flatten)]
    pub serve: ServeArgs,
}

impl ServeArgs {
    /// Validates the settings into an engine configuration.
    pub fn engine_config(&self) -> anyhow::Result<EngineConfig> {
        let mut c = EngineConfig::new(self.data_dir.clone());
        c.limits.max_future_skew_ms = i64::from(self.max_future_skew_secs) * 1000;
        anyhow::ensure!(
            self.max_summary_bytes >= 16,
            "--max-summary-bytes must be at least 16"
        );
        c.limits.max_summary_bytes = self.max_summary_bytes;
        anyhow::ensure!(
            (1..=10_000).contains(&self.max_batch_events),
            "--max-batch-events must lie in [1, 10000]"
        );
        c.limits.max_batch_events = self.max_batch_events;
        if let Some(types) = &self.event_types {
            let list: Vec<String> = types
                .split(',')
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .collect();
            anyhow::ensure!(
                !list.is_empty(),
                "--event-types must name at least one type"
            );
            c.limits.event_types = list;
        }
        anyhow::ensure!(
            self.recency_half_life_days > 0.0,
            "--recency-half-life-days must be positive"
        );
        c.rank.half_life_days = self.recency_half_life_days;
        c.rank.weights = parse_weights(&self.rank_weights)?;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.lexical_share),
            "--lexical-share must lie in [0, 1]"
        );
        c.rank.lexical_share = self.lexical_share;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.short_query_lexical_share),
            "--short-query-lexical-share must lie in [0, 1]"
        );
        c.rank.short_lexical_share = self.short_query_lexical_share;
        for (name, v) in [
            ("--context-weight", self.context_weight),
            ("--episode-weight", self.episode_weight),
            ("--actor-boost", self.actor_boost),
            ("--date-boost", self.date_boost),
            ("--question-penalty", self.question_penalty),
        ] {
            anyhow::ensure!(
                v.is_finite() && (0.0..=10.0).contains(&v),
                "{name} must lie in [0, 10]"
            );
        }
        c.rank.context_weight = self.context_weight;
        c.rank.episode_weight = self.episode_weight;
        c.rank.actor_boost = self.actor_boost;
        c.rank.date_boost = self.date_boost;
        c.rank.question_penalty = self.question_penalty;
        c.rank.episode_gap_ms = i64::from(self.episode_gap_minutes) * 60_000;
        c.recall.approximate = self.approximate_recall;
        c.recall.exact_max_candidates = self.exact_max_candidates;
        // The share is checked even while partitioned recall is off.
        if let Some(share) = self.partition_probe_share {
            c.recall.partition(share)?;
        }
        c.recall.partition_probe_max_members = self.partition_probe_max_members;
        c.recall.partition_min_vectors = self.partition_min_vectors;
        anyhow::ensure!(
            self.graph_min_share > 0.0 && self.graph_min_share <= 1.0,
            "--graph-min-share must lie in (0, 1]"
        );
        if let Some(ef) = self.graph_ef {
            anyhow::ensure!((1..=4096).contains(&ef), "--graph-ef must lie in 1..=4096");
            c.recall.graph_ef = ef;
            c.recall.calibrated_graphs = false;
        }
        c.recall.graphs = !self.no_tenant_graphs;
        c.recall.graph_min_vectors = self.graph_min_vectors;
        c.recall.graph_min_share = self.graph_min_share;
        if self.exact_recall {
            c.recall.exact_only();
        }
        anyhow::ensure!(self.refresh_ms >= 10, "--refresh-ms must be at least 10");
        c.writer.refresh_interval = Duration::from_millis(self.refresh_ms);
        c.cpu_threads = self.cpu_threads.max(1);
        anyhow::ensure!(
            self.embed_max_wait_us <= 100_000,
            "--embed-max-wait-us must be at most 100000 (0.1 s)"
        );
        c.embed_max_wait = Duration::from_micros(self.embed_max_wait_us);
        c.passage = crate::embed::PassageText::speaker(self.embed_speaker == "on");
        if let Some(dir) = &self.backup_dir {
            c.backup_dir = dir.clone();
        }
        anyhow::ensure!(
            self.max_import_bytes >= 1024,
            "--max-import-bytes must be at least 1024"
        );
        anyhow::ensure!(
            self.sweep_interval_secs >= 1,
            "--sweep-interval-secs must be at least 1"
        );
        c.writer.sweep_interval = Duration::from_secs(self.sweep_interval_secs);
        c.stale = parse_subject(&self.stale_subject)?;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.stale_min_similarity),
            "--stale-min-similarity must be between 0 and 1"
        );
        c.recall.stale_min_similarity = self.stale_min_similarity;
        if let Some(path) = &self.policy {
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("--policy {}: {e}", path.display()))?;
            c.policy = crate::policy::WritePolicy::from_json(&bytes).map_err(anyhow::Error::msg)?;
        }
        Ok(c)
    }

    /// Validates the listener's settings (timeouts, connection cap, TLS files).
    pub fn edge_config(&self) -> anyhow::Result<EdgeConfig> {
        let ms = |name: &str, v: u64| -> anyhow::Result<Duration> {
            anyhow::ensure!(
                TIMEOUT_MS_RANGE.contains(&v),
                "--{name} must lie in [{}, {}]",
                TIMEOUT_MS_RANGE.start(),
                TIMEOUT_MS_RANGE.end()
            );
            Ok(Duration::from_millis(v))
        };
        let timeouts = Timeouts {
            header: ms("header-timeout-ms", self.header_timeout_ms)?,
            body: ms("body-timeout-ms", self.body_timeout_ms)?,
            idle: ms("idle-timeout-ms", self.idle_timeout_ms)?,
            write: ms("write-timeout-ms", self.write_timeout_ms)?,
            tls_handshake: ms("tls-handshake-timeout-ms", self.tls_handshake_timeout_ms)?,
            shutdown_grace: ms("shutdown-grace-ms", self.shutdown_grace_ms)?,
        };
        anyhow::ensure!(
            (1..=MAX_CONNECTIONS).contains(&self.max_connections),
            "--max-connections must lie in [1, {MAX_CONNECTIONS}]"
        );
        let tls = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            (None, None) => None,
            _ => anyhow::bail!("--tls-cert and --tls-key go together: set both or neither"),
        };
        Ok(EdgeConfig {
            addr: self.listen,
            timeouts,
            max_connections: self.max_connections,
            tls,
        })
    }

    /// Cluster mode's settings, or `None` without `--cluster-nats`.
    pub fn cluster(&self) -> anyhow::Result<Option<ClusterSettings>> {
        let Some(nats) = self.cluster_nats.as_ref().filter(|n| !n.trim().is_empty()) else {
            anyhow::ensure!(
                self.node_id.is_none() && self.advertise_url.is_none(),
                "--node-id and --advertise-url need --cluster-nats"
            );
            return Ok(None);
        };
        for url in nats.split(',') {
            anyhow::ensure!(
                url.trim().starts_with("nats://") || url.trim().starts_with("tls://"),
                "--cluster-nats: {url:?} is not a nats:// URL"
            );
        }
        let node_id = self
            .node_id
            .clone()
            .ok_or_else(|| anyhow::anyhow!("cluster mode needs --node-id"))?;
        let advertise_url = self
            .advertise_url
            .clone()
            .ok_or_else(|| anyhow::anyhow!("cluster mode needs --advertise-url"))?;
        anyhow::ensure!(
            advertise_url.starts_with("http://")
                && advertise_url
                    .trim_end_matches('/')
                    .parse::<axum::http::Uri>()
                    .is_ok_and(|u| u.host().is_some()),
            "--advertise-url must be an http://host:port URL (nodes forward to each other over plain HTTP on the cluster's network)"
        );
        anyhow::ensure!(
            (1..=4096).contains(&self.cluster_shards),
            "--cluster-shards must lie in [1, 4096]"
        );
        anyhow::ensure!(
            (1..=5).contains(&self.cluster_replicas),
            "--cluster-replicas must lie in [1, 5]"
        );
        anyhow::ensure!(
            (1_000..=600_000).contains(&self.cluster_lease_ttl_ms),
            "--cluster-lease-ttl-ms must lie in [1000, 600000]"
        );
        anyhow::ensure!(
            self.tls_cert.is_none(),
            "cluster mode serves plain HTTP between nodes; terminate TLS in front of the nodes"
        );
        Ok(Some(ClusterSettings {
            nats: nats.clone(),
            node_id,
            advertise_url: advertise_url.trim_end_matches('/').to_string(),
            shards: self.cluster_shards,
            name: self.cluster_name.clone(),
            replicas: self.cluster_replicas,
            lease_ttl: Duration::from_millis(self.cluster_lease_ttl_ms),
            standbys: !self.cluster_no_standbys,
        }))
    }

    /// The browser origins allowed to call the API, or `None` (CORS off).
    pub fn cors(&self) -> anyhow::Result<Option<CorsOrigins>> {
        match &self.cors_origins {
            None => Ok(None),
            Some(list) => {
                CorsOrigins::parse(list).map_err(|e| anyhow::anyhow!("--cors-origins: {e}"))
            }
        }
    }

    /// Validates the failed-authentication limit.
    pub fn auth_failure_limit(&self) -> anyhow::Result<AuthFailureLimit> {
        anyhow::ensure!(
            (1..=10_000).contains(&self.auth_failure_burst),
            "--auth-failure-burst must lie in [1, 10000]"
        );
        Ok(AuthFailureLimit {
            per_minute: self.auth_failures_per_minute,
            burst: self.auth_failure_burst,
        })
    }
}

/// Keys a config file may set that are not `serve` flags: secrets read from the environment.
const SECRET_KEYS: [&str; 3] = ["admin_key", "api_key", "metrics_token"];

/// The environment variable a config-file key stands for.
fn env_name(key: &str) -> String {
    format!("EPISODIC_{}", key.to_ascii_uppercase())
}

/// Every key a config file may hold: the `serve` settings that have an environment name.
pub fn config_keys() -> Vec<String> {
    let cmd = <ServeArgs as Args>::augment_args(clap::Command::new("serve"));
    let mut keys: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_env())
        .filter_map(|e| e.to_str())
        .filter_map(|e| e.strip_prefix("EPISODIC_"))
        .map(str::to_ascii_lowercase)
        .collect();
    keys.extend(SECRET_KEYS.iter().map(|s| s.to_string()));
    keys.sort();
    keys
}

/// Reads a TOML config file into `(ENV_NAME, value)` pairs, rejecting unknown keys and
/// non-scalar values.
pub fn read_config_file(path: &std::path::Path) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("config file {}: {e}", path.display()))?;
    let known = config_keys();
    let mut out = Vec::new();
    for (key, value) in table {
        anyhow::ensure!(
            known.contains(&key),
            "config file {}: unknown key {key:?} (known: {})",
            path.display(),
            known.join(", ")
        );
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => anyhow::bail!(
                "config file {}: {key} must be a string, number or boolean, not {}",
                path.display(),
                other.type_str()
            ),
        };
        out.push((env_name(&key), text));
    }
    Ok(out)
}

/// Applies a config file beneath the environment: sets each variable it names unless the
/// environment already has it. Call before any thread starts.
pub fn apply_config_file(path: &std::path::Path) -> anyhow::Result<()> {
    for (name, value) in read_config_file(path)? {
        if std::env::var_os(&name).is_none() {
            std::env::set_var(name, value);
        }
    }
    Ok(())
}

/// The effective settings as TOML, with secrets redacted.
pub fn print_config(args: &ServeArgs) -> anyhow::Result<String> {
    let mut table = toml::Table::try_from(args)?;
    for key in SECRET_KEYS {
        if std::env::var_os(env_name(key)).is_some_and(|v| !v.is_empty()) {
            table.insert(key.to_string(), toml::Value::String("<redacted>".into()));
        }
    }
    Ok(toml::to_string(&table)?)
}

fn parse_weights(s: &str) -> anyhow::Result<crate::rank::Weights> {
    let parts: Vec<f32> = s
        .split(',')
        .map(|p| p.trim().parse::<f32>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--rank-weights: {e}"))?;
    let [relevance, recency, trust, confidence] = parts[..] else {
        anyhow::bail!("--rank-weights needs four comma-separated numbers");
    };
    anyhow::ensure!(
        parts.iter().all(|w| *w >= 0.0 && w.is_finite()),
        "--rank-weights must be non-negative"
    );
    Ok(crate::rank::Weights {
        relevance,
        recency,
        trust,
        confidence,
    })
}

fn parse_subject(s: &str) -> anyhow::Result<crate::engine::SubjectRule> {
    let mut rule = crate::engine::SubjectRule::OFF;
    if s.trim() == "off" {
        return Ok(rule);
    }
    for part in s.split(',').map(str::trim) {
        match part {
            "actor" => rule.actor = true,
            "type" => rule.event_type = true,
            "resources" => rule.resources = true,
            other => anyhow::bail!(
                "--stale-subject: unknown field {other:?} (use actor,type,resources or off)"
            ),
        }
    }
    Ok(rule)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_parse_and_reject() {
        let w = parse_weights("0.5, 0.2,0.2,0.1").expect("ok");
        assert_eq!(w.relevance, 0.5);
        assert!(parse_weights("1,2").is_err());
        assert!(parse_weights("1,2,x,4").is_err());
        assert!(parse_weights("1,-2,3,4").is_err());
    }

    #[test]
    fn config_file_keys_match_flags_and_unknown_keys_fail() {
        let keys = config_keys();
        assert!(keys.contains(&"data_dir".to_string()));
        assert!(keys.contains(&"rank_weights".to_string()));
        let dir = tempfile::tempdir().expect("tmp");
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "data_dir = \"/srv/ep\"\nrefresh_ms = 250\n").expect("write");
        let pairs = read_config_file(&good).expect("parses");
        assert!(pairs.contains(&("EPISODIC_DATA_DIR".into(), "/srv/ep".into())));
        assert!(pairs.contains(&("EPISODIC_REFRESH_MS".into(), "250".into())));
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "data_dri = \"/srv\"\n").expect("write");
        let err = read_config_file(&bad).expect_err("unknown key").to_string();
        assert!(
            err.contains("data_dri") && err.contains("bad.toml"),
            "{err}"
        );
        let nested = dir.path().join("nested.toml");
        std::fs::write(&nested, "[data_dir]\nx = 1\n").expect("write");
        assert!(read_config_file(&nested).is_err());
    }

    #[test]
    fn flag_defaults_are_the_engine_defaults() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let cli = <Cli as clap::Parser>::try_parse_from(["episodic"]).expect("no flags parse");
        let c = cli.serve.engine_config().expect("valid defaults");
        let engine = EngineConfig::new(c.data_dir.clone());
        assert_eq!(c.rank, engine.rank);
        assert_eq!(c.stale, engine.stale);
        assert_eq!(c.recall, engine.recall);
        assert_eq!(c.passage, engine.passage);
        let speaker = <Cli as clap::Parser>::try_parse_from(["episodic", "--embed-speaker", "on"])
            .expect("on parses")
            .serve
            .engine_config()
            .expect("valid");
        assert!(speaker.passage.is_speaker());
        assert!(
            <Cli as clap::Parser>::try_parse_from(["episodic", "--embed-speaker", "yes"]).is_err()
        );
    }

    #[test]
    fn edge_defaults_are_public_facing_and_bad_values_fail() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let args = |args: &[&str]| {
            let argv = std::iter::once("episodic").chain(args.iter().copied());
            <Cli as clap::Parser>::try_parse_from(argv)
                .expect("flags parse")
                .serve
        };
        let parse = |a: &[&str]| args(a).edge_config();
        let edge = parse(&[]).expect("valid defaults");
        assert!(edge.addr.ip().is_loopback());
        assert_eq!(edge.timeouts.header, Duration::from_secs(10));
        assert_eq!(edge.timeouts.body, Duration::from_secs(30));
        assert_eq!(edge.timeouts.idle, Duration::from_secs(60));
        assert_eq!(edge.max_connections, 1024);
        assert_eq!(edge.tls, None);
        assert_eq!(
            args(&[]).auth_failure_limit().expect("valid default"),
            AuthFailureLimit::default()
        );
        assert!(parse(&["--tls-cert", "c.pem"]).is_err(), "cert without key");
        assert!(parse(&["--tls-cert", "c.pem", "--tls-key", "k.pem"])
            .expect("both")
            .tls
            .is_some());
        assert!(parse(&["--header-timeout-ms", "0"]).is_err());
        assert!(parse(&["--idle-timeout-ms", "999999999"]).is_err());
        assert!(parse(&["--max-connections", "0"]).is_err());
        assert!(args(&["--auth-failure-burst", "0"])
            .auth_failure_limit()
            .is_err());
    }

    /// `ServeArgs` from these flags alone.
    fn serve_args(args: &[&str]) -> ServeArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            serve: ServeArgs,
        }
        let argv = std::iter::once("episodic").chain(args.iter().copied());
        <Cli as clap::Parser>::try_parse_from(argv)
            .expect("flags parse")
            .serve
    }

    #[test]
    fn print_config_writes_floats_as_set() {
        let text = print_config(&serve_args(&["--actor-boost", "0.3"])).expect("print");
        for line in [
            "actor_boost = 0.3\n",
            "date_boost = 0.2\n",
            "question_penalty = 0.1\n",
            "lexical_share = 0.1\n",
            "short_query_lexical_share = 0.35\n",
            "context_weight = 0.5\n",
            "stale_min_similarity = 0.0\n",
            "recency_half_life_days = 180.0\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        assert!(!text.contains("0000000"), "float noise: {text}");
        // What it prints reads back as the same settings.
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("printed.toml");
        std::fs::write(&file, &text).expect("write");
        let pairs = read_config_file(&file).expect("printed config reads back");
        assert!(pairs.contains(&("EPISODIC_ACTOR_BOOST".into(), "0.3".into())));
    }

    #[test]
    fn cors_origins_are_a_setting_checked_at_start_up() {
        assert!(!print_config(&serve_args(&[]))
            .expect("print")
            .contains("cors_origins"));
        assert_eq!(serve_args(&[]).cors().expect("unset"), None);
        let origins = serve_args(&[
            "--cors-origins",
            "https://app.example.com,http://localhost:3000",
        ]);
        assert!(print_config(&origins)
            .expect("print")
            .contains("cors_origins = \"https://app.example.com,http://localhost:3000\"\n"));
        assert!(matches!(
            origins.cors().expect("valid"),
            Some(CorsOrigins::List(list)) if list.len() == 2
        ));
        let err = serve_args(&["--cors-origins", "app.example.com"])
            .cors()
            .expect_err("not an origin")
            .to_string();
        assert!(err.starts_with("--cors-origins:"), "{err}");
        assert!(config_keys().contains(&"cors_origins".to_string()));
    }

    #[test]
    fn subject_rule_parses() {
        assert!(!parse_subject("off").expect("off").enabled());
        let r = parse_subject("actor,resources").expect("rule");
        assert!(r.actor && r.resources && !r.event_type);
        assert!(parse_subject("actor,colour").is_err());
    }
}
