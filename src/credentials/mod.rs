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
//! - well-known token formats are matched by their published prefix and shape (this
//!   server's own API keys `epi_<keyId>_<secret>`, Stripe, GitHub, AWS, Slack, Google,
//!   OpenAI-style `sk-`, JWT, PEM private keys, `scheme://user:password@host`,
//!   `Authorization: Bearer|Basic`);
//! - characters that render as nothing (zero-width space, non-joiner and joiner, word
//!   joiner, invisible operators, soft hyphen, BOM, bidi marks and controls, tag
//!   characters) are ignored while matching, so a token or key word split by one is found
//!   as if it were whole; the finding's span is mapped back to the original text and
//!   covers the invisible characters inside it;
//! - assignments ("password=…", "DB_PASSWORD: …", "pw: …", "the db password is …",
//!   "password is: …", "with password …", "passwd …", "api_key=…", "token: …") need a key
//!   word *and* a value that looks like a secret, and the bar rises as the phrasing gets
//!   looser: `=` or a `pw:`/`pwd:`/`passwd:` label accepts any non-placeholder password,
//!   prose ("… password is X", "pwd is X") needs a digit, symbol or inner capital in X, a
//!   bare "passwd X" / "pwd X" needs the same, and a bare "password X" needs a long value
//!   mixing three character classes; an absolute path after `pwd` (`PWD=/home/app`, "pwd is
//!   /srv") is the working directory, not a password; token/key/secret
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
//! are high-entropy strings with no key word or known prefix, nor a key word or token
//! written in look-alike letters (fullwidth `ｐａｓｓｗｏｒｄ`, Cyrillic `а`) or split by
//! visible characters (spaces, dots).

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
    /// This server's own API key (`epi_<keyId>_<secret>`).
    EpisodicKey,
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
            CredentialKind::EpisodicKey => "episodic_key",
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

const FORMATS: [Format; 12] = [
    (
        CredentialKind::EpisodicKey,
        r"\bepi_(?:[0-9A-Fa-f]{16}|admin)_[0-9A-Za-z_-]{43,}",
        |_| true,
    ),
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
        r#"(?i)\b(?:(?P<pw>password|passwd|passphrase|passcode|pwd|pw)|{SECRET_WORDS}|api key|access key|secret key)\b(?:\s+(?:for|to|on|of)\s+(?:the\s+|my\s+|our\s+|your\s+)?[\w.-]+(?:\s+[\w.-]+)?)?\s+(?:is|was|are|=):?(?:\s+(?:now|still|currently|just))?(?:\s+(?:set|changed|reset|updated))?(?:\s+to)?\s+(?P<q>["'`]?)(?P<val>[^\s"'`]+)|\b(?P<pw2>password|passwd|passphrase|pwd)\s+(?:has\s+been\s+|was\s+|got\s+)?(?:set|changed|reset|updated)\s+to\s+["'`]?(?P<val2>[^\s"'`]+)"#
    ))
});

/// Bare: "user admin with password X", "login root / password X", "passwd X".
static BARE: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"(?i)\b(?:(?P<tech>passwd|pwd)|password|passphrase)\s+["'`]?(?P<val>[^\s"'`]+)"#)
});

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

/// Characters that render as nothing, so they can split a token or key word without
/// changing how the text reads.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{AD}' | '\u{34F}' | '\u{61C}' | '\u{180E}' | '\u{200B}'..='\u{200F}'
        | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206F}'
        | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

/// `text` without its invisible characters, and where each remaining byte came from.
struct Visible {
    text: String,
    /// `origin[i]` is the offset in the original text of byte `i` of `text`;
    /// `origin[text.len()]` is the original length.
    origin: Vec<usize>,
}

impl Visible {
    /// `None` when `text` has no invisible character (the common case: no copy).
    fn of(text: &str) -> Option<Visible> {
        if !text.chars().any(is_invisible) {
            return None;
        }
        let mut visible = String::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len() + 1);
        for (at, c) in text.char_indices().filter(|(_, c)| !is_invisible(*c)) {
            visible.push(c);
            origin.extend((0..c.len_utf8()).map(|k| at + k));
        }
        origin.push(text.len());
        Some(Visible {
            text: visible,
            origin,
        })
    }

    /// The finding's span in the original text; an end maps to the next visible character,
    /// so invisible characters right after a secret are masked with it.
    fn map(&self, f: Finding) -> Finding {
        Finding {
            start: self.origin[f.start],
            end: self.origin[f.end],
            ..f
        }
    }
}

/// Every credential in `text`, ordered by start offset, overlaps merged to the first.
/// Invisible characters are ignored while matching; spans refer to `text` as given.
pub fn detect(text: &str) -> Vec<Finding> {
    match Visible::of(text) {
        None => detect_visible(text),
        Some(v) => detect_visible(&v.text)
            .into_iter()
            .map(|f| v.map(f))
            .collect(),
    }
}

fn detect_visible(text: &str) -> Vec<Finding> {
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
        let value = &text[start..end];
        // `passwd`/`pwd` are labels, not words: a value with secret texture after one is
        // a password; after "password" prose is common, so the value must be strong.
        let ok = if c.name("tech").is_some() {
            plausible_password(value)
                && !ordinary(value)
                && has_secret_texture(value)
                && !path_like(value)
        } else {
            strong_password(value)
        };
        if ok {
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
        if key.rsplit(['_', '.', '-']).next() == Some("pwd") && path_like(value) {
            // `PWD=/home/app`: the working directory.
            return None;
        }
        // `pass` alone is too common a word to be a key in prose ("boarding pass: 12A").
        let short_key = key == "pass";
        if code_sep || quoted || code_key {
            plausible_password(value)
        } else if short_key {
            plausible_password(value) && has_secret_texture(value) && !ordinary(value)
        } else {
            plausible_password(value) && !ordinary(value)
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
        plausible_password(value)
            && !ordinary(value)
            && (quoted || has_secret_texture(value))
            && !path_like(value)
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

/// An absolute or home-relative path (what `pwd` prints), not a password.
fn path_like(v: &str) -> bool {
    v.starts_with('/') || v.starts_with("~/") || v.starts_with("./")
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
mod tests;
