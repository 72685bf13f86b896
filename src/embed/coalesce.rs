//! The embedding coalescer: concurrent requests' single texts (recall queries, writes) are
//! gathered into one model call.
//!
//! One worker thread owns the model calls. While it runs a batch, new texts queue up, and
//! the next call takes them all (up to `max_batch`): under load, batches form by themselves
//! with no added wait. The worker waits for more texts, at most `max_wait`, only when the
//! last call it made held more than one text and the queue has not run dry since (requests
//! are arriving concurrently), and the queue holds less than a full batch; an idle server,
//! or a single client, never waits.
//! The embedder sorts each call's texts by length and cuts batches where lengths diverge,
//! so short queries are not padded to a long write's length.
//!
//! Invariants: every submitted text gets exactly one answer (its vector or the call's
//! error), in its own channel, whatever order the batch ran in; the model runs on the
//! worker thread only, never on an async thread; a wait is bounded by `max_wait`; dropping
//! the last handle stops the worker after the queue drains.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::{EmbedError, Embedder};

/// The default longest wait for more texts while requests arrive concurrently.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_millis(1);

/// The default most texts per model call (the embedder runs them in length-sorted batches).
pub const DEFAULT_MAX_BATCH: usize = 64;

type Reply = oneshot::Sender<Result<Vec<f32>, EmbedError>>;

struct Queue {
    jobs: VecDeque<(String, Reply)>,
    /// Texts in the worker's last model call; 0 once the worker found the queue empty.
    last_batch: usize,
    /// No handle is left: the worker drains the queue and stops.
    closed: bool,
}

struct Inner {
    embedder: Arc<dyn Embedder>,
    queue: Mutex<Queue>,
    arrived: Condvar,
    max_wait: Duration,
    max_batch: usize,
    calls: std::sync::atomic::AtomicU64,
    texts: std::sync::atomic::AtomicU64,
}

/// A handle to the coalescer; clones share one worker.
#[derive(Clone)]
pub struct Coalescer {
    inner: Arc<Inner>,
    _stop: Arc<StopOnDrop>,
}

impl std::fmt::Debug for Coalescer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer")
            .field("model", &self.inner.embedder.model_id())
            .field("max_wait", &self.inner.max_wait)
            .field("max_batch", &self.inner.max_batch)
            .finish()
    }
}

/// Closes the queue when the last handle goes.
struct StopOnDrop(Arc<Inner>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        lock(&self.0.queue).closed = true;
        self.0.arrived.notify_all();
    }
}

fn lock(m: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts of the coalescer's work so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoalescerStats {
    /// Model calls made.
    pub calls: u64,
    /// Texts embedded.
    pub texts: u64,
}

impl Coalescer {
    /// Starts the worker thread (`episodic-embed`) over `embedder`.
    pub fn start(
        embedder: Arc<dyn Embedder>,
        max_wait: Duration,
        max_batch: usize,
    ) -> std::io::Result<Coalescer> {
        let inner = Arc::new(Inner {
            embedder,
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                last_batch: 0,
                closed: false,
            }),
            arrived: Condvar::new(),
            max_wait,
            max_batch: max_batch.max(1),
            calls: Default::default(),
            texts: Default::default(),
        });
        let worker = Arc::clone(&inner);
        std::thread::Builder::new()
            .name("episodic-embed".into())
            .spawn(move || work(&worker))?;
        Ok(Coalescer {
            _stop: Arc::new(StopOnDrop(Arc::clone(&inner))),
            inner,
        })
    }

    /// Embeds `text`, in one model call with whatever other texts are queued.
    pub async fn embed(&self, text: String) -> Result<Vec<f32>, EmbedError> {
        let mut one = self.embed_all(vec![text]).await?;
        one.pop()
            .ok_or_else(|| EmbedError::Runtime("the embedding worker answered nothing".into()))
    }

    /// Embeds every text of `texts` in one model call (queued together, so the worker takes
    /// them at once unless a call is already full), with whatever other texts are queued;
    /// one vector per text, in order.
    pub async fn embed_all(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut replies = Vec::with_capacity(texts.len());
        {
            let mut q = lock(&self.inner.queue);
            for text in texts {
                let (tx, rx) = oneshot::channel();
                q.jobs.push_back((text, tx));
                replies.push(rx);
            }
        }
        self.inner.arrived.notify_one();
        let mut out = Vec::with_capacity(replies.len());
        for rx in replies {
            out.push(
                rx.await
                    .map_err(|_| EmbedError::Runtime("the embedding worker stopped".into()))??,
            );
        }
        Ok(out)
    }

    /// Model calls and texts so far.
    pub fn stats(&self) -> CoalescerStats {
        use std::sync::atomic::Ordering::Relaxed;
        CoalescerStats {
            calls: self.inner.calls.load(Relaxed),
            texts: self.inner.texts.load(Relaxed),
        }
    }
}

/// The worker: takes queued texts in batches and answers each.
fn work(inner: &Inner) {
    loop {
        let batch: Vec<(String, Reply)> = {
            let mut q = lock(&inner.queue);
            while q.jobs.is_empty() {
                if q.closed {
                    return;
                }
                // The worker went idle: the next text is not part of a burst.
                q.last_batch = 0;
                q = inner.arrived.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            if q.last_batch > 1 && q.jobs.len() < inner.max_batch {
                // Requests arrive concurrently: give the others a bounded moment to join.
                let deadline = Instant::now() + inner.max_wait;
                while q.jobs.len() < inner.max_batch && !q.closed {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    q = inner
                        .arrived
                        .wait_timeout(q, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            let take = q.jobs.len().min(inner.max_batch);
            q.last_batch = take;
            q.jobs.drain(..take).collect()
        };
        run(inner, batch);
    }
}

/// One model call over `batch`, each answer sent to its own channel.
fn run(inner: &Inner, batch: Vec<(String, Reply)>) {
    use std::sync::atomic::Ordering::Relaxed;
    let texts: Vec<&str> = batch.iter().map(|(t, _)| t.as_str()).collect();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inner.embedder.embed(&texts)
    }))
    .unwrap_or_else(|_| Err(EmbedError::Runtime("the embedder panicked".into())));
    inner.calls.fetch_add(1, Relaxed);
    inner.texts.fetch_add(batch.len() as u64, Relaxed);
    match result {
        Ok(vectors) if vectors.len() == batch.len() => {
            for ((_, reply), v) in batch.into_iter().zip(vectors) {
                let _ = reply.send(Ok(v));
            }
        }
        Ok(vectors) => {
            let e = EmbedError::Runtime(format!(
                "the embedder returned {} vectors for {} texts",
                vectors.len(),
                batch.len()
            ));
            for (_, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
        Err(e) => {
            for (_, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::embed::HashingEmbedder;

    /// A hashing embedder that records each call's size and takes `delay` per call.
    struct Slow {
        inner: HashingEmbedder,
        delay: Duration,
        sizes: Mutex<Vec<usize>>,
        fail_on: Option<&'static str>,
        running: AtomicUsize,
    }

    impl Embedder for Slow {
        fn model_id(&self) -> &str {
            "slow"
        }
        fn dim(&self) -> usize {
            self.inner.dim()
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
            assert_eq!(
                self.running.fetch_add(1, Ordering::SeqCst),
                0,
                "one model call at a time"
            );
            std::thread::sleep(self.delay);
            self.sizes.lock().unwrap().push(texts.len());
            self.running.fetch_sub(1, Ordering::SeqCst);
            if self.fail_on.is_some_and(|f| texts.contains(&f)) {
                return Err(EmbedError::Runtime("refused".into()));
            }
            self.inner.embed(texts)
        }
    }

    fn slow(delay_ms: u64, fail_on: Option<&'static str>) -> Arc<Slow> {
        Arc::new(Slow {
            inner: HashingEmbedder::new(),
            delay: Duration::from_millis(delay_ms),
            sizes: Mutex::new(Vec::new()),
            fail_on,
            running: AtomicUsize::new(0),
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_texts_share_model_calls_and_each_gets_its_own_vector() {
        let model = slow(20, None);
        let c = Coalescer::start(model.clone(), DEFAULT_MAX_WAIT, DEFAULT_MAX_BATCH).unwrap();
        let texts: Vec<String> = (0..40).map(|i| format!("text number {i}")).collect();
        let handles: Vec<_> = texts
            .iter()
            .map(|t| {
                let c = c.clone();
                let t = t.clone();
                tokio::spawn(async move { c.embed(t).await })
            })
            .collect();
        let alone = HashingEmbedder::new();
        for (t, h) in texts.iter().zip(handles) {
            let v = h.await.unwrap().unwrap();
            assert_eq!(
                v,
                alone.embed(&[t.as_str()]).unwrap()[0],
                "{t}: its own vector"
            );
        }
        let sizes = model.sizes.lock().unwrap().clone();
        assert_eq!(sizes.iter().sum::<usize>(), 40);
        assert!(
            sizes.len() < 40 && sizes.iter().any(|&s| s > 1),
            "texts queued behind a running call share the next: {sizes:?}"
        );
        assert_eq!(c.stats().texts, 40);
        assert_eq!(c.stats().calls as usize, sizes.len());
    }

    #[tokio::test]
    async fn a_lone_text_is_embedded_alone_without_waiting_for_company() {
        let model = slow(0, None);
        // A wait this long would show if a lone text waited at all.
        let c = Coalescer::start(model.clone(), Duration::from_secs(5), 64).unwrap();
        for i in 0..3 {
            let started = Instant::now();
            c.embed(format!("alone {i}")).await.unwrap();
            assert!(
                started.elapsed() < Duration::from_secs(4),
                "no wait when idle"
            );
        }
        assert_eq!(*model.sizes.lock().unwrap(), vec![1, 1, 1]);
    }

    #[tokio::test]
    async fn texts_given_together_share_one_call_and_keep_their_order() {
        let model = slow(0, None);
        let c = Coalescer::start(model.clone(), Duration::from_secs(5), 64).unwrap();
        let texts = vec!["the summary".to_string(), "dana: the summary".to_string()];
        let got = c.embed_all(texts.clone()).await.unwrap();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        assert_eq!(got, HashingEmbedder::new().embed(&refs).unwrap());
        assert_eq!(*model.sizes.lock().unwrap(), vec![2]);
        // Once the worker has found its queue empty (a text that arrives while it is still
        // answering the pair counts as load and may wait for company), a lone text does not
        // wait.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        c.embed("alone".into()).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(4), "no wait after");
        assert!(c.embed_all(Vec::new()).await.unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn after_a_burst_the_first_lone_text_on_an_idle_worker_does_not_wait() {
        let model = slow(30, None);
        let c = Coalescer::start(model.clone(), Duration::from_secs(5), 64).unwrap();
        // A running call with texts queued behind it: the next call holds several.
        let burst: Vec<_> = (0..6)
            .map(|i| {
                let c = c.clone();
                tokio::spawn(async move { c.embed(format!("burst {i}")).await })
            })
            .collect();
        for h in burst {
            h.await.unwrap().unwrap();
        }
        assert!(
            model.sizes.lock().unwrap().iter().any(|&s| s > 1),
            "the burst shared a call"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        c.embed("alone".into()).await.unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "the worker went idle, so a lone text does not wait for company"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failed_call_answers_every_text_in_it_with_the_error_and_later_calls_work() {
        let model = slow(30, Some("poison"));
        let c = Coalescer::start(model.clone(), DEFAULT_MAX_WAIT, 64).unwrap();
        // Occupy the worker, then queue the poison with others behind it.
        let first = {
            let c = c.clone();
            tokio::spawn(async move { c.embed("first".into()).await })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let queued: Vec<_> = ["poison", "bystander"]
            .into_iter()
            .map(|t| {
                let c = c.clone();
                tokio::spawn(async move { c.embed(t.into()).await })
            })
            .collect();
        assert!(first.await.unwrap().is_ok());
        for h in queued {
            assert!(h.await.unwrap().is_err(), "same call, same error");
        }
        assert!(c.embed("after".into()).await.is_ok());
    }

    #[test]
    fn batches_never_exceed_the_maximum() {
        let model = slow(5, None);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let c = Coalescer::start(model.clone(), DEFAULT_MAX_WAIT, 4).unwrap();
        rt.block_on(async {
            let hs: Vec<_> = (0..30)
                .map(|i| {
                    let c = c.clone();
                    tokio::spawn(async move { c.embed(format!("t{i}")).await })
                })
                .collect();
            for h in hs {
                h.await.unwrap().unwrap();
            }
        });
        let sizes = model.sizes.lock().unwrap().clone();
        assert!(sizes.iter().all(|&s| s <= 4), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 30);
    }
}
