//! Retrieval-quality evaluation on public benchmarks (LoCoMo, MADial-Bench) and on the
//! labelled scenario suite of `data/scenarios/` ([`scenarios`]).
//!
//! Role: `episodic eval <dataset>` loads a benchmark from a path given on the command line
//! (the data is never copied into the repository), ingests it through the engine's normal
//! write path (validation, policy, log, indexes) into a throw-away data directory, asks each
//! benchmark question through the engine's recall, and scores the ranked event ids against
//! the gold ids ([`metrics`]). It prints a table and writes a JSON report.
//!
//! Invariants:
//! - one engine configuration for every dataset: [`EngineConfig::new`] defaults (ranking
//!   weights included, so recency favours later events because questions are asked "now");
//!   nothing is tuned per dataset (`--relevance-only` is a labelled diagnostic that ranks by
//!   cosine alone to measure that bias, never the headline);
//! - every question is scoped to its own tenant (one tenant per conversation or user);
//! - runs are deterministic: inputs are processed in file order, embeddings are exact, every
//!   tenant is small enough for exact scoring, and fusion breaks ties by id; only wall times
//!   vary between runs;
//! - the temporary data directory is removed when the run ends, successful or not.

pub mod locomo;
pub mod madial;
pub mod metrics;
pub mod scenarios;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde_json::Value;
use tokio::task::JoinSet;

use crate::auth::TenantGrant;
use crate::embed::{Embedder, FastEmbedder};
use crate::engine::{Engine, EngineConfig};
use crate::retrieve::{RecallRequest, Scope};

/// Hits requested from dense recall per question (the largest cut-off scored is 50).
pub const DENSE_DEPTH: usize = 50;
/// Depth of each list fused by the hybrid ranking.
pub const FUSION_DEPTH: usize = 100;
/// Reciprocal rank fusion constant (the customary 60).
pub const RRF_C: f64 = 60.0;
/// Key id recorded on every eval write.
const EVAL_ACTOR: &str = "eval";

/// `episodic eval` arguments.
#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    /// Which benchmark to run.
    #[command(subcommand)]
    pub dataset: Dataset,
}

/// The benchmarks.
#[derive(Debug, Clone, Subcommand)]
pub enum Dataset {
    /// LoCoMo (locomo10.json): turn-level retrieval of question evidence.
    Locomo(LocomoArgs),
    /// MADial-Bench (English): memory retrieval for a dialogue.
    Madial(MadialArgs),
    /// Write precision/recall, type and privacy accuracy of `POST /v1/observe`'s classifier.
    Observe(ObserveArgs),
    /// The labelled scenario suite: write quality, attribution, staleness, corrections,
    /// deletion, expiry, isolation, relevance and unsafe writes, end to end.
    Scenarios(ScenariosArgs),
}

/// `episodic eval scenarios` arguments.
#[derive(Debug, Clone, Args)]
pub struct ScenariosArgs {
    /// A scenario file or a directory of `*.jsonl` scenario files.
    #[arg(long, default_value = "data/scenarios")]
    pub path: PathBuf,
    /// Only scenarios whose id starts with this prefix.
    #[arg(long)]
    pub only: Option<String>,
    /// Where to write the JSON report (default `target/eval/scenarios.json`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The models directory (manifest.json and files/).
    #[arg(long, default_value = "models")]
    pub model_dir: PathBuf,
}

/// `episodic eval observe` arguments.
#[derive(Debug, Clone, Args)]
pub struct ObserveArgs {
    /// Labelled JSONL set.
    #[arg(long, default_value = "data/observe/interactions.jsonl")]
    pub path: PathBuf,
    /// Also write the full report (with every miss) as JSON here.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Directory holding the model files.
    #[arg(long, env = "EPISODIC_MODEL_DIR", default_value = "./models")]
    pub model_dir: PathBuf,
}

/// Runs the observe classifier over a labelled set and prints the summary.
fn run_observe(a: &ObserveArgs) -> anyhow::Result<()> {
    use crate::observe::{eval, Observer};
    let embedder = crate::embed::FastEmbedder::load(&a.model_dir)?;
    let observer = Observer::new(&embedder)?;
    let items = eval::load(&a.path)?;
    let max = crate::model::validate::Limits::default().max_summary_bytes;
    let report = eval::evaluate(&observer, &embedder, &items, max)?;
    if let Some(out) = &a.out {
        std::fs::write(out, serde_json::to_vec_pretty(&report)?)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))?;
    }
    let mut summary = serde_json::to_value(&report)?;
    if let Some(obj) = summary.as_object_mut() {
        obj.insert("misses".into(), serde_json::json!(report.misses.len()));
    }
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// Runs the scenario suite, prints the table and writes the JSON report.
fn run_scenarios(a: &ScenariosArgs) -> anyhow::Result<()> {
    let report = scenarios::evaluate(&scenarios::Options {
        path: a.path.clone(),
        model_dir: a.model_dir.clone(),
        only: a.only.clone(),
    })?;
    print!("{}", report.table());
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| Path::new("target").join("eval").join("scenarios.json"));
    write_report(&out, &serde_json::to_value(&report)?)
}

/// Writes a JSON report, creating its directory.
fn write_report(out: &Path, report: &Value) -> anyhow::Result<()> {
    if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(out, text + "\n").with_context(|| format!("writing {}", out.display()))?;
    println!("report written to {}", out.display());
    Ok(())
}

/// Options shared by every benchmark.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Where to write the JSON report (default `target/eval/<dataset>.json`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The models directory (manifest.json and files/).
    #[arg(long, default_value = "models")]
    pub model_dir: PathBuf,
    /// Also score a hybrid ranking: dense recall fused with BM25 by reciprocal rank fusion.
    #[arg(long)]
    pub hybrid: bool,
    /// Diagnostic only, not the headline: rank by cosine alone (weights 1,0,0,0), to measure
    /// what the recency/trust/confidence priors of the default ranking cost or gain.
    #[arg(long)]
    pub relevance_only: bool,
}

/// `episodic eval locomo` arguments.
#[derive(Debug, Clone, Args)]
pub struct LocomoArgs {
    /// Path to locomo10.json.
    #[arg(long)]
    pub path: PathBuf,
    /// Only the first N conversations.
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Options shared by every benchmark.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `episodic eval madial` arguments.
#[derive(Debug, Clone, Args)]
pub struct MadialArgs {
    /// The madial_bench directory (holding en/ and zh/).
    #[arg(long)]
    pub path: PathBuf,
    /// Options shared by every benchmark.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs `episodic eval`: evaluates, prints the table and writes the JSON report.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    let (name, common, report) = match args.dataset {
        Dataset::Observe(a) => return run_observe(&a),
        Dataset::Scenarios(a) => return run_scenarios(&a),
        Dataset::Locomo(a) => {
            let opts = locomo::Options {
                path: a.path,
                conversations: a.conversations,
                model_dir: a.common.model_dir.clone(),
                hybrid: a.common.hybrid,
                relevance_only: a.common.relevance_only,
            };
            let report = locomo::evaluate(&opts)?;
            print!("{}", report.table());
            ("locomo", a.common, serde_json::to_value(&report)?)
        }
        Dataset::Madial(a) => {
            let opts = madial::Options {
                path: a.path,
                model_dir: a.common.model_dir.clone(),
                hybrid: a.common.hybrid,
                relevance_only: a.common.relevance_only,
            };
            let report = madial::evaluate(&opts)?;
            print!("{}", report.table());
            ("madial", a.common, serde_json::to_value(&report)?)
        }
    };
    let out = common.out.unwrap_or_else(|| {
        Path::new("target")
            .join("eval")
            .join(format!("{name}.json"))
    });
    write_report(&out, &report)
}

/// One event to ingest: its tenant, client event id and the JSON write body.
#[derive(Debug, Clone)]
pub struct Doc {
    /// The tenant it belongs to.
    pub tenant: String,
    /// The client `eventId` (also in `body`), used to map hits back.
    pub event_id: String,
    /// The write body, exactly as a client would send it.
    pub body: Value,
}

/// A question: its tenant and query text.
#[derive(Debug, Clone)]
pub struct Query {
    /// The tenant it is scoped to.
    pub tenant: String,
    /// The query text.
    pub text: String,
}

/// Ranked event ids for one query.
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    /// Dense recall through the engine, best first (at most [`DENSE_DEPTH`]).
    pub dense: Vec<String>,
    /// BM25 alone (only with `--hybrid`, as the ablation's third arm), best first (at most
    /// [`DENSE_DEPTH`]).
    pub lexical: Option<Vec<String>>,
    /// Dense fused with BM25 (only with `--hybrid`), best first (at most [`DENSE_DEPTH`]).
    pub hybrid: Option<Vec<String>>,
}

/// Wall times of a run, in seconds.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WallTimes {
    /// Loading the model and opening the engine.
    pub setup: f64,
    /// Embedding and writing every event, then refreshing the indexes.
    pub ingest: f64,
    /// The embedding part of `ingest`.
    pub ingest_embed: f64,
    /// Embedding and answering every query.
    pub query: f64,
    /// Everything, from start to report.
    pub total: f64,
}

/// The engine settings a report records.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReport {
    /// Embedding model id.
    pub model: String,
    /// Ranking weights (relevance, recency, trust, confidence).
    pub rank_weights: [f64; 4],
    /// Recency half-life in days.
    pub recency_half_life_days: f64,
    /// Whether ranking used cosine alone (the `--relevance-only` diagnostic).
    pub relevance_only: bool,
    /// Hits requested per dense recall.
    pub dense_depth: usize,
    /// Whether the hybrid ranking was scored too.
    pub hybrid: bool,
    /// Depth of each fused list (hybrid only).
    pub fusion_depth: usize,
    /// Reciprocal rank fusion constant (hybrid only).
    pub rrf_c: f64,
}

/// Removes a directory tree when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new() -> anyhow::Result<Self> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("episodic-eval-{}-{nanos}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An engine over a temporary data directory plus the embedder it uses.
pub struct Harness {
    engine: Engine,
    embedder: Arc<FastEmbedder>,
    hybrid: bool,
    relevance_only: bool,
    runtime: tokio::runtime::Runtime,
    _dir: TempDir,
}

impl Harness {
    /// Loads the model from `model_dir` and opens an engine with the default configuration
    /// (summaries up to `max_summary_bytes`, raised from the default only when needed).
    /// With `relevance_only`, ranking uses cosine alone (a diagnostic, not the headline).
    pub fn open(
        model_dir: &Path,
        max_summary_bytes: usize,
        hybrid: bool,
        relevance_only: bool,
    ) -> anyhow::Result<Self> {
        let dir = TempDir::new()?;
        let embedder = Arc::new(
            FastEmbedder::load(model_dir)
                .with_context(|| format!("loading the model from {}", model_dir.display()))?,
        );
        let mut config = EngineConfig::new(dir.0.clone());
        config.limits.max_summary_bytes = config.limits.max_summary_bytes.max(max_summary_bytes);
        if relevance_only {
            config.rank.weights = crate::rank::Weights {
                relevance: 1.0,
                recency: 0.0,
                trust: 0.0,
                confidence: 0.0,
            };
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("episodic-eval")
            .build()?;
        let dyn_embedder: Arc<dyn Embedder> = embedder.clone();
        let engine = runtime
            .block_on(runtime.spawn_blocking(move || Engine::open(config, dyn_embedder)))
            .context("engine open task")??;
        Ok(Harness {
            engine,
            embedder,
            hybrid,
            relevance_only,
            runtime,
            _dir: dir,
        })
    }

    /// The settings this harness evaluates with.
    pub fn config_report(&self) -> ConfigReport {
        let c = self.engine.config();
        let w = c.rank.weights;
        ConfigReport {
            model: self.embedder.model_id().to_string(),
            rank_weights: [w.relevance, w.recency, w.trust, w.confidence].map(round4),
            recency_half_life_days: c.rank.half_life_days,
            relevance_only: self.relevance_only,
            dense_depth: DENSE_DEPTH,
            hybrid: self.hybrid,
            fusion_depth: FUSION_DEPTH,
            rrf_c: RRF_C,
        }
    }

    /// Embeds every summary in one batched pass, then writes every event concurrently
    /// through [`Engine::write_embedded`] (validation, policy, log) and refreshes the
    /// indexes. Fails on the first rejected write, naming it. Returns the seconds spent
    /// embedding.
    pub fn ingest(&self, docs: &[Doc]) -> anyhow::Result<f64> {
        let texts: Vec<String> = docs
            .iter()
            .map(|d| {
                d.body
                    .get("summary")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .with_context(|| format!("event {} has no summary", d.event_id))
            })
            .collect::<anyhow::Result<_>>()?;
        let t = Instant::now();
        let vectors = self.embed(texts)?;
        let embed_secs = secs(t);
        self.runtime.block_on(async {
            let mut set = JoinSet::new();
            for (doc, vector) in docs.iter().zip(vectors) {
                let engine = self.engine.clone();
                let grant = TenantGrant::internal(&doc.tenant, EVAL_ACTOR);
                let body = doc.body.clone();
                let id = format!("{}/{}", doc.tenant, doc.event_id);
                set.spawn(async move {
                    engine
                        .write_embedded(&grant, &body, vector, false)
                        .await
                        .map_err(|p| anyhow::anyhow!("writing {id}: {}", describe(&p)))
                });
            }
            while let Some(done) = set.join_next().await {
                done.context("write task")??;
            }
            self.engine
                .refresh()
                .await
                .map_err(|p| anyhow::anyhow!("refresh: {p}"))
        })?;
        let stored = self.engine.stats().events;
        if stored != docs.len() {
            bail!("{} events written but {stored} stored", docs.len());
        }
        Ok(embed_secs)
    }

    /// Embeds `texts` in one batched pass off the async threads.
    fn embed(&self, texts: Vec<String>) -> anyhow::Result<Vec<Vec<f32>>> {
        let embedder = Arc::clone(&self.embedder);
        self.runtime
            .block_on(self.runtime.spawn_blocking(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                embedder.embed(&refs)
            }))
            .context("embedding task")?
            .context("embedding")
    }

    /// Answers every query scoped to its tenant: dense recall through the engine and, with
    /// hybrid enabled, the fusion of dense and BM25 rankings.
    pub fn rank_all(&self, queries: &[Query]) -> anyhow::Result<Vec<Ranked>> {
        let vectors = self.embed(queries.iter().map(|q| q.text.clone()).collect())?;
        queries
            .iter()
            .zip(vectors)
            .map(|(q, v)| self.rank_one(q, &v))
            .collect()
    }

    fn rank_one(&self, q: &Query, vector: &[f32]) -> anyhow::Result<Ranked> {
        let grant = TenantGrant::internal(&q.tenant, EVAL_ACTOR);
        let depth = if self.hybrid {
            FUSION_DEPTH
        } else {
            DENSE_DEPTH
        };
        let req = RecallRequest {
            query: q.text.clone(),
            scope: Scope::default(),
            limit: depth,
            include_superseded: false,
            include_stale: false,
            as_of: None,
        };
        let resp = self
            .engine
            .recall_with_vector(&grant, &req, vector)
            .map_err(|p| anyhow::anyhow!("recall for tenant {}: {p}", q.tenant))?;
        let dense_full: Vec<String> = resp.results.into_iter().map(|h| h.event.event_id).collect();
        let (lexical, hybrid) = if self.hybrid {
            let lexical: Vec<String> = self
                .engine
                .lexical(&grant, &q.text, FUSION_DEPTH)
                .map_err(|p| anyhow::anyhow!("lexical search for tenant {}: {p}", q.tenant))?
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let fused =
                metrics::reciprocal_rank_fusion(&[&dense_full, &lexical], RRF_C, DENSE_DEPTH);
            let mut lexical = lexical;
            lexical.truncate(DENSE_DEPTH);
            (Some(lexical), Some(fused))
        } else {
            (None, None)
        };
        let mut dense = dense_full;
        dense.truncate(DENSE_DEPTH);
        Ok(Ranked {
            dense,
            lexical,
            hybrid,
        })
    }

    /// Flushes and stops the engine (the directory is removed on drop).
    pub fn close(self) {
        self.runtime.block_on(self.engine.shutdown());
    }
}

/// A problem with its field errors spelled out.
fn describe(p: &crate::error::Problem) -> String {
    let mut s = p.to_string();
    for e in &p.errors {
        s.push_str(&format!("; {}: {}", e.field, e.message));
    }
    s
}

/// `x` rounded to 4 decimals (weights are `f32`; this keeps the report readable).
fn round4(x: f32) -> f64 {
    (f64::from(x) * 1e4).round() / 1e4
}

/// The title of the dense section of a table.
fn dense_title(config: &ConfigReport) -> &'static str {
    if config.relevance_only {
        "dense (engine recall, cosine only: --relevance-only diagnostic)"
    } else {
        "dense (engine recall, default ranking)"
    }
}

/// Seconds since `t`.
fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// Renders every arm present (dense, then BM25 alone and hybrid when run) as tables, with the
/// groups of each arm ordered by `order`.
pub(crate) fn render_arms<'a>(
    config: &ConfigReport,
    arms: [Option<&'a std::collections::BTreeMap<String, metrics::GroupReport>>; 3],
    order: impl Fn(
        &'a std::collections::BTreeMap<String, metrics::GroupReport>,
    ) -> Vec<(String, &'a metrics::GroupReport)>,
    ks: &[usize],
    all_ks: &[usize],
) -> String {
    let titles = [
        dense_title(config),
        "lexical (BM25 alone, ablation)",
        "hybrid (dense + BM25, RRF)",
    ];
    titles
        .iter()
        .zip(arms)
        .filter_map(|(title, groups)| groups.map(|g| render_table(title, &order(g), ks, all_ks)))
        .collect()
}

/// Renders a table: one row per group, one column per `(label, k)`.
fn render_table(
    title: &str,
    groups: &[(String, &metrics::GroupReport)],
    ks: &[usize],
    all_ks: &[usize],
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let mut header = format!("{:<14}{:>7}", "group", "n");
    for k in ks {
        let _ = write!(header, "{:>9}", format!("R@{k}"));
    }
    for k in all_ks {
        let _ = write!(header, "{:>11}", format!("all@{k}"));
    }
    let _ = writeln!(s, "{header}");
    for (name, g) in groups {
        let mut row = format!("{name:<14}{:>7}", g.queries);
        for k in ks {
            let v = g.recall.get(k).copied().unwrap_or(f64::NAN);
            let _ = write!(row, "{:>9.1}", v * 100.0);
        }
        for k in all_ks {
            let v = g.recall_all.get(k).copied().unwrap_or(f64::NAN);
            let _ = write!(row, "{:>11.1}", v * 100.0);
        }
        let _ = writeln!(s, "{row}");
    }
    s
}
