//! Metrics in the Prometheus text format, served at `/metrics`.
//!
//! Role: one process-wide recorder (the `metrics` facade with the Prometheus exporter's
//! recorder) that the HTTP layer and the engine feed with counters, gauges and
//! histograms; sizes of the log and indexes are read from disk when scraped.
//!
//! Invariants: recording never blocks or fails a request (the facade is lock-free and a
//! missing recorder is a no-op); metric names and label sets are stable (dashboards match on
//! them) and labels never carry ids, tenant names or text, so cardinality stays bounded
//! (routes are the matched templates, not raw paths).

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Requests by route template, method and status.
pub const HTTP_REQUESTS: &str = "episodic_http_requests_total";
/// Request latency by route template and method, seconds.
pub const HTTP_SECONDS: &str = "episodic_http_request_duration_seconds";
/// Recall stage latency, seconds: `scope` (tantivy filter or partition probe, and visibility), `vector`
/// (exact or HNSW scoring and ranking), `evidence` (breakdowns and evidence blocks).
pub const RECALL_STAGE_SECONDS: &str = "episodic_recall_stage_seconds";
/// Recalls by vector path (`exact`, `hnsw`, `hnsw_fallback_exact`, `partition`).
pub const RECALL_PATH: &str = "episodic_recall_path_total";
/// Texts embedded.
pub const EMBED_TEXTS: &str = "episodic_embed_texts_total";
/// Embedder call latency, seconds (texts/s = rate of texts over rate of this sum).
pub const EMBED_SECONDS: &str = "episodic_embed_seconds";
/// Commands sent to the single writer and not yet answered.
pub const WRITE_QUEUE: &str = "episodic_write_queue_depth";
/// Write-policy decisions by outcome (`allow`, `review`, `deny`).
pub const POLICY_DECISIONS: &str = "episodic_policy_decisions_total";
/// Failed scope-index commits, updates and repairs.
pub const SCOPE_INDEX_FAILURES: &str = "episodic_scope_index_failures_total";
/// Open client connections being served.
pub const HTTP_CONNECTIONS: &str = "episodic_http_connections";
/// Connections the server ended or refused by reason (`header_timeout`, `idle_timeout`,
/// `write_timeout`, `tls_handshake`, `over_limit`, `over_limit_dropped`).
pub const HTTP_CONNECTIONS_CUT: &str = "episodic_http_connections_cut_total";
/// Requests refused with 429 for too many failed authentications from their address.
pub const AUTH_LIMITED: &str = "episodic_auth_limited_total";

/// Seconds from publishing a batch of log records to the last acknowledgement (cluster
/// mode: every record of the batch is on a quorum of the stream's replicas).
pub const LOG_PUBLISH_SECONDS: &str = "episodic_log_publish_seconds";
/// Lease renewals by result (`ok`, `failed`: retried, `lost`: the shard was stopped).
pub const LEASE_RENEWALS: &str = "episodic_cluster_lease_renewals_total";
/// Shards this node took over from another node whose lease lapsed or was released.
pub const FAILOVERS: &str = "episodic_cluster_failovers_total";
/// Shards whose lease this node holds (serving or catching up).
pub const SHARDS_HELD: &str = "episodic_cluster_shards_held";
/// Requests handed to the node owning their tenant's shard, by result (`ok`, `failed`).
pub const FORWARDED: &str = "episodic_cluster_forwarded_total";

const LATENCY_BUCKETS: [f64; 14] = [
    0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder once and returns its handle.
pub fn init() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new();
        let builder = match builder.set_buckets(&LATENCY_BUCKETS) {
            Ok(b) => b,
            Err(_) => PrometheusBuilder::new(),
        };
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!("a metrics recorder was already installed; /metrics will be empty");
        }
        describe();
        handle
    })
}

fn describe() {
    metrics::describe_counter!(HTTP_REQUESTS, "HTTP requests by route, method and status");
    metrics::describe_histogram!(HTTP_SECONDS, metrics::Unit::Seconds, "HTTP request latency");
    metrics::describe_histogram!(
        RECALL_STAGE_SECONDS,
        metrics::Unit::Seconds,
        "recall stage latency: scope, vector, evidence"
    );
    metrics::describe_counter!(RECALL_PATH, "recalls by vector path");
    metrics::describe_counter!(EMBED_TEXTS, "texts embedded");
    metrics::describe_histogram!(
        EMBED_SECONDS,
        metrics::Unit::Seconds,
        "embedder call latency"
    );
    metrics::describe_gauge!(WRITE_QUEUE, "writer commands waiting or in progress");
    metrics::describe_counter!(POLICY_DECISIONS, "write-policy decisions by outcome");
    metrics::describe_counter!(
        SCOPE_INDEX_FAILURES,
        "failed scope index commits, updates and repairs"
    );
    metrics::describe_gauge!(HTTP_CONNECTIONS, "open client connections being served");
    metrics::describe_histogram!(
        LOG_PUBLISH_SECONDS,
        metrics::Unit::Seconds,
        "log batch publish to last quorum acknowledgement (cluster mode)"
    );
    metrics::describe_counter!(LEASE_RENEWALS, "shard lease renewals by result");
    metrics::describe_counter!(FAILOVERS, "shards taken over from another node");
    metrics::describe_gauge!(SHARDS_HELD, "shards whose lease this node holds");
    metrics::describe_counter!(
        FORWARDED,
        "requests forwarded to the owning node, by result"
    );
    metrics::describe_counter!(
        HTTP_CONNECTIONS_CUT,
        "connections ended or refused by the server, by reason"
    );
    metrics::describe_counter!(
        AUTH_LIMITED,
        "requests refused for too many failed authentications from their address"
    );
}

/// Records one finished HTTP request.
pub fn http_request(route: &str, method: &str, status: u16, elapsed: Duration) {
    let labels = [("route", route.to_string()), ("method", method.to_string())];
    metrics::histogram!(HTTP_SECONDS, &labels).record(elapsed.as_secs_f64());
    metrics::counter!(HTTP_REQUESTS, "route" => route.to_string(), "method" => method.to_string(), "status" => status.to_string())
        .increment(1);
}

/// Records one recall stage.
pub fn recall_stage(stage: &'static str, elapsed: Duration) {
    metrics::histogram!(RECALL_STAGE_SECONDS, "stage" => stage).record(elapsed.as_secs_f64());
}

/// Records which vector path answered a recall.
pub fn recall_path(path: &'static str) {
    metrics::counter!(RECALL_PATH, "path" => path).increment(1);
}

/// Records one embedder call.
pub fn embedded(texts: usize, elapsed: Duration) {
    metrics::counter!(EMBED_TEXTS).increment(texts as u64);
    metrics::histogram!(EMBED_SECONDS).record(elapsed.as_secs_f64());
}

/// Tracks one command in the writer queue for as long as the guard lives.
pub struct QueueGuard(());

impl QueueGuard {
    /// Counts a command in.
    pub fn enter() -> QueueGuard {
        metrics::gauge!(WRITE_QUEUE).increment(1.0);
        QueueGuard(())
    }
}

impl Drop for QueueGuard {
    fn drop(&mut self) {
        metrics::gauge!(WRITE_QUEUE).decrement(1.0);
    }
}

/// Counts one open connection for as long as the guard lives.
pub struct ConnectionGuard(());

impl ConnectionGuard {
    /// Counts a connection in.
    pub fn enter() -> ConnectionGuard {
        metrics::gauge!(HTTP_CONNECTIONS).increment(1.0);
        ConnectionGuard(())
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        metrics::gauge!(HTTP_CONNECTIONS).decrement(1.0);
    }
}

/// Records a connection the server ended or refused.
pub fn connection_cut(reason: &'static str) {
    metrics::counter!(HTTP_CONNECTIONS_CUT, "reason" => reason).increment(1);
}

/// Records a request refused by the failed-authentication limit.
pub fn auth_limited() {
    metrics::counter!(AUTH_LIMITED).increment(1);
}

/// Records a write-policy decision.
pub fn policy_decision(outcome: &'static str) {
    metrics::counter!(POLICY_DECISIONS, "outcome" => outcome).increment(1);
}

/// Records a failed scope-index commit, update or repair.
pub fn scope_index_failure() {
    metrics::counter!(SCOPE_INDEX_FAILURES).increment(1);
}

/// A log batch was acknowledged by a quorum after `elapsed`.
pub fn log_published(elapsed: Duration) {
    metrics::histogram!(LOG_PUBLISH_SECONDS).record(elapsed.as_secs_f64());
}

/// A lease renewal ended with `result`.
pub fn lease_renewal(result: &'static str) {
    metrics::counter!(LEASE_RENEWALS, "result" => result).increment(1);
}

/// This node took over a shard from another node.
pub fn cluster_failover() {
    metrics::counter!(FAILOVERS).increment(1);
}

/// This node now holds `n` shards' leases.
pub fn cluster_shards_held(n: usize) {
    metrics::gauge!(SHARDS_HELD).set(n as f64);
}

/// A request was forwarded to its owner with `result`.
pub fn forwarded(result: &'static str) {
    metrics::counter!(FORWARDED, "result" => result).increment(1);
}

/// The engine's gauges at one scrape (read by the engine, see `Engine::gauges`).
#[derive(Debug, Clone, Default)]
pub struct EngineGauges {
    /// Live events.
    pub events: usize,
    /// Vectors in the HNSW graph.
    pub hnsw_vectors: usize,
    /// Tenants with their own HNSW graph.
    pub tenant_graphs: usize,
    /// Points held by the tenant graphs.
    pub tenant_graph_points: usize,
    /// Tenant graphs for which no measured width reached the recall target (not searched).
    pub tenant_graphs_unsearched: usize,
    /// Whether the scope index is behind the log after a failed commit.
    pub scope_degraded: bool,
    /// Bytes on disk by store (`log`, `audit`, `scope_index`, `hnsw_index`).
    pub storage: Vec<(&'static str, u64)>,
}

/// The scrape body: recorded metrics plus the engine's gauges, when it has loaded.
pub fn render(engine: Option<&EngineGauges>) -> String {
    let mut out = init().render();
    if let Some(engine) = engine {
        out.push_str(&engine_gauges(engine));
    }
    out
}

fn engine_gauges(g: &EngineGauges) -> String {
    let mut s = String::new();
    gauge(&mut s, "episodic_events", "live events", g.events as f64);
    gauge(
        &mut s,
        "episodic_hnsw_vectors",
        "vectors in the HNSW graph",
        g.hnsw_vectors as f64,
    );
    gauge(
        &mut s,
        "episodic_tenant_graphs",
        "tenants with their own HNSW graph",
        g.tenant_graphs as f64,
    );
    gauge(
        &mut s,
        "episodic_tenant_graph_points",
        "points held by the tenant graphs",
        g.tenant_graph_points as f64,
    );
    gauge(
        &mut s,
        "episodic_tenant_graphs_unsearched",
        "tenant graphs where no search width was measured to reach recall@10 of 0.995 (their scopes go to the partition lists or are scored exactly)",
        g.tenant_graphs_unsearched as f64,
    );
    gauge(
        &mut s,
        "episodic_scope_index_degraded",
        "1 while the scope index is behind the log after a failed commit (fresh events are answered from memory)",
        f64::from(u8::from(g.scope_degraded)),
    );
    s.push_str("# HELP episodic_storage_bytes bytes on disk by store\n");
    s.push_str("# TYPE episodic_storage_bytes gauge\n");
    for (store, bytes) in &g.storage {
        s.push_str(&format!(
            "episodic_storage_bytes{{store=\"{store}\"}} {bytes}\n"
        ));
    }
    s
}

fn gauge(s: &mut String, name: &str, help: &str, value: f64) {
    s.push_str(&format!(
        "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
    ));
}

/// Total size of the regular files under `dir` (0 when missing).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// Targets whose INFO lines are noise to an operator: tantivy's segment chatter, rmcp's
/// lines for every MCP call, hnsw_rs's lines (logged even with approximate recall off).
const QUIET_TARGETS: [&str; 3] = ["tantivy", "rmcp", "hnsw_rs"];

/// The log filter's directives: `user`'s (`RUST_LOG`; default `info`), then
/// `<target>=warn` for each of [`QUIET_TARGETS`] that `user` does not name itself.
pub fn log_filter(user: Option<&str>) -> String {
    let base = user
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or("info");
    let names = |target: &str| {
        base.split(',').map(str::trim).any(|d| {
            d.strip_prefix(target)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['=', ':', '[']))
        })
    };
    let mut directives = base.to_string();
    for target in QUIET_TARGETS.into_iter().filter(|t| !names(t)) {
        directives.push_str(&format!(",{target}=warn"));
    }
    directives
}

/// Installs the process's log subscriber on stderr: `json` (one object per event) or text,
/// coloured only when stderr is a terminal and `NO_COLOR` is unset; filtered by [`log_filter`] of `RUST_LOG` (an
/// unreadable `RUST_LOG` is reported and the default used). Shared by the server and the
/// eval binary.
pub fn init_logging(format: &str) {
    use std::io::IsTerminal;
    let user = std::env::var("RUST_LOG").ok();
    let (filter, refused) =
        match tracing_subscriber::EnvFilter::try_new(log_filter(user.as_deref())) {
            Ok(filter) => (filter, None),
            Err(e) => (
                tracing_subscriber::EnvFilter::new(log_filter(None)),
                Some(e),
            ),
        };
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal() && !no_color)
        .with_env_filter(filter);
    if format == "json" {
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
    if let Some(e) = refused {
        tracing::warn!(error = %e, "RUST_LOG is not a log filter; using the default");
    }
}

#[cfg(test)]
mod tests {
    use super::log_filter;

    #[test]
    fn noisy_targets_are_quiet_unless_the_filter_names_them() {
        assert_eq!(log_filter(None), "info,tantivy=warn,rmcp=warn,hnsw_rs=warn");
        assert_eq!(log_filter(Some(" ")), log_filter(None));
        assert_eq!(
            log_filter(Some("debug")),
            "debug,tantivy=warn,rmcp=warn,hnsw_rs=warn"
        );
        assert_eq!(
            log_filter(Some("info,rmcp=debug,hnsw_rs::hnsw=info")),
            "info,rmcp=debug,hnsw_rs::hnsw=info,tantivy=warn"
        );
        assert_eq!(
            log_filter(Some("rmcp_like=debug")),
            "rmcp_like=debug,tantivy=warn,rmcp=warn,hnsw_rs=warn",
            "a target that only starts with the name is another target"
        );
        for f in [None, Some("debug"), Some("info,rmcp=debug")] {
            assert!(
                tracing_subscriber::EnvFilter::try_new(log_filter(f)).is_ok(),
                "{f:?}"
            );
        }
    }
}
