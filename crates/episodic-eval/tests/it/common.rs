//! Shared fixtures: the repository's paths, the real model (loaded once) and recall floor
//! assertions.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use episodic::embed::FastEmbedder;
use episodic_eval::metrics::OVERALL;
use episodic_eval::ArmReport;

/// The repository root (this crate lives in `crates/episodic-eval`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `rel` under the shared benchmark data beside the repository clone; panics naming what is
/// missing when it is not there.
pub fn shared_data(rel: &str) -> PathBuf {
    let path = repo_root().join("../shared/data").join(rel);
    assert!(
        path.exists(),
        "benchmark data not found at {}: the eval tests need the shared benchmark data ({rel}) \
         beside the repository clone",
        path.display()
    );
    path
}

/// The repository's models directory.
pub fn model_dir() -> PathBuf {
    repo_root().join("models")
}

/// The real model, loaded once per test binary.
pub fn real_model() -> Arc<FastEmbedder> {
    static MODEL: OnceLock<Arc<FastEmbedder>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Arc::new(
                FastEmbedder::load(&model_dir())
                    .expect("model files present: run bash models/fetch.sh"),
            )
        })
        .clone()
}

/// Overall recall@k of the ablation arm `name`.
pub fn arm_recall<'a>(arms: &'a [ArmReport], name: &str) -> &'a BTreeMap<usize, f64> {
    &arms
        .iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("ablation arm {name}"))
        .groups[OVERALL]
        .recall
}

/// Asserts that `recall` is at least each `(k, floor)`.
pub fn assert_floors(recall: &BTreeMap<usize, f64>, floors: &[(usize, f64)]) {
    for &(k, floor) in floors {
        assert!(
            recall[&k] >= floor,
            "recall@{k} {:.3} fell below {floor}",
            recall[&k]
        );
    }
}

/// Asserts that the recall of `with` beats that of `without` at each cut-off in `ks`.
pub fn assert_lifts(
    what: &str,
    with: &BTreeMap<usize, f64>,
    without: &BTreeMap<usize, f64>,
    ks: &[usize],
) {
    for k in ks {
        assert!(
            with[k] > without[k],
            "{what} must lift recall@{k}: {:.3} against {:.3} without it",
            with[k],
            without[k]
        );
    }
}
