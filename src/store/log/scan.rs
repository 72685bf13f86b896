//! Reading frames back: the sequential scanner that applies the recovery rules of
//! [`super`] (torn tail versus corruption), the start-up scan and the read-only stream.
//!
//! Invariants: a frame is returned only after its length, checksum and sequence were
//! checked; a damaged frame followed by intact data is `Corrupt`, never a torn tail; nothing
//! here writes to the file.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::{
    io_err, LogError, LogRecord, FRAME_HEADER_LEN, HEADER_LEN, MAGIC, MAX_PAYLOAD, SCAN_BUFFER,
};

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

/// The acknowledged records of a log from a given seq on (see [`super::Log::read_from`]).
pub struct Acknowledged {
    scanner: Scanner<BufReader<File>>,
    from: u64,
    done: bool,
}

impl Acknowledged {
    /// Reads `path` up to `len`, the end of its acknowledged data.
    pub(super) fn open(path: &Path, len: u64, from: u64) -> Result<Acknowledged, LogError> {
        let mut file = File::open(path).map_err(|e| io_err(path, e))?;
        let has_header = check_header(&mut file, path, len)?;
        let reader = BufReader::with_capacity(SCAN_BUFFER, file);
        Ok(Acknowledged {
            scanner: Scanner::new(reader, path, len),
            from,
            done: !has_header,
        })
    }
}

impl Iterator for Acknowledged {
    type Item = Result<LogRecord, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.scanner.step() {
                Ok(Step::Record(r)) if r.seq < self.from => {}
                Ok(Step::Record(r)) => return Some(Ok(r)),
                Ok(Step::End) => self.done = true,
                Ok(Step::Torn(at)) => {
                    self.done = true;
                    let reason = "an acknowledged frame is damaged".to_string();
                    return Some(Err(self.scanner.corrupt(at, reason)));
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
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
pub(super) fn scan_all<E: From<LogError>>(
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
pub(super) fn check_header(file: &mut File, path: &Path, file_len: u64) -> Result<bool, LogError> {
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

pub(super) fn parse_frame_header(hdr: &[u8; FRAME_HEADER_LEN as usize]) -> (u64, u32, u64) {
    let [l0, l1, l2, l3, c0, c1, c2, c3, s0, s1, s2, s3, s4, s5, s6, s7] = *hdr;
    let len = u32::from_le_bytes([l0, l1, l2, l3]) as u64;
    let crc = u32::from_le_bytes([c0, c1, c2, c3]);
    let seq = u64::from_le_bytes([s0, s1, s2, s3, s4, s5, s6, s7]);
    (len, crc, seq)
}

pub(super) fn frame_crc(seq: u64, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.finalize()
}
