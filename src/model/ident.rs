//! Identifiers: the one rule every id passes where it enters the server.
//!
//! Ids are the strings that name things and are compared for equality: `actorId`,
//! `projectId`, `resourceRefs[]`, `sourceRefs[]`, `eventId`, `supersedesEventIds[]` and
//! `tenantId` of an event; `tenantId` and `actorIds[]` of a new key; `actorId` of an
//! erasure; the `actorIds`, `projectIds`, `resourceRefs` and `eventTypes` of a recall or
//! timeline scope; id-valued query and path parameters; the ids of an observed interaction.
//! Free text (`summary`, `query`, review notes) is not an id and is never checked here.
//!
//! The rule ([`normalize`]):
//! 1. an id is not empty or all whitespace;
//! 2. it contains no control character (general category Cc, NUL included), no format
//!    character (Cf: zero-width space and joiners, word joiner, soft hyphen, BOM, the bidi
//!    embeddings, overrides, isolates and marks U+202A–U+202E, U+2066–U+2069, U+200E,
//!    U+200F, U+061C, tag characters) and no line or paragraph separator (Zl, Zp);
//! 3. it contains no unassigned code point (Cn, noncharacters included), private-use code
//!    point (Co) or surrogate (Cs), per the Unicode 16.0 tables;
//! 4. it does not start or end with whitespace: such an id is rejected, not trimmed. A
//!    trimmed id would silently merge `"user-1 "` into `"user-1"` in some places (an id
//!    written by an older build keeps its space) and not others, and a stray space is
//!    almost always a client bug worth reporting where it happens;
//! 5. an accepted id is returned in Unicode normalization form C, so canonically equivalent
//!    spellings (a decomposed `e` + U+0301 and a composed `é`) are one id everywhere: write,
//!    filters, erasure, key limits. The byte bound applies to the NFC form.
//!
//! Invariants: pure; [`normalize`] is idempotent (its output passes unchanged); the first
//! offending character is reported by code point and 0-based character position, never by
//! echoing it raw.
//!
//! Not covered: look-alikes across scripts (Latin `a`, Cyrillic `а`), compatibility forms
//! (fullwidth `ｕ` stays distinct from `u`: NFKC would merge ids a client may keep apart)
//! and case.

use unicode_general_category::{get_general_category, GeneralCategory};
use unicode_normalization::UnicodeNormalization;

use crate::error::FieldError;

/// The bound on ids that have no configured one (erasure, key limits, filters), in bytes;
/// the same as the default bound on event ids and references.
pub const MAX_ID_BYTES: usize = 512;

/// Why a string is not an acceptable id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdentError {
    /// Empty or only whitespace.
    #[error("must not be empty")]
    Empty,
    /// A control, format, bidi or separator character.
    #[error(
        "must not contain control, format or bidi characters (U+{code:04X} at position {position})"
    )]
    Invisible {
        /// The code point.
        code: u32,
        /// Its 0-based character position.
        position: usize,
    },
    /// An unassigned, private-use or surrogate code point.
    #[error("must not contain unassigned or private-use code points (U+{code:04X} at position {position})")]
    Unassigned {
        /// The code point.
        code: u32,
        /// Its 0-based character position.
        position: usize,
    },
    /// Leading or trailing whitespace.
    #[error("must not start or end with whitespace")]
    Whitespace,
    /// Longer than the bound (in bytes, after normalization).
    #[error("must be at most {max} bytes")]
    TooLong {
        /// The bound.
        max: usize,
    },
}

/// What the rule says about one character.
enum CharClass {
    Ok,
    Invisible,
    Unassigned,
}

fn classify(c: char) -> CharClass {
    match get_general_category(c) {
        GeneralCategory::Control
        | GeneralCategory::Format
        | GeneralCategory::LineSeparator
        | GeneralCategory::ParagraphSeparator => CharClass::Invisible,
        GeneralCategory::Unassigned | GeneralCategory::PrivateUse | GeneralCategory::Surrogate => {
            CharClass::Unassigned
        }
        // Letters, marks, numbers, punctuation, symbols and spaces (the enum is
        // non-exhaustive; the set of general categories is stable).
        _ => CharClass::Ok,
    }
}

/// Applies the rule: the NFC form of `raw`, or the first reason it is not an id.
pub fn normalize(raw: &str, max_bytes: usize) -> Result<String, IdentError> {
    if raw.trim().is_empty() {
        return Err(IdentError::Empty);
    }
    for (position, c) in raw.chars().enumerate() {
        let code = c as u32;
        match classify(c) {
            CharClass::Ok => {}
            CharClass::Invisible => return Err(IdentError::Invisible { code, position }),
            CharClass::Unassigned => return Err(IdentError::Unassigned { code, position }),
        }
    }
    if raw.starts_with(char::is_whitespace) || raw.ends_with(char::is_whitespace) {
        return Err(IdentError::Whitespace);
    }
    let id = if unicode_normalization::is_nfc(raw) {
        raw.to_string()
    } else {
        raw.nfc().collect()
    };
    if id.len() > max_bytes {
        return Err(IdentError::TooLong { max: max_bytes });
    }
    Ok(id)
}

/// Whether a stored actor id names the normalized `actor`: equal, or equal once the
/// characters the rule rejects are dropped, surrounding whitespace trimmed and the rest put
/// in NFC. Ids stored before the rule existed (`user-1` + U+200B, a decomposed `é`) are
/// then still erased with the actor they imitate.
pub fn same_actor(stored: &str, actor: &str) -> bool {
    if stored == actor {
        return true;
    }
    // Printable ASCII without surrounding spaces is unchanged by folding.
    let plain =
        stored.bytes().all(|b| b.is_ascii_graphic() || b == b' ') && stored.trim() == stored;
    !plain && folded(stored) == actor
}

/// `s` without control, format and separator characters, trimmed, in NFC.
fn folded(s: &str) -> String {
    let kept: String = s
        .chars()
        .filter(|c| !matches!(classify(*c), CharClass::Invisible))
        .collect();
    kept.trim().nfc().collect()
}

/// [`normalize`] with the failure as a [`FieldError`] on `field` (its JSON path).
pub fn field(field: &str, raw: &str, max_bytes: usize) -> Result<String, FieldError> {
    normalize(raw, max_bytes).map_err(|e| FieldError::new(field, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(raw: &str) -> String {
        normalize(raw, 512).expect_err(raw).to_string()
    }

    #[test]
    fn plain_ids_pass_unchanged() {
        for id in [
            "user-1",
            "acme",
            "evt-2026.06:17_a",
            "Jane Doe",
            "ユーザー",
            "ü",
        ] {
            assert_eq!(normalize(id, 512).as_deref(), Ok(id));
        }
    }

    #[test]
    fn names_the_first_hidden_character_and_its_position() {
        assert_eq!(
            err("user-1\u{200B}"),
            "must not contain control, format or bidi characters (U+200B at position 6)"
        );
        assert_eq!(
            err("a\u{0}b"),
            "must not contain control, format or bidi characters (U+0000 at position 1)"
        );
        assert_eq!(
            err("\u{E000}x"),
            "must not contain unassigned or private-use code points (U+E000 at position 0)"
        );
    }

    #[test]
    fn every_control_format_bidi_and_separator_character_is_rejected() {
        let hidden = [
            '\u{0}',
            '\u{7}',
            '\t',
            '\n',
            '\r',
            '\u{7F}',
            '\u{85}',
            '\u{9F}',
            '\u{AD}',
            '\u{61C}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2028}',
            '\u{2029}',
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{FEFF}',
            '\u{E0041}',
        ];
        for c in hidden {
            let id = format!("user{c}1");
            assert!(
                matches!(
                    normalize(&id, 512),
                    Err(IdentError::Invisible { position: 4, .. })
                ),
                "U+{:04X}",
                c as u32
            );
        }
        for c in [
            '\u{E000}',
            '\u{F8FF}',
            '\u{FDD0}',
            '\u{FFFF}',
            '\u{10FFFD}',
            '\u{378}',
        ] {
            assert!(
                matches!(
                    normalize(&format!("u{c}"), 512),
                    Err(IdentError::Unassigned { position: 1, .. })
                ),
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn surrounding_whitespace_is_rejected_not_trimmed() {
        assert_eq!(normalize(" user-1", 512), Err(IdentError::Whitespace));
        assert_eq!(
            normalize("user-1\u{3000}", 512),
            Err(IdentError::Whitespace)
        );
        assert_eq!(normalize("   ", 512), Err(IdentError::Empty));
        assert_eq!(normalize("", 512), Err(IdentError::Empty));
    }

    #[test]
    fn canonically_equivalent_spellings_are_one_id() {
        let decomposed = "jose\u{301}";
        let composed = "jos\u{E9}";
        assert_eq!(normalize(decomposed, 512).as_deref(), Ok(composed));
        assert_eq!(normalize(composed, 512).as_deref(), Ok(composed));
        // Compatibility forms stay distinct.
        assert_eq!(normalize("ｕ", 512).as_deref(), Ok("ｕ"));
    }

    #[test]
    fn the_bound_applies_to_the_normalized_form() {
        assert_eq!(normalize("abc", 2), Err(IdentError::TooLong { max: 2 }));
        // Four bytes decomposed, three composed.
        assert_eq!(normalize("ae\u{301}", 3).as_deref(), Ok("a\u{E9}"));
    }

    #[test]
    fn ids_stored_before_the_rule_match_the_actor_they_imitate() {
        assert!(same_actor("user-1", "user-1"));
        assert!(same_actor("user-1\u{200B}", "user-1"));
        assert!(same_actor("\u{202E}user-1 ", "user-1"));
        assert!(same_actor("user-1\u{0}", "user-1"));
        assert!(same_actor("jose\u{301}", "jos\u{E9}"));
        assert!(!same_actor("user-10", "user-1"));
        assert!(!same_actor("user-1", "user-1\u{200B}"));
    }

    #[test]
    fn field_errors_carry_the_path() {
        let e = field("scope.actorIds[0]", "u\u{202E}", 512).expect_err("bidi");
        assert_eq!(e.field, "scope.actorIds[0]");
        assert!(e.message.contains("U+202E at position 1"), "{}", e.message);
    }

    proptest::proptest! {
        #[test]
        fn normalize_is_idempotent(raw in "\\PC{1,20}") {
            if let Ok(id) = normalize(&raw, 512) {
                proptest::prop_assert_eq!(normalize(&id, 512), Ok(id.clone()));
            }
        }
    }
}
