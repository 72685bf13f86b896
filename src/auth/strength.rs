//! The minimum strength of an operator-chosen admin key (`EPISODIC_ADMIN_KEY`).
//!
//! The rule ([`check_admin_key`]), each part a reason to refuse start-up:
//! 1. at least [`MIN_CHARS`] characters, all printable ASCII (`!`–`~` and inner spaces: the
//!    key travels in an `Authorization` header, which trims the ends);
//! 2. at least [`MIN_DISTINCT`] distinct characters;
//! 3. an estimate of at least [`MIN_BITS`] bits: the length of the key's shortest
//!    repeating unit (its smallest period: `abcabcabc` counts as 3 characters, a key that
//!    repeats no unit as its full length) times log2 of the pool its character classes
//!    span (lowercase 26, uppercase 26, digits 10, symbols and space 33).
//!
//! So one repeated character or a short repeated pattern fails at any length, 32 random
//! hex digits pass (32 × log2 36 ≈ 165 bits), 38 decimal digits do not (≈ 126 bits).
//!
//! Invariants: pure; a refusal names the rule and the measured values, never the key.
//! Limits: an estimate of the key's shape, not of how it was made: a long English
//! sentence passes; a generated key (`openssl rand -base64 32`) is what the rule intends.

/// Fewest characters.
pub const MIN_CHARS: usize = 32;
/// Fewest distinct characters.
pub const MIN_DISTINCT: usize = 8;
/// Fewest estimated bits.
pub const MIN_BITS: f64 = 128.0;

/// The rule in one line, for error messages.
pub const RULE: &str = "at least 32 printable ASCII characters, at least 8 distinct, and at \
least 128 bits estimated as (length of its shortest repeating unit) x log2(pool of its character \
classes: lowercase 26, uppercase 26, digits 10, symbols 33); generate one with `openssl rand \
-base64 32`";

/// Why a key is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WeakKey {
    /// Fewer than [`MIN_CHARS`] characters.
    #[error("it has {chars} characters")]
    TooShort {
        /// Its length.
        chars: usize,
    },
    /// A character outside printable ASCII, or a space at an end.
    #[error("it holds a character that is not printable ASCII, or a space at an end")]
    NotPrintable,
    /// Fewer than [`MIN_DISTINCT`] distinct characters.
    #[error("it has only {distinct} distinct characters")]
    FewDistinct {
        /// Distinct characters.
        distinct: usize,
    },
    /// Below [`MIN_BITS`].
    #[error("it is estimated at {bits:.0} bits (repeating unit of {period} characters)")]
    LowEntropy {
        /// The estimate.
        bits: f64,
        /// Its smallest period.
        period: usize,
    },
}

/// Checks `key` against the rule; `Ok` carries the estimate in bits.
pub fn check_admin_key(key: &str) -> Result<f64, WeakKey> {
    let printable = key.bytes().all(|b| (b' '..=b'~').contains(&b));
    if !printable || key.starts_with(' ') || key.ends_with(' ') {
        return Err(WeakKey::NotPrintable);
    }
    let bytes = key.as_bytes();
    if bytes.len() < MIN_CHARS {
        return Err(WeakKey::TooShort { chars: bytes.len() });
    }
    let mut seen = [false; 128];
    bytes.iter().for_each(|&b| seen[usize::from(b)] = true);
    let distinct = seen.iter().filter(|s| **s).count();
    if distinct < MIN_DISTINCT {
        return Err(WeakKey::FewDistinct { distinct });
    }
    let period = smallest_period(bytes);
    let bits = period as f64 * (pool(bytes) as f64).log2();
    if bits < MIN_BITS {
        return Err(WeakKey::LowEntropy { bits, period });
    }
    Ok(bits)
}

/// Size of the alphabet spanned by the character classes present.
fn pool(bytes: &[u8]) -> u32 {
    let has = |f: fn(&u8) -> bool| bytes.iter().any(f);
    let classes = [
        (has(u8::is_ascii_lowercase), 26),
        (has(u8::is_ascii_uppercase), 26),
        (has(u8::is_ascii_digit), 10),
        (has(|b| !b.is_ascii_alphanumeric()), 33),
    ];
    classes.iter().filter(|(on, _)| *on).map(|(_, n)| n).sum()
}

/// The smallest `p` with `s[i] == s[i + p]` for every `i` (`s.len()` when none is
/// smaller), from the longest proper border (prefix-function).
fn smallest_period(s: &[u8]) -> usize {
    let mut border = vec![0usize; s.len()];
    for i in 1..s.len() {
        let mut k = border[i - 1];
        while k > 0 && s[i] != s[k] {
            k = border[k - 1];
        }
        if s[i] == s[k] {
            k += 1;
        }
        border[i] = k;
    }
    s.len() - border.last().copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_keys_are_refused_with_the_reason() {
        assert_eq!(check_admin_key("a"), Err(WeakKey::TooShort { chars: 1 }));
        assert_eq!(
            check_admin_key("test-admin-key"),
            Err(WeakKey::TooShort { chars: 14 })
        );
        assert_eq!(
            check_admin_key(&"a".repeat(64)),
            Err(WeakKey::FewDistinct { distinct: 1 })
        );
        assert_eq!(
            check_admin_key(&"ab".repeat(40)),
            Err(WeakKey::FewDistinct { distinct: 2 })
        );
        for weak in [
            "test-admin-key-".repeat(4),
            "0123456789".repeat(5),
            "Password1!".repeat(4),
            "59160723849105628374019283746501928".to_string(),
        ] {
            assert!(
                matches!(check_admin_key(&weak), Err(WeakKey::LowEntropy { .. })),
                "{weak}: {:?}",
                check_admin_key(&weak)
            );
        }
        assert_eq!(
            check_admin_key(" a-long-key-with-a-leading-space-0123456789"),
            Err(WeakKey::NotPrintable)
        );
        assert_eq!(
            check_admin_key("é-a-long-key-with-an-accent-0123456789AB"),
            Err(WeakKey::NotPrintable)
        );
    }

    #[test]
    fn generated_style_keys_pass() {
        for strong in [
            "CzBVep_E6Q4zWH2ix-wRNluApcrvFDleg6jN8hc8YYY",
            "3f9a0c1d2e4b5a6f7081920a3b4c5d6e",
            "epi_admin_BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY",
            "5916072384910562837401928374650192837465",
        ] {
            let bits = check_admin_key(strong).expect(strong);
            assert!(bits >= MIN_BITS);
        }
    }

    #[test]
    fn the_period_is_the_shortest_repeating_unit() {
        assert_eq!(smallest_period(b"abcabcabc"), 3);
        assert_eq!(smallest_period(b"abcabcab"), 3);
        assert_eq!(smallest_period(b"aaaa"), 1);
        assert_eq!(smallest_period(b"abcd"), 4);
        assert_eq!(smallest_period(b"abca"), 3);
        assert_eq!(smallest_period(b""), 0);
    }
}
