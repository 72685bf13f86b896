//! `episodic keys create` through the real binary: a key made offline works once the server
//! starts, the admin route's checks hold for the flags, and a running server's data
//! directory is refused.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::{event, model_dir};
use crate::server_binary::{free_port, spawn, stop, wait_ready};

fn keys_create(data_dir: &Path, flags: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_episodic"))
        .args(["keys", "create"])
        .args(flags)
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("EPISODIC_DATA_DIR")
        .env_remove("EPISODIC_CONFIG")
        .env_remove("EPISODIC_POLICY")
        .output()
        .expect("run episodic keys create")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// `episodic keys create` on `data_dir` (no server running): the plaintext key it prints.
pub(crate) fn create_key_offline(data_dir: &Path, tenant: &str, roles: &str) -> String {
    let out = keys_create(data_dir, &["--tenant", tenant, "--roles", roles]);
    assert!(out.status.success(), "keys create: {}", stderr(&out));
    let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        key.starts_with("epi_") && !key.contains('\n'),
        "one key on stdout: {key}"
    );
    key
}

#[test]
fn flags_are_checked_as_the_admin_route_checks_a_body() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = keys_create(
        dir.path(),
        &[
            "--tenant",
            "acme",
            "--roles",
            "writer,reader",
            "--label",
            "desktop agent",
            "--default-source-trust",
            "tool_result",
            "--max-privacy-class",
            "private",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let made: Value = serde_json::from_slice(&out.stdout).expect("the admin route's answer");
    assert!(made["key"].as_str().is_some_and(|k| k.starts_with("epi_")));
    assert_eq!(made["tenantId"], "acme");
    assert_eq!(made["roles"], json!(["reader", "writer"]));
    assert_eq!(made["label"], "desktop agent");
    assert_eq!(made["defaultSourceTrust"], "tool_result");
    assert_eq!(made["maxPrivacyClass"], "private");
    assert!(
        stderr(&out).contains("shown only this once"),
        "{}",
        stderr(&out)
    );
    assert!(
        !dir.path().join("admin.key").exists(),
        "no admin key is made"
    );

    // Every problem at once, each named by its flag; nothing is created.
    let out = keys_create(
        dir.path(),
        &[
            "--tenant",
            "acme corp",
            "--roles",
            "writer,reviewer",
            "--default-source-trust",
            "trusted",
        ],
    );
    assert!(!out.status.success());
    let err = stderr(&out);
    for expected in [
        "the key was not created",
        "--tenant: must be 1-128 characters",
        "--roles (roles[1]): unknown role reviewer; known roles: memory_reviewer, operator, reader, writer",
        "--default-source-trust: must be one of user_provided",
    ] {
        assert!(err.contains(expected), "{expected}: {err}");
    }
    let out = keys_create(dir.path(), &["--tenant", "acme", "--roles", "admin"]);
    assert!(stderr(&out).contains("tenant keys cannot hold admin"));
    let stored = std::fs::read_to_string(dir.path().join("keys.json")).expect("keys");
    let stored: Vec<Value> = serde_json::from_str(&stored).expect("records");
    assert_eq!(stored.len(), 1, "only the valid key was stored");
}

#[test]
fn a_key_made_offline_works_once_the_server_starts_and_a_running_server_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = create_key_offline(dir.path(), "acme", "writer,reader");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let child = spawn(dir.path(), port, &model_dir());
    let http = reqwest::blocking::Client::new();
    let checks = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_ready(&http, &base);
        let written = http
            .post(format!("{base}/v1/events"))
            .bearer_auth(&key)
            .json(&event(
                "u1",
                "The customer asked for renewal notices by email",
                "2026-06-17T09:20:00Z",
            ))
            .send()
            .expect("write");
        assert_eq!(written.status().as_u16(), 201);
        // The server read the keys once, at start, under the directory's lock: a key made
        // beside it would go unseen, so making one is refused, naming the way that works.
        let out = keys_create(dir.path(), &["--tenant", "acme", "--roles", "reader"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(err.contains("in use by another episodic process"), "{err}");
        assert!(err.contains("POST /v1/admin/keys"), "{err}");
        assert!(out.stdout.is_empty(), "no key printed");
    }));
    stop(child);
    if let Err(failed) = checks {
        std::panic::resume_unwind(failed);
    }
}
