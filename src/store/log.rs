//! The append-only record log: Episodic's single source of truth.
//!
//! Every other structure (indexes, caches, summaries) is derived from this
//! file and can be rebuilt by replaying it. The log is owned by one writer
//! thread through [`Log`]; readers that need a consistent view use the
//! records handed back by [`Log::open`], receive them one at a time from
//! [`Log::open_with`] (start-up replay: no copy of the whole log in memory)
//! or stream them read-only with [`read_records`].
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
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

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

/// Streams records without loading all into memory (used for large logs / verification tools).
///
/// Read-only: a torn tail simply ends the stream (the file is not modified),
/// so the iterator yields exactly the records [`Log::open`] would recover.
/// Corruption is yielded once as an `Err`, after which the iterator ends.
pub fn read_records(
    path: &Path,
) -> Result<impl Iterator<Item = Result<LogRecord, LogError>>, LogError> {
    let mut file = File::open(path).map_err(|e| io_err(path, e))?;
    let file_len = file.metadata().map_err(|e| io_err(path, e))?.len();
    let has_header = check_header(&mut file, path, file_len)?;
    let scanner = Scanner::new(BufReader::new(file), path, file_len);
    Ok(RecordIter {
        scanner,
        done: !has_header,
    })
}

/// Iterator returned by [`read_records`].
struct RecordIter<R> {
    scanner: Scanner<R>,
    done: bool,
}

impl<R: Read> Iterator for RecordIter<R> {
    type Item = Result<LogRecord, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.scanner.step() {
            Ok(Step::Record(r)) => Some(Ok(r)),
            Ok(Step::End) | Ok(Step::Torn(_)) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Outcome of decoding one frame.
enum Step {
    Record(LogRecord),
    End,
    /// The frame at this offset is a torn tail.
    Torn(u64),
}

/// Sequential frame decoder applying the recovery rules.
struct Scanner<R> {
    reader: R,
    path: PathBuf,
    offset: u64,
    file_len: u64,
    prev_seq: Option<u64>,
}

impl<R: Read> Scanner<R> {
    /// `reader` must be positioned just after the file header.
    fn new(reader: R, path: &Path, file_len: u64) -> Self {
        Scanner {
            reader,
            path: path.to_path_buf(),
            offset: HEADER_LEN,
            file_len,
            prev_seq: None,
        }
    }

    fn step(&mut self) -> Result<Step, LogError> {
        let o = self.offset;
        if o >= self.file_len {
            return Ok(Step::End);
        }
        if o.saturating_add(FRAME_HEADER_LEN) > self.file_len {
            return Ok(Step::Torn(o));
        }
        let mut hdr = [0u8; FRAME_HEADER_LEN as usize];
        self.read(&mut hdr)?;
        let (len, crc, seq) = parse_frame_header(&hdr);
        let end = o.saturating_add(FRAME_HEADER_LEN).saturating_add(len);
        if end > self.file_len {
            // A torn append leaves no intact frame after it; a damaged length field in the
            // middle of the log does. Never cut off acknowledged records behind it.
            if self.intact_frame_follows(o + FRAME_HEADER_LEN)? {
                let reason = format!(
                    "declared payload length {len} runs past end of file, but intact records follow"
                );
                return Err(self.corrupt(o, reason));
            }
            return Ok(Step::Torn(o));
        }
        if len > MAX_PAYLOAD as u64 {
            let reason = format!("declared payload length {len} exceeds maximum {MAX_PAYLOAD}");
            return Err(self.corrupt(o, reason));
        }
        let mut payload = vec![0u8; len as usize];
        self.read(&mut payload)?;
        if frame_crc(seq, &payload) != crc {
            if end == self.file_len {
                return Ok(Step::Torn(o));
            }
            return Err(self.corrupt(o, "checksum mismatch".to_string()));
        }
        self.check_seq(o, seq)?;
        self.offset = end;
        Ok(Step::Record(LogRecord { seq, payload }))
    }

    /// Whether an intact frame (checksum valid, seq above the previous one) starts at any
    /// offset from `from` (where the reader stands) on. Looks at most one maximal frame
    /// beyond the longest possible true payload, so allocation stays bounded.
    fn intact_frame_follows(&mut self, from: u64) -> Result<bool, LogError> {
        let window = (2 * (MAX_PAYLOAD as u64 + FRAME_HEADER_LEN)).min(self.file_len - from);
        let mut buf = vec![0u8; window as usize];
        self.read(&mut buf)?;
        let hdr_len = FRAME_HEADER_LEN as usize;
        for p in 0..buf.len().saturating_sub(hdr_len - 1) {
            let Some(hdr) = buf
                .get(p..p + hdr_len)
                .and_then(|h| <&[u8; 16]>::try_from(h).ok())
            else {
                break;
            };
            let (len, crc, seq) = parse_frame_header(hdr);
            let start = p + hdr_len;
            let Some(payload) = usize::try_from(len)
                .ok()
                .and_then(|l| buf.get(start..start.checked_add(l)?))
            else {
                continue;
            };
            if self.prev_seq.is_none_or(|prev| seq > prev) && frame_crc(seq, payload) == crc {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn check_seq(&mut self, o: u64, seq: u64) -> Result<(), LogError> {
        if let Some(prev) = self.prev_seq {
            if seq <= prev {
                let reason = format!("seq {seq} is not greater than previous seq {prev}");
                return Err(self.corrupt(o, reason));
            }
        }
        self.prev_seq = Some(seq);
        Ok(())
    }

    fn read(&mut self, buf: &mut [u8]) -> Result<(), LogError> {
        self.reader
            .read_exact(buf)
            .map_err(|e| io_err(&self.path, e))
    }

    fn corrupt(&self, offset: u64, reason: String) -> LogError {
        LogError::Corrupt {
            path: self.path.display().to_string(),
            offset,
            reason,
        }
    }
}

/// Hands every intact record to `visit`; returns the last seq and the offset where intact
/// data ends.
fn scan_all<E: From<LogError>>(
    file: &File,
    path: &Path,
    file_len: u64,
    mut visit: impl FnMut(LogRecord) -> Result<(), E>,
) -> Result<(Option<u64>, u64), E> {
    let mut reader = BufReader::with_capacity(SCAN_BUFFER, file);
    reader
        .seek(SeekFrom::Start(HEADER_LEN))
        .map_err(|e| io_err(path, e))?;
    let mut scanner = Scanner::new(reader, path, file_len);
    loop {
        match scanner.step()? {
            Step::Record(r) => visit(r)?,
            Step::End => return Ok((scanner.prev_seq, file_len)),
            Step::Torn(at) => return Ok((scanner.prev_seq, at)),
        }
    }
}

/// Checks the magic. `Ok(true)`: valid header, file positioned after it.
/// `Ok(false)`: a short prefix of the magic (torn creation). Else `Corrupt`.
fn check_header(file: &mut File, path: &Path, file_len: u64) -> Result<bool, LogError> {
    let n = file_len.min(HEADER_LEN) as usize;
    let mut buf = [0u8; HEADER_LEN as usize];
    file.read_exact(&mut buf[..n])
        .map_err(|e| io_err(path, e))?;
    if buf[..n] != MAGIC[..n] {
        return Err(LogError::Corrupt {
            path: path.display().to_string(),
            offset: 0,
            reason: "bad magic (not an Episodic log)".to_string(),
        });
    }
    Ok(n == MAGIC.len())
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

fn parse_frame_header(hdr: &[u8; FRAME_HEADER_LEN as usize]) -> (u64, u32, u64) {
    let [l0, l1, l2, l3, c0, c1, c2, c3, s0, s1, s2, s3, s4, s5, s6, s7] = *hdr;
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as u64;
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let seq = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    (len, crc, seq)
}

fn frame_crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.finalize()
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tempfile::TempDir;

    fn setup() -> (TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("episodic.log");
        (dir, path)
    }

    fn payloads(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| vec![i as u8; i * 7 % 23]).collect()
    }

    fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
        v.iter().map(|p| p.as_slice()).collect()
    }

    fn reopen(path: &Path) -> (Log, Recovery) {
        Log::open(path).unwrap()
    }

    /// Byte offset where each of `lens` frames starts, plus the final end.
    fn frame_offsets(lens: &[usize]) -> Vec<u64> {
        let mut offs = vec![HEADER_LEN];
        for l in lens {
            let last = *offs.last().unwrap();
            offs.push(last + FRAME_HEADER_LEN + *l as u64);
        }
        offs
    }

    fn flip_byte(path: &Path, at: u64) {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[at as usize] ^= 0x5a;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn create_writes_header_and_is_empty() {
        let (_d, path) = setup();
        let (log, rec) = Log::open(&path).unwrap();
        assert!(rec.records.is_empty());
        assert_eq!(rec.truncated_bytes, 0);
        assert_eq!(log.next_seq(), FIRST_SEQ);
        assert_eq!(log.len_bytes(), 8);
        assert_eq!(log.path(), path.as_path());
        assert_eq!(std::fs::read(&path).unwrap(), MAGIC.to_vec());
    }

    #[test]
    fn round_trip_multiple_batches_and_empty_payloads() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        let a = log.append_batch(&[b"one", b"", b"three"]).unwrap();
        let b = log.append_batch(&[b""]).unwrap();
        let c = log.append_batch(&[b"five", b"six"]).unwrap();
        assert_eq!(a, vec![1, 2, 3]);
        assert_eq!(b, vec![4]);
        assert_eq!(c, vec![5, 6]);
        assert_eq!(log.next_seq(), 7);
        let len = log.len_bytes();
        assert_eq!(len, std::fs::metadata(&path).unwrap().len());
        drop(log);
        let (log, rec) = reopen(&path);
        let got: Vec<_> = rec
            .records
            .iter()
            .map(|r| (r.seq, r.payload.clone()))
            .collect();
        let want: Vec<(u64, Vec<u8>)> = vec![
            (1, b"one".to_vec()),
            (2, vec![]),
            (3, b"three".to_vec()),
            (4, vec![]),
            (5, b"five".to_vec()),
            (6, b"six".to_vec()),
        ];
        assert_eq!(got, want);
        assert_eq!(rec.truncated_bytes, 0);
        assert_eq!(log.next_seq(), 7);
        assert_eq!(log.len_bytes(), len);
    }

    #[test]
    fn seq_continues_after_reopen() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a", b"b"]).unwrap();
        drop(log);
        let (mut log, _) = reopen(&path);
        assert_eq!(log.append_batch(&[b"c"]).unwrap(), vec![3]);
    }

    #[test]
    fn group_commit_returns_seqs_in_order() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        let data = payloads(50);
        let seqs = log.append_batch(&refs(&data)).unwrap();
        assert_eq!(seqs, (1..=50).collect::<Vec<u64>>());
        assert!(log.append_batch(&[]).unwrap().is_empty());
        assert_eq!(log.next_seq(), 51);
        let (_, rec) = reopen(&path);
        let got: Vec<Vec<u8>> = rec.records.into_iter().map(|r| r.payload).collect();
        assert_eq!(got, data);
    }

    #[test]
    fn too_large_batch_writes_nothing() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"keep"]).unwrap();
        let before = log.len_bytes();
        let big = vec![0u8; MAX_PAYLOAD + 1];
        let err = log.append_batch(&[b"ok", &big]).unwrap_err();
        assert!(
            matches!(err, LogError::TooLarge { len, max } if len == MAX_PAYLOAD + 1 && max == MAX_PAYLOAD)
        );
        assert_eq!(log.len_bytes(), before);
        assert_eq!(log.next_seq(), 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
    }

    #[test]
    fn truncate_at_every_offset_of_last_two_records() {
        let (_d, path) = setup();
        let data = payloads(6);
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&refs(&data[..4])).unwrap();
        log.append_batch(&refs(&data[4..])).unwrap();
        drop(log);
        let full = std::fs::read(&path).unwrap();
        let lens: Vec<usize> = data.iter().map(Vec::len).collect();
        let offs = frame_offsets(&lens);
        assert_eq!(*offs.last().unwrap(), full.len() as u64);
        for cut in offs[4]..=offs[6] {
            std::fs::write(&path, &full[..cut as usize]).unwrap();
            let (mut log, rec) = Log::open(&path).unwrap();
            let complete = offs.iter().filter(|&&o| o <= cut).count().saturating_sub(1);
            assert_eq!(rec.records.len(), complete, "cut {cut}");
            for (i, r) in rec.records.iter().enumerate() {
                assert_eq!(r.seq, i as u64 + 1);
                assert_eq!(r.payload, data[i]);
            }
            assert_eq!(rec.truncated_bytes, cut - offs[complete], "cut {cut}");
            assert_eq!(log.len_bytes(), offs[complete]);
            let seqs = log.append_batch(&[b"after"]).unwrap();
            assert_eq!(seqs, vec![complete as u64 + 1]);
            drop(log);
            let (_, rec) = reopen(&path);
            assert_eq!(rec.records.len(), complete + 1);
            assert_eq!(rec.truncated_bytes, 0);
            assert_eq!(rec.records[complete].payload, b"after");
        }
    }

    #[test]
    fn open_with_visits_every_record_then_cuts_a_torn_tail() {
        let (_d, path) = setup();
        let data = payloads(5);
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&refs(&data)).unwrap();
        drop(log);
        let full_len = std::fs::metadata(&path).unwrap().len();
        let torn = full_len - 3;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(torn)
            .unwrap();
        // A visitor that fails stops the open and leaves the file as it was.
        let mut seen = 0;
        let err = Log::open_with(&path, |_| {
            seen += 1;
            if seen == 2 {
                return Err(LogError::TooLarge { len: 0, max: 0 });
            }
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(err, LogError::TooLarge { .. }));
        assert_eq!(seen, 2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), torn);
        let mut visited = Vec::new();
        let (log, found) = Log::open_with(&path, |r| {
            visited.push((r.seq, r.payload));
            Ok::<(), LogError>(())
        })
        .unwrap();
        let want: Vec<(u64, Vec<u8>)> = (1..).zip(data[..4].iter().cloned()).collect();
        assert_eq!(visited, want);
        assert_eq!(found.last_seq, Some(4));
        assert!(found.truncated_bytes > 0);
        assert_eq!(log.next_seq(), 5);
        assert_eq!(log.len_bytes(), torn - found.truncated_bytes);
    }

    #[test]
    fn flipped_byte_in_last_record_is_torn_tail() {
        let (_d, path) = setup();
        let data = payloads(4);
        let lens: Vec<usize> = data.iter().map(Vec::len).collect();
        let offs = frame_offsets(&lens);
        // crc field, seq field, and payload of the last frame.
        for at in [offs[3] + 5, offs[3] + 10, offs[4] - 1] {
            std::fs::remove_file(&path).ok();
            let (mut log, _) = Log::open(&path).unwrap();
            log.append_batch(&refs(&data)).unwrap();
            drop(log);
            flip_byte(&path, at);
            let (log, rec) = Log::open(&path).unwrap();
            assert_eq!(rec.records.len(), 3, "flip at {at}");
            assert_eq!(rec.truncated_bytes, offs[4] - offs[3]);
            assert_eq!(log.next_seq(), 4);
        }
    }

    #[test]
    fn flipped_byte_in_middle_record_is_corrupt() {
        let (_d, path) = setup();
        let data = payloads(4);
        let lens: Vec<usize> = data.iter().map(Vec::len).collect();
        let offs = frame_offsets(&lens);
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&refs(&data)).unwrap();
        drop(log);
        flip_byte(&path, offs[2] + FRAME_HEADER_LEN);
        let before = std::fs::read(&path).unwrap();
        let err = Log::open(&path).unwrap_err();
        match &err {
            LogError::Corrupt {
                path: p, offset, ..
            } => {
                assert_eq!(p, &path.display().to_string());
                assert_eq!(*offset, offs[2]);
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains(&path.display().to_string()) && msg.contains(&offs[2].to_string()));
        // Refusing to open must not modify the file.
        assert_eq!(std::fs::read(&path).unwrap(), before);
    }

    #[test]
    fn overlong_length_in_middle_record_is_corrupt_not_torn() {
        let (_d, path) = setup();
        let data = payloads(6);
        let lens: Vec<usize> = data.iter().map(Vec::len).collect();
        let offs = frame_offsets(&lens);
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&refs(&data)).unwrap();
        drop(log);
        // Raise the declared length of frame 2 so that it runs past the end of the file.
        let mut bytes = std::fs::read(&path).unwrap();
        let at = offs[2] as usize + 3;
        bytes[at] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = Log::open(&path).unwrap_err();
        assert!(
            matches!(err, LogError::Corrupt { offset, .. } if offset == offs[2]),
            "{err:?}"
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "acknowledged records kept"
        );
    }

    #[test]
    fn non_increasing_seq_is_corrupt() {
        let (_d, path) = setup();
        let mut bytes = MAGIC.to_vec();
        encode_frame(&mut bytes, 5, b"x");
        let second = bytes.len() as u64;
        encode_frame(&mut bytes, 5, b"y");
        std::fs::write(&path, &bytes).unwrap();
        let err = Log::open(&path).unwrap_err();
        assert!(matches!(err, LogError::Corrupt { offset, .. } if offset == second));
    }

    #[test]
    fn oversized_declared_length() {
        let (_d, path) = setup();
        let mut frame = Vec::new();
        frame.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        frame.extend_from_slice(&[0u8; 12]);
        // At the tail (runs past EOF): torn.
        let mut bytes = MAGIC.to_vec();
        encode_frame(&mut bytes, 1, b"ok");
        let tail = bytes.len() as u64;
        bytes.extend_from_slice(&frame);
        bytes.extend_from_slice(&[7u8; 100]);
        std::fs::write(&path, &bytes).unwrap();
        let (_, rec) = Log::open(&path).unwrap();
        assert_eq!(rec.records.len(), 1);
        assert_eq!(rec.truncated_bytes, 16 + 100);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), tail);
        // Fits within the file: corrupt.
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&frame);
        let f = File::create(&path).unwrap();
        f.set_len(8 + 16 + MAX_PAYLOAD as u64 + 1 + 16).unwrap();
        drop(f);
        let mut f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(&bytes).unwrap();
        drop(f);
        let err = Log::open(&path).unwrap_err();
        assert!(
            matches!(err, LogError::Corrupt { offset: 8, .. }),
            "{err:?}"
        );
    }

    #[test]
    fn wrong_magic_is_corrupt() {
        let (_d, path) = setup();
        std::fs::write(&path, b"NOTALOG!and more").unwrap();
        let err = Log::open(&path).unwrap_err();
        assert!(matches!(err, LogError::Corrupt { offset: 0, .. }));
        assert!(err.to_string().contains(&path.display().to_string()));
        std::fs::write(&path, b"XP").unwrap();
        assert!(matches!(
            Log::open(&path),
            Err(LogError::Corrupt { offset: 0, .. })
        ));
        assert!(read_records(&path).is_err());
    }

    #[test]
    fn short_header_prefix_is_torn_creation() {
        let (_d, path) = setup();
        for n in 0..8 {
            std::fs::write(&path, &MAGIC[..n]).unwrap();
            let (mut log, rec) = Log::open(&path).unwrap();
            assert!(rec.records.is_empty());
            assert_eq!(rec.truncated_bytes, n as u64);
            assert_eq!(log.append_batch(&[b"x"]).unwrap(), vec![1]);
            drop(log);
            let (_, rec) = reopen(&path);
            assert_eq!(rec.records.len(), 1);
        }
    }

    #[test]
    fn rewrite_keeps_records_and_seqs() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a", b"b", b"c", b"d", b"e"]).unwrap();
        let keep = vec![
            LogRecord {
                seq: 2,
                payload: b"b".to_vec(),
            },
            LogRecord {
                seq: 4,
                payload: b"D!".to_vec(),
            },
        ];
        log.rewrite(&keep).unwrap();
        assert_eq!(log.next_seq(), 6, "seqs never go backwards");
        assert!(!tmp_path(&path).exists());
        assert_eq!(log.len_bytes(), std::fs::metadata(&path).unwrap().len());
        assert_eq!(log.append_batch(&[b"f"]).unwrap(), vec![6]);
        drop(log);
        let (log, rec) = reopen(&path);
        let seqs: Vec<u64> = rec.records.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, vec![2, 4, 6]);
        assert_eq!(rec.records[1].payload, b"D!");
        assert_eq!(log.next_seq(), 7);
    }

    #[test]
    fn rewrite_can_raise_next_seq_and_empty_log() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a"]).unwrap();
        log.rewrite(&[LogRecord {
            seq: 100,
            payload: vec![],
        }])
        .unwrap();
        assert_eq!(log.next_seq(), 101);
        log.rewrite(&[]).unwrap();
        assert_eq!(log.next_seq(), 101);
        assert_eq!(log.len_bytes(), 8);
        assert_eq!(log.append_batch(&[b"z"]).unwrap(), vec![101]);
        drop(log);
        let (_, rec) = reopen(&path);
        assert_eq!(rec.records.len(), 1);
        assert_eq!(rec.records[0].seq, 101);
    }

    #[test]
    fn rewrite_rejects_bad_input_and_leaves_log_intact() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a", b"b"]).unwrap();
        let before = std::fs::read(&path).unwrap();
        let bad = vec![
            LogRecord {
                seq: 3,
                payload: vec![],
            },
            LogRecord {
                seq: 3,
                payload: vec![],
            },
        ];
        let err = log.rewrite(&bad).unwrap_err();
        assert!(
            matches!(&err, LogError::Io { source, .. } if source.kind() == io::ErrorKind::InvalidInput)
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);
        assert!(!tmp_path(&path).exists());
        assert_eq!(log.append_batch(&[b"c"]).unwrap(), vec![3]);
    }

    #[test]
    fn rewrite_overwrites_stale_tmp() {
        let (_d, path) = setup();
        std::fs::write(tmp_path(&path), b"garbage from a crashed compaction").unwrap();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a"]).unwrap();
        log.rewrite(&[LogRecord {
            seq: 1,
            payload: b"a".to_vec(),
        }])
        .unwrap();
        assert!(!tmp_path(&path).exists());
        let (_, rec) = reopen(&path);
        assert_eq!(rec.records.len(), 1);
    }

    #[test]
    fn read_records_streams_and_stops_at_torn_tail() {
        let (_d, path) = setup();
        let (mut log, _) = Log::open(&path).unwrap();
        log.append_batch(&[b"a", b"bb", b"ccc"]).unwrap();
        let len = log.len_bytes();
        drop(log);
        let all: Vec<LogRecord> = read_records(&path).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(all.len(), 3);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 1).unwrap();
        drop(f);
        let some: Vec<LogRecord> = read_records(&path).unwrap().map(|r| r.unwrap()).collect();
        assert_eq!(some, all[..2].to_vec());
        // Read-only: the torn tail is still there.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), len - 1);
        flip_byte(&path, 8 + 16);
        let items: Vec<_> = read_records(&path).unwrap().collect();
        assert_eq!(items.len(), 1);
        assert!(matches!(items[0], Err(LogError::Corrupt { offset: 8, .. })));
    }

    #[test]
    fn garbage_never_panics() {
        let (_d, path) = setup();
        let mut seed = 0x1234_5678_u64;
        for round in 0..200u64 {
            let mut bytes = MAGIC.to_vec();
            let n = (round * 37) % 300;
            for _ in 0..n {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                bytes.push((seed >> 33) as u8);
            }
            std::fs::write(&path, &bytes).unwrap();
            let _ = Log::open(&path);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn recovered_records_are_a_prefix(
            batches in prop::collection::vec(
                prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..5),
                1..6,
            ),
            cut in any::<prop::sample::Index>(),
        ) {
            let (_d, path) = setup();
            let (mut log, _) = Log::open(&path).unwrap();
            let mut written = Vec::new();
            for b in &batches {
                let seqs = log.append_batch(&refs(b)).unwrap();
                written.extend(seqs.into_iter().zip(b.iter().cloned()));
            }
            let full = log.len_bytes();
            drop(log);
            let cut = cut.index(full as usize + 1) as u64;
            OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
            let (mut log, rec) = Log::open(&path).unwrap();
            let got: Vec<(u64, Vec<u8>)> =
                rec.records.into_iter().map(|r| (r.seq, r.payload)).collect();
            let lens: Vec<usize> = written.iter().map(|(_, p)| p.len()).collect();
            let complete = frame_offsets(&lens).iter().filter(|&&o| o <= cut).count().saturating_sub(1);
            prop_assert_eq!(&got[..], &written[..complete]);
            let next = log.append_batch(&[b"tail"]).unwrap()[0];
            prop_assert!(got.last().is_none_or(|(s, _)| *s < next));
        }
    }
}
