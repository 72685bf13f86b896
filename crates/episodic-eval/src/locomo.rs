//! LoCoMo (Maharana et al., ACL 2024): turn-level retrieval of each question's evidence.
//!
//! Role: reads `locomo10.json` from a path (CC BY-NC 4.0: read in place, never copied),
//! turns every dialog turn into one event (tenant = `sample_id`, eventId = the turn id such
//! as `D3:12`, actor = speaker, occurredAt = the session date-time read as UTC plus the turn
//! index in seconds, sourceRefs = [`locomo/<sample_id>/session_<n>`, turn id], summary = the
//! text plus ` [shares <blip_caption>]`), asks every question scoped to its tenant and scores
//! recall@{5,10,25,50} and recall_all@k overall and per category.
//!
//! Invariants:
//! - sessions are the `session_<n>` keys holding a list, in numeric order (conv-26 has date
//!   keys without sessions);
//! - evidence is normalised as the data README says: split on `;`, `,` and whitespace,
//!   `D:11:26` → `D11:26`, `D30:05` → `D30:5`, `"D"` and ids of turns that do not exist are
//!   dropped; a question left without gold turns is counted as skipped, not scored;
//! - turn ids are compared in canonical `(session, turn)` form on both sides.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Value};
use time::{Date, Month, PrimitiveDateTime, Time};

use episodic::embed::PassageText;

use crate::metrics::{GroupReport, OVERALL};
use crate::{
    render_arms, render_passage_comparison, run_once, score_all, secs, Doc, EvalPartitions, Query,
    WallTimes,
};

/// Cut-offs scored.
pub const KS: [usize; 4] = [5, 10, 25, 50];

/// Category names by code (1..=5), as the data README lists them.
pub const CATEGORIES: [(u64, &str); 5] = [
    (1, "multi-hop"),
    (2, "temporal"),
    (3, "open-domain"),
    (4, "single-hop"),
    (5, "adversarial"),
];

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct Options {
    /// Path to `locomo10.json`.
    pub path: PathBuf,
    /// Only the first N conversations (all when `None`).
    pub conversations: Option<usize>,
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
    /// Write each turn with an opaque actor id (one per speaker and conversation) and the
    /// speaker's name in `actorNames`, as a product whose actor ids are not names would.
    pub opaque_actors: bool,
}

/// Dataset counts of a run.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Conversations evaluated.
    pub conversations: usize,
    /// Sessions ingested.
    pub sessions: usize,
    /// Turns ingested (one event each).
    pub turns: usize,
    /// Questions read.
    pub questions: usize,
    /// Questions scored (at least one gold turn after normalisation).
    pub scored: usize,
    /// Questions skipped for lack of gold turns.
    pub skipped: usize,
    /// Evidence ids dropped by normalisation (`"D"`, unknown turns, unparsable).
    pub dropped_evidence_ids: usize,
}

/// The LoCoMo report.
pub type Report = crate::DatasetReport<Counts>;

impl Report {
    /// A readable table of recall (%) per group.
    pub fn table(&self) -> String {
        let mut out = format!(
            "LoCoMo: {} conversations, {} turns, {} questions scored ({} skipped); \
             wall {:.1}s (ingest {:.1}s of which embedding {:.1}s, query {:.1}s)\n",
            self.counts.conversations,
            self.counts.turns,
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
            ordered_groups,
            &KS,
            &KS,
        ));
        if let Some(other) = &self.other_passage {
            out.push_str(&render_passage_comparison(
                other,
                &self.ranking,
                self.ablation.as_deref(),
                ordered_groups,
                &KS,
                &KS,
            ));
        }
        out
    }

    /// Recall@k of the default ranking (0..1) in `group`, if `k` was scored.
    pub fn recall(&self, group: &str, k: usize) -> Option<f64> {
        self.ranking.get(group)?.recall.get(&k).copied()
    }
}

/// Conversations before this index (1–5) are the development half, the rest (6–10) the
/// test half: knobs and signals are chosen on the first, the second is the headline.
pub const DEV_CONVERSATIONS: usize = 5;

/// The half a conversation (by its index in the file) belongs to.
fn half_of(conversation: usize) -> &'static str {
    if conversation < DEV_CONVERSATIONS {
        crate::DEV
    } else {
        crate::TEST
    }
}

/// `overall`, the test and development halves, then categories in code order.
fn ordered_groups(groups: &BTreeMap<String, GroupReport>) -> Vec<(String, &GroupReport)> {
    let mut names = vec![
        OVERALL.to_string(),
        crate::TEST.to_string(),
        crate::DEV.to_string(),
    ];
    names.extend(CATEGORIES.iter().map(|(_, n)| n.to_string()));
    names
        .into_iter()
        .filter_map(|n| groups.get(&n).map(|g| (n, g)))
        .collect()
}

/// A turn id in canonical form: `(session, turn)`.
type TurnKey = (u32, u32);

/// Parses `D3:12` (also `D:3:12`, `D3:012`) into `(3, 12)`.
fn parse_turn_id(s: &str) -> Option<TurnKey> {
    let rest = s.strip_prefix('D')?;
    let rest = rest.strip_prefix(':').unwrap_or(rest);
    let (a, b) = rest.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The gold turns of one question and how many evidence ids were dropped.
fn normalise_evidence(
    evidence: &[Value],
    turns: &HashMap<TurnKey, String>,
) -> (HashSet<String>, usize) {
    let mut gold = HashSet::new();
    let mut dropped = 0;
    for e in evidence {
        let Some(s) = e.as_str() else {
            dropped += 1;
            continue;
        };
        for token in s.split(|c: char| c == ';' || c == ',' || c.is_whitespace()) {
            if token.is_empty() {
                continue;
            }
            match parse_turn_id(token).and_then(|k| turns.get(&k)) {
                Some(id) => {
                    gold.insert(id.clone());
                }
                None => dropped += 1,
            }
        }
    }
    (gold, dropped)
}

/// Parses `1:56 pm on 8 May, 2023` as a UTC date-time.
fn parse_session_time(s: &str) -> Option<PrimitiveDateTime> {
    let (clock, date) = s.trim().split_once(" on ")?;
    let (hm, period) = clock.trim().split_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let (h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    if !(1..=12).contains(&h) {
        return None;
    }
    let hour = match period.to_ascii_lowercase().as_str() {
        "am" => h % 12,
        "pm" => h % 12 + 12,
        _ => return None,
    };
    let mut parts = date.split([' ', ',']).filter(|p| !p.is_empty());
    let day: u8 = parts.next()?.parse().ok()?;
    let month = parse_month(parts.next()?)?;
    let year: i32 = parts.next()?.parse().ok()?;
    let date = Date::from_calendar_date(year, month, day).ok()?;
    let time = Time::from_hms(hour, m, 0).ok()?;
    Some(PrimitiveDateTime::new(date, time))
}

fn parse_month(s: &str) -> Option<Month> {
    const NAMES: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    let i = NAMES.iter().position(|n| n.eq_ignore_ascii_case(s))?;
    Month::try_from(u8::try_from(i + 1).ok()?).ok()
}

/// One conversation's events and questions.
struct Conversation {
    docs: Vec<Doc>,
    questions: Vec<(Query, Option<&'static str>, HashSet<String>)>,
    sessions: usize,
    dropped: usize,
}

/// An actor id that names nobody: `user-` and 8 hex digits of a hash of the conversation and
/// the speaker (FNV-1a), stable across runs.
fn opaque_id(sample_id: &str, speaker: &str) -> String {
    let h = sample_id
        .bytes()
        .chain([0xff])
        .chain(speaker.bytes())
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
    format!("user-{h:08x}")
}

fn read_conversation(sample: &Value, opaque_actors: bool) -> anyhow::Result<Conversation> {
    let sample_id = sample
        .get("sample_id")
        .and_then(Value::as_str)
        .context("a sample without sample_id")?
        .to_string();
    let conv = sample
        .get("conversation")
        .and_then(Value::as_object)
        .with_context(|| format!("{sample_id}: no conversation object"))?;
    let mut sessions: Vec<(u32, &Vec<Value>)> = conv
        .iter()
        .filter_map(|(k, v)| {
            let n: u32 = k.strip_prefix("session_")?.parse().ok()?;
            Some((n, v.as_array()?))
        })
        .collect();
    sessions.sort_by_key(|(n, _)| *n);
    let mut docs = Vec::new();
    let mut turns: HashMap<TurnKey, String> = HashMap::new();
    for (n, session) in &sessions {
        let date_key = format!("session_{n}_date_time");
        let date_text = conv
            .get(&date_key)
            .and_then(Value::as_str)
            .with_context(|| format!("{sample_id}: no {date_key}"))?;
        let start = parse_session_time(date_text)
            .with_context(|| format!("{sample_id}: cannot parse {date_key} {date_text:?}"))?
            .assume_utc();
        for (i, turn) in session.iter().enumerate() {
            let field = |name: &str| {
                turn.get(name)
                    .and_then(Value::as_str)
                    .with_context(|| format!("{sample_id} session_{n} turn {i}: no {name}"))
            };
            let dia_id = field("dia_id")?;
            let speaker = field("speaker")?;
            let mut summary = field("text")?.to_string();
            if let Some(c) = turn.get("blip_caption").and_then(Value::as_str) {
                if !c.trim().is_empty() {
                    summary.push_str(&format!(" [shares {c}]"));
                }
            }
            let key = parse_turn_id(dia_id)
                .with_context(|| format!("{sample_id}: unparsable turn id {dia_id:?}"))?;
            if turns.insert(key, dia_id.to_string()).is_some() {
                bail!("{sample_id}: duplicate turn id {dia_id}");
            }
            let occurred = start + time::Duration::seconds(i as i64);
            let occurred = occurred
                .format(&time::format_description::well_known::Rfc3339)
                .context("formatting occurredAt")?;
            let (actor, names) = if opaque_actors {
                (opaque_id(&sample_id, speaker), vec![speaker.to_string()])
            } else {
                (speaker.to_string(), Vec::new())
            };
            let body = json!({
                "eventId": dia_id,
                "eventType": "tool_observed_event",
                "occurredAt": occurred,
                "actorId": actor,
                "actorNames": names,
                "summary": summary,
                "resourceRefs": [],
                "sourceRefs": [format!("locomo/{sample_id}/session_{n}"), dia_id],
                "sourceTrust": "user_provided",
                "confidence": "high",
                "privacyClass": "internal",
                "retention": {"deleteOnRequest": true},
            });
            docs.push(Doc {
                tenant: sample_id.clone(),
                event_id: dia_id.to_string(),
                body,
            });
        }
    }
    let mut questions = Vec::new();
    let mut dropped = 0;
    let qa = sample
        .get("qa")
        .and_then(Value::as_array)
        .with_context(|| format!("{sample_id}: no qa list"))?;
    for (i, q) in qa.iter().enumerate() {
        let text = q
            .get("question")
            .and_then(Value::as_str)
            .with_context(|| format!("{sample_id} qa {i}: no question"))?;
        let category = q
            .get("category")
            .and_then(Value::as_u64)
            .and_then(|c| CATEGORIES.iter().find(|(code, _)| *code == c))
            .map(|(_, name)| *name);
        let evidence = q
            .get("evidence")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        let (gold, d) = normalise_evidence(evidence, &turns);
        dropped += d;
        let query = Query {
            tenant: sample_id.clone(),
            text: text.to_string(),
        };
        questions.push((query, category, gold));
    }
    Ok(Conversation {
        docs,
        questions,
        sessions: sessions.len(),
        dropped,
    })
}

/// Runs the LoCoMo evaluation end to end.
pub fn evaluate(opts: &Options) -> anyhow::Result<Report> {
    let started = Instant::now();
    let raw = std::fs::read(&opts.path).with_context(|| {
        format!(
            "reading the LoCoMo data at {} (pass --path to locomo10.json)",
            opts.path.display()
        )
    })?;
    let samples: Vec<Value> =
        serde_json::from_slice(&raw).with_context(|| format!("parsing {}", opts.path.display()))?;
    let take = opts.conversations.unwrap_or(samples.len());
    let convs: Vec<Conversation> = samples
        .iter()
        .take(take)
        .map(|s| read_conversation(s, opts.opaque_actors))
        .collect::<anyhow::Result<_>>()?;
    let docs: Vec<Doc> = convs.iter().flat_map(|c| c.docs.iter().cloned()).collect();
    let max_summary = docs
        .iter()
        .filter_map(|d| d.body.get("summary").and_then(Value::as_str))
        .map(str::len)
        .max()
        .unwrap_or(0);

    let partitions = EvalPartitions::over(opts.partition_probe_share, docs.len());
    let queries: Vec<Query> = convs
        .iter()
        .flat_map(|c| c.questions.iter().map(|(q, _, _)| q.clone()))
        .collect();
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

    let golds = || {
        convs.iter().enumerate().flat_map(|(i, c)| {
            c.questions.iter().map(move |(_, category, gold)| {
                let mut groups = vec![half_of(i)];
                groups.extend(*category);
                (groups, gold)
            })
        })
    };
    let scored = score_all(&KS, &run.arms, golds(), &run.ranked);
    let other_passage =
        crate::compare_passage(&run, opts.compare_passage, run_under, &KS, golds())?;
    let counts = Counts {
        conversations: convs.len(),
        sessions: convs.iter().map(|c| c.sessions).sum(),
        turns: docs.len(),
        questions: queries.len(),
        dropped_evidence_ids: convs.iter().map(|c| c.dropped).sum(),
        scored: scored.scored,
        skipped: scored.skipped,
    };
    Ok(Report {
        dataset: "locomo".to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_ids_and_evidence_normalise() {
        assert_eq!(parse_turn_id("D3:12"), Some((3, 12)));
        assert_eq!(parse_turn_id("D:11:26"), Some((11, 26)));
        assert_eq!(parse_turn_id("D30:05"), Some((30, 5)));
        assert_eq!(parse_turn_id("D"), None);
        let turns: HashMap<TurnKey, String> =
            [((2, 3), "D2:3"), ((5, 17), "D5:17"), ((30, 5), "D30:5")]
                .into_iter()
                .map(|(k, v)| (k, v.to_string()))
                .collect();
        let ev = vec![json!("D2:3; D5:17"), json!("D"), json!("D30:05 D4:36")];
        let (gold, dropped) = normalise_evidence(&ev, &turns);
        let mut g: Vec<_> = gold.into_iter().collect();
        g.sort();
        assert_eq!(g, vec!["D2:3", "D30:5", "D5:17"]);
        assert_eq!(dropped, 2);
    }

    #[test]
    fn session_times_parse_as_utc() {
        let t = parse_session_time("1:56 pm on 8 May, 2023")
            .unwrap()
            .assume_utc();
        assert_eq!(t.unix_timestamp(), 1_683_554_160);
        let t = parse_session_time("12:04 am on 1 January, 2024").unwrap();
        assert_eq!((t.hour(), t.minute()), (0, 4));
        assert!(parse_session_time("25:00 pm on 1 May, 2023").is_none());
    }

    #[test]
    fn opaque_ids_name_nobody_and_stay_apart() {
        let a = opaque_id("conv-26", "Caroline");
        assert_eq!(a, opaque_id("conv-26", "Caroline"), "stable across runs");
        assert_ne!(a, opaque_id("conv-26", "Melanie"));
        assert_ne!(a, opaque_id("conv-30", "Caroline"));
        assert!(a.starts_with("user-") && a.len() == 13, "{a}");
        assert!(!a.to_lowercase().contains("caroline"));
    }
}
