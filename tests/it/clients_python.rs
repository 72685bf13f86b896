//! The Python package `clients/python` (`episodic-client`): its pytest suite runs against the
//! real `episodic` binary this build made (`EPISODIC_BIN`), with the real model. The suite
//! starts the server on loopback with a fresh data directory and keys made offline, and
//! covers every route the client wraps, its typed errors, its models against
//! `/openapi.json`, its retries (through a fault-injecting proxy) and the LangChain,
//! LangGraph and LlamaIndex adapters with the framework versions pinned in its extras.
//!
//! The package and its extras are installed from PyPI into a virtual environment under the
//! target directory (held to the exact versions of `constraints.txt`), made once and reused
//! while its marker matches `pyproject.toml` and `constraints.txt`; the
//! package itself is reinstalled whenever its sources change. Nothing is skipped: without
//! `python3 -m venv` (Debian's `python3-venv`) or without PyPI the test fails saying so.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::model_dir;

const EXTRAS: &str = "langchain,langgraph,llama-index,test";

fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/python")
}

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: could not run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fingerprint of every file under `dir` (paths and contents), for the reinstall marker.
fn fingerprint(dir: &Path, hasher: &mut DefaultHasher) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "__pycache__" || name.ends_with(".egg-info") {
            continue;
        }
        if path.is_dir() {
            fingerprint(&path, hasher);
        } else {
            path.hash(hasher);
            std::fs::read(&path).expect("source file").hash(hasher);
        }
    }
}

/// The venv's python with the package and its extras installed.
fn venv_python() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients-python-venv");
    let python = venv.join("bin").join("python");
    let deps_marker = venv.join("episodic-client-pyproject.toml");
    let pkg_marker = venv.join("episodic-client-sources.txt");
    // The extras' ranges, held to the exact tested versions by the constraints file.
    let pyproject = std::fs::read_to_string(package().join("pyproject.toml")).expect("pyproject")
        + &std::fs::read_to_string(package().join("constraints.txt")).expect("constraints.txt");
    let mut hasher = DefaultHasher::new();
    pyproject.hash(&mut hasher);
    fingerprint(&package().join("src"), &mut hasher);
    let sources = format!("{:016x}", hasher.finish());
    let spec = format!("{}[{EXTRAS}]", package().display());
    let pip = |args: &[&str], what: &str| {
        run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--quiet",
                ])
                .args(args),
            what,
        )
    };
    // pip builds the wheel in the source tree; a stale build/ could carry removed modules.
    let _ = std::fs::remove_dir_all(package().join("build"));
    let deps_current = std::fs::read_to_string(&deps_marker).unwrap_or_default();
    if deps_current != pyproject || !python.exists() {
        let _ = std::fs::remove_dir_all(&venv);
        let out = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .unwrap_or_else(|e| panic!("python3 -m venv: could not run python3: {e}"));
        assert!(
            out.status.success(),
            "python3 -m venv failed; this test needs it (Debian: apt-get install python3-venv):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let constraints = package().join("constraints.txt");
        pip(
            &[&spec, "-c", constraints.to_str().expect("utf-8 path")],
            &format!("pip install {spec} (the package and its extras, from PyPI)"),
        );
        std::fs::write(&deps_marker, &pyproject).expect("deps marker");
        std::fs::write(&pkg_marker, &sources).expect("sources marker");
    } else if std::fs::read_to_string(&pkg_marker).unwrap_or_default() != sources {
        pip(
            &["--no-deps", "--force-reinstall", &spec],
            "reinstalling the changed package",
        );
        std::fs::write(&pkg_marker, &sources).expect("sources marker");
    }
    // The venv holds exactly the tested versions (a reused venv too).
    let pins: Vec<(String, String)> = std::fs::read_to_string(package().join("constraints.txt"))
        .expect("constraints.txt")
        .lines()
        .filter_map(|l| l.split_once("=="))
        .map(|(name, version)| (name.trim().to_string(), version.trim().to_string()))
        .collect();
    let names: Vec<&str> = pins.iter().map(|(n, _)| n.as_str()).collect();
    let out = run(
        Command::new(&python).args([
            "-c",
            "import importlib.metadata as m, sys; print(' '.join(m.version(n) for n in sys.argv[1:]))",
        ]).args(&names),
        "reading the installed versions",
    );
    let installed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let pinned: Vec<String> = pins.iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        installed, pinned,
        "the venv's versions of {names:?} are not constraints.txt's"
    );
    python
}

#[test]
fn clients_python_pytest_suite_passes_against_the_real_binary() {
    let python = venv_python();
    let out = Command::new(&python)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q", "tests"])
        .current_dir(package())
        .env("EPISODIC_BIN", env!("CARGO_BIN_EXE_episodic"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("EPISODIC_ADMIN_KEY")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pytest failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout.lines().last().unwrap_or("");
    assert!(
        summary.contains(" passed") && !summary.contains("skipped"),
        "pytest ran no test or skipped some: {summary}"
    );
}
