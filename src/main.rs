//! The `episodic` binary: parses the command line and runs the server.

/// mimalloc rather than the system allocator: a recall allocates and frees many short-lived
/// buffers, which glibc's allocator spent about a quarter of a small tenant's recall on
/// (merging freed chunks); see docs/architecture.md.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use anyhow::Context;
use clap::{Parser, Subcommand};

use episodic::api::auth_limit::AuthLimiter;
use episodic::api::cors::CorsOrigins;
use episodic::api::forward::Forwarder;
use episodic::api::listener::{EdgeConfig, Listener};
use episodic::api::{router_with_cors, AppState};
use episodic::auth::KeyStore;
use episodic::cluster::{Node, NodeConfig};
use episodic::config::{ClusterSettings, McpArgs, ServeArgs};
use episodic::embed::{verify_model_dir, FastEmbedder};
use episodic::engine::{DataDirLock, Engine};
use episodic::serving::Engines;
use episodic::store::nats::NatsConnection;

#[derive(Parser)]
#[command(name = "episodic", version, about = "Long-term episodic memory server")]
struct Cli {
    /// TOML file of settings (keys as in `print-config`); environment and flags override it.
    #[arg(long, global = true, env = "EPISODIC_CONFIG")]
    config: Option<std::path::PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, env = "EPISODIC_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (REST under /v1, MCP at /mcp).
    Serve(ServeArgs),
    /// Print the effective settings (defaults, config file, environment, flags) as TOML, secrets redacted.
    PrintConfig(ServeArgs),
    /// Import a JSONL file of events into one tenant through validation and the write policy (server stopped; exit status 2 when some lines were not imported).
    Import(episodic::transfer::ImportArgs),
    /// Export one tenant's events as JSONL, optionally with vectors (server stopped).
    Export(episodic::transfer::ExportArgs),
    /// Serve MCP over stdin/stdout as one API key (`--stdio`).
    Mcp(McpArgs),
    /// Manage tenant keys in a data directory while no server runs on it.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Check that the log and audit trail hold everything acknowledged; with
    /// `--accept-loss`, start over from what they hold after a refused start (stop the server
    /// first). Events known to be deleted stay deleted.
    Recover {
        /// Directory holding the log, indexes and keys.
        #[arg(long, env = "EPISODIC_DATA_DIR", default_value = "./data/var")]
        data_dir: std::path::PathBuf,
        /// Accept the loss the report shows and make the files consistent again.
        #[arg(long)]
        accept_loss: bool,
    },
    /// Restore a backup made by `POST /v1/admin/backup` into a new or empty data directory:
    /// checks every file against the backup's manifest, copies it, and rebuilds the indexes
    /// from the log (vectors come from the log: nothing is embedded, no model is loaded).
    Restore {
        /// The backup's directory (the `path` the backup answered with).
        #[arg(long)]
        from: std::path::PathBuf,
        /// The data directory to create (it must not exist, or be empty).
        #[arg(long)]
        data_dir: std::path::PathBuf,
    },
    /// Physically purge deleted, erased and expired content (stop the server first).
    Compact {
        /// Directory holding the log, indexes and keys.
        #[arg(long, env = "EPISODIC_DATA_DIR", default_value = "./data/var")]
        data_dir: std::path::PathBuf,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create a tenant key (the same checks as POST /v1/admin/keys) and print it once:
    /// the bare key on stdout, or with --json the answer of the admin route.
    Create(episodic::offline_keys::CreateKeyArgs),
}

fn keys(command: &KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create(args) => {
            let new = episodic::offline_keys::create(args)?;
            if args.json {
                let body = episodic::wire::new_key::new_key_body(&new);
                println!("{}", serde_json::to_string_pretty(&body)?);
            } else {
                println!("{}", new.key);
            }
            eprintln!(
                "created key {} for tenant {} with roles {} in {}; the key is shown only this once",
                new.record.key_id,
                new.record.tenant_id.as_deref().unwrap_or_default(),
                new.record.roles.join(","),
                args.data_dir.display()
            );
            Ok(())
        }
    }
}

fn compact(data_dir: std::path::PathBuf) -> anyhow::Result<()> {
    let config = episodic::engine::EngineConfig::new(data_dir);
    let engine = Engine::open(config, Arc::new(episodic::embed::OfflineEmbedder))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(engine.compact("cli-compact"));
    runtime.block_on(engine.shutdown());
    let report = report.map_err(|p| anyhow::anyhow!("{p}"))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn restore(from: &std::path::Path, data_dir: std::path::PathBuf) -> anyhow::Result<()> {
    let report = episodic::engine::restore(from, &data_dir)?;
    // Opening replays the log into the table and rebuilds every index from it; the
    // offline embedder fails if anything asks it for a vector.
    let config = episodic::engine::EngineConfig::new(data_dir);
    let engine = Engine::open(config, Arc::new(episodic::embed::OfflineEmbedder))?;
    let events = engine.stats().events;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(engine.shutdown());
    anyhow::ensure!(
        events == report.events,
        "the restored log holds {events} live events, the backup's manifest {}",
        report.events
    );
    println!("{}", serde_json::to_string_pretty(&report)?);
    eprintln!(
        "restored backup {} ({} events, log sequence {}) into {}: start the server on it",
        report.backup_id, report.events, report.log_sequence, report.data_dir
    );
    Ok(())
}

fn recover(data_dir: std::path::PathBuf, accept_loss: bool) -> anyhow::Result<()> {
    let config = episodic::engine::EngineConfig::new(data_dir);
    let report = episodic::engine::recover(&config, accept_loss)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    if report.nothing_lost {
        eprintln!("nothing is missing: the log and the audit trail hold everything acknowledged");
        return Ok(());
    }
    anyhow::ensure!(
        report.applied,
        "acknowledged records are missing (above); pass --accept-loss to start from what the files hold"
    );
    eprintln!(
        "recovered: the server starts from what the files hold; the losses are in the audit trail"
    );
    Ok(())
}

/// The config file named by `--config` or `EPISODIC_CONFIG`, found before clap parses (clap
/// reads the environment the file feeds).
fn config_path_from_args() -> Option<std::path::PathBuf> {
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy();
        if text == "--config" {
            return args.next().map(Into::into);
        }
        if let Some(path) = text.strip_prefix("--config=") {
            return Some(path.into());
        }
    }
    std::env::var_os("EPISODIC_CONFIG").map(Into::into)
}

fn main() -> ExitCode {
    episodic::fsutil::owner_only_umask();
    if let Some(path) = config_path_from_args() {
        if let Err(e) = episodic::config::apply_config_file(&path) {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    }
    let cli = Cli::parse();
    episodic::telemetry::init_logging(&cli.log_format);
    let result = match cli.command {
        Command::Import(args) => return exit_code(import(&args)),
        Command::Serve(args) => serve(args),
        Command::PrintConfig(args) => {
            episodic::config::print_config(&args).map(|text| print!("{text}"))
        }
        Command::Export(args) => episodic::transfer::export(&args).map(|n| {
            eprintln!("exported {n} events");
        }),
        Command::Mcp(args) => mcp(&args),
        Command::Keys(command) => keys(&command),
        Command::Compact { data_dir } => compact(data_dir),
        Command::Restore { from, data_dir } => restore(&from, data_dir),
        Command::Recover {
            data_dir,
            accept_loss,
        } => recover(data_dir, accept_loss),
    };
    exit_code(result.map(|()| ExitCode::SUCCESS))
}

/// The process's exit status: the command's, or 1 after printing its error.
fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Exit status of an import that ran to its end but left lines out (the summary lists them).
const EXIT_LINES_NOT_IMPORTED: u8 = 2;

/// `episodic import`: the summary on stdout; exit status 0 only when every line was written
/// or unchanged, 2 when some were not, 1 when the import could not run or stopped.
fn import(args: &episodic::transfer::ImportArgs) -> anyhow::Result<ExitCode> {
    let summary = episodic::transfer::import(args)?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    eprintln!("imported {}", summary.describe());
    if summary.complete() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(EXIT_LINES_NOT_IMPORTED))
    }
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = args.engine_config()?;
    let edge = args.edge_config()?;
    let cors = args.cors()?;
    let cluster = args.cluster()?;
    let (keys, lock, engines, forward, conn) = match &cluster {
        None => {
            let (keys, lock) = open_keys(&args)?;
            (keys, Some(lock), Engines::single(), None, None)
        }
        Some(settings) => {
            let (keys, conn) = open_cluster_keys(&args, settings)?;
            let admin = admin_key_env().expect("checked by open_cluster_keys");
            config.audit_secret = Some(episodic::audit::Keyed::derived(&admin, &settings.name));
            let forward = Arc::new(Forwarder::new(&settings.node_id, &admin));
            let engines = Engines::Cluster(Arc::new(OnceLock::new()));
            (keys, None, engines, Some(forward), Some(conn))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("episodic-io")
        .build()?;
    let state = AppState {
        engines,
        forward,
        keys: Arc::new(keys),
        body_limit: args.max_body_bytes,
        import_limit: args.max_import_bytes,
        auth_limit: Arc::new(AuthLimiter::new(args.auth_failure_limit()?)),
    };
    let load = Load {
        model_dir: args.model_dir.clone(),
        reembed_to: args.reembed_to.clone(),
        config,
        lock,
        cluster: cluster.zip(conn),
    };
    runtime.block_on(run(args, edge, cors, load, state))
}

fn admin_key_env() -> Option<String> {
    std::env::var("EPISODIC_ADMIN_KEY")
        .ok()
        .filter(|k| !k.is_empty())
}

/// Cluster mode: connects to NATS and opens the replicated key store, whose admin key is
/// `EPISODIC_ADMIN_KEY` (the same on every node).
fn open_cluster_keys(
    args: &ServeArgs,
    settings: &ClusterSettings,
) -> anyhow::Result<(KeyStore, NatsConnection)> {
    verify_model_dir(&args.model_dir)?;
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let admin = admin_key_env().ok_or_else(|| {
        anyhow::anyhow!("cluster mode needs EPISODIC_ADMIN_KEY, the same on every node")
    })?;
    let conn = NatsConnection::connect(&settings.nats)
        .with_context(|| format!("connecting to NATS at {}", settings.nats))?;
    let bucket = format!("{}_KEYS", settings.name);
    let mut keys = KeyStore::open_replicated(&conn, &bucket, settings.replicas, &admin)?;
    if let Some(token) = std::env::var("EPISODIC_METRICS_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        keys.set_metrics_token(&token)?;
    }
    Ok((keys, conn))
}

/// What the loader needs: the model, the engine settings, on a single node the data
/// directory's lock (taken before its key store was read), and in cluster mode the node's
/// settings and connection.
struct Load {
    model_dir: std::path::PathBuf,
    reembed_to: Option<std::path::PathBuf>,
    config: episodic::engine::EngineConfig,
    lock: Option<DataDirLock>,
    cluster: Option<(ClusterSettings, NatsConnection)>,
}

impl Load {
    /// Loads the model, then opens the engine or starts the cluster node (blocking).
    fn run(self, engines: &Engines) -> anyhow::Result<()> {
        match (self.cluster, engines, self.lock) {
            (None, Engines::Single(slot), Some(lock)) => {
                let engine = load_engine(
                    &self.model_dir,
                    self.reembed_to.as_deref(),
                    self.config,
                    lock,
                )?;
                let _ = slot.set(engine);
                tracing::info!("ready");
            }
            (Some((settings, conn)), Engines::Cluster(slot), None) => {
                anyhow::ensure!(
                    self.reembed_to.is_none(),
                    "--reembed-to re-embeds one node's data directory; it is not available in \
                     cluster mode"
                );
                let embedder = FastEmbedder::load(&self.model_dir)?;
                episodic::observe::Observer::shared(&embedder)?;
                let node = Node::start(
                    &conn,
                    NodeConfig {
                        node_id: settings.node_id.clone(),
                        advertise_url: settings.advertise_url,
                        cluster: settings.name,
                        shards: settings.shards,
                        lease_ttl: settings.lease_ttl,
                        replicas: settings.replicas,
                        standbys: settings.standbys,
                        engine: self.config,
                    },
                    Arc::new(embedder),
                )?;
                let _ = slot.set(Arc::new(node));
                tracing::info!(node = %settings.node_id, "joined the cluster; taking shards");
            }
            _ => anyhow::bail!("the engines do not match the mode"),
        }
        Ok(())
    }
}

/// Checks the model files, creates the data dir, takes its lock and opens the key store
/// under it (as `serve` and `mcp` both need); the lock goes on to the engine, so no
/// `keys create` can change the keys this process has read.
fn open_keys(args: &ServeArgs) -> anyhow::Result<(KeyStore, DataDirLock)> {
    verify_model_dir(&args.model_dir)?;
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let lock = DataDirLock::take(&args.data_dir)?;
    let admin_env = std::env::var("EPISODIC_ADMIN_KEY")
        .ok()
        .filter(|k| !k.is_empty());
    let (mut keys, written) = KeyStore::open(&args.data_dir, admin_env.as_deref())?;
    if let Some(token) = std::env::var("EPISODIC_METRICS_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
    {
        keys.set_metrics_token(&token)?;
    }
    if let Some(path) = written {
        tracing::info!(path = %path.display(), "generated the admin key (shown once, in this file)");
    }
    Ok((keys, lock))
}

/// Loads the model and opens the engine under the data directory's lock (blocking: call
/// off the async threads).
fn load_engine(
    model_dir: &std::path::Path,
    reembed_to: Option<&std::path::Path>,
    mut config: episodic::engine::EngineConfig,
    lock: DataDirLock,
) -> anyhow::Result<Engine> {
    let embedder = FastEmbedder::load(model_dir)?;
    episodic::observe::Observer::shared(&embedder)?;
    if let Some(dir) = reembed_to {
        let target = FastEmbedder::load(dir).with_context(|| {
            format!("loading the model to re-embed with from {}", dir.display())
        })?;
        config.reembed_to = Some(episodic::engine::ReembedTarget(Arc::new(target)));
    }
    Engine::open_locked(config, Arc::new(embedder), lock)
}

/// `episodic mcp --stdio`: opens the engine as `serve` does and serves MCP on stdin/stdout,
/// every tool call acting as `--api-key`, until the client closes stdin.
fn mcp(args: &McpArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.stdio,
        "pass --stdio (the streamable HTTP transport is /mcp on `episodic serve`)"
    );
    anyhow::ensure!(
        args.serve.cluster()?.is_none(),
        "mcp --stdio serves one node's data directory; in cluster mode use /mcp of any node"
    );
    let config = args.serve.engine_config()?;
    let (keys, lock) = open_keys(&args.serve)?;
    keys.authenticate(&args.api_key)
        .map_err(|p| anyhow::anyhow!("--api-key: {}: {}", p.code().as_str(), p))?;
    let engine = load_engine(
        &args.serve.model_dir,
        args.serve.reembed_to.as_deref(),
        config,
        lock,
    )?;
    let state = episodic::mcp::McpState {
        engines: Engines::of(engine.clone()),
        keys: Arc::new(keys),
        body_limit: args.serve.max_body_bytes,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("episodic-io")
        .build()?;
    tracing::info!("ready; serving MCP on stdio");
    let served = runtime.block_on(episodic::mcp::serve_stdio(state, &args.api_key));
    runtime.block_on(engine.shutdown());
    served
}

async fn run(
    args: ServeArgs,
    edge: EdgeConfig,
    cors: Option<CorsOrigins>,
    load: Load,
    state: AppState,
) -> anyhow::Result<()> {
    let listener = Listener::bind(edge).await?;
    tracing::info!(
        addr = %args.listen,
        tls = listener.is_tls(),
        max_connections = listener.max_connections(),
        "listening; loading model and indexes"
    );
    let engines = state.engines.clone();
    let loader = tokio::task::spawn_blocking(move || load.run(&engines));
    let app = router_with_cors(state.clone(), cors.as_ref());
    let serve_task = tokio::spawn(listener.serve(app, shutdown_signal()));
    loader.await.context("loader task")??;
    serve_task.await.context("server task")?;
    match &state.engines {
        Engines::Single(slot) => {
            if let Some(engine) = slot.get() {
                engine.shutdown().await;
            }
        }
        Engines::Cluster(slot) => {
            if let Some(node) = slot.get().cloned() {
                tokio::task::spawn_blocking(move || node.stop())
                    .await
                    .context("stopping the node")?;
            }
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutting down");
}
