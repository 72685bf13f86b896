//! Online re-embedding: every stored event embedded again with another model while the
//! engine serves, then one switch to the new vectors.
//!
//! A background thread (never an async thread, never the writer) walks the internal ids in
//! order, embeds each live event's passage with the target model, and keeps the vectors
//! beside the serving ones: in memory (a [`VectorStore`] labelled with the target model) and
//! in a side file under `index/reembed/`, fsynced per batch, from which a restart resumes.
//! Recall and writes use the serving model throughout. Once the new vectors cover every
//! internal id the writer has given, the writer switches ([`Command::SwitchModel`]): it
//! rewrites the log with the new vectors (each record naming the model that made it), swaps
//! the vectors and the serving model in one step, rebuilds the derived indexes, and the side
//! file is removed. Writes that come meanwhile get ids past the walk's end, so the walk
//! goes on until it is level with the writer; the writer refuses a switch that is behind.
//!
//! Invariants:
//! - the side file is derived data, like an index: each record carries a hash of the text
//!   it was embedded from, and a resume keeps records only while they match the events the
//!   log holds now (a torn tail, a restored backup or another log's file are dropped);
//! - every compaction drops the re-embedding's vectors and side file (they may hold
//!   content the compaction purges), and the walk starts again (an epoch, as for the
//!   partitions and graphs);
//! - the switch is one writer step: until it, every vector read or written is the old
//!   model's; after it, every one is the new model's. A write embedded with the old model
//!   and applied after the switch is refused by the writer and embedded again
//!   ([`super::writer::PutReply::ModelChanged`]); a recall whose query was embedded with the
//!   other model is embedded again;
//! - a log rewrite that fails leaves the old model serving, and the walk tries again.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::oneshot;

use super::shared::{Serving, Shared};
use super::writer::{Command, Fill, Switch, SWITCH_TAIL};
use crate::embed::{as_passage, PassageText};
use crate::index::vector::VectorStore;
use crate::model::Timestamp;
use crate::read::Slot;

/// Events embedded per model call and per fsync of the side file.
const BATCH: usize = 64;
/// How long the walk waits after a failure (the model, the disk) before it tries again.
const RETRY_AFTER: Duration = Duration::from_secs(2);
/// First bytes of a side file.
const MAGIC: &[u8; 8] = b"EPREMB1\n";

/// Where a re-embedding stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub enum ReembedState {
    /// Walking the events.
    Running,
    /// Switched: the new model serves.
    Complete,
    /// The last step failed; it is retried (see `error`).
    Retrying,
}

/// A re-embedding's progress (`GET /v1/admin/reembed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReembedStatus {
    /// The model that served when it started.
    pub from: String,
    /// The model it embeds with.
    pub to: String,
    /// Where it stands.
    pub state: ReembedState,
    /// Internal ids covered (live events embedded, and the ids of deleted ones passed).
    pub done: usize,
    /// Internal ids given so far.
    pub total: usize,
    /// Internal ids taken from the side file when it resumed.
    pub resumed: usize,
    /// When this run started.
    pub started_at: Timestamp,
    /// When it switched models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switched_at: Option<Timestamp>,
    /// The last failure, while retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The model that serves, and a re-embedding's progress (`GET /v1/admin/reembed`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// The model that made the stored vectors, which embeds every write and query.
    pub model: String,
    /// Its dimension.
    pub dim: usize,
    /// The re-embedding started when this server started (`--reembed-to`), if any.
    pub reembed: Option<ReembedStatus>,
}

/// Starts the walk to `target` on a thread of its own; it stops when `stop` is set or the
/// writer is gone.
pub(super) fn start(
    shared: Arc<Shared>,
    tx: Sender<Command>,
    target: Arc<Serving>,
    passage: PassageText,
    stop: Arc<AtomicBool>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let from = shared.serving.load().embedder.model_id().to_string();
    *shared.reembed.write() = Some(ReembedStatus {
        from,
        to: target.embedder.model_id().to_string(),
        state: ReembedState::Running,
        done: 0,
        total: shared.table.read().next_doc() as usize,
        resumed: 0,
        started_at: Timestamp::now(),
        switched_at: None,
        error: None,
    });
    let walk = Walk {
        shared,
        tx,
        target,
        passage,
        stop,
    };
    std::thread::Builder::new()
        .name("episodic-reembed".into())
        .spawn(move || walk.run())
}

/// The re-embedding thread's state.
struct Walk {
    shared: Arc<Shared>,
    tx: Sender<Command>,
    target: Arc<Serving>,
    passage: PassageText,
    stop: Arc<AtomicBool>,
}

/// What one step of the walk came to.
enum Step {
    /// The epoch changed: start again.
    Restart,
    /// Switched, or told to stop.
    Done,
}

impl Walk {
    fn run(self) {
        while !self.stopped() {
            let epoch = *self.shared.reembed_epoch.lock();
            match self.attempt(epoch) {
                Ok(Step::Done) => return,
                Ok(Step::Restart) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "re-embedding failed; retrying");
                    self.status(|s| {
                        s.state = ReembedState::Retrying;
                        s.error = Some(e.clone());
                    });
                    std::thread::sleep(RETRY_AFTER);
                }
            }
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    fn status(&self, f: impl FnOnce(&mut ReembedStatus)) {
        if let Some(s) = self.shared.reembed.write().as_mut() {
            f(s);
        }
    }

    /// One run of the walk under `epoch`: resume from the side file, embed until level
    /// with the writer, switch.
    fn attempt(&self, epoch: u64) -> Result<Step, String> {
        let model = self.target.embedder.model_id();
        let dim = self.target.embedder.dim();
        let (mut side, next) =
            SideFile::resume(&self.shared, model, dim, &self.passage, &self.target)?;
        let resumed = next.len();
        self.status(|s| {
            s.resumed = resumed;
            s.done = resumed;
        });
        let next = Arc::new(next);
        loop {
            if self.stopped() {
                return Ok(Step::Done);
            }
            if *self.shared.reembed_epoch.lock() != epoch {
                return Ok(Step::Restart);
            }
            let upto = self.shared.table.read().next_doc() as usize;
            // Within SWITCH_TAIL of the writer, ask for the switch: the writer embeds the
            // rest itself, since writes that keep coming would keep the walk a step behind.
            if next.len() + SWITCH_TAIL < upto {
                self.embed_batch(&mut side, &next, upto)?;
                let done = next.len();
                self.status(|s| {
                    s.state = ReembedState::Running;
                    s.error = None;
                    s.done = done;
                    s.total = upto;
                });
                continue;
            }
            match self.switch(&next, epoch)? {
                Switch::Switched => {
                    drop(side);
                    self.shared.paths.remove_reembed_files();
                    self.status(|s| {
                        s.state = ReembedState::Complete;
                        s.error = None;
                        s.switched_at = Some(Timestamp::now());
                        s.total = s.done;
                    });
                    tracing::info!(
                        model,
                        events = upto,
                        "re-embedding complete; the new model serves"
                    );
                    return Ok(Step::Done);
                }
                Switch::Behind => {}
                Switch::Stale => return Ok(Step::Restart),
            }
        }
    }

    /// Embeds the next batch of ids below `upto`, appends it to the side file and to `next`.
    fn embed_batch(
        &self,
        side: &mut SideFile,
        next: &VectorStore,
        upto: usize,
    ) -> Result<(), String> {
        let last = upto.min(next.len() + BATCH);
        let rows = embed_rows(&self.shared, &self.target, self.passage, next.len(), last)?;
        side.append(&rows)?;
        push_rows(next, &rows)
    }

    /// Asks the writer to switch to `next`.
    fn switch(&self, next: &Arc<VectorStore>, epoch: u64) -> Result<Switch, String> {
        let (reply, answer) = oneshot::channel();
        let (target, passage) = (Arc::clone(&self.target), self.passage);
        // The writer embeds the last few ids itself, if writes came since the walk was
        // level: under a steady stream of writes the walk would otherwise never be.
        let fill = Fill(Box::new(
            move |shared: &Shared, next: &VectorStore, upto: usize| {
                let rows = embed_rows(shared, &target, passage, next.len(), upto)?;
                push_rows(next, &rows)
            },
        ));
        self.tx
            .send(Command::SwitchModel {
                next: Arc::clone(next),
                serving: Arc::clone(&self.target),
                epoch,
                fill,
                reply,
            })
            .map_err(|_| "the writer has stopped".to_string())?;
        answer
            .blocking_recv()
            .map_err(|_| "the writer has stopped".to_string())?
            .map_err(|e| format!("switching models: {e}"))
    }
}

/// One row per id: its text's hash and vector, or nothing for an id with no live event.
type Row = (u32, Option<(u32, Vec<f32>)>);

/// The target model's rows of the ids `first..last`.
fn embed_rows(
    shared: &Shared,
    target: &Serving,
    passage: PassageText,
    first: usize,
    last: usize,
) -> Result<Vec<Row>, String> {
    let texts: Vec<Option<String>> = {
        let table = shared.table.read();
        (first..last)
            .map(|doc| passage_of(table.slots().get(doc), &passage, target))
            .collect()
    };
    let wanted: Vec<&str> = texts.iter().flatten().map(String::as_str).collect();
    let vectors = target
        .embedder
        .embed(&wanted)
        .map_err(|e| format!("embedding with {}: {e}", target.embedder.model_id()))?;
    if vectors.len() != wanted.len() {
        return Err(format!(
            "{} returned {} vectors for {} texts",
            target.embedder.model_id(),
            vectors.len(),
            wanted.len()
        ));
    }
    let mut vectors = vectors.into_iter();
    Ok(texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let row = text
                .as_deref()
                .and_then(|t| vectors.next().map(|v| (text_hash(t), v)));
            ((first + i) as u32, row)
        })
        .collect())
}

/// Appends rows to `next` (an id with no live event gets a zero vector).
fn push_rows(next: &VectorStore, rows: &[Row]) -> Result<(), String> {
    let zero = vec![0.0; next.dim()];
    for (doc, row) in rows {
        let v = row.as_ref().map_or(zero.as_slice(), |(_, v)| v.as_slice());
        next.push(*doc, v).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The text the target model embeds for a slot: a live event's passage, nothing for a
/// deleted or empty one (its vector stays zero, as compaction leaves it).
fn passage_of(slot: Option<&Slot>, passage: &PassageText, target: &Serving) -> Option<String> {
    match slot {
        Some(Slot::Live(e)) => Some(as_passage(
            &*target.embedder,
            &passage.text(&e.event.actor_id, &e.event.summary),
        )),
        Some(Slot::Deleted(_) | Slot::Empty) | None => None,
    }
}

/// A short hash of the text a vector was made from.
fn text_hash(text: &str) -> u32 {
    crc32fast::hash(text.as_bytes())
}

/// The side file of a re-embedding: a header naming the model and dimension, then one
/// record per internal id, in order: `doc u32 | kind u8 | [text hash u32 | dim × f32] |
/// crc32 u32`, kind 0 for an id with no live event, 1 for a vector.
struct SideFile {
    file: File,
    dim: usize,
}

impl SideFile {
    fn path(dir: &Path, model: &str) -> PathBuf {
        dir.join(format!("{model}.vectors"))
    }

    /// Opens (or creates) the side file of `model` and reads back the vectors whose text
    /// still matches the table; the file is cut after the last record kept.
    fn resume(
        shared: &Shared,
        model: &str,
        dim: usize,
        passage: &PassageText,
        target: &Serving,
    ) -> Result<(SideFile, VectorStore), String> {
        let dir = &shared.paths.reembed;
        crate::fsutil::create_private_dir_all(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = Self::path(dir, model);
        let io = |e: std::io::Error| format!("{}: {e}", path.display());
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        let header = header(model, dim);
        let store = VectorStore::for_model(model, dim);
        let mut kept = header.len() as u64;
        let mut head = vec![0u8; header.len()];
        if file.read_exact(&mut head).is_ok() && head == header {
            let zero = vec![0.0; dim];
            let mut reader = BufReader::new(&mut file);
            while let Some((len, doc, row)) = read_record(&mut reader, dim) {
                if doc as usize != store.len() {
                    break;
                }
                // The table is read-locked per record, not across the file's reading: the
                // writer, which locks it to apply writes, goes on while a long file resumes.
                let want = {
                    let table = shared.table.read();
                    passage_of(table.slots().get(doc as usize), passage, target)
                };
                let matches = match (&want, &row) {
                    (None, None) => true,
                    (Some(t), Some((hash, _))) => text_hash(t) == *hash,
                    _ => false,
                };
                if !matches {
                    break;
                }
                let v = row.as_ref().map_or(zero.as_slice(), |(_, v)| v.as_slice());
                if store.push(doc, v).is_err() {
                    break;
                }
                kept += len;
            }
        } else {
            file.set_len(0).map_err(io)?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            file.write_all(&header).map_err(io)?;
        }
        file.set_len(kept).map_err(io)?;
        file.seek(SeekFrom::Start(kept)).map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok((SideFile { file, dim }, store))
    }

    /// Appends rows and makes them durable.
    fn append(&mut self, rows: &[Row]) -> Result<(), String> {
        let mut buf = Vec::with_capacity(rows.len() * (13 + self.dim * 4));
        for (doc, row) in rows {
            let start = buf.len();
            buf.extend_from_slice(&doc.to_le_bytes());
            match row {
                None => buf.push(0),
                Some((hash, v)) => {
                    buf.push(1);
                    buf.extend_from_slice(&hash.to_le_bytes());
                    for x in v {
                        buf.extend_from_slice(&x.to_le_bytes());
                    }
                }
            }
            let crc = crc32fast::hash(&buf[start..]);
            buf.extend_from_slice(&crc.to_le_bytes());
        }
        self.file
            .write_all(&buf)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| format!("writing the re-embedding's side file: {e}"))
    }
}

fn header(model: &str, dim: usize) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&(dim as u32).to_le_bytes());
    h.extend_from_slice(&(model.len() as u32).to_le_bytes());
    h.extend_from_slice(model.as_bytes());
    h
}

/// One record: its length in bytes, its id, and its text hash and vector (none for kind 0);
/// `None` at the end or at a torn or corrupt record.
#[allow(clippy::type_complexity)]
fn read_record(r: &mut impl Read, dim: usize) -> Option<(u64, u32, Option<(u32, Vec<f32>)>)> {
    let mut head = [0u8; 5];
    r.read_exact(&mut head).ok()?;
    let mut body = head.to_vec();
    let doc = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    let row = match head[4] {
        0 => None,
        1 => {
            let mut rest = vec![0u8; 4 + dim * 4];
            r.read_exact(&mut rest).ok()?;
            body.extend_from_slice(&rest);
            let hash = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let v = rest[4..]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Some((hash, v))
        }
        _ => return None,
    };
    let mut crc = [0u8; 4];
    r.read_exact(&mut crc).ok()?;
    if u32::from_le_bytes(crc) != crc32fast::hash(&body) {
        return None;
    }
    Some((body.len() as u64 + 4, doc, row))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_torn_or_corrupt_one_ends_the_read() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("m.vectors");
        let mut side = SideFile {
            file: File::create(&path).expect("create"),
            dim: 2,
        };
        side.append(&[
            (0, Some((7, vec![0.6, 0.8]))),
            (1, None),
            (2, Some((9, vec![1.0, 0.0]))),
        ])
        .expect("append");
        let bytes = std::fs::read(&path).expect("read");
        let mut r = bytes.as_slice();
        let (len, doc, row) = read_record(&mut r, 2).expect("first");
        assert_eq!((len, doc, row), (17 + 4, 0, Some((7, vec![0.6, 0.8]))));
        assert_eq!(
            read_record(&mut r, 2).map(|(_, d, row)| (d, row)),
            Some((1, None))
        );
        assert_eq!(read_record(&mut r, 2).map(|(_, d, _)| d), Some(2));
        assert!(read_record(&mut r, 2).is_none());
        // A torn last record, and a flipped bit, each end the read there.
        let torn = &bytes[..bytes.len() - 3];
        let mut r = torn;
        assert_eq!(std::iter::from_fn(|| read_record(&mut r, 2)).count(), 2);
        let mut flipped = bytes.clone();
        flipped[6] ^= 1;
        let mut r = flipped.as_slice();
        assert!(read_record(&mut r, 2).is_none());
    }
}
