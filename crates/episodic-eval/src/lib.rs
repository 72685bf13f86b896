//! Offline quality evaluation of the `episodic` engine: retrieval on public benchmarks
//! (LoCoMo, MADial-Bench), the observe classifier on its labelled sets ([`observe`]) and the
//! labelled scenario suite of `data/scenarios/` ([`scenarios`]).
//!
//! Role: `episodic-eval <dataset>` loads a benchmark from a path given on the command line
//! (the data is never copied into the repository), ingests it through the engine's normal
//! write path (validation, policy, log, indexes) into a throw-away data directory, asks each
//! benchmark question through the engine's recall, and scores the ranked event ids against
//! the gold ids ([`metrics`]). It prints a table and writes a JSON report. This crate sits
//! outside the server and uses only the `episodic` library's public API; the items public
//! there only for it (`Engine::recall_ranked`, `Principal::from_parts`) say so in their docs,
//! as diagnostics surfaces for offline evaluation.
//!
//! Invariants:
//! - one engine configuration for every dataset: [`EngineConfig::new`] defaults (ranking
//!   weights and signals included); nothing is tuned per dataset or per question. The
//!   headline is always the default ranking; `--ablation` adds arms that switch signals off
//!   ([`ablation_arms`]) on the same ingested data, to show what each one gains, and ingests
//!   the dataset once more under the other passage rule ([`PassageComparison`]), to show
//!   what embedding the actor's label changes under every ranking;
//! - events are embedded from the passage text the engine's write would embed
//!   ([`Engine::passage_text`]), from the actor id the dataset's loader writes;
//! - every question is scoped to its own tenant (one tenant per conversation or user);
//! - runs are deterministic: inputs are processed in file order, embeddings are exact and
//!   recall is exact; only wall times vary between runs;
//! - the temporary data directory is removed when the run ends, successful or not.

pub mod locomo;
pub mod madial;
pub mod metrics;
pub mod observe;
pub mod scenarios;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use serde_json::Value;

use episodic::auth::TenantGrant;
use episodic::embed::{Embedder, FastEmbedder, PassageText};
use episodic::engine::{Engine, EngineConfig};
use episodic::rank::RankConfig;
use episodic::retrieve::{RecallRequest, Scope};

/// The read time every question is ranked at (recency and expiry are judged at it): fixed,
/// so that two runs, or two builds, rank every question the same way to the last tie.
pub const READ_TIME: &str = "2026-12-01T00:00:00Z";

/// The group of the development half of a dataset: knobs and signals are chosen on it.
pub const DEV: &str = "dev";

/// The group of the held-out test half of a dataset, the headline figure.
pub const TEST: &str = "test";

/// [`READ_TIME`] as a timestamp.
fn read_time() -> episodic::model::Timestamp {
    episodic::model::Timestamp::parse(READ_TIME).expect("a valid RFC 3339 constant")
}

/// Hits requested from recall per question (the largest cut-off scored is 50).
pub const DEPTH: usize = 50;
/// Key id recorded on every eval write.
const EVAL_ACTOR: &str = "eval";

/// The benchmarks.
#[derive(Debug, Clone, Subcommand)]
pub enum Dataset {
    /// LoCoMo (locomo10.json): turn-level retrieval of question evidence.
    Locomo(LocomoArgs),
    /// MADial-Bench (English): memory retrieval for a dialogue.
    Madial(MadialArgs),
    /// Write precision/recall, type and privacy accuracy of `POST /v1/observe`'s classifier.
    Observe(ObserveArgs),
    /// The labelled scenario suite, end to end, in its nine families: write quality,
    /// staleness, corrections, deletion and expiry, isolation, attribution, retrieval
    /// relevance, untrusted content under review, evidence and unsafe writes.
    Scenarios(ScenariosArgs),
}

/// `episodic-eval scenarios` arguments.
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

/// `episodic-eval observe` arguments.
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
    /// Classify each item from the vector a write by this actor stores under
    /// `--embed-speaker on` (`"<label>: <text>"`, e.g. `user:dana` → `dana: ...`) instead of
    /// the text's own vector.
    #[arg(long)]
    pub speaker_actor: Option<String>,
}

/// Runs the observe classifier over a labelled set and prints the summary.
fn run_observe(a: &ObserveArgs) -> anyhow::Result<()> {
    use episodic::observe::Observer;
    let embedder = FastEmbedder::load(&a.model_dir)?;
    let observer = Observer::new(&embedder)?;
    let items = observe::load(&a.path)?;
    let max = episodic::model::validate::Limits::default().max_summary_bytes;
    let report = observe::evaluate(
        &observer,
        &embedder,
        &items,
        max,
        a.speaker_actor.as_deref(),
    )?;
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
    /// Also score the ablation arms (dense alone, BM25 alone, dense + BM25, then adding actor
    /// names, episode context, episode best and named dates; the default adds the question
    /// penalty) next to the default ranking, on the same ingested data; and ingest again
    /// under the other `--embed-speaker` setting to compare every ranking question by
    /// question.
    #[arg(long)]
    pub ablation: bool,
    /// Answer every scope of more than 100 events from vector partitions built over the
    /// whole ingested set, reading this share of the lists (what partitioned recall costs
    /// in recall on real embeddings; default: exact recall).
    #[arg(long)]
    pub partition_probe_share: Option<f64>,
    /// Also write every question's ranked event ids (default ranking, then each arm) here as
    /// JSON lines, to compare the rankings of two builds.
    #[arg(long)]
    pub rankings: Option<PathBuf>,
    /// Embed every event with its actor's label (`on`) or its summary alone (`off`), as the
    /// server's `--embed-speaker` does (default: the engine's default). With `--ablation`
    /// the dataset is also ingested under the other setting and compared question by
    /// question.
    #[arg(long, value_parser = ["on", "off"])]
    pub embed_speaker: Option<String>,
}

impl CommonArgs {
    /// The passage rule `--embed-speaker` names (`None`: the engine's default).
    pub fn passage(&self) -> Option<PassageText> {
        self.embed_speaker
            .as_deref()
            .map(|s| PassageText::speaker(s == "on"))
    }
}

/// Partitioned recall in an eval: the share of lists probed and the events to wait for.
#[derive(Debug, Clone, Copy)]
pub struct EvalPartitions {
    /// See [`episodic::retrieve::RecallConfig::partition_probe_share`].
    pub probe_share: f64,
    /// Partitions are built once this many events are stored (the whole set).
    pub events: usize,
}

impl EvalPartitions {
    /// Partitions reading `probe_share` of the lists over `events` events; `None` (exact
    /// recall) without a share.
    pub fn over(probe_share: Option<f64>, events: usize) -> Option<Self> {
        probe_share.map(|probe_share| EvalPartitions {
            probe_share,
            events,
        })
    }
}

/// Scopes up to this size are scored exactly in an eval with partitions.
const EVAL_EXACT_MAX: usize = 100;

/// `episodic-eval locomo` arguments.
#[derive(Debug, Clone, Args)]
pub struct LocomoArgs {
    /// Path to locomo10.json.
    #[arg(long)]
    pub path: PathBuf,
    /// Only the first N conversations.
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Write each turn with an opaque actor id (`user-<hash>`, one per speaker) and the
    /// speaker's name in `actorNames`, instead of the name as the actor id.
    #[arg(long)]
    pub opaque_actors: bool,
    /// Options shared by every benchmark.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `episodic-eval madial` arguments.
#[derive(Debug, Clone, Args)]
pub struct MadialArgs {
    /// The madial_bench directory (holding en/ and zh/).
    #[arg(long)]
    pub path: PathBuf,
    /// Options shared by every benchmark.
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs `episodic-eval <dataset>`: evaluates, prints the table and writes the JSON report.
pub fn run(dataset: Dataset) -> anyhow::Result<()> {
    let (name, common, report) = match dataset {
        Dataset::Observe(a) => return run_observe(&a),
        Dataset::Scenarios(a) => return run_scenarios(&a),
        Dataset::Locomo(a) => {
            let opts = locomo::Options {
                path: a.path,
                conversations: a.conversations,
                model_dir: a.common.model_dir.clone(),
                ablation: a.common.ablation,
                partition_probe_share: a.common.partition_probe_share,
                rankings: a.common.rankings.clone(),
                passage: a.common.passage(),
                compare_passage: a.common.ablation,
                opaque_actors: a.opaque_actors,
            };
            let report = locomo::evaluate(&opts)?;
            print!("{}", report.table());
            ("locomo", a.common, serde_json::to_value(&report)?)
        }
        Dataset::Madial(a) => {
            let opts = madial::Options {
                path: a.path,
                model_dir: a.common.model_dir.clone(),
                ablation: a.common.ablation,
                partition_probe_share: a.common.partition_probe_share,
                rankings: a.common.rankings.clone(),
                passage: a.common.passage(),
                compare_passage: a.common.ablation,
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

/// Ranked event ids for one query, best first (at most [`DEPTH`] each).
#[derive(Debug, Clone, Default)]
pub struct Ranked {
    /// Recall through the engine with its default ranking.
    pub ranking: Vec<String>,
    /// The same recall under each ablation arm (empty without `--ablation`).
    pub arms: Vec<Vec<String>>,
}

/// Writes each query's rankings as one JSON line (`tenant`, `query`, `ranking`, `arms`), when
/// `path` is given.
pub fn write_rankings(
    path: Option<&Path>,
    queries: &[Query],
    ranked: &[Ranked],
) -> anyhow::Result<()> {
    let Some(path) = path else { return Ok(()) };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut out = String::new();
    for (q, r) in queries.iter().zip(ranked) {
        let line = serde_json::json!({
            "tenant": q.tenant, "query": q.text, "ranking": r.ranking, "arms": r.arms,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    std::fs::write(path, out)?;
    Ok(())
}

/// An ablation arm: a name and the ranking it uses.
#[derive(Debug, Clone)]
pub struct Arm {
    /// Short name (the report's key).
    pub name: &'static str,
    /// The ranking configuration of this arm.
    pub rank: RankConfig,
}

/// The ablation arms derived from `base` (the default ranking is the headline, not an arm):
/// each switches signals off, everything else (priors included) unchanged.
pub fn ablation_arms(base: &RankConfig) -> Vec<Arm> {
    let off = |(lexical_share, short_lexical_share): (f32, f32), actor: bool| RankConfig {
        lexical_share,
        short_lexical_share,
        context_weight: 0.0,
        episode_weight: 0.0,
        actor_boost: if actor { base.actor_boost } else { 0.0 },
        date_boost: 0.0,
        question_penalty: 0.0,
        ..base.clone()
    };
    let shares = (base.lexical_share, base.short_lexical_share);
    vec![
        Arm {
            name: "dense",
            rank: off((0.0, 0.0), false),
        },
        Arm {
            name: "bm25",
            rank: off((1.0, 1.0), false),
        },
        Arm {
            name: "dense+bm25",
            rank: off(shares, false),
        },
        Arm {
            name: "dense+bm25+actor",
            rank: off(shares, true),
        },
        Arm {
            name: "dense+bm25+actor+context",
            rank: RankConfig {
                episode_weight: 0.0,
                date_boost: 0.0,
                question_penalty: 0.0,
                ..base.clone()
            },
        },
        Arm {
            name: "dense+bm25+actor+context+episode",
            rank: RankConfig {
                date_boost: 0.0,
                question_penalty: 0.0,
                ..base.clone()
            },
        },
        Arm {
            name: "dense+bm25+actor+context+episode+date",
            rank: RankConfig {
                question_penalty: 0.0,
                ..base.clone()
            },
        },
    ]
}

/// One ablation arm's figures.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArmReport {
    /// The arm's name.
    pub name: String,
    /// Recall per group.
    pub groups: std::collections::BTreeMap<String, metrics::GroupReport>,
}

/// Scores the default ranking and every arm of `ranked` against `golds` (group, gold set)
/// in order. Returns the default ranking's groups, the arms' reports (`None` without arms),
/// and how many queries were scored and skipped.
pub fn score_all<'a>(
    ks: &[usize],
    arms: &[Arm],
    golds: impl Iterator<Item = (Vec<&'a str>, &'a std::collections::HashSet<String>)>,
    ranked: &[Ranked],
) -> Scored {
    let mut main = metrics::Accumulator::new(ks);
    let mut per_arm: Vec<metrics::Accumulator> =
        arms.iter().map(|_| metrics::Accumulator::new(ks)).collect();
    let (mut scored, mut skipped) = (0, 0);
    for ((groups, gold), r) in golds.zip(ranked) {
        if main.add(&groups, gold, &r.ranking) {
            scored += 1;
        } else {
            skipped += 1;
        }
        for (acc, list) in per_arm.iter_mut().zip(&r.arms) {
            acc.add(&groups, gold, list);
        }
    }
    Scored {
        ranking: main.report(),
        ablation: (!arms.is_empty()).then(|| {
            arms.iter()
                .zip(&per_arm)
                .map(|(arm, acc)| ArmReport {
                    name: arm.name.to_string(),
                    groups: acc.report(),
                })
                .collect()
        }),
        scored,
        skipped,
    }
}

/// What [`score_all`] returns.
#[derive(Debug, Clone)]
pub struct Scored {
    /// The default ranking, per group.
    pub ranking: std::collections::BTreeMap<String, metrics::GroupReport>,
    /// Each arm, in [`ablation_arms`] order (with `--ablation`).
    pub ablation: Option<Vec<ArmReport>>,
    /// Queries scored.
    pub scored: usize,
    /// Queries without gold ids.
    pub skipped: usize,
}

/// The report of one dataset run: its counts (`C`, per dataset) and the shared parts.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DatasetReport<C> {
    /// `"locomo"` or `"madial-en"`.
    pub dataset: String,
    /// The data file or directory evaluated.
    pub path: String,
    /// Engine and eval settings.
    pub config: ConfigReport,
    /// Dataset counts.
    pub counts: C,
    /// Recall through the engine with its default ranking, per group (`overall`, then the
    /// dataset's categories or users).
    pub ranking: std::collections::BTreeMap<String, metrics::GroupReport>,
    /// The ablation arms (with `--ablation`), in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablation: Option<Vec<ArmReport>>,
    /// The same rankings over the dataset ingested under the other passage rule (with
    /// `--ablation`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_passage: Option<PassageComparison>,
    /// Wall times in seconds.
    pub wall_seconds: WallTimes,
}

/// The rankings of a dataset ingested under another passage rule than the headline's, to
/// compare question by question with the headline's rankings of the same name.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PassageComparison {
    /// The rule these events were embedded under.
    pub passage: PassageText,
    /// The default ranking, per group.
    pub ranking: std::collections::BTreeMap<String, metrics::GroupReport>,
    /// The ablation arms, in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ablation: Option<Vec<ArmReport>>,
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
    /// The passage rule events were embedded under.
    pub passage: PassageText,
    /// Ranking weights (relevance, recency, trust, confidence).
    pub rank_weights: [f64; 4],
    /// Recency half-life in days.
    pub recency_half_life_days: f64,
    /// Share of the match from BM25 for long queries.
    pub lexical_share: f64,
    /// Share of the match from BM25 for short queries.
    pub short_lexical_share: f64,
    /// Weight of the episode neighbours' match.
    pub context_weight: f64,
    /// Weight of the best match in the event's episode.
    pub episode_weight: f64,
    /// Bonus when the query names the actor.
    pub actor_boost: f64,
    /// Bonus when the event occurred on a date the query names.
    pub date_boost: f64,
    /// Penalty when the event's text ends in a question.
    pub question_penalty: f64,
    /// Episode gap in minutes.
    pub episode_gap_minutes: f64,
    /// Hits requested per recall.
    pub depth: usize,
    /// The ablation arms scored (empty without `--ablation`).
    pub ablation_arms: Vec<String>,
    /// With `--partition-probe-share`, the share of partition lists read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition_probe_share: Option<f64>,
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
    arms: Vec<Arm>,
    runtime: tokio::runtime::Runtime,
    _dir: TempDir,
}

impl Harness {
    /// Loads the model from `model_dir` and opens an engine with the default configuration
    /// (summaries up to `max_summary_bytes`, raised from the default only when needed).
    /// With `ablation`, every query is also ranked under each [`ablation_arms`] arm. Events
    /// are embedded under `passage` (`None`: the engine's default rule).
    pub fn open(
        model_dir: &Path,
        max_summary_bytes: usize,
        ablation: bool,
        partitions: Option<EvalPartitions>,
        passage: Option<PassageText>,
    ) -> anyhow::Result<Self> {
        let dir = TempDir::new()?;
        let embedder = Arc::new(
            FastEmbedder::load(model_dir)
                .with_context(|| format!("loading the model from {}", model_dir.display()))?,
        );
        let mut config = EngineConfig::new(dir.0.clone());
        config.limits.max_summary_bytes = config.limits.max_summary_bytes.max(max_summary_bytes);
        if let Some(passage) = passage {
            config.passage = passage;
        }
        if let Some(p) = partitions {
            config.recall.partition(p.probe_share)?;
            config.recall.partition_min_vectors = p.events;
            config.recall.exact_max_candidates = EVAL_EXACT_MAX;
        }
        let arms = if ablation {
            ablation_arms(&config.rank)
        } else {
            Vec::new()
        };
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
            arms,
            runtime,
            _dir: dir,
        })
    }

    /// The ablation arms every query is also ranked under.
    pub fn arms(&self) -> &[Arm] {
        &self.arms
    }

    /// The settings this harness evaluates with.
    pub fn config_report(&self) -> ConfigReport {
        let r = &self.engine.config().rank;
        let w = r.weights;
        ConfigReport {
            model: self.embedder.model_id().to_string(),
            passage: self.engine.config().passage,
            rank_weights: [w.relevance, w.recency, w.trust, w.confidence].map(round4),
            recency_half_life_days: r.half_life_days,
            lexical_share: round4(r.lexical_share),
            short_lexical_share: round4(r.short_lexical_share),
            context_weight: round4(r.context_weight),
            episode_weight: round4(r.episode_weight),
            actor_boost: round4(r.actor_boost),
            date_boost: round4(r.date_boost),
            question_penalty: round4(r.question_penalty),
            episode_gap_minutes: r.episode_gap_ms as f64 / 60_000.0,
            depth: DEPTH,
            ablation_arms: self.arms.iter().map(|a| a.name.to_string()).collect(),
            partition_probe_share: self
                .engine
                .config()
                .recall
                .partitioned
                .then_some(self.engine.config().recall.partition_probe_share),
        }
    }

    /// Reads every body as the write route would, embeds every event's passage text
    /// ([`Engine::passage_text`], what [`Engine::write`] would embed) in one batched pass,
    /// then writes every event concurrently through [`Engine::write_embedded`] (validation,
    /// policy, log) and refreshes the indexes. Fails on the first rejected write, naming
    /// it. Returns the seconds spent embedding.
    pub fn ingest(&self, docs: &[Doc]) -> anyhow::Result<f64> {
        let inputs: Vec<_> = docs
            .iter()
            .map(|doc| {
                let grant = TenantGrant::internal(&doc.tenant, EVAL_ACTOR);
                episodic::wire::event_input(&self.engine, &grant, &doc.body).map_err(|p| {
                    anyhow::anyhow!("reading {}/{}: {}", doc.tenant, doc.event_id, describe(&p))
                })
            })
            .collect::<anyhow::Result<_>>()?;
        let texts: Vec<String> = inputs
            .iter()
            .map(|i| self.engine.passage_text(&i.actor_id, &i.summary))
            .collect();
        let t = Instant::now();
        let vectors = self.embed(texts)?;
        let embed_secs = secs(t);
        self.runtime.block_on(async {
            // Every write is sent to the writer at its first poll (a given vector means no
            // await before that), and `join_all` polls them in order: the events are stored
            // in document order, so ties in the ranking break the same way in every run.
            let writes = docs
                .iter()
                .zip(inputs)
                .zip(vectors)
                .map(|((doc, input), vector)| {
                    let grant = TenantGrant::internal(&doc.tenant, EVAL_ACTOR);
                    async move {
                        let written = self
                            .engine
                            .write_embedded(&grant, input, vector, false)
                            .await
                            .map_err(episodic::wire::Problem::from);
                        written.map_err(|p| {
                            anyhow::anyhow!(
                                "writing {}/{}: {}",
                                doc.tenant,
                                doc.event_id,
                                describe(&p)
                            )
                        })
                    }
                });
            for done in futures::future::join_all(writes).await {
                done?;
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
        let recall = &self.engine.config().recall;
        // Partitions are built only from `partition_min_vectors` on (an eval with
        // `--partition-probe-share` lowers it to its corpus size).
        if recall.partitioned && docs.len() >= recall.partition_min_vectors {
            self.wait_for_partitions(docs.len())?;
        }
        Ok(embed_secs)
    }

    /// Waits until the vector partitions cover `events` ids (built in the background).
    fn wait_for_partitions(&self, events: usize) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.engine.stats().partitioned < events {
            if started.elapsed() > std::time::Duration::from_secs(600) {
                bail!("vector partitions were not built within 10 minutes");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(())
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

    /// Answers every query scoped to its tenant through the engine's recall: the default
    /// ranking and, with arms, each arm's. Each ranking's query vector is embedded from the
    /// text the engine's own recall would embed for it ([`Engine::semantic_query`]); every
    /// distinct text is embedded once, in one batch.
    pub fn rank_all(&self, queries: &[Query]) -> anyhow::Result<Vec<Ranked>> {
        let ranks: Vec<&RankConfig> = std::iter::once(&self.engine.config().rank)
            .chain(self.arms.iter().map(|a| &a.rank))
            .collect();
        let mut texts: Vec<String> = Vec::new();
        let mut slot: std::collections::HashMap<String, usize> = Default::default();
        let which: Vec<Vec<usize>> = queries
            .iter()
            .map(|q| {
                let grant = TenantGrant::internal(&q.tenant, EVAL_ACTOR);
                ranks
                    .iter()
                    .map(|rank| {
                        let text = self.engine.semantic_query(&grant, &q.text, rank);
                        *slot.entry(text.clone()).or_insert_with(|| {
                            texts.push(text);
                            texts.len() - 1
                        })
                    })
                    .collect()
            })
            .collect();
        let vectors = self.embed(texts)?;
        queries
            .iter()
            .zip(which)
            .map(|(q, at)| {
                let mut vs = at.iter().map(|&i| vectors[i].as_slice());
                let default = vs.next().context("a vector per ranking")?;
                self.rank_one(q, default, vs.collect())
            })
            .collect()
    }

    /// Ranks `q` by the default ranking with `vector` and by each arm with its own vector.
    fn rank_one(
        &self,
        q: &Query,
        vector: &[f32],
        arm_vectors: Vec<&[f32]>,
    ) -> anyhow::Result<Ranked> {
        let grant = TenantGrant::internal(&q.tenant, EVAL_ACTOR);
        let req = RecallRequest {
            query: q.text.clone(),
            scope: Scope::default(),
            limit: DEPTH,
            include_superseded: false,
            include_stale: false,
            exact: false,
            as_of: None,
        };
        let recall = |rank: &RankConfig, vector: &[f32]| -> anyhow::Result<Vec<String>> {
            let resp = self
                .engine
                .recall_ranked(&grant, &req, vector, rank, read_time())
                .map_err(|p| anyhow::anyhow!("recall for tenant {}: {p}", q.tenant))?;
            Ok(resp
                .results
                .into_iter()
                .map(|h| h.event.event_id.clone())
                .collect())
        };
        Ok(Ranked {
            ranking: recall(&self.engine.config().rank, vector)?,
            arms: self
                .arms
                .iter()
                .zip(arm_vectors)
                .map(|(a, v)| recall(&a.rank, v))
                .collect::<anyhow::Result<_>>()?,
        })
    }

    /// Flushes and stops the engine (the directory is removed on drop).
    pub fn close(self) {
        self.runtime.block_on(self.engine.shutdown());
    }
}

/// One ingest and ranking of a dataset: every query's rankings, the arms they were ranked
/// under, the settings and the wall times (seconds).
pub(crate) struct Run {
    pub(crate) ranked: Vec<Ranked>,
    pub(crate) arms: Vec<Arm>,
    pub(crate) config: ConfigReport,
    pub(crate) setup: f64,
    pub(crate) ingest: f64,
    pub(crate) ingest_embed: f64,
    pub(crate) query: f64,
}

/// Opens a harness embedding under `passage` (`None`: the engine's default), ingests `docs`,
/// ranks every query (and, with `ablation`, every arm) and closes it.
pub(crate) fn run_once(
    model_dir: &Path,
    max_summary_bytes: usize,
    ablation: bool,
    partitions: Option<EvalPartitions>,
    passage: Option<PassageText>,
    docs: &[Doc],
    queries: &[Query],
) -> anyhow::Result<Run> {
    let t = Instant::now();
    let harness = Harness::open(model_dir, max_summary_bytes, ablation, partitions, passage)?;
    let setup = secs(t);
    let t = Instant::now();
    let ingest_embed = harness.ingest(docs)?;
    let ingest = secs(t);
    let t = Instant::now();
    let ranked = harness.rank_all(queries)?;
    let query = secs(t);
    let run = Run {
        ranked,
        arms: harness.arms().to_vec(),
        config: harness.config_report(),
        setup,
        ingest,
        ingest_embed,
        query,
    };
    harness.close();
    Ok(run)
}

/// With `compare`, the dataset ingested and ranked again under the other passage rule than
/// `run`'s (by `run_under`), scored against the same `golds`; `None` without.
pub(crate) fn compare_passage<'a>(
    run: &Run,
    compare: bool,
    run_under: impl Fn(Option<PassageText>) -> anyhow::Result<Run>,
    ks: &[usize],
    golds: impl Iterator<Item = (Vec<&'a str>, &'a std::collections::HashSet<String>)>,
) -> anyhow::Result<Option<PassageComparison>> {
    if !compare {
        return Ok(None);
    }
    let other = run_under(Some(run.config.passage.other()))?;
    let s = score_all(ks, &other.arms, golds, &other.ranked);
    Ok(Some(PassageComparison {
        passage: other.config.passage,
        ranking: s.ranking,
        ablation: s.ablation,
    }))
}

/// A problem with its field errors spelled out.
fn describe(p: &episodic::wire::Problem) -> String {
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

/// Seconds since `t`.
fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// Renders the default ranking and every ablation arm present as tables, with the groups
/// of each ordered by `order`.
pub(crate) fn render_arms<'a>(
    ranking: &'a std::collections::BTreeMap<String, metrics::GroupReport>,
    ablation: Option<&'a [ArmReport]>,
    order: impl Fn(
        &'a std::collections::BTreeMap<String, metrics::GroupReport>,
    ) -> Vec<(String, &'a metrics::GroupReport)>,
    ks: &[usize],
    all_ks: &[usize],
) -> String {
    let arms = ablation.unwrap_or_default();
    let mut out = render_table(
        "default ranking (dense + BM25 + actor names + episode context and best + dates + question penalty, with priors)",
        &order(ranking),
        ks,
        all_ks,
        arms.last().map(|a| &a.groups),
    );
    for (i, arm) in arms.iter().enumerate() {
        let title = format!("ablation arm: {}", arm.name);
        let before = i.checked_sub(1).map(|j| &arms[j].groups);
        out.push_str(&render_table(
            &title,
            &order(&arm.groups),
            ks,
            all_ks,
            before,
        ));
    }
    out
}

/// Renders a table: one row per group, one column per `(label, k)`, the 95% bootstrap
/// half-width of R@10 (or of the first cut-off) and, given the ranking `before` this one
/// (the arm with one signal fewer), the paired difference from it at that cut-off with its
/// own 95% half-width: what the added signal lifts, against its noise.
fn render_table(
    title: &str,
    groups: &[(String, &metrics::GroupReport)],
    ks: &[usize],
    all_ks: &[usize],
    before: Option<&std::collections::BTreeMap<String, metrics::GroupReport>>,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let mut header = format!("{:<14}{:>7}", "group", "n");
    for k in ks {
        let _ = write!(header, "{:>9}", format!("R@{k}"));
    }
    let ci_at = ks
        .iter()
        .position(|&k| k == 10)
        .or((!ks.is_empty()).then_some(0));
    let ci_k = ci_at.map(|i| ks[i]);
    if let Some(k) = ci_k {
        let _ = write!(header, "{:>9}", format!("±R@{k}"));
    }
    for k in all_ks {
        let _ = write!(header, "{:>11}", format!("all@{k}"));
    }
    if let (Some(k), Some(_)) = (ci_k, before) {
        let _ = write!(header, "{:>15}", format!("ΔR@{k} paired"));
    }
    let _ = writeln!(s, "{header}");
    for (name, g) in groups {
        let mut row = format!("{name:<14}{:>7}", g.queries);
        for k in ks {
            let v = g.recall.get(k).copied().unwrap_or(f64::NAN);
            let _ = write!(row, "{:>9.1}", v * 100.0);
        }
        if let Some(k) = ci_k {
            let v = g.recall_ci95.get(&k).copied().unwrap_or(f64::NAN);
            let _ = write!(row, "{:>9.1}", v * 100.0);
        }
        for k in all_ks {
            let v = g.recall_all.get(k).copied().unwrap_or(f64::NAN);
            let _ = write!(row, "{:>11.1}", v * 100.0);
        }
        let paired = ci_at
            .zip(before.and_then(|b| b.get(name)))
            .and_then(|(at, b)| metrics::paired_difference(g, b, at));
        if let Some((mean, half)) = paired {
            let cell = format!("{:+.1}±{:.1}", mean * 100.0, half * 100.0);
            let _ = write!(row, "{cell:>15}");
        }
        let _ = writeln!(s, "{row}");
    }
    s
}

/// Renders the rankings of the other passage rule, each with the paired difference from the
/// headline's ranking of the same name (the default ranking, then each arm): what embedding
/// under that rule changes, question by question, against its noise.
pub(crate) fn render_passage_comparison<'a>(
    other: &'a PassageComparison,
    ranking: &'a std::collections::BTreeMap<String, metrics::GroupReport>,
    ablation: Option<&'a [ArmReport]>,
    order: impl Fn(
        &'a std::collections::BTreeMap<String, metrics::GroupReport>,
    ) -> Vec<(String, &'a metrics::GroupReport)>,
    ks: &[usize],
    all_ks: &[usize],
) -> String {
    let rule = match other.passage {
        PassageText::Speaker => "embed-speaker on",
        PassageText::Summary => "embed-speaker off",
    };
    let mut out = render_table(
        &format!("{rule}: default ranking (paired: this minus the headline's default ranking)"),
        &order(&other.ranking),
        ks,
        all_ks,
        Some(ranking),
    );
    let arms = other.ablation.as_deref().unwrap_or_default();
    let headline = ablation.unwrap_or_default();
    for arm in arms {
        let before = headline
            .iter()
            .find(|h| h.name == arm.name)
            .map(|h| &h.groups);
        out.push_str(&render_table(
            &format!(
                "{rule}: ablation arm {} (paired: this minus the headline's same arm)",
                arm.name
            ),
            &order(&arm.groups),
            ks,
            all_ks,
            before,
        ));
    }
    out
}
