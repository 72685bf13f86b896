//! `episodic import` and `episodic export`: JSONL in and out of one tenant.
//!
//! Role: offline bulk transfer while the server is stopped (the data directory is locked by
//! whichever process has it open); with the server running, `POST /v1/import` and
//! `GET /v1/export` do the same. The line format and the summary are
//! [`crate::wire::transfer`]'s, the writes the engine's ([`Engine::import`]), the export its
//! snapshot ([`Engine::export_now`]), so both edges behave alike.
//!
//! Invariants:
//! - nothing bypasses validation or policy: an import line is a complete write body, and
//!   the fields the server owns are dropped and re-derived, never trusted;
//! - order is kept: a line that corrects earlier events is written only after every earlier
//!   line is durable;
//! - every line is accounted for in the summary, and the exit status is 0 only when every
//!   line was written or unchanged ([`ImportSummary::complete`]): 2 when some were not, 1
//!   when the import could not run or stopped;
//! - a stored vector is reused only when it was made by the model in use, else the summary is
//!   re-embedded; a line that repeats a stored event is never embedded.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::auth::TenantGrant;
use crate::config::ServeArgs;
use crate::embed::{Embedder, FastEmbedder};
use crate::engine::{Engine, ImportLine};
use crate::wire::transfer::{export_line, parse_line, Aborted, Vectors};
pub use crate::wire::transfer::{ImportSummary, LineIssue};
use crate::wire::Problem;

/// `episodic import` arguments.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// JSONL file of complete event records (as `episodic export` writes them); `-` for
    /// stdin.
    #[arg(long)]
    pub file: PathBuf,
    /// Tenant the events are written to (a line naming another tenant is invalid).
    #[arg(long)]
    pub tenant: String,
    /// Lines embedded per model call.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Also write the summary as JSON here.
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Server settings (data directory, model, policy, limits) the import runs under.
    #[command(flatten)]
    pub serve: ServeArgs,
}

/// `episodic export` arguments.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Tenant to export.
    #[arg(long)]
    pub tenant: String,
    /// Output file (default: stdout).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Include each event's summary embedding and the model id that made it.
    #[arg(long)]
    pub with_vectors: bool,
    /// Directory holding the log, indexes and keys.
    #[arg(long, env = "EPISODIC_DATA_DIR", default_value = "./data/var")]
    pub data_dir: PathBuf,
}

/// Runs `episodic import`.
pub fn import(args: &ImportArgs) -> anyhow::Result<ImportSummary> {
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    let config = args.serve.engine_config()?;
    crate::embed::verify_model_dir(&args.serve.model_dir)?;
    let embedder: Arc<dyn Embedder> = Arc::new(FastEmbedder::load(&args.serve.model_dir)?);
    let engine = Engine::open(config, Arc::clone(&embedder))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let grant = TenantGrant::internal(&args.tenant, "cli-import");
    let result = runtime.block_on(import_lines(&engine, &grant, embedder.model_id(), args));
    runtime.block_on(engine.shutdown());
    let summary = result?;
    if let Some(path) = &args.summary {
        let bytes = serde_json::to_vec_pretty(&summary)?;
        crate::fsutil::create_private(path)
            .and_then(|mut f| f.write_all(&bytes))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(summary)
}

fn open_input(file: &PathBuf) -> anyhow::Result<(Box<dyn BufRead>, Option<u64>)> {
    if file.as_os_str() == "-" {
        return Ok((Box::new(BufReader::new(std::io::stdin())), None));
    }
    let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
    let bytes = f.metadata().map(|m| m.len()).ok();
    Ok((Box::new(BufReader::new(f)), bytes))
}

/// A progress bar over `total` units, `counts` being the template's counter (`{pos}/{len}
/// events`, or `{bytes}/{total_bytes}` for a file read once); a spinner when the total is
/// unknown (stdin).
fn progress(total: Option<u64>, what: &str, counts: &str) -> ProgressBar {
    let bar = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    let style = ProgressStyle::with_template(&format!(
        "{{msg}} [{{elapsed_precise}}] {{wide_bar}} {counts} (eta {{eta}})"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(what.to_string());
    bar
}

async fn import_lines(
    engine: &Engine,
    grant: &TenantGrant,
    model_id: &str,
    args: &ImportArgs,
) -> anyhow::Result<ImportSummary> {
    let (reader, total) = open_input(&args.file)?;
    let bar = progress(total, "importing", "{bytes}/{total_bytes}");
    let mut summary = ImportSummary::default();
    let mut batch = Vec::with_capacity(args.batch);
    let limits = &engine.config().limits;
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", i + 1))?;
        bar.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(&line, i + 1, &args.tenant, limits, Vectors::Reuse(model_id)) {
            Ok(p) => batch.push(p),
            Err(issue) => summary.invalid_line(issue),
        }
        if batch.len() >= args.batch {
            write_batch(engine, grant, std::mem::take(&mut batch), &mut summary).await?;
        }
    }
    write_batch(engine, grant, batch, &mut summary).await?;
    bar.finish_and_clear();
    Ok(summary)
}

async fn write_batch(
    engine: &Engine,
    grant: &TenantGrant,
    batch: Vec<ImportLine>,
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let first = batch.first().map_or(0, |l| l.line);
    let written = match engine.import(grant, batch).await {
        Ok(written) => written,
        Err(e) => {
            let problem = Problem::from(e);
            anyhow::bail!(
                "lines from {first} on: {}: {}; they were not all imported",
                problem.code.as_str(),
                problem.detail
            )
        }
    };
    match summary.add(written) {
        Ok(()) => Ok(()),
        Err(Aborted { line, problem }) => anyhow::bail!(
            "line {line}: {}: {}; lines after it were not imported",
            problem.code.as_str(),
            problem.detail
        ),
    }
}

/// Runs `episodic export`; returns the number of events written.
pub fn export(args: &ExportArgs) -> anyhow::Result<usize> {
    let engine = Engine::open(
        crate::engine::EngineConfig::new(args.data_dir.clone()),
        Arc::new(crate::embed::OfflineEmbedder),
    )?;
    let grant = TenantGrant::internal(&args.tenant, "cli-export");
    let snapshot = engine.export_now(&grant, args.with_vectors);
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(engine.shutdown());
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::io::BufWriter::new(
            crate::fsutil::create_private(path)
                .with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let bar = progress(
        Some(snapshot.len() as u64),
        "exporting",
        "{pos}/{len} events",
    );
    let model = engine.vector_model();
    if args.with_vectors && model.is_none() && !snapshot.is_empty() {
        eprintln!(
            "the log records no model for its vectors (they were written before models were \
             recorded): events are exported without vectors, and an import embeds them again"
        );
    }
    for e in snapshot.events() {
        let vector = model
            .as_deref()
            .and_then(|m| snapshot.vector(e).map(|v| (v, m)));
        out.write_all(&export_line(
            e.event,
            vector.as_ref().map(|(v, m)| (v.as_slice(), *m)),
        ))?;
        bar.inc(1);
    }
    out.flush()?;
    bar.finish_and_clear();
    Ok(snapshot.len())
}
