//! Offline evaluation of the observer on a labelled JSONL set (`data/observe/`).
//!
//! Invariants: the eval runs exactly the classification the HTTP route runs ([`prepare`],
//! one embedding of the summary, [`Observer::classify`]); nothing is written anywhere;
//! precision is over items the observer stored, recall over items labelled `store`, and
//! type / privacy accuracy over items both labelled and predicted `store`. An item without
//! a `privacyClass` label is expected to be `internal`.

use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

use episodic::embed::{Embedder, PassageText};
use episodic::model::PrivacyClass;
use episodic::observe::{prepare, Observer, Role};

/// One labelled interaction.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Labelled {
    /// The interaction text.
    pub text: String,
    /// Who said it.
    #[serde(deserialize_with = "role")]
    pub role: Role,
    /// `store` or `ignore`.
    pub expect: Expect,
    /// Expected event type (store items).
    #[serde(default)]
    pub event_type: Option<String>,
    /// Expected privacy class (store items; default `internal`).
    #[serde(default)]
    pub privacy_class: Option<PrivacyClass>,
}

/// The label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Worth remembering.
    Store,
    /// Routine chatter or content-free.
    Ignore,
}

/// A [`Role`] from its wire string.
fn role<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Role, D::Error> {
    let s = String::deserialize(d)?;
    Role::ALL
        .into_iter()
        .find(|r| r.as_str() == s)
        .ok_or_else(|| serde::de::Error::custom(format!("unknown role {s}")))
}

/// One item the observer got wrong.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Miss {
    /// Line number (1-based).
    pub line: usize,
    /// The text.
    pub text: String,
    /// `decision`, `eventType` or `privacyClass`.
    pub kind: &'static str,
    /// The label.
    pub expected: String,
    /// What the observer said.
    pub got: String,
}

/// Eval figures.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Items read.
    pub items: usize,
    /// Items labelled `store`.
    pub labelled_store: usize,
    /// Items the observer stored.
    pub predicted_store: usize,
    /// Items labelled and predicted `store`.
    pub true_store: usize,
    /// true_store / predicted_store.
    pub precision: f64,
    /// true_store / labelled_store.
    pub recall: f64,
    /// Event-type accuracy on true_store items that carry a type label.
    pub type_accuracy: f64,
    /// Privacy-class accuracy on true_store items.
    pub privacy_accuracy: f64,
    /// The embedding model used.
    pub model: String,
    /// Every wrong decision, type or privacy class.
    pub misses: Vec<Miss>,
}

/// Reads a labelled JSONL file (blank lines skipped).
pub fn load(path: &Path) -> anyhow::Result<Vec<(usize, Labelled)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: Labelled = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: invalid item", path.display(), i + 1))?;
        out.push((i + 1, item));
    }
    Ok(out)
}

#[derive(Default)]
struct Counts {
    labelled: usize,
    predicted: usize,
    both: usize,
    typed: usize,
    type_ok: usize,
    privacy_ok: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        a as f64 / b as f64
    }
}

/// Runs the observer over `items`, embedding summaries in batches. With `speaker_actor`,
/// each summary is embedded as that actor's passage under the speaker rule
/// ([`PassageText::Speaker`]), the vector such a write stores and classifies with.
pub fn evaluate(
    observer: &Observer,
    embedder: &dyn Embedder,
    items: &[(usize, Labelled)],
    max_summary_bytes: usize,
    speaker_actor: Option<&str>,
) -> anyhow::Result<Report> {
    let prepared: Vec<_> = items
        .iter()
        .map(|(_, it)| prepare(&it.text, max_summary_bytes))
        .collect();
    let passages: Vec<String> = prepared
        .iter()
        .map(|p| match speaker_actor {
            Some(actor) => PassageText::Speaker.text(actor, &p.summary),
            None => p.summary.clone(),
        })
        .collect();
    let mut vectors = Vec::with_capacity(items.len());
    for chunk in passages.chunks(64) {
        let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
        vectors.extend(embedder.embed(&texts)?);
    }
    let mut c = Counts::default();
    let mut misses = Vec::new();
    for (((line, item), p), v) in items.iter().zip(&prepared).zip(&vectors) {
        let got = observer.classify(p, item.role, v);
        let stored = got.verdict.ignore.is_none();
        let labelled = item.expect == Expect::Store;
        c.labelled += usize::from(labelled);
        c.predicted += usize::from(stored);
        let miss = |kind, expected: String, got: String| Miss {
            line: *line,
            text: item.text.clone(),
            kind,
            expected,
            got,
        };
        if stored != labelled {
            let said = match got.verdict.ignore {
                Some(r) => format!("ignore ({})", r.as_str()),
                None => format!("store ({}) {:?}", got.verdict.event_type, got.cues),
            };
            misses.push(miss("decision", format!("{:?}", item.expect), said));
            continue;
        }
        if !stored {
            continue;
        }
        c.both += 1;
        if let Some(t) = &item.event_type {
            c.typed += 1;
            if t == got.verdict.event_type {
                c.type_ok += 1;
            } else {
                let said = format!("{} {:?}", got.verdict.event_type, got.cues);
                misses.push(miss("eventType", t.clone(), said));
            }
        }
        let want = item.privacy_class.unwrap_or(PrivacyClass::Internal);
        if want == got.privacy_class {
            c.privacy_ok += 1;
        } else {
            let got_s = format!("{} {:?}", got.privacy_class.as_str(), got.privacy_signals);
            misses.push(miss("privacyClass", want.as_str().into(), got_s));
        }
    }
    Ok(Report {
        items: items.len(),
        labelled_store: c.labelled,
        predicted_store: c.predicted,
        true_store: c.both,
        precision: ratio(c.both, c.predicted),
        recall: ratio(c.both, c.labelled),
        type_accuracy: ratio(c.type_ok, c.typed),
        privacy_accuracy: ratio(c.privacy_ok, c.both),
        model: embedder.model_id().to_string(),
        misses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use episodic::embed::HashingEmbedder;

    #[test]
    fn counts_precision_recall_and_accuracies() {
        let lines = [
            r#"{"text": "thanks a lot!", "role": "user", "expect": "ignore"}"#,
            r#"{"text": "from now on please email my invoices", "role": "user", "expect": "store", "eventType": "user_preference_stated"}"#,
            r#"{"text": "status: the build failed with an error", "role": "tool", "expect": "store", "eventType": "incident_or_failure"}"#,
        ];
        let items: Vec<(usize, Labelled)> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| (i + 1, serde_json::from_str(l).expect("item")))
            .collect();
        let e = HashingEmbedder::new();
        let obs = Observer::new(&e).expect("observer");
        let r = evaluate(&obs, &e, &items, 4096, None).expect("eval");
        assert_eq!((r.items, r.labelled_store), (3, 2));
        assert!((r.precision - 1.0).abs() < 1e-9, "{r:?}");
        assert!((r.recall - 1.0).abs() < 1e-9, "{r:?}");
        assert!((r.privacy_accuracy - 1.0).abs() < 1e-9);
    }
}
