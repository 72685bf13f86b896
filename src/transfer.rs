//! `episodic import` and `episodic export`: JSONL in and out of one tenant.
//!
//! Role: offline bulk transfer while the server is stopped (the data directory is locked by
//! whichever process has it open). Import sends every line through the engine's normal write
//! path (validation, write policy, durable log, indexes) with summaries embedded in batches;
//! export writes the tenant's events in log order, optionally with their vectors.
//!
//! Invariants:
//! - nothing bypasses validation or policy: an import line is a write body, and the fields
//!   the server owns in an exported line (`recordedAt`, `status`, `policyVersion`,
//!   `supersededBy`, `supersededAt`, `contentWarnings`) are dropped and re-derived, never
//!   trusted;
//! - order is kept: a line that corrects earlier events is written only after every earlier
//!   line is durable; other lines of a batch are written concurrently so the writer
//!   group-commits them;
//! - every line is accounted for in the summary: allowed, review, denied, unchanged
//!   (idempotent replay), invalid or failed, each non-written one with its line number;
//! - a stored vector is reused only when it was made by the model in use, else the summary is
//!   re-embedded.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::auth::TenantGrant;
use crate::config::ServeArgs;
use crate::embed::{Embedder, FastEmbedder};
use crate::engine::{Engine, Error, WriteOutcome};
use crate::error::{ErrorCode, FieldError};
use crate::model::validate::validate_event;
use crate::model::{Decision, EventInput, Timestamp};
use crate::wire::Problem;

/// Fields of an exported line that the server owns; an import drops them.
const SERVER_OWNED: [&str; 6] = [
    "recordedAt",
    "status",
    "policyVersion",
    "supersededBy",
    "supersededAt",
    "contentWarnings",
];
/// Extra fields an export adds next to the event.
const VECTOR_FIELD: &str = "vector";
const MODEL_FIELD: &str = "embeddingModel";

/// `episodic import` arguments.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// JSONL file of events (write bodies or `episodic export` lines); `-` for stdin.
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

/// A line that was not written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LineIssue {
    /// 1-based line number.
    pub line: usize,
    /// Stable error code.
    pub code: String,
    /// What was wrong.
    pub detail: String,
    /// Field errors, for invalid lines.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

/// What an import did with every line.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportSummary {
    /// Non-blank lines read.
    pub lines: usize,
    /// Written and retrievable.
    pub allowed: usize,
    /// Written and held for review.
    pub review: usize,
    /// Already present with identical content.
    pub unchanged: usize,
    /// Refused by the write policy.
    pub denied: Vec<LineIssue>,
    /// Malformed JSON or failed validation.
    pub invalid: Vec<LineIssue>,
    /// Rejected by the engine for another reason (conflict, unknown supersession target).
    pub failed: Vec<LineIssue>,
    /// Texts embedded (lines with a reusable vector are not).
    pub embedded: usize,
    /// Vectors reused from the file.
    pub vectors_reused: usize,
}

/// One parsed, validated line waiting for its vector.
struct Pending {
    line: usize,
    input: EventInput,
    vector: Option<Vec<f32>>,
    corrects: bool,
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
    let result = runtime.block_on(import_lines(&engine, &grant, embedder.as_ref(), args));
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
    embedder: &dyn Embedder,
    args: &ImportArgs,
) -> anyhow::Result<ImportSummary> {
    let (reader, total) = open_input(&args.file)?;
    let bar = progress(total, "importing", "{bytes}/{total_bytes}");
    let mut summary = ImportSummary::default();
    let mut batch = Vec::with_capacity(args.batch);
    for (i, line) in reader.lines().enumerate() {
        let line = line.with_context(|| format!("reading line {}", i + 1))?;
        bar.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        summary.lines += 1;
        match parse_line(&line, i + 1, &args.tenant, engine, embedder.model_id()) {
            Ok(p) => batch.push(p),
            Err(issue) => summary.invalid.push(issue),
        }
        if batch.len() >= args.batch {
            write_batch(
                engine,
                grant,
                embedder,
                std::mem::take(&mut batch),
                &mut summary,
            )
            .await?;
        }
    }
    write_batch(engine, grant, embedder, batch, &mut summary).await?;
    bar.finish_and_clear();
    Ok(summary)
}

fn parse_line(
    line: &str,
    number: usize,
    tenant: &str,
    engine: &Engine,
    model_id: &str,
) -> Result<Pending, LineIssue> {
    let issue = |code: ErrorCode, detail: String, errors: Vec<FieldError>| LineIssue {
        line: number,
        code: code.as_str().to_string(),
        detail,
        errors,
    };
    let value: Value = serde_json::from_str(line)
        .map_err(|e| issue(ErrorCode::MalformedJson, e.to_string(), Vec::new()))?;
    let Value::Object(mut obj) = value else {
        return Err(issue(
            ErrorCode::ValidationFailed,
            "a line must be a JSON object".into(),
            Vec::new(),
        ));
    };
    if obj.get("tenantId").is_some_and(|t| t != tenant) {
        return Err(issue(
            ErrorCode::TenantMismatch,
            format!("the line names tenant {}, not {tenant}", obj["tenantId"]),
            Vec::new(),
        ));
    }
    let vector = take_vector(&mut obj, model_id);
    for field in SERVER_OWNED {
        obj.remove(field);
    }
    let body = Value::Object(obj);
    let input =
        validate_event(&body, &engine.config().limits, Timestamp::now()).map_err(|errs| {
            issue(
                ErrorCode::ValidationFailed,
                format!("{} field error(s)", errs.len()),
                errs,
            )
        })?;
    Ok(Pending {
        line: number,
        corrects: !input.supersedes_event_ids.is_empty(),
        input,
        vector,
    })
}

/// Removes the export's vector fields; keeps the vector only if the same model made it.
fn take_vector(obj: &mut Map<String, Value>, model_id: &str) -> Option<Vec<f32>> {
    let model = obj.remove(MODEL_FIELD);
    let vector = obj.remove(VECTOR_FIELD)?;
    if model.as_ref().and_then(Value::as_str) != Some(model_id) {
        return None;
    }
    serde_json::from_value(vector).ok()
}

async fn write_batch(
    engine: &Engine,
    grant: &TenantGrant,
    embedder: &dyn Embedder,
    mut batch: Vec<Pending>,
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    embed_missing(engine, embedder, &mut batch, summary).await?;
    let mut group = Vec::new();
    for p in batch {
        if p.corrects {
            flush(engine, grant, std::mem::take(&mut group), summary).await?;
            flush(engine, grant, vec![p], summary).await?;
        } else {
            group.push(p);
        }
    }
    flush(engine, grant, group, summary).await
}

async fn embed_missing(
    engine: &Engine,
    embedder: &dyn Embedder,
    batch: &mut [Pending],
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    let dim = embedder.dim();
    for p in batch.iter_mut() {
        if p.vector.as_ref().is_some_and(|v| v.len() != dim) {
            p.vector = None;
        }
    }
    let texts: Vec<String> = batch
        .iter()
        .filter(|p| p.vector.is_none())
        .map(|p| p.input.summary.clone())
        .collect();
    summary.vectors_reused += batch.len() - texts.len();
    if texts.is_empty() {
        return Ok(());
    }
    summary.embedded += texts.len();
    let mut vectors = engine.embed_many(texts).await?.into_iter();
    for p in batch.iter_mut().filter(|p| p.vector.is_none()) {
        p.vector = vectors.next();
    }
    Ok(())
}

async fn flush(
    engine: &Engine,
    grant: &TenantGrant,
    group: Vec<Pending>,
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for p in group {
        let (engine, grant) = (engine.clone(), grant.clone());
        tasks.spawn(async move {
            let vector = p.vector.unwrap_or_default();
            let result = engine.write_embedded(&grant, p.input, vector, false).await;
            (p.line, result)
        });
    }
    let mut results: Vec<(usize, Result<WriteOutcome, Error>)> =
        tasks.join_all().await.into_iter().collect();
    results.sort_by_key(|(line, _)| *line);
    for (line, result) in results {
        tally(line, result, summary)?;
    }
    Ok(())
}

fn tally(
    line: usize,
    result: Result<WriteOutcome, Error>,
    summary: &mut ImportSummary,
) -> anyhow::Result<()> {
    let result = result.map_err(Problem::from);
    let issue = |p: &Problem| LineIssue {
        line,
        code: p.code.as_str().to_string(),
        detail: p.detail.clone(),
        errors: p.errors.clone(),
    };
    match result {
        Ok(o) if o.retried => summary.unchanged += 1,
        Ok(o) => match o.decision {
            Decision::Review { .. } => summary.review += 1,
            Decision::Allow { .. } | Decision::Deny { .. } => summary.allowed += 1,
        },
        Err(p) if p.code == ErrorCode::PolicyDenied => summary.denied.push(issue(&p)),
        Err(p) if p.code == ErrorCode::ValidationFailed => summary.invalid.push(issue(&p)),
        Err(p) if p.code == ErrorCode::StorageUnavailable || p.code == ErrorCode::Internal => {
            anyhow::bail!(
                "line {line}: {}: {}; lines after it were not imported",
                p.code.as_str(),
                p.detail
            )
        }
        Err(p) => summary.failed.push(issue(&p)),
    }
    Ok(())
}

/// Runs `episodic export`; returns the number of events written.
pub fn export(args: &ExportArgs) -> anyhow::Result<usize> {
    let model_id = args
        .with_vectors
        .then(|| crate::embed::FAST_MODEL_ID.to_string());
    let engine = Engine::open(
        crate::engine::EngineConfig::new(args.data_dir.clone()),
        Arc::new(crate::embed::OfflineEmbedder),
    )?;
    let events = engine.export_events(&args.tenant, args.with_vectors);
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    runtime.block_on(engine.shutdown());
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(std::io::BufWriter::new(
            crate::fsutil::create_private(path)
                .with_context(|| format!("creating {}", path.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let bar = progress(Some(events.len() as u64), "exporting", "{pos}/{len} events");
    for e in &events {
        let mut line = serde_json::to_value(&e.event)?;
        if let (Some(v), Some(model), Value::Object(obj)) = (&e.vector, &model_id, &mut line) {
            obj.insert(VECTOR_FIELD.into(), serde_json::to_value(v)?);
            obj.insert(MODEL_FIELD.into(), Value::String(model.clone()));
        }
        serde_json::to_writer(&mut out, &line)?;
        out.write_all(b"\n")?;
        bar.inc(1);
    }
    out.flush()?;
    bar.finish_and_clear();
    Ok(events.len())
}
