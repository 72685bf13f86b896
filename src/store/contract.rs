//! The contract of [`EventLog`], as tests any implementation must pass: [`check_core`] takes
//! a constructor of fresh, empty logs and runs every check every log must pass against it;
//! [`check_in_place`] adds those of a log that rewrites and skips sequences in place (the
//! file log), and [`check_all`] runs both. The file log runs them in its own tests, the NATS
//! stream log runs [`check_core`] against a real cluster (`tests/it/nats_log.rs`).
//!
//! What cannot be observed through the trait (one sync per batch, what a crash leaves) is
//! each implementation's own tests' business (the file log's torn-tail and corruption
//! tests, the `crash` and `disk_full` integration tests).

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

use super::log::{LogError, LogRecord};
use super::EventLog;

/// Opens one log: its first call creates it empty, every later call opens it again (a
/// restart), seeing what earlier handles made durable. Earlier handles are dropped first.
pub type Opener = Box<dyn FnMut() -> Box<dyn EventLog>>;

/// Runs every check; `fresh` returns an opener of a new, empty log each time it is called.
pub fn check_all(fresh: &dyn Fn() -> Opener) {
    check_core(fresh);
    check_in_place(fresh);
}

/// The checks every log passes: appends, reads, reopening, erasure, size.
pub fn check_core(fresh: &dyn Fn() -> Opener) {
    starts_empty(fresh());
    appends_get_consecutive_sequences(fresh());
    reads_start_at_a_sequence(fresh());
    appends_survive_a_reopen(fresh());
    erase_removes_only_the_named_records(fresh());
    erase_keeps_the_last_record(fresh());
    size_grows_with_appends(fresh());
}

/// The checks of a log that rewrites records (in place, or by rotating to a new copy).
pub fn check_rewrite(fresh: &dyn Fn() -> Opener) {
    rewrite_keeps_sequences_and_never_goes_back(fresh());
    rewrite_refuses_unordered_records(fresh());
}

/// The checks of a log that rewrites records and skips sequences in place.
pub fn check_in_place(fresh: &dyn Fn() -> Opener) {
    check_rewrite(fresh);
    advance_to_skips_sequences_for_good(fresh());
}

fn all(log: &dyn EventLog) -> Vec<(u64, Vec<u8>)> {
    log.read_from(0)
        .unwrap()
        .map(|r| r.map(|r| (r.seq, r.payload)))
        .collect::<Result<_, LogError>>()
        .unwrap()
}

fn rec(seq: u64, payload: &[u8]) -> (u64, Vec<u8>) {
    (seq, payload.to_vec())
}

fn log_record(seq: u64, payload: &[u8]) -> LogRecord {
    LogRecord {
        seq,
        payload: payload.to_vec(),
    }
}

fn starts_empty(mut open: Opener) {
    let log = open();
    assert_eq!(
        log.next_seq(),
        super::log::FIRST_SEQ,
        "a new log starts at 1"
    );
    assert!(all(log.as_ref()).is_empty(), "a new log holds nothing");
}

fn appends_get_consecutive_sequences(mut open: Opener) {
    let mut log = open();
    assert_eq!(log.append_batch(&[b"a", b"", b"c"]).unwrap(), vec![1, 2, 3]);
    assert!(log.append_batch(&[]).unwrap().is_empty(), "an empty batch");
    assert_eq!(log.next_seq(), 4, "an empty batch consumes no sequence");
    assert_eq!(log.append_batch(&[b"d"]).unwrap(), vec![4]);
    assert_eq!(log.next_seq(), 5);
    let want = vec![rec(1, b"a"), rec(2, b""), rec(3, b"c"), rec(4, b"d")];
    assert_eq!(
        all(log.as_ref()),
        want,
        "read back in order, payloads intact"
    );
}

fn reads_start_at_a_sequence(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a", b"b", b"c", b"d"]).unwrap();
    let from = |log: &dyn EventLog, seq| -> Vec<u64> {
        log.read_from(seq)
            .unwrap()
            .map(|r| r.unwrap().seq)
            .collect()
    };
    assert_eq!(from(log.as_ref(), 3), vec![3, 4]);
    assert_eq!(from(log.as_ref(), 1), vec![1, 2, 3, 4]);
    assert_eq!(from(log.as_ref(), 4), vec![4]);
    assert!(from(log.as_ref(), 5).is_empty(), "nothing after the end");
}

fn appends_survive_a_reopen(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"one", b"two"]).unwrap();
    log.append_batch(&[b"three"]).unwrap();
    drop(log);
    let mut log = open();
    assert_eq!(
        all(log.as_ref()),
        vec![rec(1, b"one"), rec(2, b"two"), rec(3, b"three")]
    );
    assert_eq!(log.next_seq(), 4, "sequences continue after a reopen");
    assert_eq!(log.append_batch(&[b"four"]).unwrap(), vec![4]);
}

fn rewrite_keeps_sequences_and_never_goes_back(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a", b"b", b"c", b"d", b"e"]).unwrap();
    log.rewrite(&[log_record(2, b"b"), log_record(4, b"D!")])
        .unwrap();
    assert_eq!(all(log.as_ref()), vec![rec(2, b"b"), rec(4, b"D!")]);
    assert_eq!(log.next_seq(), 6, "a rewrite never moves sequences back");
    assert_eq!(log.append_batch(&[b"f"]).unwrap(), vec![6]);
    drop(log);
    let log = open();
    assert_eq!(
        all(log.as_ref()),
        vec![rec(2, b"b"), rec(4, b"D!"), rec(6, b"f")]
    );
    assert_eq!(log.next_seq(), 7);
}

fn rewrite_refuses_unordered_records(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a", b"b"]).unwrap();
    let bad = [log_record(3, b"x"), log_record(3, b"y")];
    assert!(log.rewrite(&bad).is_err(), "sequences must increase");
    assert_eq!(all(log.as_ref()), vec![rec(1, b"a"), rec(2, b"b")]);
    assert_eq!(
        log.append_batch(&[b"c"]).unwrap(),
        vec![3],
        "log still usable"
    );
}

fn erase_removes_only_the_named_records(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a", b"b", b"c", b"d"]).unwrap();
    log.erase(&[2, 3, 99]).unwrap();
    assert_eq!(all(log.as_ref()), vec![rec(1, b"a"), rec(4, b"d")]);
    assert_eq!(log.next_seq(), 5, "erasing does not move sequences");
    log.erase(&[]).unwrap();
    drop(log);
    let mut log = open();
    assert_eq!(all(log.as_ref()), vec![rec(1, b"a"), rec(4, b"d")]);
    assert_eq!(log.append_batch(&[b"e"]).unwrap(), vec![5]);
}

fn erase_keeps_the_last_record(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a", b"b", b"c"]).unwrap();
    assert!(
        log.erase(&[2, 3]).is_err(),
        "the last record cannot be erased"
    );
    let want = vec![rec(1, b"a"), rec(2, b"b"), rec(3, b"c")];
    assert_eq!(all(log.as_ref()), want, "a refused erase changes nothing");
}

fn advance_to_skips_sequences_for_good(mut open: Opener) {
    let mut log = open();
    log.append_batch(&[b"a"]).unwrap();
    log.advance_to(10).unwrap();
    log.advance_to(5).unwrap();
    assert_eq!(log.next_seq(), 10, "advance_to never moves back");
    assert_eq!(log.append_batch(&[b"j"]).unwrap(), vec![10]);
    drop(log);
    let log = open();
    assert_eq!(all(log.as_ref()), vec![rec(1, b"a"), rec(10, b"j")]);
    assert_eq!(log.next_seq(), 11, "skipped sequences stay skipped");
}

fn size_grows_with_appends(mut open: Opener) {
    let mut log = open();
    let before = log.size_bytes();
    log.append_batch(&[&[7u8; 100]]).unwrap();
    assert!(log.size_bytes() > before, "an append takes room");
}
