//! The MCP tools through the official MCP Python SDK (`mcp` on PyPI, pinned below), as an
//! agent's host uses them: `tests/clients/mcp_sdk_client.py` starts the real `episodic mcp
//! --stdio` binary, and talks to `/mcp` of the real `episodic serve`, with a key made offline
//! by `episodic keys create`. It lists the tools, records an event with only the minimal
//! arguments, recalls it (the SDK checks the structured result against the recall tool's
//! output schema), corrects it partially and checks that errors are problem-shaped.
//!
//! The SDK is installed from PyPI into a virtual environment under the target directory,
//! made once and reused while it holds the pinned version. Nothing is skipped: without
//! `python3 -m venv` (Debian's `python3-venv`) or without PyPI the test fails saying so.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

use crate::cli_keys::create_key_offline;
use crate::common::model_dir;
use crate::server_binary::{free_port, spawn, stop, wait_ready};

/// The SDK version the client script is written for.
const MCP_SDK_VERSION: &str = "2.3.0";

fn script() -> &'static str {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/clients/mcp_sdk_client.py"
    )
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("{what}: could not run {cmd:?}: {e}"))
}

fn must(out: std::process::Output, what: &str) -> std::process::Output {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The virtual environment's python with the pinned SDK: reused when its marker names the
/// pinned version, else made anew (`python3 -m venv`, then pip from PyPI).
fn sdk_python() -> PathBuf {
    static MADE: Mutex<Option<PathBuf>> = Mutex::new(None);
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(python) = made.as_ref() {
        return python.clone();
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-sdk-venv");
    let python = venv.join("bin").join("python");
    let marker = venv.join("episodic-mcp-sdk.txt");
    let pinned = format!("mcp=={MCP_SDK_VERSION}");
    let current = std::fs::read_to_string(&marker).unwrap_or_default();
    if current.trim() != pinned || !python.exists() {
        let _ = std::fs::remove_dir_all(&venv);
        let out = run(
            Command::new("python3").args(["-m", "venv"]).arg(&venv),
            "python3 -m venv",
        );
        assert!(
            out.status.success(),
            "python3 -m venv failed; this test needs it (Debian: apt-get install python3-venv):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        must(
            run(
                Command::new(&python).args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--quiet",
                    &pinned,
                ]),
                "pip install",
            ),
            &format!("pip install {pinned} from PyPI"),
        );
        std::fs::write(&marker, &pinned).expect("venv marker");
    }
    let out = must(
        run(
            Command::new(&python).args([
                "-c",
                "import importlib.metadata as m; print(m.version('mcp'))",
            ]),
            "the SDK version",
        ),
        "reading the SDK version",
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        MCP_SDK_VERSION,
        "the venv holds another SDK version"
    );
    *made = Some(python.clone());
    python
}

/// Runs the client script with `args` and returns its JSON summary.
fn client(args: &[&str]) -> Value {
    let out = must(
        run(
            Command::new(sdk_python()).arg(script()).args(args),
            "the MCP SDK client",
        ),
        "the MCP SDK client",
    );
    let summary: Value =
        serde_json::from_slice(&out.stdout).expect("the client prints one JSON object");
    assert_eq!(
        summary["errors"],
        serde_json::json!([
            "validation_failed",
            "validation_failed",
            "not_found",
            "protocol:bad_request"
        ]),
        "{summary}"
    );
    assert!(
        summary["hits"].as_u64().is_some_and(|n| n >= 1),
        "{summary}"
    );
    summary
}

#[test]
fn the_python_sdk_drives_every_step_over_stdio_with_a_key_made_offline() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = create_key_offline(dir.path(), "acme", "writer,reader");
    let summary = client(&[
        "stdio",
        "--binary",
        env!("CARGO_BIN_EXE_episodic"),
        "--data-dir",
        dir.path().to_str().expect("utf-8 path"),
        "--model-dir",
        model_dir().to_str().expect("utf-8 path"),
        "--key",
        &key,
    ]);
    assert_eq!(summary["transport"], "stdio");
}

#[test]
fn the_python_sdk_drives_every_step_over_streamable_http() {
    let dir = tempfile::tempdir().expect("tmp");
    let key = create_key_offline(dir.path(), "acme", "writer,reader");
    let port = free_port();
    let child = spawn(dir.path(), port, &model_dir());
    wait_ready(
        &reqwest::blocking::Client::new(),
        &format!("http://127.0.0.1:{port}"),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    let ran = std::panic::catch_unwind(|| client(&["http", "--url", &url, "--key", &key]));
    stop(child);
    let summary = ran.unwrap_or_else(|failed| std::panic::resume_unwind(failed));
    assert_eq!(summary["transport"], "http");
}
