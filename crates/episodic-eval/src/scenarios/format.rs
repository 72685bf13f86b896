//! The scenario file format and its loader.
//!
//! Role: reads `data/scenarios/*.jsonl` (files in name order) into [`Scenario`]s. A file is a
//! sequence of JSON objects, one per line; blank lines and lines starting with `#` (the
//! story's narration) are skipped. A `{"scenario": ...}` line opens a scenario; every
//! following line is one step of it, named by its single operation key (`write`, `observe`,
//! `review`, `delete`, `erase`, `compact`, `recall`, `timeline`, `get`) next to its labels.
//!
//! Invariants:
//! - every error names the file and the 1-based line (`path:line: message`), including
//!   semantic ones (an unknown tenant, a label naming an event never written);
//! - unknown keys are rejected at every level, so a misspelt label can never be silently
//!   ignored;
//! - a scenario declares two or more tenants and uses no other; scenario ids are unique
//!   across the suite; event names are unique per tenant within a scenario;
//! - loading is pure: nothing is embedded or written here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use serde_json::Value;

use episodic::model::{Confidence, PrivacyClass, SourceTrust, Timestamp};
use episodic::policy::WritePolicy;
use episodic::retrieve::Scope;

/// One scenario: a header and its steps, in file order.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Unique id, e.g. `support-correction-01`.
    pub id: String,
    /// Family (which seed bullets it exercises).
    pub family: String,
    /// One-line story title.
    pub title: String,
    /// The story's present: every time is shifted so that this maps to the real clock.
    pub now: Timestamp,
    /// Tenants of the story (two or more).
    pub tenants: Vec<String>,
    /// Write policy in force, when not the default (the seed's rules, `v1`).
    pub policy: Option<WritePolicy>,
    /// File it came from.
    pub file: PathBuf,
    /// Line of its header.
    pub line: usize,
    /// Its steps.
    pub steps: Vec<Step>,
}

/// One step and where it was written.
#[derive(Debug, Clone)]
pub struct Step {
    /// 1-based line in the file.
    pub line: usize,
    /// What to do and what to expect.
    pub op: Op,
}

/// The operations a step can perform.
#[derive(Debug, Clone)]
pub enum Op {
    /// A direct event write (`POST /v1/events`).
    Write(WriteStep),
    /// A raw interaction through the observer (`POST /v1/observe`).
    Observe(ObserveStep),
    /// A reviewer's decision on a pending event.
    Review(ReviewStep),
    /// Deletion of one event by an operator.
    Delete(Target),
    /// Erasure of every event of an actor.
    Erase(EraseStep),
    /// Physical purge of deleted content.
    Compact(TenantOnly),
    /// A scored recall.
    Recall(RecallStep),
    /// A timeline listing with an expected order.
    Timeline(TimelineStep),
    /// A single-event read.
    Get(GetStep),
}

/// Which actors a key may act for (absent: every actor of the tenant).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrantSpec {
    /// The actors the key is limited to.
    pub actors: Vec<String>,
}

/// An event as the story tells it; the runner turns it into a wire body.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EventSpec {
    /// Tenant whose key writes it.
    pub tenant: String,
    /// Scenario-local event id (sent as `eventId`).
    pub id: String,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// `occurredAt` in story time.
    pub at: String,
    /// Actor.
    pub actor: String,
    /// Summary.
    pub summary: String,
    /// Source references.
    pub source: Vec<String>,
    /// Source trust.
    pub trust: SourceTrust,
    /// Confidence (default `high`).
    #[serde(default)]
    pub confidence: Option<Confidence>,
    /// Privacy class (default `internal`).
    #[serde(default)]
    pub privacy: Option<PrivacyClass>,
    /// Resource references.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Project.
    #[serde(default)]
    pub project: Option<String>,
    /// Expiry in story time.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// `retention.deleteOnRequest` (default true).
    #[serde(default)]
    pub delete_on_request: Option<bool>,
    /// Events this one corrects.
    #[serde(default)]
    pub supersedes: Vec<String>,
    /// How the correction was made.
    #[serde(default)]
    pub correction_path: Option<String>,
    /// A `tenantId` to put in the body (a spoofing attempt when it differs from `tenant`).
    #[serde(default)]
    pub body_tenant: Option<String>,
}

/// The expected outcome of a direct write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteExpect {
    /// Stored and retrievable.
    Allow,
    /// Stored, pending review.
    Review,
    /// Refused by the write policy.
    Deny,
    /// Refused before the policy (validation, forbidden actor, tenant mismatch, conflict).
    Reject,
}

/// Why an item must never become a trusted, retrievable memory as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnsafeKind {
    /// A secret or credential.
    Secret,
    /// Instruction-like text (stored only with a content warning).
    Instruction,
    /// Content from an untrusted source (stored only through review).
    Untrusted,
    /// Special-category data (stored only with an expiry).
    Sensitive,
}

/// A direct write.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteStep {
    /// The event.
    pub write: EventSpec,
    /// Expected decision (default `allow`).
    #[serde(default = "default_allow")]
    pub expect: WriteExpect,
    /// The key's actor limits.
    #[serde(default)]
    pub grant: Option<GrantSpec>,
    /// Unsafe-content label.
    #[serde(default, rename = "unsafe")]
    pub unsafe_kind: Option<UnsafeKind>,
    /// The secret itself (with `unsafe: secret`): unsafe if a stored summary still holds it.
    #[serde(default)]
    pub secret: Option<String>,
}

fn default_allow() -> WriteExpect {
    WriteExpect::Allow
}

/// A raw interaction as the story tells it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InteractionSpec {
    /// Tenant whose key sends it.
    pub tenant: String,
    /// Actor it would be attributed to.
    pub actor: String,
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// What was said or returned.
    pub text: String,
    /// When, in story time.
    pub at: String,
    /// Source references.
    pub source: Vec<String>,
    /// Source trust.
    pub trust: SourceTrust,
    /// Project.
    #[serde(default)]
    pub project: Option<String>,
    /// Resource references.
    #[serde(default)]
    pub resources: Vec<String>,
}

/// The label of an observed interaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObserveExpect {
    /// Worth remembering.
    Store,
    /// Routine chatter (or something that must not be stored).
    Ignore,
}

/// An observed interaction.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObserveStep {
    /// The interaction.
    pub observe: InteractionSpec,
    /// Store or ignore.
    pub expect: ObserveExpect,
    /// Name for the stored event (required for `store`), used by later labels.
    #[serde(default, rename = "as")]
    pub name: Option<String>,
    /// Expected event type of the candidate.
    #[serde(default)]
    pub event_type: Option<String>,
    /// Unsafe-content label.
    #[serde(default, rename = "unsafe")]
    pub unsafe_kind: Option<UnsafeKind>,
    /// The secret itself (with `unsafe: secret`): unsafe if a stored summary still holds it.
    #[serde(default)]
    pub secret: Option<String>,
}

/// A review decision.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewStep {
    /// The pending event and the decision.
    pub review: ReviewTarget,
}

/// What is reviewed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewTarget {
    /// Tenant.
    pub tenant: String,
    /// Event name.
    pub id: String,
    /// Approve (true) or reject (false).
    pub approve: bool,
}

/// One event of one tenant.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Target {
    /// Tenant.
    pub tenant: String,
    /// Event name.
    pub id: String,
}

/// A tenant.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TenantOnly {
    /// Tenant.
    pub tenant: String,
}

/// An erasure request.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EraseStep {
    /// Tenant and actor.
    pub erase: EraseTarget,
    /// Events that must be erased.
    pub erased: Vec<String>,
    /// Events that must be kept (retention forbids deletion on request).
    #[serde(default)]
    pub kept: Vec<String>,
}

/// Whose events are erased.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EraseTarget {
    /// Tenant.
    pub tenant: String,
    /// Actor.
    pub actor: String,
}

/// A recall query.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecallQuery {
    /// Tenant whose key asks.
    pub tenant: String,
    /// Query text.
    pub query: String,
    /// Scope filters (wire format, story times).
    #[serde(default)]
    pub scope: Option<Value>,
    /// Results requested (default 10).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Also return superseded events.
    #[serde(default)]
    pub include_superseded: bool,
}

/// A recall and its labels.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecallStep {
    /// The query.
    pub recall: RecallQuery,
    /// Relevant events (scored by recall@k and nDCG@k).
    #[serde(default)]
    pub expect: Vec<String>,
    /// Events that must not be returned because newer evidence replaced them.
    #[serde(default)]
    pub stale: Vec<String>,
    /// The key's actor limits.
    #[serde(default)]
    pub grant: Option<GrantSpec>,
}

/// A timeline query.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineQuerySpec {
    /// Tenant whose key asks.
    pub tenant: String,
    /// Only this actor.
    #[serde(default)]
    pub actor: Option<String>,
    /// Only this project.
    #[serde(default)]
    pub project: Option<String>,
    /// Only this event type.
    #[serde(default, rename = "type")]
    pub event_type: Option<String>,
    /// Inclusive start (story time).
    #[serde(default)]
    pub from: Option<String>,
    /// Exclusive end (story time).
    #[serde(default)]
    pub to: Option<String>,
    /// Also list superseded events.
    #[serde(default)]
    pub include_superseded: bool,
}

/// A timeline and its expected order.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimelineStep {
    /// The query.
    pub timeline: TimelineQuerySpec,
    /// Exactly the events expected, oldest `occurredAt` first.
    pub expect_order: Vec<String>,
    /// The key's actor limits.
    #[serde(default)]
    pub grant: Option<GrantSpec>,
}

/// A single-event read.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GetStep {
    /// Which event.
    pub get: Target,
    /// `found` or `missing`.
    pub expect: GetExpect,
    /// Expected status when found.
    #[serde(default)]
    pub status: Option<String>,
}

/// Whether a get should find the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GetExpect {
    /// The event is readable.
    Found,
    /// 404.
    Missing,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Header {
    scenario: String,
    family: String,
    title: String,
    now: String,
    tenants: Vec<String>,
    #[serde(default)]
    policy: Option<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct DeleteLine {
    delete: Target,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CompactLine {
    compact: TenantOnly,
}

const OPS: [&str; 10] = [
    "scenario", "write", "observe", "review", "delete", "erase", "compact", "recall", "timeline",
    "get",
];

/// Loads every `*.jsonl` file of `path` (or `path` itself when it is a file), in name order.
pub fn load(path: &Path) -> anyhow::Result<Vec<Scenario>> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    if files.is_empty() {
        bail!("no *.jsonl scenario files in {}", path.display());
    }
    let mut all = Vec::new();
    for file in &files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        all.extend(parse_file(file, &text)?);
    }
    let mut seen = BTreeSet::new();
    for s in &all {
        if !seen.insert(s.id.clone()) {
            bail!(
                "{}:{}: scenario id {} is used twice",
                s.file.display(),
                s.line,
                s.id
            );
        }
    }
    Ok(all)
}

/// Parses one file's text (`file` is only used in messages).
pub fn parse_file(file: &Path, text: &str) -> anyhow::Result<Vec<Scenario>> {
    let mut out: Vec<Scenario> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let at = |e: anyhow::Error| anyhow!("{}:{line}: {e:#}", file.display());
        let value: Value = serde_json::from_str(trimmed)
            .map_err(|e| anyhow!("{}:{line}: not a JSON object: {e}", file.display()))?;
        let op = op_of(&value).map_err(at)?;
        if op == "scenario" {
            if let Some(prev) = out.last() {
                check_scenario(prev)?;
            }
            out.push(header(file, line, value).map_err(at)?);
            continue;
        }
        let Some(current) = out.last_mut() else {
            bail!(
                "{}:{line}: a `{op}` step before any `scenario` line",
                file.display()
            );
        };
        let op = step(op, value).map_err(at)?;
        current.steps.push(Step { line, op });
    }
    if let Some(last) = out.last() {
        check_scenario(last)?;
    }
    Ok(out)
}

fn op_of(value: &Value) -> anyhow::Result<&'static str> {
    let Value::Object(obj) = value else {
        bail!("each line must be a JSON object");
    };
    let found: Vec<&'static str> = OPS
        .iter()
        .copied()
        .filter(|k| obj.contains_key(*k))
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => bail!("no operation key (one of {})", OPS.join(", ")),
        many => bail!("several operation keys: {}", many.join(", ")),
    }
}

fn parse<T: serde::de::DeserializeOwned>(value: Value, what: &str) -> anyhow::Result<T> {
    serde_json::from_value(value).map_err(|e| anyhow!("invalid `{what}` line: {e}"))
}

fn header(file: &Path, line: usize, value: Value) -> anyhow::Result<Scenario> {
    let h: Header = parse(value, "scenario")?;
    let now = Timestamp::parse(&h.now)
        .ok_or_else(|| anyhow!("now: {} is not an RFC 3339 date-time", h.now))?;
    if h.tenants.len() < 2 {
        bail!("a scenario needs at least two tenants");
    }
    let policy = match h.policy {
        None => None,
        Some(p) => {
            Some(WritePolicy::from_json(p.to_string().as_bytes()).map_err(|e| anyhow!("{e}"))?)
        }
    };
    if h.scenario.trim().is_empty() || h.family.trim().is_empty() {
        bail!("scenario and family must not be empty");
    }
    Ok(Scenario {
        id: h.scenario,
        family: h.family,
        title: h.title,
        now,
        tenants: h.tenants,
        policy,
        file: file.to_path_buf(),
        line,
        steps: Vec::new(),
    })
}

fn step(op: &str, value: Value) -> anyhow::Result<Op> {
    Ok(match op {
        "write" => Op::Write(parse(value, op)?),
        "observe" => Op::Observe(parse(value, op)?),
        "review" => Op::Review(parse(value, op)?),
        "delete" => Op::Delete(parse::<DeleteLine>(value, op)?.delete),
        "erase" => Op::Erase(parse(value, op)?),
        "compact" => Op::Compact(parse::<CompactLine>(value, op)?.compact),
        "recall" => Op::Recall(parse(value, op)?),
        "timeline" => Op::Timeline(parse(value, op)?),
        "get" => Op::Get(parse(value, op)?),
        other => bail!("unknown operation {other}"),
    })
}

/// Checks the cross-line rules of one scenario; errors name the offending line.
fn check_scenario(s: &Scenario) -> anyhow::Result<()> {
    let mut names: BTreeMap<(String, String), usize> = BTreeMap::new();
    let tenants: BTreeSet<&str> = s.tenants.iter().map(String::as_str).collect();
    let fail = |line: usize, msg: String| anyhow!("{}:{line}: {msg}", s.file.display());
    let mut used_tenants = BTreeSet::new();
    for st in &s.steps {
        let tenant = step_tenant(&st.op);
        if !tenants.contains(tenant) {
            return Err(fail(
                st.line,
                format!("tenant {tenant} is not declared by scenario {}", s.id),
            ));
        }
        used_tenants.insert(tenant.to_string());
        check_times(&st.op).map_err(|e| fail(st.line, e))?;
        for name in defined(&st.op) {
            if names
                .insert((tenant.to_string(), name.clone()), st.line)
                .is_some()
            {
                return Err(fail(
                    st.line,
                    format!("event {name} is defined twice in tenant {tenant}"),
                ));
            }
        }
        for name in referenced(&st.op) {
            if !names.contains_key(&(tenant.to_string(), name.clone())) {
                return Err(fail(
                    st.line,
                    format!("event {name} is not written before this line in tenant {tenant}"),
                ));
            }
        }
        let secret = match &st.op {
            Op::Write(w) => Some((w.unsafe_kind, w.secret.is_some())),
            Op::Observe(o) => Some((o.unsafe_kind, o.secret.is_some())),
            Op::Review(_)
            | Op::Delete(_)
            | Op::Erase(_)
            | Op::Compact(_)
            | Op::Recall(_)
            | Op::Timeline(_)
            | Op::Get(_) => None,
        };
        if let Some((kind, has)) = secret {
            if (kind == Some(UnsafeKind::Secret)) != has {
                return Err(fail(
                    st.line,
                    "`secret` is required with, and only with, `unsafe: secret`".into(),
                ));
            }
        }
        if let Op::Observe(o) = &st.op {
            if o.expect == ObserveExpect::Store && o.name.is_none() {
                return Err(fail(st.line, "a `store` observation needs `as`".into()));
            }
        }
    }
    if used_tenants.len() < 2 {
        return Err(fail(
            s.line,
            format!("scenario {} must use at least two tenants", s.id),
        ));
    }
    if !s.steps.iter().any(|st| matches!(st.op, Op::Recall(_))) {
        return Err(fail(s.line, format!("scenario {} has no recall", s.id)));
    }
    Ok(())
}

fn step_tenant(op: &Op) -> &str {
    match op {
        Op::Write(w) => &w.write.tenant,
        Op::Observe(o) => &o.observe.tenant,
        Op::Review(r) => &r.review.tenant,
        Op::Delete(t) => &t.tenant,
        Op::Erase(e) => &e.erase.tenant,
        Op::Compact(t) => &t.tenant,
        Op::Recall(r) => &r.recall.tenant,
        Op::Timeline(t) => &t.timeline.tenant,
        Op::Get(g) => &g.get.tenant,
    }
}

fn defined(op: &Op) -> Vec<String> {
    match op {
        Op::Write(w) => vec![w.write.id.clone()],
        Op::Observe(o) => o.name.iter().cloned().collect(),
        Op::Review(_)
        | Op::Delete(_)
        | Op::Erase(_)
        | Op::Compact(_)
        | Op::Recall(_)
        | Op::Timeline(_)
        | Op::Get(_) => Vec::new(),
    }
}

fn referenced(op: &Op) -> Vec<String> {
    match op {
        Op::Write(w) => w.write.supersedes.clone(),
        Op::Observe(_) | Op::Compact(_) => Vec::new(),
        Op::Review(r) => vec![r.review.id.clone()],
        Op::Delete(t) => vec![t.id.clone()],
        Op::Erase(e) => e.erased.iter().chain(&e.kept).cloned().collect(),
        Op::Recall(r) => r.expect.iter().chain(&r.stale).cloned().collect(),
        Op::Timeline(t) => t.expect_order.clone(),
        Op::Get(g) => vec![g.get.id.clone()],
    }
}

fn check_times(op: &Op) -> Result<(), String> {
    let time = |name: &str, s: &str| -> Result<(), String> {
        Timestamp::parse(s)
            .map(|_| ())
            .ok_or_else(|| format!("{name}: {s} is not an RFC 3339 date-time"))
    };
    match op {
        Op::Write(w) => {
            time("at", &w.write.at)?;
            if let Some(e) = &w.write.expires_at {
                time("expiresAt", e)?;
            }
        }
        Op::Observe(o) => time("at", &o.observe.at)?,
        Op::Timeline(t) => {
            for s in t.timeline.from.iter().chain(&t.timeline.to) {
                time("from/to", s)?;
            }
        }
        Op::Recall(r) => {
            if let Some(scope) = &r.recall.scope {
                serde_json::from_value::<Scope>(scope.clone())
                    .map_err(|e| format!("scope: {e}"))?;
            }
        }
        Op::Review(_) | Op::Delete(_) | Op::Erase(_) | Op::Compact(_) | Op::Get(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
# a comment
{"scenario": "s1", "family": "f", "title": "t", "now": "2026-06-30T12:00:00Z", "tenants": ["a", "b"]}
{"write": {"tenant": "a", "id": "e1", "type": "task_milestone", "at": "2026-06-01T10:00:00Z", "actor": "u", "summary": "Shipped", "source": ["s"], "trust": "tool_result"}}
{"recall": {"tenant": "b", "query": "shipped"}, "expect": []}
"#;

    #[test]
    fn parses_a_scenario() {
        let s = parse_file(Path::new("x.jsonl"), GOOD).expect("valid");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].steps.len(), 2);
        assert_eq!(s[0].steps[0].line, 4);
    }

    #[test]
    fn errors_name_file_and_line() {
        let bad = GOOD.replace("\"actor\": \"u\"", "\"actr\": \"u\"");
        let err = parse_file(Path::new("fam.jsonl"), &bad).expect_err("invalid");
        let msg = format!("{err:#}");
        assert!(msg.starts_with("fam.jsonl:4:"), "{msg}");
        assert!(msg.contains("actr"), "{msg}");
        let dangling = GOOD.replace("\"expect\": []", "\"expect\": [\"e9\"]");
        let msg = format!(
            "{:#}",
            parse_file(Path::new("f.jsonl"), &dangling).expect_err("x")
        );
        assert!(msg.starts_with("f.jsonl:5:") && msg.contains("e9"), "{msg}");
    }
}
