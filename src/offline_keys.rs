//! `episodic keys create`: a tenant key made in a data directory while no server runs, so
//! an agent's `episodic mcp --stdio` (or a first `serve`) can be set up without starting a
//! server to call `POST /v1/admin/keys`.
//!
//! Invariants:
//! - A key is checked exactly as the admin route checks it: the flags become the route's
//!   body and go through [`crate::wire::new_key`]; a role beyond the built-in ones is
//!   accepted only if it is an approver role in use (the policy's, from `--policy`, or one an
//!   event awaiting review names, read by opening the engine on the directory, as the route
//!   asks the running engine).
//! - The data directory's lock ([`DataDirLock`]) is held from before the key store is read
//!   until the new key is durable. `serve` and `mcp --stdio` read the key store once, under
//!   the same lock, so a key made beside them would go unseen, and their next key change
//!   would overwrite it: while one runs, this refuses, naming the directory and the route
//!   to use instead.
//! - No admin key is made or needed; the plaintext key exists only in the answer.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{json, Map, Value};

use crate::auth::{KeyStore, NewKey};
use crate::engine::{DataDirLock, Engine, EngineConfig};
use crate::error::FieldError;
use crate::wire::new_key::{asks_for_other_roles, parse_new_key};

/// The flags of `episodic keys create`.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateKeyArgs {
    /// Directory holding the log, indexes and keys (created if missing).
    #[arg(long, env = "EPISODIC_DATA_DIR", default_value = "./data/var")]
    pub data_dir: PathBuf,
    /// The tenant the key is bound to (1-128 characters of A-Za-z0-9._:-).
    #[arg(long)]
    pub tenant: String,
    /// Comma-separated roles: writer, reader, operator, memory_reviewer, or an approver role
    /// in use (e.g. writer,reader).
    #[arg(long, value_delimiter = ',', required = true)]
    pub roles: Vec<String>,
    /// Comma-separated actors the key is limited to (default: every actor of the tenant).
    #[arg(long, value_delimiter = ',')]
    pub actor_ids: Option<Vec<String>>,
    /// The most restricted privacy class the key may read: public, internal (default),
    /// private or sensitive.
    #[arg(long)]
    pub max_privacy_class: Option<String>,
    /// What the key is for (1-128 characters).
    #[arg(long)]
    pub label: Option<String>,
    /// The sourceTrust a write with this key gets when it names none (default:
    /// agent_inferred), e.g. tool_result for a tool's pipeline.
    #[arg(long)]
    pub default_source_trust: Option<String>,
    /// The write-policy file the server runs with (its approver role may then be given).
    #[arg(long, env = "EPISODIC_POLICY")]
    pub policy: Option<PathBuf>,
    /// Print the answer of POST /v1/admin/keys (JSON) instead of the bare key.
    #[arg(long)]
    pub json: bool,
}

impl CreateKeyArgs {
    /// The body of `POST /v1/admin/keys` these flags stand for (role and actor entries
    /// trimmed of surrounding spaces, so `writer, reader` reads as two roles).
    pub fn body(&self) -> Value {
        let list = |items: &[String]| -> Value {
            items
                .iter()
                .map(|s| Value::String(s.trim().to_string()))
                .collect()
        };
        let mut body = Map::new();
        body.insert("tenantId".into(), json!(self.tenant));
        body.insert("roles".into(), list(&self.roles));
        if let Some(actors) = &self.actor_ids {
            body.insert("actorIds".into(), list(actors));
        }
        for (field, value) in [
            ("maxPrivacyClass", &self.max_privacy_class),
            ("label", &self.label),
            ("defaultSourceTrust", &self.default_source_trust),
        ] {
            if let Some(v) = value {
                body.insert(field.into(), json!(v));
            }
        }
        Value::Object(body)
    }
}

/// The flag a field of the admin route's body comes from.
fn flag_of(field: &str) -> &'static str {
    let base = field.split(['[', '.']).next().unwrap_or(field);
    match base {
        "tenantId" => "--tenant",
        "roles" => "--roles",
        "actorIds" => "--actor-ids",
        "maxPrivacyClass" => "--max-privacy-class",
        "label" => "--label",
        "defaultSourceTrust" => "--default-source-trust",
        _ => "",
    }
}

/// One line per field error, named by its flag (and its entry, for list flags).
fn describe(errors: &[FieldError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|e| {
            let flag = flag_of(&e.field);
            match (flag, e.field.contains('[')) {
                ("", _) => format!("  {}: {}", e.field, e.message),
                (flag, true) => format!("  {flag} ({}): {}", e.field, e.message),
                (flag, false) => format!("  {flag}: {}", e.message),
            }
        })
        .collect();
    format!("the key was not created:\n{}", lines.join("\n"))
}

/// Creates the key `args` describe in its data directory's key store and returns it (the
/// only copy of the plaintext). Blocking; fails while another process holds the directory.
pub fn create(args: &CreateKeyArgs) -> anyhow::Result<NewKey> {
    let body = args.body();
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let lock = DataDirLock::take(&args.data_dir).map_err(|e| {
        e.context(
            "keys create needs the data directory to itself (a running server reads its keys \
             once, at start); stop it first, or create the key with POST /v1/admin/keys and \
             the admin key while it runs",
        )
    })?;
    let keys = KeyStore::open_records(&args.data_dir)?;
    if !asks_for_other_roles(&body) {
        // Built-in roles only: no approver role to look up, so no engine to open.
        let input = parse_new_key(&body, &BTreeSet::new())
            .map_err(|p| anyhow::anyhow!(describe(&p.errors)))?;
        let new = input.create(&keys)?;
        drop(lock);
        return Ok(new);
    }
    let mut config = EngineConfig::new(args.data_dir.clone());
    if let Some(path) = &args.policy {
        let bytes = std::fs::read(path).with_context(|| format!("--policy {}", path.display()))?;
        config.policy =
            crate::policy::WritePolicy::from_json(&bytes).map_err(anyhow::Error::msg)?;
    }
    let engine = Engine::open_locked(config, Arc::new(crate::embed::OfflineEmbedder), lock)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let created = runtime.block_on(async {
        let approvers = engine
            .approver_roles()
            .await
            .map_err(|e| anyhow::anyhow!("reading the approver roles in use: {e}"))?;
        let input =
            parse_new_key(&body, &approvers).map_err(|p| anyhow::anyhow!(describe(&p.errors)))?;
        // Written while the engine, and with it the directory's lock, is still held.
        Ok::<_, anyhow::Error>(input.create(&keys)?)
    });
    runtime.block_on(engine.shutdown());
    created
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CreateKeyArgs,
    }

    fn args(argv: &[&str]) -> CreateKeyArgs {
        let mut all = vec!["keys"];
        all.extend_from_slice(argv);
        Cli::try_parse_from(all).expect("flags parse").args
    }

    #[test]
    fn flags_become_the_admin_routes_body() {
        let a = args(&[
            "--tenant",
            "acme",
            "--roles",
            "writer, reader",
            "--actor-ids",
            "user-1,user-2",
            "--max-privacy-class",
            "private",
            "--label",
            "desktop agent",
            "--default-source-trust",
            "tool_result",
        ]);
        assert_eq!(
            a.body(),
            json!({"tenantId": "acme", "roles": ["writer", "reader"],
                   "actorIds": ["user-1", "user-2"], "maxPrivacyClass": "private",
                   "label": "desktop agent", "defaultSourceTrust": "tool_result"})
        );
        let minimal = args(&["--tenant", "acme", "--roles", "reader"]);
        assert_eq!(
            minimal.body(),
            json!({"tenantId": "acme", "roles": ["reader"]})
        );
        assert!(Cli::try_parse_from(["keys", "--tenant", "acme"]).is_err());
    }

    #[test]
    fn field_errors_are_named_by_their_flags() {
        let text = describe(&[
            FieldError::new("roles[1]", "unknown role x; known roles: reader, writer"),
            FieldError::new("tenantId", "must be 1-128 characters of [A-Za-z0-9._:-]"),
            FieldError::new("defaultSourceTrust", "must be one of user_provided"),
        ]);
        assert_eq!(
            text,
            "the key was not created:\n  --roles (roles[1]): unknown role x; known roles: \
             reader, writer\n  --tenant: must be 1-128 characters of [A-Za-z0-9._:-]\n  \
             --default-source-trust: must be one of user_provided"
        );
    }

    #[test]
    fn a_key_made_offline_authenticates_and_bad_flags_make_none() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut a = args(&["--tenant", "acme", "--roles", "writer,reader"]);
        a.data_dir = dir.path().join("var");
        let new = create(&a).expect("created");
        assert!(new.key.starts_with("epi_"));
        assert_eq!(new.record.roles, vec!["reader", "writer"]);
        let keys = KeyStore::open_records(&a.data_dir).expect("keys");
        let p = keys.authenticate(&new.key).expect("the key is stored");
        assert_eq!(p.tenant(), Some("acme"));
        assert!(!a.data_dir.join("admin.key").exists());

        let mut bad = args(&["--tenant", "acme", "--roles", "writer,admin"]);
        bad.data_dir = a.data_dir.clone();
        let err = format!("{:#}", create(&bad).expect_err("admin is refused"));
        assert!(
            err.contains("--roles (roles[1]): tenant keys cannot hold admin"),
            "{err}"
        );
        assert_eq!(
            KeyStore::open_records(&a.data_dir)
                .expect("keys")
                .list()
                .len(),
            1
        );

        // A role beyond the built-in ones: known only as the policy's approver role.
        let mut officer = args(&["--tenant", "acme", "--roles", "reader,privacy_officer"]);
        officer.data_dir = a.data_dir.clone();
        let err = format!("{:#}", create(&officer).expect_err("not a role in use"));
        assert!(
            err.contains("unknown role privacy_officer; known roles: memory_reviewer, operator, reader, writer"),
            "{err}"
        );
        let policy = dir.path().join("policy.json");
        std::fs::write(
            &policy,
            r#"{"version": "v2", "approverRole": "privacy_officer"}"#,
        )
        .expect("policy");
        officer.policy = Some(policy);
        let made = create(&officer).expect("the policy's approver role");
        assert_eq!(made.record.roles, vec!["privacy_officer", "reader"]);

        let _held = DataDirLock::take(&a.data_dir).expect("lock");
        let err = format!("{:#}", create(&a).expect_err("the directory is in use"));
        assert!(err.contains("in use by another episodic process"), "{err}");
        assert!(err.contains("POST /v1/admin/keys"), "{err}");
    }
}
