//! Helpers shared by the benches: a process's resident memory and a directory's size.

#![allow(dead_code)] // each bench uses a subset

use std::path::Path;

/// The server's allocator (see `src/main.rs`), so that in-process figures match it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

/// The vocabulary the HTTP benches make events and queries from.
pub const ACTORS: usize = 20;
pub const PROJECTS: usize = 5;
pub const TYPES: [&str; 4] = [
    "user_preference_stated",
    "correction_received",
    "task_milestone",
    "incident_or_failure",
];
pub const SUBJECTS: [&str; 16] = [
    "renewal notices",
    "the invoice format",
    "support hours",
    "the shipping address",
    "password reset emails",
    "the data export",
    "meeting reminders",
    "the billing currency",
    "the staging deployment",
    "the weekly report",
    "dark mode in the dashboard",
    "the API rate limit",
    "the onboarding checklist",
    "refund requests",
    "the mobile app crash",
    "the database migration",
];
pub const VERBS: [&str; 10] = [
    "asked to change",
    "confirmed",
    "complained about",
    "requested a copy of",
    "wants weekly updates on",
    "approved the plan for",
    "reported a problem with",
    "corrected the details of",
    "finished the work on",
    "asked for help with",
];
pub const CHANNELS: [&str; 6] = [
    "by email",
    "over chat",
    "in the support ticket",
    "during the call",
    "in a comment on the tracker",
    "through the mobile app",
];
pub const QUESTIONS: [&str; 6] = [
    "What did the user say about {}?",
    "Has anyone reported problems with {}?",
    "How does the customer want {} handled?",
    "What changed recently regarding {}?",
    "Who confirmed {} and when?",
    "Any corrections about {}?",
];
