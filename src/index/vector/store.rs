//! Append-only, chunked storage of fixed-dimension vectors.
//!
//! Layout: vectors live in chunks of [`CHUNK_VECTORS`] vectors. Full chunks are
//! *sealed* into immutable `Arc<[f32]>` blocks that readers use without any
//! lock; the single open *tail* chunk is an `Arc<RwLock<Vec<f32>>>` that only
//! the appender writes. Growth therefore copies at most one chunk (when the
//! tail is sealed), never the whole store. Each sealed chunk is then coded
//! ([`super::quant`], 8 bits per component) on a rayon thread into a block
//! that broad scopes scan first.
//!
//! # Invariants
//!
//! * `len` only grows, by one per [`VectorStore::push`], and is published
//!   (release store) after the vector is fully written, so any id `< len()`
//!   refers to a complete vector.
//! * Appends are serialised by `append_lock`; ids must be exactly `len()`.
//! * A code block, once installed, codes exactly the vectors of its sealed
//!   chunk. Codes may lag (the open tail and a chunk being coded have none):
//!   readers then use the full vector, so answers never depend on them.
//! * Vectors `[k * CHUNK_VECTORS, (k + 1) * CHUNK_VECTORS)` are in `sealed[k]`
//!   when `k < sealed.len()`, otherwise in the tail. A sealed chunk is a copy
//!   of the old tail, which is never written again, so readers still holding
//!   the old tail see the same data.

use std::cell::OnceCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

use super::quant::{CodeBlock, CodeRef};
use super::{check_vector, VectorError};

/// Number of vectors per chunk (4096 × 384 × 4 B = 6 MiB per sealed chunk).
pub const CHUNK_VECTORS: usize = 4096;

/// The open chunk being appended to.
type Tail = Arc<RwLock<Vec<f32>>>;

/// Code blocks by sealed chunk, `None` while one is being coded. The list itself is shared
/// and replaced whole when a block is installed, so a snapshot clones one `Arc`.
type Codes = Arc<RwLock<Arc<Vec<Option<Arc<CodeBlock>>>>>>;

/// The vectors, rows of `width` components, chunked as described above.
struct Lane {
    width: usize,
    chunks: RwLock<Chunks>,
}

struct Chunks {
    /// Replaced whole on each seal (every [`CHUNK_VECTORS`] appends), so that a snapshot
    /// clones one `Arc` instead of one per chunk.
    sealed: Arc<Vec<Arc<[f32]>>>,
    tail: Tail,
}

impl Lane {
    fn new(width: usize) -> Self {
        let chunks = Chunks {
            sealed: Arc::default(),
            tail: new_tail(width),
        };
        Lane {
            width,
            chunks: RwLock::new(chunks),
        }
    }

    /// Appends row number `len`, sealing the full tail first. Caller holds the append lock.
    fn append(&self, len: usize, row: &[f32]) {
        debug_assert_eq!(row.len(), self.width);
        if len > 0 && len.is_multiple_of(CHUNK_VECTORS) {
            self.seal_tail(len / CHUNK_VECTORS);
        }
        let tail = Arc::clone(&self.chunks.read().tail);
        tail.write().extend_from_slice(row);
    }

    /// Freezes a copy of the full tail into `sealed` and opens a new tail.
    /// Idempotent: does nothing once `want_sealed` chunks are sealed.
    fn seal_tail(&self, want_sealed: usize) {
        let old_tail = Arc::clone(&self.chunks.read().tail);
        let block: Arc<[f32]> = Arc::from(old_tail.read().as_slice());
        let mut chunks = self.chunks.write();
        if chunks.sealed.len() < want_sealed {
            let mut sealed = Vec::clone(&chunks.sealed);
            sealed.push(block);
            chunks.sealed = Arc::new(sealed);
            let old = std::mem::replace(&mut chunks.tail, Arc::new(RwLock::new(Vec::new())));
            drop(old_tail);
            chunks.tail = reuse_tail(old, self.width);
        }
    }
}

/// Append-only vector storage with concurrent readers and one appender. Next to each
/// vector it keeps its 8-bit code ([`quant`]), which broad scopes scan first.
pub struct VectorStore {
    dim: usize,
    /// The model that made the vectors, once known; never changes after it is set.
    model: std::sync::OnceLock<String>,
    vectors: Lane,
    /// The code block of each sealed chunk, once coded (see [`VectorStore::push`]).
    codes: Codes,
    len: AtomicUsize,
    append_lock: Mutex<()>,
}

impl std::fmt::Debug for VectorStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VectorStore")
            .field("dim", &self.dim)
            .field("model", &self.model())
            .field("len", &self.len())
            .finish()
    }
}

impl VectorStore {
    /// Creates an empty store for vectors of `dim` components.
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            model: std::sync::OnceLock::new(),
            vectors: Lane::new(dim),
            codes: Codes::default(),
            len: AtomicUsize::new(0),
            append_lock: Mutex::new(()),
        }
    }

    /// Creates an empty store for vectors of `dim` components made by `model`.
    pub fn for_model(model: &str, dim: usize) -> Self {
        let store = Self::new(dim);
        let _ = store.model.set(model.to_string());
        store
    }

    /// The model that made the vectors, when the store was created for one or labelled.
    pub fn model(&self) -> Option<&str> {
        self.model.get().map(String::as_str)
    }

    /// Labels the store with the model that made its vectors, if it has no label yet; the
    /// label it holds, when that differs from `model`.
    pub fn label(&self, model: &str) -> Result<(), String> {
        match self.model.get_or_init(|| model.to_string()) {
            held if held == model => Ok(()),
            held => Err(held.clone()),
        }
    }

    /// Appends the vector of `id`, which must equal [`len()`](Self::len).
    ///
    /// Errors: [`VectorError::OutOfOrder`], [`VectorError::Dim`],
    /// [`VectorError::NonFinite`], [`VectorError::Full`]. On error nothing is
    /// stored.
    pub fn push(&self, id: u32, v: &[f32]) -> Result<(), VectorError> {
        let _append = self.append_lock.lock();
        let len = self.len.load(Ordering::Acquire);
        let expected = u32::try_from(len).map_err(|_| VectorError::Full)?;
        if id != expected {
            return Err(VectorError::OutOfOrder { expected, got: id });
        }
        check_vector(id, v, self.dim)?;
        self.vectors.append(len, v);
        if len > 0 && len.is_multiple_of(CHUNK_VECTORS) {
            self.code_sealed(len / CHUNK_VECTORS - 1);
        }
        self.len.store(len + 1, Ordering::Release);
        Ok(())
    }

    /// Codes sealed chunk `k` on a rayon thread, off the appender's path (a restart's replay
    /// does not wait for it). Until its block is installed, that chunk's vectors are scored
    /// in full wherever codes would be used.
    fn code_sealed(&self, k: usize) {
        let Some(block) = self.vectors.chunks.read().sealed.get(k).cloned() else {
            return;
        };
        let (codes, dim) = (Arc::clone(&self.codes), self.dim);
        rayon::spawn(move || {
            let coded = Arc::new(CodeBlock::encode(&block, dim));
            let mut installed = codes.write();
            let mut blocks = Vec::clone(&installed);
            if blocks.len() <= k {
                blocks.resize(k + 1, None);
            }
            blocks[k] = Some(coded);
            *installed = Arc::new(blocks);
        });
    }

    /// Whether every sealed chunk has its code block (tests wait for it).
    pub fn coded(&self) -> bool {
        let sealed = self.vectors.chunks.read().sealed.len();
        let blocks = self.codes.read();
        blocks.len() >= sealed && blocks.iter().take(sealed).all(Option::is_some)
    }

    /// Number of stored vectors (= the next id to push).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// True when no vector has been stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Dimension of every stored vector.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Calls `f` with the vector of `id` without copying it; `None` (and `f`
    /// not called) when `id` is unknown.
    pub fn with_vector<R>(&self, id: u32, f: impl FnOnce(&[f32]) -> R) -> Option<R> {
        let snap = self.snapshot();
        let reader = snap.reader();
        reader.vector(id).map(f)
    }

    /// Copy of the vector of `id`, `None` when unknown.
    pub fn get(&self, id: u32) -> Option<Vec<f32>> {
        self.with_vector(id, <[f32]>::to_vec)
    }

    /// A consistent read view of the first `len()` vectors, cheap to take
    /// (clones four `Arc`s) and independent of later appends.
    pub(super) fn snapshot(&self) -> Snapshot {
        let vectors = self.vectors.chunks.read();
        // Loaded under the chunk lock: a concurrent seal cannot be half seen.
        let len = self.len.load(Ordering::Acquire);
        Snapshot {
            len,
            vectors: LaneSnapshot {
                width: self.dim,
                sealed: Arc::clone(&vectors.sealed),
                tail: Arc::clone(&vectors.tail),
            },
            codes: Arc::clone(&self.codes.read()),
        }
    }
}

/// An empty tail with room for a whole chunk, so appends never reallocate it.
fn new_tail(width: usize) -> Tail {
    Arc::new(RwLock::new(Vec::with_capacity(CHUNK_VECTORS * width)))
}

/// The next tail after `old` was sealed: `old`'s buffer, emptied, when no snapshot still
/// holds it (its memory is already mapped: a restart's replay then touches each vector's
/// memory once, in its sealed chunk), else a fresh one.
fn reuse_tail(old: Tail, width: usize) -> Tail {
    match Arc::try_unwrap(old) {
        Ok(lock) => {
            let mut buf = lock.into_inner();
            buf.clear();
            Arc::new(RwLock::new(buf))
        }
        Err(_) => new_tail(width),
    }
}

/// Read view of the vectors.
struct LaneSnapshot {
    width: usize,
    sealed: Arc<Vec<Arc<[f32]>>>,
    tail: Tail,
}

/// Lazily read-locked tail of the vectors, for a [`Reader`].
struct LaneReader<'a> {
    snap: &'a LaneSnapshot,
    tail: OnceCell<RwLockReadGuard<'a, Vec<f32>>>,
}

impl<'a> LaneReader<'a> {
    fn new(snap: &'a LaneSnapshot) -> Self {
        LaneReader {
            snap,
            tail: OnceCell::new(),
        }
    }

    #[inline(always)]
    /// Row `id`, which the caller has checked is below the snapshot's length.
    fn row(&self, id: usize) -> Option<&[f32]> {
        let (chunk, offset) = (id / CHUNK_VECTORS, (id % CHUNK_VECTORS) * self.snap.width);
        let data: &[f32] = match self.snap.sealed.get(chunk) {
            Some(block) => block,
            None => self.tail.get_or_init(|| self.snap.tail.read()).as_slice(),
        };
        data.get(offset..offset + self.snap.width)
    }
}

/// Read view of a [`VectorStore`]; see [`VectorStore::snapshot`].
pub(super) struct Snapshot {
    len: usize,
    vectors: LaneSnapshot,
    codes: Arc<Vec<Option<Arc<CodeBlock>>>>,
}

impl Snapshot {
    /// The number of vectors it holds.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// A reader for a batch of lookups; it read-locks the tail chunk at
    /// most once, on first use, and holds it until dropped, so keep readers short.
    pub(super) fn reader(&self) -> Reader<'_> {
        Reader {
            len: self.len,
            vectors: LaneReader::new(&self.vectors),
            codes: &self.codes,
        }
    }
}

/// Batch lookup handle over a [`Snapshot`] (not shared between threads).
pub(super) struct Reader<'a> {
    len: usize,
    vectors: LaneReader<'a>,
    codes: &'a [Option<Arc<CodeBlock>>],
}

impl Reader<'_> {
    #[inline(always)]
    fn index(&self, id: u32) -> Option<usize> {
        usize::try_from(id).ok().filter(|&i| i < self.len)
    }

    /// The vector of `id`, or `None` if `id` is not in the snapshot.
    #[inline(always)]
    pub(super) fn vector(&self, id: u32) -> Option<&[f32]> {
        self.vectors.row(self.index(id)?)
    }

    /// The 8-bit code of `id`, or `None` if `id` is not in the snapshot or its chunk is
    /// not coded (yet: the open tail chunk never is).
    #[inline(always)]
    pub(super) fn code(&self, id: u32) -> Option<CodeRef<'_>> {
        let i = self.index(id)?;
        let block = self.codes.get(i / CHUNK_VECTORS)?.as_ref()?;
        block.code(i % CHUNK_VECTORS)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn vec_for(id: u32, dim: usize) -> Vec<f32> {
        (0..dim).map(|j| id as f32 + j as f32 / 1000.0).collect()
    }

    #[test]
    fn push_get_across_chunks() {
        let store = VectorStore::new(3);
        let n = (CHUNK_VECTORS * 2 + 5) as u32;
        for id in 0..n {
            store.push(id, &vec_for(id, 3)).unwrap();
        }
        assert_eq!(store.len(), n as usize);
        for id in [0, 1, 4095, 4096, 8191, 8192, n - 1] {
            assert_eq!(store.get(id).unwrap(), vec_for(id, 3));
        }
        assert!(store.get(n).is_none());
        assert_eq!(store.with_vector(7, |v| v[0]), Some(7.0));
        assert_eq!(store.with_vector(n + 9, |v| v[0]), None);
    }

    #[test]
    fn out_of_order_and_dim_errors() {
        let store = VectorStore::new(4);
        assert!(matches!(
            store.push(1, &[0.0; 4]),
            Err(VectorError::OutOfOrder {
                expected: 0,
                got: 1
            })
        ));
        assert!(matches!(
            store.push(0, &[0.0; 3]),
            Err(VectorError::Dim {
                expected: 4,
                got: 3
            })
        ));
        assert!(matches!(
            store.push(0, &[f32::NAN; 4]),
            Err(VectorError::NonFinite { id: 0 })
        ));
        assert!(store.is_empty());
        store.push(0, &[1.0; 4]).unwrap();
        assert!(matches!(
            store.push(0, &[1.0; 4]),
            Err(VectorError::OutOfOrder {
                expected: 1,
                got: 0
            })
        ));
        assert_eq!(store.len(), 1);
        assert_eq!(store.dim(), 4);
    }

    #[test]
    fn snapshot_is_stable_under_appends() {
        let store = VectorStore::new(2);
        for id in 0..CHUNK_VECTORS as u32 {
            store.push(id, &vec_for(id, 2)).unwrap();
        }
        let snap = store.snapshot();
        // Sealing the old tail must not change what the snapshot sees.
        for id in CHUNK_VECTORS as u32..CHUNK_VECTORS as u32 + 10 {
            store.push(id, &vec_for(id, 2)).unwrap();
        }
        let reader = snap.reader();
        let last = CHUNK_VECTORS as u32 - 1;
        assert_eq!(snap.len, CHUNK_VECTORS);
        assert!(reader.code(last + 1).is_none());
        assert_eq!(reader.vector(last).unwrap(), &vec_for(last, 2)[..]);
        assert!(reader.vector(last + 1).is_none());
    }

    #[test]
    fn concurrent_readers_see_whole_vectors() {
        let store = Arc::new(VectorStore::new(64));
        let writer = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for id in 0..20_000u32 {
                    store.push(id, &[id as f32; 64]).unwrap();
                }
            })
        };
        let reader = {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                while store.len() < 20_000 {
                    let len = store.len() as u32;
                    if len == 0 {
                        continue;
                    }
                    let id = len - 1;
                    let ok = store.with_vector(id, |v| v.iter().all(|&x| x == id as f32));
                    assert_eq!(ok, Some(true));
                }
            })
        };
        writer.join().unwrap();
        reader.join().unwrap();
    }
}
