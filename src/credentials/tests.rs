//! Tests of `credentials`.

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

/// An API key of this server's format (`epi_<16 hex>_<43 base64url>`).
const EPI_KEY: &str = "epi_3f9a0c1d2e4b5a6f_CzBVep_E6Q4zWH2ix-wRNluApcrvFDleg6jN8hc8YYY";
/// The generated admin key's format.
const EPI_ADMIN: &str = "epi_admin_BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY";

/// Forms beyond the first table: this server's keys, tokens and key words
/// split by invisible characters, and the short password labels. Each: text, the text
/// that must be gone once masked, kind.
fn hardened_positives() -> Vec<(String, &'static str, CredentialKind)> {
    let key = EPI_KEY;
    vec![
        (
            format!("use {key} for the agent"),
            key,
            CredentialKind::EpisodicKey,
        ),
        (
            format!("Authorization: Bearer {key}"),
            key,
            CredentialKind::EpisodicKey,
        ),
        (
            format!("admin key is {EPI_ADMIN}."),
            EPI_ADMIN,
            CredentialKind::EpisodicKey,
        ),
        (
            format!("EPISODIC_API_KEY={key}"),
            key,
            CredentialKind::EpisodicKey,
        ),
        (
            format!("{}\u{200B}{}", &key[..20], &key[20..]),
            "CzBVep_E6Q4zWH2ix",
            CredentialKind::EpisodicKey,
        ),
        (
            "token ghp_16C7e42F292c\u{200C}6912E7710c838347Ae178B4a here".into(),
            "6912E7710c838347Ae178B4a",
            CredentialKind::GithubToken,
        ),
        (
            "sk_live_4eC39Hq\u{200D}LyjWDarjtT1zdp7dc".into(),
            "LyjWDarjtT1zdp7dc",
            CredentialKind::StripeKey,
        ),
        (
            "AKIAIOSF\u{2060}ODNN7EXAMPLE".into(),
            "ODNN7EXAMPLE",
            CredentialKind::AwsAccessKeyId,
        ),
        (
            "\u{FEFF}xoxb-2048-1024-a1B2c3\u{AD}D4e5F6g7H8".into(),
            "D4e5F6g7H8",
            CredentialKind::SlackToken,
        ),
        (
            "pass\u{200B}word=hunter22".into(),
            "hunter22",
            CredentialKind::Password,
        ),
        ("pw: hunter22".into(), "hunter22", CredentialKind::Password),
        (
            "PW: Tr0ub4dor".into(),
            "Tr0ub4dor",
            CredentialKind::Password,
        ),
        ("pw=letmein".into(), "letmein", CredentialKind::Password),
        ("pwd=letmein".into(), "letmein", CredentialKind::Password),
        ("pwd = s3cret!".into(), "s3cret!", CredentialKind::Password),
        (
            "passwd hunter22".into(),
            "hunter22",
            CredentialKind::Password,
        ),
        (
            "login root passwd Winter#9".into(),
            "Winter#9",
            CredentialKind::Password,
        ),
        (
            "passwd: sunshine".into(),
            "sunshine",
            CredentialKind::Password,
        ),
        (
            "password is hunter22".into(),
            "hunter22",
            CredentialKind::Password,
        ),
        (
            "the password is: Xk9pq2mLw".into(),
            "Xk9pq2mLw",
            CredentialKind::Password,
        ),
        (
            "Password is `sunshine`".into(),
            "sunshine",
            CredentialKind::Password,
        ),
        (
            "my pw is hunter22".into(),
            "hunter22",
            CredentialKind::Password,
        ),
        (
            "the pwd is Summer2026".into(),
            "Summer2026",
            CredentialKind::Password,
        ),
    ]
}

/// Ordinary text near the hardened forms that must stay clean.
const HARDENED_NEGATIVES: [&str; 20] = [
    "keys look like epi_<keyId>_<secret>",
    "the epi_ prefix marks this server's keys",
    "epi_3f9a0c1d2e4b5a6f_short",
    "epi_admin_ was revoked and replaced",
    "zero\u{200B}width characters are harmless in prose",
    "soft\u{AD}hyphen\u{AD}ated words wrap nicely",
    "token\u{200B}: expired",
    "pw: ********",
    "pw: n/a",
    "the pw is expired",
    "passwd file permissions were fixed",
    "edited /etc/passwd and /etc/shadow",
    "ran passwd -l bob to lock the account",
    "the pwd command prints the working directory",
    "PWD=/home/deploy/app",
    "the pwd is /srv/episodic",
    "password is required",
    "the password is still valid",
    "boarding pass: gate B12",
    "pass: the salt",
];

#[test]
fn hardened_positives_are_detected_and_masked() {
    for (text, secret, kind) in hardened_positives() {
        let found = detect(&text);
        assert_eq!(found.len(), 1, "{text:?}: {found:?}");
        assert_eq!(found[0].kind, kind, "{text:?}");
        let masked = mask(&text, &found);
        assert!(!masked.contains(secret), "{masked:?}");
        assert!(
            masked.contains(&format!("[redacted {}]", kind.as_str())),
            "{masked:?}"
        );
    }
}

#[test]
fn hardened_negatives_are_not_credentials() {
    for text in HARDENED_NEGATIVES {
        let found = detect(text);
        assert!(found.is_empty(), "{text:?}: {:?}", kinds(&found));
    }
}

#[test]
fn a_split_token_is_masked_with_its_invisible_characters() {
    let text = "key ghp_16C7e42F292c\u{200B}6912E7710c838347Ae178B4a\u{200B} end";
    let found = detect(text);
    assert_eq!(mask(text, &found), "key [redacted github_token] end");
    assert!(found
        .iter()
        .all(|f| text.is_char_boundary(f.start) && text.is_char_boundary(f.end)));
}

#[test]
fn the_servers_own_key_is_masked_whole() {
    let text = format!("saved {EPI_KEY} in the notes");
    let found = detect(&text);
    assert_eq!(&text[found[0].start..found[0].end], EPI_KEY);
}

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
