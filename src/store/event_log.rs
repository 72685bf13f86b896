//! The seam between the engine and its durable event log: [`EventLog`], what any log must
//! do for the writer, the start-up catch-up, `episodic recover` and compaction, and
//! [`open_local`], the one place that picks an implementation.
//!
//! The local checksummed file log ([`crate::store::log::Log`]) is the only implementation
//! today. A cluster mode is expected to add a NATS JetStream one; the trait is shaped for it
//! (see [`EventLog`]'s docs) without depending on any async runtime.
//!
//! Invariants every implementation keeps (checked by the contract tests in `contract.rs`,
//! which any new implementation must pass):
//! - **acknowledged means durable**: [`EventLog::append_batch`] returns the sequences of the
//!   batch only once every record of it is durable, and a failed batch is never
//!   half-acknowledged (none of it is read back, its sequences are not consumed);
//! - **strictly increasing sequences**: an append's records get consecutive sequences from
//!   [`EventLog::next_seq`], in payload order; sequences never go backwards, not even after
//!   [`EventLog::rewrite`], [`EventLog::erase`] or a reopen, but may have gaps (compaction
//!   drops records, [`EventLog::advance_to`] skips lost ones);
//! - **reads see exactly what was acknowledged**: [`EventLog::read_from`] yields every
//!   durable record at or after a sequence, in sequence order, and nothing else.

use std::path::Path;

use super::log::Log;
use super::{LogError, LogRecord, Recovered};

/// Records read back from a log, in sequence order; an error ends the stream.
pub type Records<'a> = Box<dyn Iterator<Item = Result<LogRecord, LogError>> + 'a>;

/// A durable, append-only log of opaque payloads, each at a sequence number.
///
/// The engine holds its log as a `Box<dyn EventLog>`, not as a type parameter: the log is
/// chosen when the engine opens (by configuration, once a second implementation exists),
/// every method is called at most once per batch of requests on the writer thread (so the
/// dynamic call costs nothing next to an fsync or a network round trip), and the writer,
/// catch-up, recovery and compaction are compiled once instead of once per implementation.
///
/// Methods block. The writer owns the log on a dedicated OS thread, never an async one, so a
/// remote implementation blocks that thread on its client (for instance with a runtime
/// handle's `block_on`); the trait itself needs no async runtime. For a NATS JetStream
/// stream:
/// - [`EventLog::append_batch`] publishes the batch and returns the sequences of the
///   acknowledgements (`PubAck.seq`): the sequences are the log's answer, never computed by
///   the caller. Each message carries an expected-last-sequence fence
///   (`Nats-Expected-Last-Sequence` = the sequence before it), so a second writer is refused
///   instead of interleaving; a refused fence is an append failure
///   ([`LogError::Fenced`]) and the writer answers it like a full disk: nothing of the batch
///   is acknowledged;
/// - [`EventLog::next_seq`] is the stream's last sequence + 1 as this handle last saw it;
/// - [`EventLog::read_from`] is an ordered consumer starting at a sequence;
/// - [`EventLog::erase`] is the per-message erase (which overwrites the stored data);
/// - [`EventLog::rewrite`] has no in-place equivalent: a remote log would write a new stream
///   generation with the same sequences, or refuse it and compact with [`EventLog::erase`].
pub trait EventLog: Send {
    /// Appends `payloads` as consecutive records from [`EventLog::next_seq`] on, durably, and
    /// returns their sequences in payload order (one sync for the whole batch: group
    /// commit). An empty batch appends nothing and returns no sequence. On error nothing of
    /// the batch is acknowledged: it is not read back and its sequences are not consumed.
    fn append_batch(&mut self, payloads: &[&[u8]]) -> Result<Vec<u64>, LogError>;

    /// The sequence the next appended record will get.
    fn next_seq(&self) -> u64;

    /// Every durable record whose sequence is at least `from`, in sequence order. Reading
    /// `0` on reads the whole log.
    fn read_from(&self, from: u64) -> Result<Records<'_>, LogError>;

    /// Atomically replaces the whole log with exactly `records` (strictly increasing
    /// sequences, kept as given): compaction. Afterwards [`EventLog::next_seq`] is the
    /// larger of what it was and the last record's sequence + 1. A crash leaves either the
    /// old log or the new one. Callers keep the highest sequence in `records` (compaction
    /// ends with a marker record) because a log may store no other high-water mark.
    fn rewrite(&mut self, records: &[LogRecord]) -> Result<(), LogError>;

    /// Physically removes the records at `seqs` (sequences not in the log are ignored); the
    /// others keep their sequences and payloads, and [`EventLog::next_seq`] does not move.
    /// The last record (the highest sequence) cannot be erased, for the reason given at
    /// [`EventLog::rewrite`]: that is an error and nothing changes.
    fn erase(&mut self, seqs: &[u64]) -> Result<(), LogError>;

    /// Makes the next appended record's sequence at least `seq` (durable once a record is
    /// appended at it). `episodic recover` uses it so that new records never reuse the
    /// sequences of acknowledged records that were lost.
    fn advance_to(&mut self, seq: u64);

    /// Bytes the log occupies on its medium (compaction reports it before and after).
    fn size_bytes(&self) -> u64;
}

/// Opens (or creates) the local file log at `path`: every frame is checked and a torn,
/// never-acknowledged tail is cut (see [`crate::store::log`]). Also returns what the opening
/// scan found: the last sequence and the bytes cut.
pub fn open_local(path: &Path) -> Result<(Box<dyn EventLog>, Recovered), LogError> {
    let (log, found) = Log::open_checked(path)?;
    Ok((Box::new(log), found))
}
