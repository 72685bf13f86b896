//! Helpers shared by the benches: a process's resident memory and a directory's size.

#![allow(dead_code)] // each bench uses a subset

use std::path::Path;

/// A `kB` field of `/proc/<pid>/status` (`pid` may be `self`), such as `VmRSS` or `RssAnon`;
/// 0 where unavailable.
pub fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Bytes of every file under `dir` (0 when it cannot be read).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
