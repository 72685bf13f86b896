//! The seam between the engine and its durable event log: [`EventLog`], what any log must
//! do for the writer, the start-up catch-up, `episodic recover` and compaction, and
//! [`LogLocation::open`], the one place that picks an implementation.
//!
//! Two implementations: the local checksummed file log ([`crate::store::log::Log`]), the
//! default, and a NATS JetStream stream ([`crate::store::nats::NatsLog`]) for cluster mode.
//! The trait depends on no async runtime (see [`EventLog`]'s docs).
//!
//! Invariants every implementation keeps (checked by the contract tests in `contract.rs`,
//! which any new implementation must pass):
//! - **acknowledged means durable**: [`EventLog::append_batch`] returns the sequences of the
//!   batch only once every record of it is durable, and a failed batch is never
//!   half-acknowledged: the caller learns of none of its sequences. The file log then
//!   holds none of it (it is not read back, its sequences are not consumed); a remote log
//!   whose acknowledgements never came ([`LogError::Remote`]) may hold a prefix of it, and
//!   refuses every later append on that handle, so the next writer opens the log again and
//!   reads what it holds before appending;
//! - **strictly increasing sequences**: an append's records get consecutive sequences from
//!   [`EventLog::next_seq`], in payload order; sequences never go backwards, not even after
//!   [`EventLog::rewrite`], [`EventLog::erase`] or a reopen, but may have gaps (compaction
//!   drops records, [`EventLog::advance_to`] skips lost ones);
//! - **reads see exactly what was acknowledged**: [`EventLog::read_from`] yields every
//!   durable record at or after a sequence, in sequence order, and nothing else.

use std::path::Path;

use super::log::{Frozen, Log};
use super::nats::{Generations, NatsConnection, NatsLog, WriteLease};
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
/// - [`EventLog::rewrite`] has no in-place equivalent: the stream refuses it
///   ([`LogError::Unsupported`]); compaction there is a rotation to a new stream;
/// - an append whose acknowledgements never come is published again (the same message ids,
///   so nothing is stored twice) until a deadline; past it the append fails, part of it may
///   be stored, and the handle refuses further appends.
pub trait EventLog: Send {
    /// Appends `payloads` as consecutive records from [`EventLog::next_seq`] on, durably, and
    /// returns their sequences in payload order (one sync for the whole batch: group
    /// commit). An empty batch appends nothing and returns no sequence. On error nothing of
    /// the batch is acknowledged (see the module's invariants for what a remote log may
    /// then hold).
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

    /// Learns what other writers appended since this handle last looked (a standby's log
    /// in cluster mode); afterwards [`EventLog::next_seq`] follows the log's last record.
    /// A log only this handle writes has nothing to learn.
    fn refresh(&mut self) -> Result<(), LogError> {
        Ok(())
    }

    /// Whether [`EventLog::erase`] is cheap enough to run at every deletion (it touches
    /// only the records named); otherwise erased records wait for compaction.
    fn erases_in_place(&self) -> bool {
        false
    }

    /// Makes the next appended record's sequence at least `seq` (durable once a record is
    /// appended at it). `episodic recover` uses it so that new records never reuse the
    /// sequences of acknowledged records that were lost. A log that numbers its own records
    /// refuses to skip ([`LogError::Unsupported`]).
    fn advance_to(&mut self, seq: u64) -> Result<(), LogError>;

    /// Bytes the log occupies on its medium (compaction reports it before and after).
    fn size_bytes(&self) -> u64;

    /// The records acknowledged so far as a file prefix that stays as it is while the log
    /// goes on ([`Frozen`]): what an online backup copies. Only a local file log has one; a
    /// stream refuses ([`LogError::Unsupported`]), being replicated instead.
    fn frozen(&self) -> Result<Frozen, LogError> {
        Err(LogError::Unsupported {
            log: "this log".into(),
            what: "be copied as a file (it is not a local file)",
        })
    }
}

/// Opens (or creates) the local file log at `path`: every frame is checked and a torn,
/// never-acknowledged tail is cut (see [`crate::store::log`]). Also returns what the opening
/// scan found: the last sequence and the bytes cut.
pub fn open_local(path: &Path) -> Result<(Box<dyn EventLog>, Recovered), LogError> {
    let (log, found) = Log::open_checked(path)?;
    Ok((Box::new(log), found))
}

/// Where an engine's event log lives.
#[derive(Debug, Clone, Default)]
pub enum LogLocation {
    /// The checksummed file under the data directory (the default).
    #[default]
    Local,
    /// A NATS JetStream stream, replicated `replicas` times (cluster mode).
    Stream {
        /// The cluster connection.
        conn: NatsConnection,
        /// The stream's name.
        name: String,
        /// Copies the stream keeps (3 in a production cluster).
        replicas: usize,
        /// Appends are refused once this lapses (the writer's lease on the stream), if set.
        lease: Option<WriteLease>,
        /// Who commits a rotation to the next generation (compaction), if the log may be
        /// compacted.
        generations: Option<std::sync::Arc<dyn Generations>>,
    },
}

impl LogLocation {
    /// Opens the log: the file at `path` for [`LogLocation::Local`], else the stream
    /// (created when missing). The one place that picks an implementation.
    pub fn open(&self, path: &Path) -> Result<(Box<dyn EventLog>, Recovered), LogError> {
        match self {
            LogLocation::Local => open_local(path),
            LogLocation::Stream {
                conn,
                name,
                replicas,
                lease,
                generations,
            } => {
                let mut log = NatsLog::open(conn, name, *replicas)?;
                log.set_lease(lease.clone());
                log.set_generations(generations.clone());
                let found = Recovered {
                    last_seq: log.next_seq().checked_sub(1).filter(|s| *s > 0),
                    truncated_bytes: 0,
                };
                Ok((Box::new(log), found))
            }
        }
    }

    /// How the log is named in messages: the file's path or the stream's name.
    pub fn describe(&self, path: &Path) -> String {
        match self {
            LogLocation::Local => path.display().to_string(),
            LogLocation::Stream { name, .. } => format!("stream {name}"),
        }
    }
}
