//! The TypeScript package `clients/typescript`: its `node:test` suite (built with `tsc`)
//! runs against the real `episodic` binary this build made (`EPISODIC_BIN`), with the real
//! model: every route the client wraps, its typed errors, its types against
//! `/openapi.json`, and its retries through a fault-injecting proxy.
//!
//! The package is copied under the target directory (so the source tree gets no
//! `node_modules` or build output) and its locked devDependencies installed with `npm ci`
//! from the npm registry, reused while `package-lock.json` is unchanged. Nothing is
//! skipped: without `npm` (Node 20 or later) or without the registry the test fails saying so.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::model_dir;

fn package() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/typescript")
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().expect("name");
        if name == "node_modules" || name == "dist" {
            continue;
        }
        if path.is_dir() {
            copy_tree(&path, &to.join(name));
        } else {
            std::fs::copy(&path, to.join(name)).expect("copy");
        }
    }
}

fn npm(dir: &Path, args: &[&str], what: &str) -> std::process::Output {
    let out = Command::new("npm")
        .args(args)
        .current_dir(dir)
        .env("EPISODIC_BIN", env!("CARGO_BIN_EXE_episodic"))
        .env("EPISODIC_MODEL_DIR", model_dir())
        .env_remove("EPISODIC_ADMIN_KEY")
        .output()
        .unwrap_or_else(|e| {
            panic!("{what}: could not run npm ({e}); this test needs Node 20+ and npm on PATH")
        });
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn clients_typescript_node_test_suite_passes_against_the_real_binary() {
    let work = Path::new(env!("CARGO_TARGET_TMPDIR")).join("clients-typescript");
    let lock = std::fs::read(package().join("package-lock.json")).expect("package-lock.json");
    let installed = work.join("node_modules").join(".episodic-lock");
    let reuse = std::fs::read(&installed).is_ok_and(|l| l == lock);
    for name in ["src", "test", "dist"] {
        let _ = std::fs::remove_dir_all(work.join(name));
    }
    copy_tree(&package(), &work);
    if !reuse {
        npm(
            &work,
            &["ci", "--no-audit", "--no-fund", "--prefer-offline"],
            "npm ci (the locked devDependencies, from the npm registry)",
        );
        std::fs::write(&installed, &lock).expect("lock marker");
    }
    let out = npm(&work, &["test"], "npm test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let count = |label: &str| -> u64 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# {label} ")))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '# {label}' line in the node:test output:\n{stdout}"))
    };
    assert!(count("pass") > 0, "no test ran:\n{stdout}");
    assert_eq!(count("fail"), 0, "{stdout}");
    assert_eq!(count("skipped"), 0, "{stdout}");
    assert_eq!(count("cancelled"), 0, "{stdout}");
}
