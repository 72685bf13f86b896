//! Pure privacy detection: finds personal and special-category data in a text and maps it
//! to a [`PrivacyClass`].
//!
//! Invariants:
//! - detection is a pure function of the text (no I/O, no model, no clock);
//! - numeric detectors validate what they match (Luhn for payment cards, mod-97 for IBANs,
//!   SSA area/group/serial rules for SSNs, a digit count for phone numbers), so order ids,
//!   dates, amounts and version numbers are not flagged;
//! - the class is the most restrictive one any signal implies: health, government ids and
//!   financial account numbers → `sensitive`; e-mail, phone, address, birth date →
//!   `private`; nothing → `internal`.

use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::model::PrivacyClass;

/// One kind of personal data found in a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// An e-mail address.
    Email,
    /// A telephone number.
    Phone,
    /// A postal address or date of birth stated as such.
    PersonalDetail,
    /// A payment card number that passes the Luhn check.
    PaymentCard,
    /// An IBAN that passes the mod-97 check.
    Iban,
    /// A national id: SSN-shaped number or a labelled passport / licence / tax id.
    GovernmentId,
    /// A health condition, treatment or medical appointment.
    Health,
}

impl SignalKind {
    /// The privacy class this signal implies.
    pub fn class(self) -> PrivacyClass {
        match self {
            SignalKind::Email | SignalKind::Phone | SignalKind::PersonalDetail => {
                PrivacyClass::Private
            }
            SignalKind::PaymentCard
            | SignalKind::Iban
            | SignalKind::GovernmentId
            | SignalKind::Health => PrivacyClass::Sensitive,
        }
    }
}

/// One detected signal: its kind and the byte span it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Signal {
    /// What was found.
    pub kind: SignalKind,
    /// Byte offset of the match in the text.
    pub start: usize,
    /// Byte offset one past the match.
    pub end: usize,
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the unit tests; an invalid one is a bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid built-in pattern")
}

static EMAIL: LazyLock<Regex> =
    LazyLock::new(|| re(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"));
static PHONE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?:\+\d[\d ().-]{6,18}\d)|(?:\(\d{3}\)\s?\d{3}[\s.-]\d{4})|(?:\b\d{3}[.-]\d{3}[.-]\d{4}\b)|(?:\b0\d{3,4}\s\d{5,6}\b)",
    )
});
static CARD: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d(?:[ -]?\d){12,18}\b"));
static SSN: LazyLock<Regex> = LazyLock::new(|| re(r"\b(\d{3})-(\d{2})-(\d{4})\b"));
static IBAN: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"));
static LABELLED_ID: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i:\b(?:passport|national id|national insurance|driver'?s licen[cs]e|tax id|social security|nhs number)\b(?:\s*(?:no\.?|number|#))?\s*(?:is|:)?)\s*#?\s*[A-Z]{0,3}\d[A-Z0-9-]{4,14}\d\b",
    )
});
static PERSONAL: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:(?:my|home|shipping|billing|mailing|new) address (?:is|to)\b|(?:my|home|shipping|billing|mailing|new) address:|date of birth\b|dob\b|born on\b|i live at\b)",
    )
});
static HEALTH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)\b(?:diagnos(?:is|ed)|prescri(?:ption|bed)|medication|insulin|chemo(?:therapy)?|therapist|therapy session|psychiatri(?:st|c)|pregnan(?:t|cy)|diabet(?:es|ic)|asthma|cancer|tumou?r|hiv|depression|anxiety|adhd|surgery|allerg(?:y|ic)|blood pressure|cholesterol|antidepressants?|mental health|biopsy|dialysis|migraines?|epilep(?:sy|tic)|seizures?|physiotherapy|oncolog(?:y|ist)|cardiolog(?:y|ist)|dermatolog(?:y|ist)|gynaecolog(?:y|ist)|gynecolog(?:y|ist)|dentist|dental|mri scan|x-ray|blood test|covid|sick leave|hospitali[sz]ed|inhaler|panic attacks?|ivf|rehab|sobriety|hypertension)\b",
    )
});

/// Every signal in `text`, ordered by start offset.
pub fn detect(text: &str) -> Vec<Signal> {
    let mut out = Vec::new();
    push_all(&mut out, &EMAIL, text, SignalKind::Email, |_| true);
    push_all(&mut out, &PHONE, text, SignalKind::Phone, phone_ok);
    push_all(&mut out, &CARD, text, SignalKind::PaymentCard, card_ok);
    push_all(&mut out, &SSN, text, SignalKind::GovernmentId, ssn_ok);
    push_all(
        &mut out,
        &LABELLED_ID,
        text,
        SignalKind::GovernmentId,
        |_| true,
    );
    push_all(&mut out, &IBAN, text, SignalKind::Iban, iban_ok);
    push_all(
        &mut out,
        &PERSONAL,
        text,
        SignalKind::PersonalDetail,
        |_| true,
    );
    push_all(&mut out, &HEALTH, text, SignalKind::Health, |_| true);
    drop_contained(out)
}

fn push_all(
    out: &mut Vec<Signal>,
    re: &Regex,
    text: &str,
    kind: SignalKind,
    accept: fn(&str) -> bool,
) {
    for m in re.find_iter(text) {
        if accept(m.as_str()) {
            out.push(Signal {
                kind,
                start: m.start(),
                end: m.end(),
            });
        }
    }
}

/// Sorts by position and drops a weaker signal whose span lies inside a stronger one
/// (a card number is not also a phone number).
fn drop_contained(mut signals: Vec<Signal>) -> Vec<Signal> {
    signals.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
    let all = signals.clone();
    signals.retain(|s| {
        !all.iter().any(|o| {
            o != s
                && o.start <= s.start
                && s.end <= o.end
                && o.kind.class() >= s.kind.class()
                && (o.end - o.start) > (s.end - s.start)
        })
    });
    signals
}

/// The class implied by `signals`: the most restrictive, or `internal` when none.
pub fn class_of(signals: &[Signal]) -> PrivacyClass {
    signals
        .iter()
        .map(|s| s.kind.class())
        .max()
        .unwrap_or(PrivacyClass::Internal)
}

/// The distinct kinds in `signals`, sorted.
pub fn kinds(signals: &[Signal]) -> Vec<SignalKind> {
    let mut k: Vec<SignalKind> = signals.iter().map(|s| s.kind).collect();
    k.sort();
    k.dedup();
    k
}

fn digits(s: &str) -> Vec<u32> {
    s.chars().filter_map(|c| c.to_digit(10)).collect()
}

fn phone_ok(s: &str) -> bool {
    (8..=15).contains(&digits(s).len())
}

/// The Luhn checksum over a digit string (rightmost digit is the check digit).
pub fn luhn_valid(d: &[u32]) -> bool {
    if d.len() < 2 {
        return false;
    }
    let sum: u32 = d
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &x)| {
            if i % 2 == 1 {
                let y = x * 2;
                if y > 9 {
                    y - 9
                } else {
                    y
                }
            } else {
                x
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// A card number: 13-19 digits, a known issuer prefix, and a valid Luhn check.
fn card_ok(s: &str) -> bool {
    let d = digits(s);
    if !(13..=19).contains(&d.len()) || !luhn_valid(&d) {
        return false;
    }
    let prefix2 = d[0] * 10 + d[1];
    let prefix4 = d[..4].iter().fold(0, |a, &x| a * 10 + x);
    d[0] == 4
        || (51..=55).contains(&prefix2)
        || (2221..=2720).contains(&prefix4)
        || prefix2 == 34
        || prefix2 == 37
        || prefix4 == 6011
        || prefix2 == 65
}

/// SSN-shaped: area not 000/666/9xx, group not 00, serial not 0000.
fn ssn_ok(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let [area, group, serial] = parts.as_slice() else {
        return false;
    };
    *area != "000"
        && *area != "666"
        && !area.starts_with('9')
        && *group != "00"
        && *serial != "0000"
}

/// ISO 13616 mod-97 check.
pub fn iban_ok(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u64 = 0;
    for c in tail.chars().chain(head.chars()) {
        let v = match c.to_digit(36) {
            Some(v) => u64::from(v),
            None => return false,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

/// `text` with every payment card number masked except its last four digits, so a full
/// card number never reaches the log.
pub fn mask_cards(text: &str, signals: &[Signal]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for s in signals.iter().filter(|s| s.kind == SignalKind::PaymentCard) {
        if s.start < last {
            continue;
        }
        out.push_str(&text[last..s.start]);
        let d = digits(&text[s.start..s.end]);
        let tail: String = d[d.len().saturating_sub(4)..]
            .iter()
            .filter_map(|x| char::from_digit(*x, 10))
            .collect();
        out.push_str("[card ending ");
        out.push_str(&tail);
        out.push(']');
        last = s.end;
    }
    out.push_str(&text[last..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_of(text: &str) -> Vec<SignalKind> {
        kinds(&detect(text))
    }

    #[test]
    fn luhn_accepts_known_test_numbers_and_rejects_a_changed_digit() {
        assert!(luhn_valid(&digits("4111111111111111")));
        assert!(luhn_valid(&digits("5500005555555559")));
        assert!(luhn_valid(&digits("378282246310005")));
        assert!(!luhn_valid(&digits("4111111111111112")));
        assert!(!luhn_valid(&digits("7")));
    }

    #[test]
    fn detects_payment_cards_only_when_luhn_and_prefix_pass() {
        assert_eq!(
            kinds_of("charge my card 4111 1111 1111 1111 please"),
            vec![SignalKind::PaymentCard]
        );
        assert_eq!(
            kinds_of("amex 3782-822463-10005"),
            vec![SignalKind::PaymentCard]
        );
        assert!(kinds_of("card 4111 1111 1111 1112").is_empty());
        // A long order number that happens to pass Luhn but has no issuer prefix.
        assert!(luhn_valid(&digits("1234567812345670")));
        assert!(kinds_of("order 1234567812345670 shipped").is_empty());
    }

    #[test]
    fn detects_emails_and_phones() {
        assert_eq!(
            kinds_of("write to jane.doe+billing@example.co.uk"),
            vec![SignalKind::Email]
        );
        assert_eq!(
            kinds_of("call me on +44 7700 900123"),
            vec![SignalKind::Phone]
        );
        assert_eq!(
            kinds_of("my cell is (415) 555-0134"),
            vec![SignalKind::Phone]
        );
        assert_eq!(
            kinds_of("reach me at 415-555-0134"),
            vec![SignalKind::Phone]
        );
    }

    #[test]
    fn detects_government_ids() {
        assert_eq!(
            kinds_of("my SSN is 123-45-6789"),
            vec![SignalKind::GovernmentId]
        );
        assert!(kinds_of("ref 000-12-3456").is_empty());
        assert!(kinds_of("ref 923-12-3456").is_empty());
        assert_eq!(
            kinds_of("passport number X1234567 expires soon"),
            vec![SignalKind::GovernmentId]
        );
    }

    #[test]
    fn detects_ibans_with_a_valid_checksum_only() {
        assert_eq!(
            kinds_of("pay to GB82 WEST 1234 5698 7654 32"),
            vec![SignalKind::Iban]
        );
        assert_eq!(
            kinds_of("IBAN DE89370400440532013000"),
            vec![SignalKind::Iban]
        );
        assert!(kinds_of("pay to GB82 WEST 1234 5698 7654 33").is_empty());
    }

    #[test]
    fn detects_health_and_personal_details() {
        assert_eq!(
            kinds_of("I was diagnosed with type 2 diabetes last year"),
            vec![SignalKind::Health]
        );
        assert_eq!(
            kinds_of("my new address is 12 Elm Road"),
            vec![SignalKind::PersonalDetail]
        );
        assert_eq!(
            class_of(&detect("date of birth 1984-02-11")),
            PrivacyClass::Private
        );
    }

    #[test]
    fn ordinary_numbers_are_not_personal_data() {
        for text in [
            "order ORD-2024-55671 shipped on 2026-06-17",
            "invoice 88213 for $1,249.00 is due 06/30/2026",
            "upgrade to version 3.14.159 finished at 14:05:33",
            "ticket #4521 moved to done, build 20260617.3 green",
            "the deployment is healthy and the health check passed",
            "we sold 1200000 units across 45 stores",
            "tracking number 1Z999AA10123456784",
        ] {
            let found = detect(text);
            assert!(found.is_empty(), "{text}: {found:?}");
            assert_eq!(class_of(&found), PrivacyClass::Internal);
        }
    }

    #[test]
    fn the_most_restrictive_signal_sets_the_class() {
        let s = detect("email a@b.io about my chemotherapy schedule");
        assert_eq!(kinds(&s), vec![SignalKind::Email, SignalKind::Health]);
        assert_eq!(class_of(&s), PrivacyClass::Sensitive);
    }

    #[test]
    fn cards_are_masked_to_the_last_four_digits() {
        let text = "use 4111 1111 1111 1111 for the renewal";
        let masked = mask_cards(text, &detect(text));
        assert_eq!(masked, "use [card ending 1111] for the renewal");
    }
}
