//! MADial-Bench, English (He et al., 2024): memory retrieval for a dialogue.
//!
//! Role: reads `en/MADial-Bench-en-memory.jsonl`, `en/MADial-Bench-en-dialogue.jsonl` and
//! (for the user of each memory, which the English file lacks)
//! `zh/MADial-Bench-zh-memory.jsonl` under a directory given on the command line; stores one
//! event per memory (tenant = `madial-user-<id>`, eventId = `m<id>`, occurredAt = `time` at
//! midnight UTC, summary = `event`), queries with the dialogue before its first test turn,
//! scoped to the dialogue's user, and scores recall@{1,3,5,10}.
//!
//! Invariants:
//! - every English memory has a user id from the Chinese file (same ids), else the run fails;
//! - the query is the dialogue lines strictly between `<BOD>` and the first test turn, each
//!   trimmed, joined by newlines;
//! - relevant ids that name no memory are dropped (none do in the published files).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Value};

use episodic::embed::PassageText;

use crate::metrics::{GroupReport, OVERALL};
use crate::{
    render_arms, render_passage_comparison, run_once, score_all, secs, Doc, EvalPartitions, Query,
    WallTimes,
};

/// Cut-offs scored.
pub const KS: [usize; 4] = [1, 3, 5, 10];

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `madial_bench` directory (holding `en/` and `zh/`).
    pub path: PathBuf,
    /// The models directory.
    pub model_dir: PathBuf,
    /// Also score the ablation arms.
    pub ablation: bool,
    /// Partitioned recall probing this share of the lists (default: exact recall).
    pub partition_probe_share: Option<f64>,
    /// Where to write every question's rankings (see [`crate::write_rankings`]).
    pub rankings: Option<PathBuf>,
    /// The passage rule events are embedded under (`None`: the engine's default).
    pub passage: Option<PassageText>,
    /// Also ingest under the other passage rule and compare ([`crate::PassageComparison`]).
    pub compare_passage: bool,
}

/// Dataset counts of a run.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Memories ingested (one event each).
    pub memories: usize,
    /// Memories per user id.
    pub memories_per_user: BTreeMap<u64, usize>,
    /// Dialogues read.
    pub dialogues: usize,
    /// Dialogues scored (at least one relevant memory).
    pub scored: usize,
    /// Dialogues skipped for lack of relevant memories.
    pub skipped: usize,
}

/// The MADial-Bench report.
pub type Report = crate::DatasetReport<Counts>;

impl Report {
    /// A readable table of recall (%) per group.
    pub fn table(&self) -> String {
        let mut out = format!(
            "MADial-Bench (en): {} memories, {} dialogues scored ({} skipped); \
             wall {:.1}s (ingest {:.1}s of which embedding {:.1}s, query {:.1}s)\n",
            self.counts.memories,
            self.counts.scored,
            self.counts.skipped,
            self.wall_seconds.total,
            self.wall_seconds.ingest,
            self.wall_seconds.ingest_embed,
            self.wall_seconds.query,
        );
        out.push_str(&render_arms(
            &self.ranking,
            self.ablation.as_deref(),
            overall_first,
            &KS,
            &[5, 10],
        ));
        if let Some(other) = &self.other_passage {
            out.push_str(&render_passage_comparison(
                other,
                &self.ranking,
                self.ablation.as_deref(),
                overall_first,
                &KS,
                &[5, 10],
            ));
        }
        out
    }
}

/// The half of the dialogue on line `index` (0-based) of `count`: the first half of the
/// file's dialogues (ids 1–80 of 160) is the development half, the rest the test half.
fn half_of(index: usize, count: usize) -> &'static str {
    if index < count.div_ceil(2) {
        crate::DEV
    } else {
        crate::TEST
    }
}

/// `overall`, the test and development halves, then users in name order.
fn overall_first(groups: &BTreeMap<String, GroupReport>) -> Vec<(String, &GroupReport)> {
    let first = [OVERALL, crate::TEST, crate::DEV];
    let heads = first
        .iter()
        .filter_map(|n| groups.get(*n).map(|g| ((*n).to_string(), g)));
    let users = groups
        .iter()
        .filter(|(n, _)| !first.contains(&n.as_str()))
        .map(|(n, g)| (n.clone(), g));
    heads.chain(users).collect()
}

/// Reads a JSON-lines file.
fn read_jsonl(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{} line {}", path.display(), i + 1))
        })
        .collect()
}

/// `(id, fields)` of every memory line `{"<id>": {...}}`, in file order.
fn memories(lines: &[Value]) -> anyhow::Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    for line in lines {
        let obj = line.as_object().context("a memory line is not an object")?;
        for (id, fields) in obj {
            out.push((id.clone(), fields.clone()));
        }
    }
    Ok(out)
}

/// Runs the MADial-Bench (English) evaluation end to end.
pub fn evaluate(opts: &Options) -> anyhow::Result<Report> {
    let started = Instant::now();
    let en_mem = memories(&read_jsonl(
        &opts.path.join("en").join("MADial-Bench-en-memory.jsonl"),
    )?)?;
    let zh_mem = memories(&read_jsonl(
        &opts.path.join("zh").join("MADial-Bench-zh-memory.jsonl"),
    )?)?;
    let dialogues = read_jsonl(&opts.path.join("en").join("MADial-Bench-en-dialogue.jsonl"))?;
    let users: HashMap<String, u64> = zh_mem
        .iter()
        .filter_map(|(id, f)| Some((id.clone(), f.get("user-id")?.as_u64()?)))
        .collect();

    let mut counts = Counts::default();
    let mut docs = Vec::new();
    let mut known: HashSet<String> = HashSet::new();
    for (id, f) in &en_mem {
        let user = *users
            .get(id)
            .with_context(|| format!("memory {id} has no user id in the zh memory file"))?;
        let date = f
            .get("time")
            .and_then(Value::as_str)
            .with_context(|| format!("memory {id}: no time"))?;
        let event = f
            .get("event")
            .and_then(Value::as_str)
            .with_context(|| format!("memory {id}: no event"))?;
        let event_id = format!("m{id}");
        let body = json!({
            "eventId": event_id,
            "eventType": "tool_observed_event",
            "occurredAt": format!("{date}T00:00:00Z"),
            "actorId": format!("user-{user}"),
            "summary": event,
            "resourceRefs": [],
            "sourceRefs": [format!("madial/en/memory/{id}")],
            "sourceTrust": "user_provided",
            "confidence": "high",
            "privacyClass": "internal",
            "retention": {"deleteOnRequest": true},
        });
        *counts.memories_per_user.entry(user).or_default() += 1;
        if !known.insert(format!("{user}/{event_id}")) {
            bail!("duplicate memory id {id}");
        }
        docs.push(Doc {
            tenant: format!("madial-user-{user}"),
            event_id,
            body,
        });
    }
    counts.memories = docs.len();
    let max_summary = en_mem
        .iter()
        .filter_map(|(_, f)| f.get("event").and_then(Value::as_str))
        .map(str::len)
        .max()
        .unwrap_or(0);

    let mut queries = Vec::new();
    let mut golds = Vec::new();
    for (i, d) in dialogues.iter().enumerate() {
        let user = d
            .get("user-id")
            .and_then(Value::as_u64)
            .with_context(|| format!("dialogue {i}: no user-id"))?;
        let lines: Vec<&str> = d
            .get("dialogue")
            .and_then(Value::as_array)
            .with_context(|| format!("dialogue {i}: no dialogue"))?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let first_test = d
            .get("test-turn")
            .and_then(Value::as_array)
            .and_then(|t| t.iter().filter_map(Value::as_u64).min())
            .with_context(|| format!("dialogue {i}: no test-turn"))?;
        let end = usize::try_from(first_test)?.min(lines.len());
        let text = lines[..end]
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && *l != "<BOD>")
            .collect::<Vec<_>>()
            .join("\n");
        if text.is_empty() {
            bail!("dialogue {i}: nothing before the first test turn");
        }
        let gold: HashSet<String> = d
            .get("relevant-id")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .filter_map(|v| v.as_u64().map(|n| format!("m{n}")))
            .filter(|id| known.contains(&format!("{user}/{id}")))
            .collect();
        queries.push(Query {
            tenant: format!("madial-user-{user}"),
            text,
        });
        golds.push((format!("user-{user}"), gold));
    }
    counts.dialogues = queries.len();

    let partitions = EvalPartitions::over(opts.partition_probe_share, docs.len());
    let read = secs(started);
    let run_under = |passage| {
        run_once(
            &opts.model_dir,
            max_summary,
            opts.ablation,
            partitions,
            passage,
            &docs,
            &queries,
        )
    };
    let run = run_under(opts.passage)?;
    crate::write_rankings(opts.rankings.as_deref(), &queries, &run.ranked)?;

    let gold_groups = || {
        golds
            .iter()
            .enumerate()
            .map(|(i, (g, gold))| (vec![half_of(i, golds.len()), g.as_str()], gold))
    };
    let scored = score_all(&KS, &run.arms, gold_groups(), &run.ranked);
    counts.scored = scored.scored;
    counts.skipped = scored.skipped;
    let other_passage =
        crate::compare_passage(&run, opts.compare_passage, run_under, &KS, gold_groups())?;
    Ok(Report {
        dataset: "madial-en".to_string(),
        path: opts.path.display().to_string(),
        config: run.config,
        counts,
        ranking: scored.ranking,
        ablation: scored.ablation,
        other_passage,
        wall_seconds: WallTimes {
            setup: read + run.setup,
            ingest: run.ingest,
            ingest_embed: run.ingest_embed,
            query: run.query,
            total: secs(started),
        },
    })
}
