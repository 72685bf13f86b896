//! The passage text of a stored event: the one text its vector is embedded from.
//!
//! Role: every place that makes a stored event's vector (a write, a batch item, an import
//! line without a vector, an observation, a correction, the eval's ingest) asks
//! [`PassageText::text`] for the text to embed; nothing else decides it. Queries are not
//! passages: a recall embeds its query text as it is (less the names of the tenant's actors
//! it names, [`crate::retrieve::QueryWords`]), never with a speaker label.
//!
//! Invariants:
//! - [`PassageText::Summary`] embeds the summary exactly as stored;
//! - [`PassageText::Speaker`] embeds `"<label>: <summary>"` when the actor id yields a label
//!   ([`actor_label`]) and the summary alone otherwise, so an opaque id (`user-1`, a UUID)
//!   never puts noise into the vector;
//! - the rule is a pure function of the actor id and the summary: the same event gives the
//!   same text on every node and in every run;
//! - vectors made under one rule are not comparable with those made under the other for the
//!   same event: a store written under one setting should be re-embedded after the setting
//!   changes (events written before the change keep their vectors).

use serde::Serialize;

/// The longest label, in characters, taken from an actor id; a longer last segment is
/// treated as opaque.
pub const MAX_LABEL_CHARS: usize = 40;

/// The most words a label may have.
const MAX_LABEL_WORDS: usize = 4;

/// How a stored event's passage text is made from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PassageText {
    /// The summary alone.
    #[default]
    Summary,
    /// The actor's label, a colon and the summary: who acted goes into the vector.
    Speaker,
}

impl PassageText {
    /// The rule for the `--embed-speaker` setting (`true`: [`PassageText::Speaker`]).
    pub fn speaker(on: bool) -> Self {
        if on {
            PassageText::Speaker
        } else {
            PassageText::Summary
        }
    }

    /// The rule other than this one.
    pub fn other(self) -> Self {
        match self {
            PassageText::Summary => PassageText::Speaker,
            PassageText::Speaker => PassageText::Summary,
        }
    }

    /// Whether the actor's label goes into the vector.
    pub fn is_speaker(self) -> bool {
        self == PassageText::Speaker
    }

    /// The text to embed for an event of `actor_id` with `summary`.
    pub fn text(self, actor_id: &str, summary: &str) -> String {
        match (self, actor_label(actor_id)) {
            (PassageText::Speaker, Some(label)) => format!("{label}: {summary}"),
            _ => summary.to_string(),
        }
    }
}

/// The label an actor id gives a passage, or `None` for an id that names no one readable.
///
/// The label is the id's last segment after a `:` or `/` (`user:dana` → `dana`,
/// `crm/contacts/dana` → `dana`), with `_`, `-` and `.` read as spaces (`dana_smith` →
/// `dana smith`) and case kept. It is given only when that segment reads as a name: 1 to
/// [`MAX_LABEL_CHARS`] characters, at most 4 words, letters only (apostrophes inside a word
/// allowed); an id with a digit or any other character (`user-1`, `u_8f3a`, a UUID, an
/// e-mail address) is opaque and gives none, so its passage is the summary alone.
pub fn actor_label(actor_id: &str) -> Option<String> {
    let last = actor_id
        .rsplit([':', '/'])
        .next()
        .unwrap_or(actor_id)
        .trim();
    let spaced: String = last
        .chars()
        .map(|c| if matches!(c, '_' | '-' | '.') { ' ' } else { c })
        .collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let readable = |w: &&str| {
        w.chars().all(|c| c.is_alphabetic() || c == '\'')
            && w.chars().next().is_some_and(char::is_alphabetic)
    };
    if words.is_empty() || words.len() > MAX_LABEL_WORDS || !words.iter().all(readable) {
        return None;
    }
    let label = words.join(" ");
    (label.chars().count() <= MAX_LABEL_CHARS).then_some(label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_come_from_the_last_segment_of_readable_ids() {
        assert_eq!(actor_label("user:dana").as_deref(), Some("dana"));
        assert_eq!(actor_label("Caroline").as_deref(), Some("Caroline"));
        assert_eq!(actor_label("acme:user:Dana").as_deref(), Some("Dana"));
        assert_eq!(actor_label("crm/contacts/dana").as_deref(), Some("dana"));
        assert_eq!(
            actor_label("user:dana_smith").as_deref(),
            Some("dana smith")
        );
        assert_eq!(
            actor_label("agent:support-bot").as_deref(),
            Some("support bot")
        );
        assert_eq!(actor_label("user:O'Brien").as_deref(), Some("O'Brien"));
        assert_eq!(actor_label("user:José").as_deref(), Some("José"));
        assert_eq!(actor_label("assistant").as_deref(), Some("assistant"));
    }

    #[test]
    fn opaque_ids_give_no_label() {
        for id in [
            "user-1",
            "user:42",
            "u_8f3a",
            "0192f0c4-6d1e-7c3a-9b8e-1f2a3b4c5d6e",
            "dana@example.com",
            "user:",
            ":",
            "a b c d e",
            "user:'quoted",
            &"x".repeat(MAX_LABEL_CHARS + 1),
        ] {
            assert_eq!(actor_label(id), None, "{id:?}");
        }
        assert_eq!(
            actor_label(&"x".repeat(MAX_LABEL_CHARS)).map(|l| l.len()),
            Some(MAX_LABEL_CHARS)
        );
    }

    #[test]
    fn the_speaker_rule_prefixes_readable_actors_and_the_summary_rule_never_does() {
        let summary = "I painted a sunrise last week.";
        assert_eq!(
            PassageText::Speaker.text("user:caroline", summary),
            "caroline: I painted a sunrise last week."
        );
        assert_eq!(PassageText::Speaker.text("user-1", summary), summary);
        assert_eq!(PassageText::Summary.text("user:caroline", summary), summary);
        assert_eq!(PassageText::default(), PassageText::Summary);
        assert_eq!(PassageText::speaker(true), PassageText::Speaker);
        assert!(!PassageText::speaker(false).is_speaker());
        assert_eq!(PassageText::Speaker.other(), PassageText::Summary);
        assert_eq!(PassageText::Summary.other(), PassageText::Speaker);
    }
}
