//! Pure credential detection: finds secrets (API keys, access tokens, passwords, private
//! keys, URLs with embedded passwords) in a text, so the write path can refuse to store them.
//! Used by the write policy (`policy`, which denies such events) and by the observer
//! (`observe`, which ignores such interactions and masks the secret in its summary).
//!
//! Invariants:
//! - detection is a pure function of the text (no I/O, no model, no clock);
//! - a [`Finding`] carries only the kind and a byte span: nothing in this module logs,
//!   formats or returns a secret's value, and [`mask`] is the only function that touches the
//!   matched bytes (to replace them);
//! - well-known token formats are matched by their published prefix and shape (Stripe,
//!   GitHub, AWS, Slack, Google, OpenAI-style `sk-`, JWT, PEM private keys,
//!   `scheme://user:password@host`, `Authorization: Bearer|Basic`);
//! - assignments ("password=…", "DB_PASSWORD: …", "the db password is …", "with password …",
//!   "api_key=…", "token: …") need a key word *and* a value that looks like a secret, and the
//!   bar rises as the phrasing gets looser: `=` accepts any non-placeholder password, prose
//!   ("… password is X") needs a digit, symbol or inner capital in X, and a bare
//!   "password X" needs a long value mixing three character classes; token/key/secret
//!   values need eight characters with letters and digits. Placeholders (`***`,
//!   `<redacted>`, `${VAR}`), ordinary words ("the password is incorrect") and attribute
//!   keys (`password_policy`, `token_expiry`, `max_tokens`) are not credentials, so a
//!   sentence that merely mentions a password does not trigger;
//! - the span of a finding is the secret only where the format allows (the value of an
//!   assignment, the password of a URL, the token after `Bearer`), so a masked text keeps
//!   its key names and hosts readable.
//!
//! Known limits: a password that is a plain lowercase word stated in prose ("my password
//! is hunter") is not detected (it is indistinguishable from "my password is expired"), nor
//! are high-entropy strings with no key word or known prefix.

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::Serialize;

/// One kind of credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CredentialKind {
    /// Stripe secret or restricted key (`sk_live_`, `sk_test_`, `rk_…`) or webhook secret.
    StripeKey,
    /// GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// AWS access key id (`AKIA…`, `ASIA…`).
    AwsAccessKeyId,
    /// AWS secret access key assignment.
    AwsSecretKey,
    /// Slack token (`xoxb-`, `xoxp-`, …) or incoming-webhook URL.
    SlackToken,
    /// Google API key (`AIza…`).
    GoogleApiKey,
    /// OpenAI-style long key (`sk-…`, `sk-proj-…`).
    SkKey,
    /// JSON Web Token (`eyJ….….…`).
    Jwt,
    /// PEM private key block.
    PrivateKey,
    /// A URL with an embedded `user:password@`.
    UrlCredentials,
    /// An `Authorization: Bearer …` / `Basic …` value.
    AuthorizationHeader,
    /// A password stated or assigned.
    Password,
    /// A secret, token or API key assigned to a named key.
    SecretAssignment,
}

impl CredentialKind {
    /// The wire string (used in policy reasons and observe responses).
    pub fn as_str(self) -> &'static str {
        match self {
            CredentialKind::StripeKey => "stripe_key",
            CredentialKind::GithubToken => "github_token",
            CredentialKind::AwsAccessKeyId => "aws_access_key_id",
            CredentialKind::AwsSecretKey => "aws_secret_key",
            CredentialKind::SlackToken => "slack_token",
            CredentialKind::GoogleApiKey => "google_api_key",
            CredentialKind::SkKey => "sk_key",
            CredentialKind::Jwt => "jwt",
            CredentialKind::PrivateKey => "private_key",
            CredentialKind::UrlCredentials => "url_credentials",
            CredentialKind::AuthorizationHeader => "authorization_header",
            CredentialKind::Password => "password",
            CredentialKind::SecretAssignment => "secret_assignment",
        }
    }
}

/// One credential found: its kind and the byte span of the secret itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// What was found.
    pub kind: CredentialKind,
    /// Byte offset of the secret in the text.
    pub start: usize,
    /// Byte offset one past the secret.
    pub end: usize,
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the unit tests; an invalid one is a bug.
    #[allow(clippy::expect_used)]
    Regex::new(pattern).expect("valid built-in pattern")
}

/// Well-known token formats: (kind, pattern, value check). The secret is the group `s`
/// when the pattern has one (the key name or scheme stays readable), else the whole match.
type Format = (CredentialKind, &'static str, ValueCheck);

/// Accepts or rejects the matched secret.
type ValueCheck = fn(&str) -> bool;

const FORMATS: [Format; 11] = [
    (
        CredentialKind::StripeKey,
        r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}|\bwhsec_[0-9A-Za-z]{24,}",
        |_| true,
    ),
    (
        CredentialKind::GithubToken,
        r"\bgh[pousr]_[0-9A-Za-z]{30,}|\bgithub_pat_[0-9A-Za-z_]{40,}",
        |_| true,
    ),
    (
        CredentialKind::AwsAccessKeyId,
        r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b",
        |_| true,
    ),
    (
        CredentialKind::SlackToken,
        r"\bxox[abprs]-[0-9A-Za-z-]{10,}|https://hooks\.slack\.com/services/[0-9A-Za-z/_-]{20,}",
        |_| true,
    ),
    (
        CredentialKind::GoogleApiKey,
        r"\bAIza[0-9A-Za-z_-]{35}",
        |_| true,
    ),
    (
        CredentialKind::SkKey,
        r"\bsk-(?:proj-|svcacct-|admin-|ant-)?[0-9A-Za-z_-]{20,}",
        random_looking,
    ),
    (
        CredentialKind::Jwt,
        r"\beyJ[0-9A-Za-z_-]{10,}\.[0-9A-Za-z_-]{10,}\.[0-9A-Za-z_-]{10,}",
        |_| true,
    ),
    (
        CredentialKind::PrivateKey,
        r"(?s)-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        |_| true,
    ),
    (
        CredentialKind::AwsSecretKey,
        r#"(?i:aws_?secret(?:_access)?_?key)["']?\s*(?:[:=]|=>)\s*["']?(?P<s>[0-9A-Za-z/+=]{40})"#,
        |_| true,
    ),
    (
        CredentialKind::AuthorizationHeader,
        r"(?i:\bauthorization\b\s*[:=]\s*|\bbearer\s+)(?i:(?:bearer|basic)\s+)?(?P<s>[0-9A-Za-z._~+/-]{16,}=*)",
        strong_secret,
    ),
    (
        CredentialKind::UrlCredentials,
        r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@]+:(?P<s>[^\s@/]+)@[^\s/]+",
        plausible_password,
    ),
];

static FORMAT_RES: LazyLock<Vec<(CredentialKind, Regex, ValueCheck)>> =
    LazyLock::new(|| FORMATS.iter().map(|&(k, p, ok)| (k, re(p), ok)).collect());

/// Key words that name a password.
const PASSWORD_WORDS: &str = "password|passwd|passphrase|passcode|pwd|pass|pw";
/// Key words that name another kind of secret.
const SECRET_WORDS: &str = "secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|token|auth|credentials?";

/// Last segments of a key that describe a secret rather than hold one
/// (`password_policy`, `token_expiry`, `secret_name`).
const ATTRIBUTE_SEGMENTS: [&str; 34] = [
    "policy",
    "policies",
    "rotation",
    "reset",
    "hint",
    "field",
    "prompt",
    "length",
    "len",
    "min",
    "max",
    "count",
    "limit",
    "limits",
    "size",
    "type",
    "expiry",
    "expires",
    "expiration",
    "ttl",
    "url",
    "uri",
    "endpoint",
    "file",
    "path",
    "name",
    "id",
    "manager",
    "usage",
    "budget",
    "format",
    "version",
    "label",
    "strength",
];

/// `KEY = value`, `KEY: value`, `"key": "value"`; the key may be part of an identifier
/// (`DB_PASSWORD`, `x-api-key`, `spring.datasource.password`).
static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r#"(?i)(?P<key>\b(?:[a-z0-9]+[_.-])*(?:(?P<pw>{PASSWORD_WORDS})|{SECRET_WORDS})(?:[_.-][a-z0-9]+)*)\b["']?\s*(?P<sep>:=|=>|=|:)\s*(?P<q>["'`]?)(?P<val>[^\s"'`,;]+)"#
    ))
});

/// Prose: "the db password is X", "my password for the VPN is X", "password was changed to X".
static PROSE: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r#"(?i)\b(?:(?P<pw>password|passwd|passphrase|passcode|pwd)|{SECRET_WORDS}|api key|access key|secret key)\b(?:\s+(?:for|to|on|of)\s+(?:the\s+|my\s+|our\s+|your\s+)?[\w.-]+(?:\s+[\w.-]+)?)?\s+(?:is|was|are|=)(?:\s+(?:now|still|currently|just))?(?:\s+(?:set|changed|reset|updated))?(?:\s+to)?\s+(?P<q>["'`]?)(?P<val>[^\s"'`]+)|\b(?P<pw2>password|passwd|passphrase|pwd)\s+(?:has\s+been\s+|was\s+|got\s+)?(?:set|changed|reset|updated)\s+to\s+["'`]?(?P<val2>[^\s"'`]+)"#
    ))
});

/// Bare: "user admin with password X", "login root / password X".
static BARE: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?i)\b(?:password|passwd|passphrase|pwd)\s+["'`]?(?P<val>[^\s"'`]+)"#));

/// Values that stand for a secret without being one.
const PLACEHOLDERS: [&str; 24] = [
    "redacted",
    "hidden",
    "masked",
    "removed",
    "omitted",
    "none",
    "null",
    "nil",
    "empty",
    "unset",
    "undefined",
    "required",
    "optional",
    "true",
    "false",
    "n/a",
    "tbd",
    "todo",
    "example",
    "placeholder",
    "secret",
    "password",
    "token",
    "string",
];

/// Ordinary words that follow a key word in sentences about passwords, not in assignments.
const ORDINARY_WORDS: [&str; 46] = [
    "your",
    "you",
    "the",
    "this",
    "that",
    "their",
    "his",
    "her",
    "our",
    "my",
    "reset",
    "expired",
    "expires",
    "expiring",
    "changed",
    "change",
    "updated",
    "update",
    "incorrect",
    "invalid",
    "wrong",
    "correct",
    "forgotten",
    "forgot",
    "lost",
    "stolen",
    "locked",
    "weak",
    "strong",
    "missing",
    "rotated",
    "revoked",
    "valid",
    "same",
    "different",
    "new",
    "old",
    "still",
    "not",
    "also",
    "case-sensitive",
    "mandatory",
    "accepted",
    "rejected",
    "set",
    "stored",
];

/// Every credential in `text`, ordered by start offset, overlaps merged to the first.
pub fn detect(text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (kind, pattern, ok) in FORMAT_RES.iter() {
        for c in pattern.captures_iter(text) {
            let Some(m) = c.name("s").or_else(|| c.get(0)) else {
                continue;
            };
            if ok(m.as_str()) {
                out.push(Finding {
                    kind: *kind,
                    start: m.start(),
                    end: m.end(),
                });
            }
        }
    }
    for c in ASSIGNMENT.captures_iter(text) {
        if let Some(f) = assignment(&c) {
            out.push(f);
        }
    }
    for c in PROSE.captures_iter(text) {
        if let Some(f) = prose(&c) {
            out.push(f);
        }
    }
    for c in BARE.captures_iter(text) {
        let Some(v) = c.name("val") else { continue };
        let (start, end) = trim_value(text, v.start(), v.end());
        if strong_password(&text[start..end]) {
            out.push(Finding {
                kind: CredentialKind::Password,
                start,
                end,
            });
        }
    }
    merge(out)
}

/// The distinct kinds in `findings`, sorted.
pub fn kinds(findings: &[Finding]) -> Vec<CredentialKind> {
    let mut k: Vec<CredentialKind> = findings.iter().map(|f| f.kind).collect();
    k.sort();
    k.dedup();
    k
}

/// The first credential kind in `text`, if any (what the write policy needs).
pub fn first_kind(text: &str) -> Option<CredentialKind> {
    detect(text).first().map(|f| f.kind)
}

/// `text` with every finding replaced by `[redacted <kind>]`.
pub fn mask(text: &str, findings: &[Finding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in findings {
        if f.start < last || f.end > text.len() {
            continue;
        }
        out.push_str(&text[last..f.start]);
        out.push_str("[redacted ");
        out.push_str(f.kind.as_str());
        out.push(']');
        last = f.end;
    }
    out.push_str(&text[last..]);
    out
}

fn assignment(c: &Captures) -> Option<Finding> {
    let key = c.name("key")?.as_str().to_ascii_lowercase();
    let v = c.name("val")?;
    let text = c.get(0)?.as_str();
    let base = c.get(0)?.start();
    let (start, end) = trim_value(text, v.start() - base, v.end() - base);
    let value = &text[start..end];
    if key_is_attribute(&key) {
        return None;
    }
    let quoted = c.name("q").is_some_and(|q| !q.as_str().is_empty());
    let code_sep = c.name("sep").is_some_and(|s| s.as_str() != ":");
    // An identifier-style key (`DB_PASSWORD`, `api.key`) is code, whatever the separator.
    let code_key = key.contains(['_', '.', '-']) || key == "apikey";
    let is_password = c.name("pw").is_some();
    let ok = if is_password {
        // `pass`/`pw` alone are too common as words to be keys in prose.
        let short_key = matches!(key.as_str(), "pass" | "pw");
        if code_sep || quoted || code_key {
            plausible_password(value)
        } else {
            !short_key && plausible_password(value) && !ordinary(value)
        }
    } else if matches!(key.as_str(), "auth" | "credential" | "credentials") {
        strong_secret(value) && (code_sep || quoted)
    } else {
        strong_secret(value)
    };
    ok.then_some(Finding {
        kind: if is_password {
            CredentialKind::Password
        } else {
            CredentialKind::SecretAssignment
        },
        start: base + start,
        end: base + end,
    })
}

fn prose(c: &Captures) -> Option<Finding> {
    let (v, is_password) = match (c.name("val"), c.name("val2")) {
        (Some(v), _) => (v, c.name("pw").is_some()),
        (None, Some(v)) => (v, c.name("pw2").is_some()),
        (None, None) => return None,
    };
    let text = c.get(0)?.as_str();
    let base = c.get(0)?.start();
    let (start, end) = trim_value(text, v.start() - base, v.end() - base);
    let value = &text[start..end];
    let quoted = c.name("q").is_some_and(|q| !q.as_str().is_empty());
    let ok = if is_password {
        plausible_password(value) && !ordinary(value) && (quoted || has_secret_texture(value))
    } else {
        strong_secret(value)
    };
    ok.then_some(Finding {
        kind: if is_password {
            CredentialKind::Password
        } else {
            CredentialKind::SecretAssignment
        },
        start: base + start,
        end: base + end,
    })
}

fn key_is_attribute(key: &str) -> bool {
    key.rsplit(['_', '.', '-'])
        .next()
        .is_some_and(|last| ATTRIBUTE_SEGMENTS.contains(&last))
}

/// Drops trailing sentence punctuation and closing brackets from a value span.
fn trim_value(text: &str, start: usize, end: usize) -> (usize, usize) {
    let v = &text[start..end];
    let trimmed = v.trim_end_matches(['.', ',', ';', ':', ')', ']', '}', '>']);
    (start, start + trimmed.len())
}

fn placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    let first = v.chars().next();
    let all_same = v.chars().all(|c| Some(c) == first);
    all_same
        || lower.starts_with("xxx")
        || matches!(first, Some('<' | '[' | '{' | '$' | '%' | '*' | '('))
        || lower.contains("redacted")
        || PLACEHOLDERS.contains(&lower.as_str())
        || lower.starts_with("your_")
        || lower.starts_with("your-")
        || lower.starts_with("my_")
}

fn ordinary(v: &str) -> bool {
    ORDINARY_WORDS.contains(&v.to_ascii_lowercase().as_str())
}

/// Anything that could be a password: four or more characters and not a placeholder.
fn plausible_password(v: &str) -> bool {
    v.chars().count() >= 4 && !placeholder(v)
}

/// A digit, a symbol (other than a hyphen or apostrophe between letters) or an inner
/// capital: what separates "hunter2!" from "incorrect".
fn has_secret_texture(v: &str) -> bool {
    let core = v.trim_end_matches(['!', '?']);
    let has_digit = v.chars().any(|c| c.is_ascii_digit());
    let has_symbol = core
        .chars()
        .any(|c| !c.is_alphanumeric() && c != '-' && c != '\'');
    let inner_upper = v.chars().skip(1).any(char::is_uppercase);
    has_digit || has_symbol || inner_upper
}

/// Character classes present: lower, upper, digit, symbol.
fn classes(v: &str) -> usize {
    let lower = v.chars().any(|c| c.is_lowercase());
    let upper = v.chars().any(|c| c.is_uppercase());
    let digit = v.chars().any(|c| c.is_ascii_digit());
    let symbol = v.chars().any(|c| !c.is_alphanumeric());
    [lower, upper, digit, symbol].iter().filter(|x| **x).count()
}

/// A bare "password X": long and mixing three character classes.
fn strong_password(v: &str) -> bool {
    v.chars().count() >= 8 && classes(v) >= 3 && !placeholder(v)
}

/// A token, key or secret value: at least eight characters with letters and digits, or
/// sixteen mixed-case letters; never a placeholder.
fn strong_secret(v: &str) -> bool {
    let n = v.chars().count();
    if placeholder(v) || n < 8 {
        return false;
    }
    let letters = v.chars().any(char::is_alphabetic);
    let digits = v.chars().any(|c| c.is_ascii_digit());
    (letters && digits) || (n >= 16 && classes(v) >= 2)
}

/// Random-looking: letters and digits both present (rules out hyphenated words).
fn random_looking(v: &str) -> bool {
    v.chars().any(|c| c.is_ascii_digit()) && v.chars().filter(char::is_ascii_alphabetic).count() > 4
}

/// Sorts by position and keeps the first of overlapping findings (a well-known format
/// found first wins over the assignment that contains it).
fn merge(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by_key(|f| (f.start, std::cmp::Reverse(f.end)));
    let mut out: Vec<Finding> = Vec::with_capacity(findings.len());
    for f in findings {
        match out.last_mut() {
            Some(prev) if f.start < prev.end => {
                prev.end = prev.end.max(f.end);
            }
            _ => out.push(f),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds_of(text: &str) -> Vec<CredentialKind> {
        kinds(&detect(text))
    }

    /// Texts that hold a credential, with the secret that must be masked and its kind.
    const POSITIVES: [(&str, &str, CredentialKind); 30] = [
        (
            "Here is the staging Stripe key: sk_test_51Hq8xLkT0kenABCDEF1234567890xyz, remember it",
            "sk_test_51Hq8xLkT0kenABCDEF1234567890xyz",
            CredentialKind::StripeKey,
        ),
        (
            "live key sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            CredentialKind::StripeKey,
        ),
        (
            "restricted rk_live_51Habc0123456789ABCDEFGH for reporting",
            "rk_live_51Habc0123456789ABCDEFGH",
            CredentialKind::StripeKey,
        ),
        (
            "Deploy step printed GITHUB_TOKEN=ghp_16C7e42F292c6912E7710c838347Ae178B4a while pushing tags.",
            "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
            CredentialKind::GithubToken,
        ),
        (
            "use github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ now",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
            CredentialKind::GithubToken,
        ),
        (
            "app token ghs_abcdefghijklmnopqrstuvwxyz0123456789 expired",
            "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
            CredentialKind::GithubToken,
        ),
        (
            "the access key id is AKIAIOSFODNN7EXAMPLE for the uploader",
            "AKIAIOSFODNN7EXAMPLE",
            CredentialKind::AwsAccessKeyId,
        ),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            CredentialKind::AwsSecretKey,
        ),
        (
            "bot token xoxb-2048-1024-a1B2c3D4e5F6g7H8 for #alerts",
            "xoxb-2048-1024-a1B2c3D4e5F6g7H8",
            CredentialKind::SlackToken,
        ),
        (
            "maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY in the config",
            "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY",
            CredentialKind::GoogleApiKey,
        ),
        (
            "export OPENAI_API_KEY sk-proj-Abc123Def456Ghi789Jkl012Mno345 before running",
            "sk-proj-Abc123Def456Ghi789Jkl012Mno345",
            CredentialKind::SkKey,
        ),
        (
            "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U leaked",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            CredentialKind::Jwt,
        ),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\nthanks",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
            CredentialKind::PrivateKey,
        ),
        (
            "connect with postgres://analytics_admin:s3cr3tPass@db.internal:5432/analytics",
            "s3cr3tPass",
            CredentialKind::UrlCredentials,
        ),
        (
            "curl -H 'Authorization: Bearer abcDEF123456ghiJKL789' https://api.test",
            "abcDEF123456ghiJKL789",
            CredentialKind::AuthorizationHeader,
        ),
        (
            "the db password is hunter2!",
            "hunter2!",
            CredentialKind::Password,
        ),
        (
            "admin user is analytics_admin with password Xk9#pq!2mLw7.",
            "Xk9#pq!2mLw7",
            CredentialKind::Password,
        ),
        ("pwd: Tr0ub4dor&3", "Tr0ub4dor&3", CredentialKind::Password),
        ("password=letmein", "letmein", CredentialKind::Password),
        (
            "DB_PASSWORD=correcthorse in the .env file",
            "correcthorse",
            CredentialKind::Password,
        ),
        ("passwd: Winter2026", "Winter2026", CredentialKind::Password),
        (
            "my password for the VPN is Summer#24",
            "Summer#24",
            CredentialKind::Password,
        ),
        (
            "the wifi password was changed to Blue-Fox-77",
            "Blue-Fox-77",
            CredentialKind::Password,
        ),
        (
            r#"{"user": "svc", "password": "plain"}"#,
            "plain",
            CredentialKind::Password,
        ),
        (
            "api_key=a1b2c3d4e5f6a7b8c9d0",
            "a1b2c3d4e5f6a7b8c9d0",
            CredentialKind::SecretAssignment,
        ),
        (
            "token: 9f8e7d6c5b4a39281706",
            "9f8e7d6c5b4a39281706",
            CredentialKind::SecretAssignment,
        ),
        (
            "client_secret: Q7w9Xz2Lk4Pm8Rt1",
            "Q7w9Xz2Lk4Pm8Rt1",
            CredentialKind::SecretAssignment,
        ),
        (
            "secret: 4f3c2b1a0e9d8c7b",
            "4f3c2b1a0e9d8c7b",
            CredentialKind::SecretAssignment,
        ),
        (
            "the API key is 7h1sIsAV3ryS3cr3tK3y",
            "7h1sIsAV3ryS3cr3tK3y",
            CredentialKind::SecretAssignment,
        ),
        (
            "x-api-key: zq81MUYkq0WvFbP2",
            "zq81MUYkq0WvFbP2",
            CredentialKind::SecretAssignment,
        ),
    ];

    /// Texts that talk about passwords, tokens and keys without holding one.
    const NEGATIVES: [&str; 32] = [
        "the user asked how to reset their password",
        "Customer 881 could not log in after the password reset e-mail expired.",
        "Office Wi-Fi password rotation completed for the Berlin office",
        "my password is incorrect, please help",
        "the password is too short",
        "password is case-sensitive",
        "password: ********",
        "password: <redacted>",
        "DB_PASSWORD=${DB_PASSWORD}",
        "token: expired",
        "max_tokens: 4096",
        "the token expired yesterday and the user had to log in again",
        "password_policy: 12 characters minimum",
        "token_expiry: 2026-10-01T00:00:00Z",
        "Subject: Password: Your reset link",
        "we rotated the API keys for all services last week",
        "secret santa is on Friday",
        "the secret to good bread is patience",
        "please use a password manager like 1Password",
        "the password must be at least 12 characters",
        "reset password flow v2 shipped",
        "I forgot my password again",
        "pass the salt",
        "all tests pass: 412 passed, 0 failed",
        "sk-learn is installed",
        "the task-force-of-engineers met today",
        "visit https://docs.example.com/guides/auth for details",
        "email me at jane@example.com",
        "Authorization: Bearer <key>",
        "order ORD-2024-55671 shipped on 2026-06-17",
        "Ticket: password reset for user 42",
        "the new password is stored in the vault",
    ];

    #[test]
    fn all_patterns_compile() {
        assert_eq!(FORMAT_RES.len(), FORMATS.len());
        assert!(ASSIGNMENT.is_match("password=x1y2"));
        assert!(PROSE.is_match("password is x"));
        assert!(BARE.is_match("password x"));
    }

    #[test]
    fn positives_are_detected_with_the_secret_span() {
        for (text, secret, kind) in POSITIVES {
            let found = detect(text);
            assert_eq!(found.len(), 1, "{text}: {found:?}");
            let f = found[0];
            assert_eq!(f.kind, kind, "{text}");
            assert_eq!(&text[f.start..f.end], secret, "{text}");
            let masked = mask(text, &found);
            assert!(!masked.contains(secret), "{masked}");
            assert!(masked.contains(&format!("[redacted {}]", kind.as_str())));
        }
    }

    #[test]
    fn negatives_are_not_credentials() {
        for text in NEGATIVES {
            let found = detect(text);
            assert!(found.is_empty(), "{text}: {:?}", kinds(&found));
            assert_eq!(first_kind(text), None);
        }
    }

    #[test]
    fn several_secrets_are_all_masked_and_kinds_are_distinct() {
        let text = "password=hunter22 and token: a1b2c3d4e5f6g7h8, again password=hunter22";
        let found = detect(text);
        assert_eq!(found.len(), 3);
        assert_eq!(
            kinds(&found),
            vec![CredentialKind::Password, CredentialKind::SecretAssignment]
        );
        let masked = mask(text, &found);
        assert!(!masked.contains("hunter22") && !masked.contains("a1b2c3d4"));
        assert_eq!(
            masked,
            "password=[redacted password] and token: [redacted secret_assignment], again password=[redacted password]"
        );
    }

    #[test]
    fn a_known_format_inside_an_assignment_is_one_finding_of_the_format_kind() {
        assert_eq!(
            kinds_of("STRIPE_SECRET_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
            vec![CredentialKind::StripeKey]
        );
    }

    #[test]
    fn an_unterminated_private_key_is_masked_to_the_end() {
        let text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA";
        let found = detect(text);
        assert_eq!(kinds(&found), vec![CredentialKind::PrivateKey]);
        assert_eq!(mask(text, &found), "[redacted private_key]");
    }

    #[test]
    fn debug_output_names_the_kind_and_offsets_only() {
        let text = "password=hunter22";
        let shown = format!("{:?}", detect(text));
        assert!(!shown.contains("hunter22"), "{shown}");
        assert!(shown.contains("Password"));
    }

    #[test]
    fn wire_names_are_snake_case() {
        assert_eq!(CredentialKind::GithubToken.as_str(), "github_token");
        assert_eq!(
            serde_json::to_value(CredentialKind::AwsAccessKeyId).expect("json"),
            "aws_access_key_id"
        );
    }
}
