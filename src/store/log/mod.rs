//! The append-only record log: Episodic's single source of truth.
//!
//! Every other structure (indexes, caches, summaries) is derived from this
//! file and can be rebuilt by reading it back. The log is owned by one writer
//! thread through [`Log`], which implements the engine's seam,
//! [`crate::store::EventLog`]. Its records are read back in order: handed
//! over by [`Log::open`], one at a time by [`Log::open_with`] (no copy of the
//! whole log in memory), from a sequence on by [`Log::read_from`] (the
//! acknowledged bytes only), or read-only by [`read_records`].
//!
//! This file holds the format, appends and the atomic rewrite; `scan.rs` reads frames back
//! (the recovery rules, the start-up scan, [`read_records`]); `tests.rs` holds the unit tests.
//!
//! # On-disk format
//!
//! ```text
//! offset 0: b"EPILOG01"                                   (8-byte file header)
//! then, repeated:
//!   [u32 LE payload_len][u32 LE crc32(seq_le ++ payload)][u64 LE seq][payload]
//! ```
//!
//! # Invariants
//!
//! * **Acknowledged means durable.** [`Log::append_batch`] returns only after
//!   the whole batch has been written and `fdatasync`ed; a batch is written as
//!   one group and synced once (group commit).
//! * **Never half-acknowledged.** If any step of a batch fails, the file is
//!   truncated back to its previous length (best effort, retried before the
//!   next append) and the in-memory position and `next_seq` are not advanced.
//! * **Strictly increasing seqs.** Each record's seq is greater than the
//!   previous one's. Seqs need not be contiguous: [`Log::rewrite`] keeps the
//!   original seqs of the records it retains. New logs start at seq 1.
//! * **Recovery truncates only a torn tail.** On open, an incomplete final
//!   frame (short header, declared length running past end of file, or a
//!   checksum mismatch on a frame that ends exactly at end of file) is cut
//!   off, the cut is logged with `tracing::warn!` and fsynced.
//! * **Mid-file corruption refuses to open.** A checksum mismatch on a frame
//!   followed by more bytes, an over-long declared length that still fits in
//!   the file, a non-increasing seq, or a wrong magic yields
//!   [`LogError::Corrupt`] naming the file and the byte offset of the frame;
//!   intact acknowledged records after it are never silently dropped.
//! * **Bounded allocation.** A declared payload length above
//!   [`MAX_PAYLOAD`] (64 MiB) is never allocated.
//! * **Short header.** A file shorter than 8 bytes whose bytes are a prefix
//!   of the magic (including an empty file) is treated as a creation that
//!   was torn: it is reset to a fresh header. Any other content → `Corrupt`.
//! * **Atomic compaction.** [`Log::rewrite`] writes `<path>.compact.tmp`,
//!   fsyncs it, renames it over the log and fsyncs the directory, so a crash
//!   leaves either the old or the new log, never a mix.
//! * No `unsafe`, and no input file can make this module panic.
//!
//! Known limit of the exact recovery rules: if a crash lands mid-batch and
//! the filesystem persisted later pages of that (never acknowledged) batch
//! but not earlier ones, the damaged frame is not at the tail and the log
//! refuses to open with `Corrupt` rather than dropping the batch.

#![warn(missing_docs)]

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

mod scan;

pub use scan::read_records;
use scan::{check_header, frame_crc, scan_all, Acknowledged};

/// File header written at offset 0 of every log.
pub const MAGIC: &[u8; 8] = b"EPILOG01";
/// Read buffer of the start-up scan.
const SCAN_BUFFER: usize = 1 << 20;
/// Largest payload accepted on append or during recovery (64 MiB).
pub const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// Seq assigned to the first record of a brand-new (or emptied) log.
pub const FIRST_SEQ: u64 = 1;

const HEADER_LEN: u64 = MAGIC.len() as u64;
const FRAME_HEADER_LEN: u64 = 16;
/// Frames are buffered up to roughly this size before each `write_all`.
const WRITE_CHUNK: usize = 1024 * 1024;
const TMP_SUFFIX: &str = ".compact.tmp";

/// Errors raised by the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An operating-system call on the log (or its directory) failed.
    #[error("log i/o failed on {path}: {source}")]
    Io {
        /// File or directory the failing call was made on.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The log contains damage that is not a torn tail; it refuses to open.
    #[error("log {path} is corrupt at byte {offset}: {reason}")]
    Corrupt {
        /// The log file.
        path: String,
        /// Byte offset of the offending frame (0 for the file header).
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// A payload exceeds [`MAX_PAYLOAD`]; nothing was written.
    #[error("log record too large: {len} bytes (max {max})")]
    TooLarge {
        /// Length of the offending payload.
        len: usize,
        /// The maximum allowed.
        max: usize,
    },
    /// Another writer appended to a shared log since this handle last saw it (the
    /// expected-last-sequence fence of a remote log, see [`crate::store::EventLog`]);
    /// nothing of the batch was acknowledged. The file log never raises it: the data
    /// directory's lock already excludes a second writer.
    #[error(
        "log {log}: expected last sequence {expected}, found {found}; another writer appended"
    )]
    Fenced {
        /// The log (stream) name.
        log: String,
        /// The last sequence this handle expected.
        expected: u64,
        /// The last sequence the log holds.
        found: u64,
    },
    /// A remote log (a NATS JetStream stream) failed, refused, or did not answer in time;
    /// the reason says whether part of an append may be stored.
    #[error("log {log}: {reason}")]
    Remote {
        /// The log (stream) name.
        log: String,
        /// What went wrong.
        reason: String,
    },
    /// The log cannot do what was asked (a stream cannot rewrite records in place).
    #[error("log {log} cannot {what}")]
    Unsupported {
        /// The log (stream) name.
        log: String,
        /// What it cannot do.
        what: &'static str,
    },
}

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRecord {
    /// Sequence number; strictly increasing along the log.
    pub seq: u64,
    /// Opaque payload bytes.
    pub payload: Vec<u8>,
}

/// What [`Log::open`] found on disk.
#[derive(Debug)]
pub struct Recovery {
    /// Every intact record, in log order.
    pub records: Vec<LogRecord>,
    /// Bytes cut off a torn tail (0 when the log was clean).
    pub truncated_bytes: u64,
}

/// What [`Log::open_with`] found besides the records it handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    /// Seq of the last intact record (`None` for an empty log).
    pub last_seq: Option<u64>,
    /// Bytes cut off a torn tail (0 when the log was clean).
    pub truncated_bytes: u64,
}

/// The acknowledged prefix of a log file at one instant ([`Log::frozen`]): a valid log by
/// itself, header included.
#[derive(Debug)]
pub struct Frozen {
    /// A read-only handle on the file as it was (kept even if the log is rewritten).
    pub file: File,
    /// Bytes of it that were acknowledged.
    pub len: u64,
    /// The sequence of the last record among them (`None` for an empty log).
    pub last_seq: Option<u64>,
}

/// The single writer handle on a log file. Owned by one writer thread.
#[derive(Debug)]
pub struct Log {
    file: File,
    path: PathBuf,
    len: u64,
    next_seq: u64,
    /// Set when a rollback truncation failed; retried before the next write.
    dirty_tail: bool,
}

impl Log {
    /// Opens or creates the log; reads every intact record; truncates (and fsyncs) a torn tail.
    pub fn open(path: &Path) -> Result<(Log, Recovery), LogError> {
        let mut records = Vec::new();
        let (log, found) = Self::open_with(path, |r| {
            records.push(r);
            Ok::<(), LogError>(())
        })?;
        let recovery = Recovery {
            records,
            truncated_bytes: found.truncated_bytes,
        };
        Ok((log, recovery))
    }

    /// Like [`Log::open`], keeping no record: checks every frame and cuts a torn tail, then
    /// reports the last sequence and the bytes cut. Records are read back with
    /// [`Log::read_from`].
    pub fn open_checked(path: &Path) -> Result<(Log, Recovered), LogError> {
        Self::open_with(path, |_| Ok::<(), LogError>(()))
    }

    /// Like [`Log::open`], but hands each intact record to `visit` in log order as it is read
    /// instead of keeping them all, so memory stays flat however long the log is. A torn tail
    /// is cut off only after every record before it was visited; an error from `visit` or a
    /// corrupt frame stops the open (records visited so far must then be discarded).
    pub fn open_with<E: From<LogError>>(
        path: &Path,
        visit: impl FnMut(LogRecord) -> Result<(), E>,
    ) -> Result<(Log, Recovered), E> {
        let created = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(crate::fsutil::PRIVATE_FILE)
            .open(path);
        match created {
            Ok(file) => Ok(Self::init_fresh(path, file, 0)?),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Self::open_existing(path, visit),
            Err(e) => Err(io_err(path, e).into()),
        }
    }

    /// Appends all payloads as consecutive records with seqs next_seq.., then ONE fdatasync (group commit).
    /// Returns the seqs. On any error the file is truncated back to its previous length (best effort) and
    /// the in-memory position is not advanced, so a failed batch is never half-acknowledged.
    pub fn append_batch(&mut self, payloads: &[&[u8]]) -> Result<Vec<u64>, LogError> {
        for p in payloads {
            check_size(p.len())?;
        }
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        let seqs = self.assign_seqs(payloads.len())?;
        self.settle_tail()?;
        match self.write_and_sync(seqs.iter().copied().zip(payloads.iter().copied())) {
            Ok(new_len) => {
                self.len = new_len;
                self.next_seq = seqs[seqs.len() - 1] + 1;
                Ok(seqs)
            }
            Err(e) => {
                self.rollback();
                Err(io_err(&self.path, e))
            }
        }
    }

    /// The seq the next appended record will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Makes the next appended record's seq at least `seq` (in memory; durable once a record
    /// is appended). Recovery uses it so that new records never reuse the sequences of
    /// records that were acknowledged and then lost.
    pub fn advance_to(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq);
    }

    /// Every acknowledged record whose seq is at least `from`, in log order, read through a
    /// handle of its own (appends made while it runs are not seen). Only the acknowledged
    /// bytes are read, so a damaged frame among them (the file changed under the log) is an
    /// error, never a silently shorter answer. Records before `from` are read and skipped.
    pub fn read_from(&self, from: u64) -> Result<Acknowledged, LogError> {
        Acknowledged::open(&self.path, self.len, from)
    }

    /// Removes the records at `seqs` by rewriting the log without them (see
    /// [`Log::rewrite`]); unknown seqs are ignored. The last record is refused with
    /// [`LogError::Io`] of kind `InvalidInput` (it keeps the highest seq across a reopen, the
    /// format storing no other watermark) and nothing changes. Holds the kept records in
    /// memory while it runs, as compaction does.
    pub fn erase(&mut self, seqs: &[u64]) -> Result<(), LogError> {
        let gone: std::collections::HashSet<u64> = seqs.iter().copied().collect();
        if gone.is_empty() {
            return Ok(());
        }
        let mut kept = Vec::new();
        let mut last = None;
        for record in self.read_from(0)? {
            let record = record?;
            last = Some(record.seq);
            if !gone.contains(&record.seq) {
                kept.push(record);
            }
        }
        if last.is_some_and(|seq| gone.contains(&seq)) {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                "the last record holds the log's highest seq and cannot be erased",
            );
            return Err(io_err(&self.path, e));
        }
        self.rewrite(&kept)
    }

    /// A read-only handle on the log's current file and its acknowledged length: the bytes
    /// below that length never change (appends go past it, a rollback truncates only past
    /// it, a rewrite renames a new file over the path while this handle keeps the old one),
    /// so a backup copies them while writes go on ([`Frozen`]).
    pub fn frozen(&self) -> Result<Frozen, LogError> {
        let file = File::open(&self.path).map_err(|e| io_err(&self.path, e))?;
        Ok(Frozen {
            file,
            len: self.len,
            last_seq: self.next_seq.checked_sub(1).filter(|s| *s >= FIRST_SEQ),
        })
    }

    /// Length of the log file in bytes, header included (acknowledged data only).
    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    /// Path of the log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Atomically replaces the log with exactly `records` (their seqs kept; must be increasing):
    /// writes `<path>.compact.tmp`, fsyncs it, renames over the log, fsyncs the directory, reopens for append.
    /// next_seq afterwards = max(old next_seq, last record seq + 1) so seqs never go backwards.
    ///
    /// Non-increasing seqs are rejected with [`LogError::Io`] of kind
    /// `InvalidInput` before anything is written.
    ///
    /// The format stores no seq watermark: after a reopen, `next_seq` is the
    /// last on-disk record's seq + 1. If compaction drops the highest-seq
    /// records, those seqs can be issued again after a restart; callers that
    /// must never reuse a seq should keep the last record when compacting.
    pub fn rewrite(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        validate_rewrite(&self.path, records)?;
        let tmp = tmp_path(&self.path);
        let (file, len) = match write_compacted(&tmp, records) {
            Ok(ok) => ok,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        if let Err(e) = std::fs::rename(&tmp, &self.path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io_err(&self.path, e));
        }
        // The renamed inode is now the log: switch to it before the dir sync.
        self.file = file;
        self.len = len;
        self.dirty_tail = false;
        if let Some(last) = records.last() {
            self.next_seq = self.next_seq.max(last.seq.saturating_add(1));
        }
        sync_parent_dir(&self.path)
    }

    fn init_fresh(path: &Path, file: File, dropped: u64) -> Result<(Log, Recovered), LogError> {
        write_header(&file).map_err(|e| io_err(path, e))?;
        sync_parent_dir(path)?;
        let log = Log {
            file,
            path: path.to_path_buf(),
            len: HEADER_LEN,
            next_seq: FIRST_SEQ,
            dirty_tail: false,
        };
        let found = Recovered {
            last_seq: None,
            truncated_bytes: dropped,
        };
        Ok((log, found))
    }

    fn open_existing<E: From<LogError>>(
        path: &Path,
        visit: impl FnMut(LogRecord) -> Result<(), E>,
    ) -> Result<(Log, Recovered), E> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let file_len = file.metadata().map_err(|e| io_err(path, e))?.len();
        if !check_header(&mut file, path, file_len)? {
            warn_truncate(path, 0, file_len);
            return Ok(Self::init_fresh(path, file, file_len)?);
        }
        let (last_seq, end) = scan_all(&file, path, file_len, visit)?;
        if end < file_len {
            warn_truncate(path, end, file_len - end);
            file.set_len(end).map_err(|e| io_err(path, e))?;
            file.sync_all().map_err(|e| io_err(path, e))?;
        }
        let log = Log {
            file,
            path: path.to_path_buf(),
            len: end,
            next_seq: last_seq.map_or(FIRST_SEQ, |s| s.saturating_add(1)),
            dirty_tail: false,
        };
        let found = Recovered {
            last_seq,
            truncated_bytes: file_len - end,
        };
        Ok((log, found))
    }

    fn assign_seqs(&self, n: usize) -> Result<Vec<u64>, LogError> {
        let n = n as u64;
        if self.next_seq.checked_add(n).is_none() {
            let e = io::Error::new(io::ErrorKind::InvalidInput, "log seq space exhausted");
            return Err(io_err(&self.path, e));
        }
        Ok((self.next_seq..self.next_seq + n).collect())
    }

    /// Retries a rollback truncation that failed earlier.
    fn settle_tail(&mut self) -> Result<(), LogError> {
        if self.dirty_tail {
            self.file
                .set_len(self.len)
                .map_err(|e| io_err(&self.path, e))?;
            self.dirty_tail = false;
        }
        Ok(())
    }

    fn write_and_sync<'a>(
        &mut self,
        frames: impl Iterator<Item = (u64, &'a [u8])>,
    ) -> io::Result<u64> {
        self.file.seek(SeekFrom::Start(self.len))?;
        let written = write_frames(&mut self.file, frames)?;
        self.file.sync_data()?;
        Ok(self.len + written)
    }

    fn rollback(&mut self) {
        let ok = self.file.set_len(self.len).is_ok() && self.file.sync_data().is_ok();
        self.dirty_tail = !ok;
        if !ok {
            tracing::warn!(path = %self.path.display(), len = self.len, "log rollback truncation failed; will retry");
        }
    }
}

/// Resets `file` to a bare header and fsyncs it.
impl crate::store::EventLog for Log {
    fn append_batch(&mut self, payloads: &[&[u8]]) -> Result<Vec<u64>, LogError> {
        Log::append_batch(self, payloads)
    }

    fn next_seq(&self) -> u64 {
        Log::next_seq(self)
    }

    fn read_from(&self, from: u64) -> Result<crate::store::Records<'_>, LogError> {
        Ok(Box::new(Log::read_from(self, from)?))
    }

    fn rewrite(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        Log::rewrite(self, records)
    }

    fn erase(&mut self, seqs: &[u64]) -> Result<(), LogError> {
        Log::erase(self, seqs)
    }

    fn advance_to(&mut self, seq: u64) -> Result<(), LogError> {
        Log::advance_to(self, seq);
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.len_bytes()
    }

    fn frozen(&self) -> Result<Frozen, LogError> {
        Log::frozen(self)
    }
}

/// Resets `file` to a bare header and fsyncs it.
fn write_header(mut file: &File) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(MAGIC)?;
    file.sync_all()
}

/// Writes a header plus `records` to a fresh `tmp` file and fsyncs it.
fn write_compacted(tmp: &Path, records: &[LogRecord]) -> Result<(File, u64), LogError> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(crate::fsutil::PRIVATE_FILE)
        .open(tmp)
        .map_err(|e| io_err(tmp, e))?;
    let frames = records.iter().map(|r| (r.seq, r.payload.as_slice()));
    let len = file
        .write_all(MAGIC)
        .and_then(|()| write_frames(&mut file, frames))
        .and_then(|n| file.sync_all().map(|()| HEADER_LEN + n))
        .map_err(|e| io_err(tmp, e))?;
    Ok((file, len))
}

fn validate_rewrite(path: &Path, records: &[LogRecord]) -> Result<(), LogError> {
    for r in records {
        check_size(r.payload.len())?;
    }
    if records.windows(2).any(|w| w[1].seq <= w[0].seq) {
        let e = io::Error::new(
            io::ErrorKind::InvalidInput,
            "rewrite records must have strictly increasing seqs",
        );
        return Err(io_err(path, e));
    }
    Ok(())
}

/// Encodes and writes frames in ~1 MiB chunks; returns bytes written.
fn write_frames<'a>(
    w: &mut impl Write,
    frames: impl Iterator<Item = (u64, &'a [u8])>,
) -> io::Result<u64> {
    let mut buf = Vec::new();
    let mut total = 0u64;
    for (seq, payload) in frames {
        encode_frame(&mut buf, seq, payload);
        if buf.len() >= WRITE_CHUNK {
            w.write_all(&buf)?;
            total += buf.len() as u64;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    Ok(total + buf.len() as u64)
}

/// Appends one frame; `payload.len()` must already be checked against [`MAX_PAYLOAD`].
fn encode_frame(buf: &mut Vec<u8>, seq: u64, payload: &[u8]) {
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&frame_crc(seq, payload).to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(payload);
}

fn check_size(len: usize) -> Result<(), LogError> {
    if len > MAX_PAYLOAD {
        return Err(LogError::TooLarge {
            len,
            max: MAX_PAYLOAD,
        });
    }
    Ok(())
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut s = OsString::from(path.as_os_str());
    s.push(TMP_SUFFIX);
    PathBuf::from(s)
}

/// fsyncs the directory holding `path` so a create or rename is durable.
fn sync_parent_dir(path: &Path) -> Result<(), LogError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(dir).map_err(|e| io_err(dir, e))
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

fn warn_truncate(path: &Path, offset: u64, bytes: u64) {
    tracing::warn!(
        path = %path.display(),
        offset,
        bytes,
        "truncating torn tail of log"
    );
}

fn io_err(path: &Path, source: io::Error) -> LogError {
    LogError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
