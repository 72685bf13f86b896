//! The event log as a NATS JetStream stream: [`NatsLog`], the second implementation of
//! [`EventLog`], over a [`NatsConnection`] that owns the async client.
//!
//! A record is one message on the stream's single subject, its sequence is the stream
//! sequence, and its payload is the record's bytes as the file log would hold them. The
//! stream is file-backed and replicated (R3 in a cluster), so an acknowledgement means the
//! record is held by a quorum (fsynced there on servers from 2.10 run with
//! `sync_interval: always`).
//!
//! Invariants (beyond those of [`EventLog`]):
//! - **fenced appends**: every message carries `Nats-Expected-Last-Sequence` = the sequence
//!   before it, so a second writer at the same position is refused ([`LogError::Fenced`])
//!   instead of interleaving. The server reads an expected 0 as "no check", so the stream's
//!   first record carries `Nats-Expected-Last-Subject-Sequence: 0` instead (the stream has
//!   one subject: "the stream must be empty"). A batch's first message is acknowledged
//!   before the others are sent, so the others' fences chain on this batch alone (sent
//!   together, a later fence could match another writer's record after the first was
//!   refused); the others are pipelined, which the stream-sequence fence allows (the
//!   subject-sequence one checks only applied messages, and refuses pipelined ones);
//! - **retries are exact**: every message carries a `Nats-Msg-Id` made of the stream, its
//!   sequence and a digest of its payload, so re-publishing a batch whose acknowledgements
//!   were lost (a leader election) stores nothing twice, while a stale writer with other
//!   content at that position still meets the fence;
//! - **an unknown outcome stops the handle**: when a batch is neither acknowledged nor
//!   refused within [`RETRY_DEADLINE`], part of it may still be stored. The append fails
//!   ([`LogError::Remote`]), nothing of it is acknowledged to clients, and every later
//!   append on this handle fails too: whoever writes next must open the stream again and
//!   read what it holds first;
//! - **erasure is physical**: [`EventLog::erase`] uses the stream's secure delete, which
//!   overwrites the message in the stream's files (its copy in the replication log goes
//!   with the stream's next snapshot);
//! - **log sequences survive rotation**: every message carries its log sequence in the
//!   `Episodic-Seq` header. In a stream's first generation it equals the stream sequence;
//!   compaction ([`EventLog::rewrite`]) is a rotation: the kept records are published, with
//!   their log sequences, to a new stream (the next generation, named by the
//!   [`Generations`] the log was opened with), which is then made the log by a
//!   compare-and-set of the shard's generation record, and only then is the old stream
//!   deleted, on every replica. Without [`Generations`], rewriting is refused
//!   ([`LogError::Unsupported`]), and so is [`EventLog::advance_to`] past the end.
//!
//! Methods block the calling thread (the writer's, never an async one) on the connection's
//! own runtime, whatever runtime the caller may be inside.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, Stream};
use async_nats::jetstream::{self, ErrorCode};
use bytes::Bytes;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::event_log::{EventLog, Records};
use super::log::{LogError, LogRecord};

/// The header holding a message's log sequence.
const SEQ_HEADER: &str = "Episodic-Seq";

/// How long an append keeps re-publishing a batch whose outcome is unknown (longer than
/// the worst leader election measured, 8 s) before it gives up.
pub const RETRY_DEADLINE: Duration = Duration::from_secs(30);
/// The stream's duplicate window: longer than [`RETRY_DEADLINE`], so a retry is always
/// recognised.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// How long one publish waits for its acknowledgement before it is retried.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Messages fetched per round trip when reading.
const READ_BATCH: usize = 512;
/// How long a read waits for records the stream said it holds.
const READ_STALL: Duration = Duration::from_secs(15);

/// A connection to a NATS cluster, with the runtime its client runs on. Cheap to clone.
#[derive(Clone)]
pub struct NatsConnection {
    inner: Arc<Connected>,
}

struct Connected {
    runtime: Option<tokio::runtime::Runtime>,
    js: jetstream::Context,
    urls: String,
}

impl Drop for Connected {
    fn drop(&mut self) {
        // Dropping a runtime blocks; the last handle may go away on an async thread.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for NatsConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NatsConnection")
            .field("urls", &self.inner.urls)
            .finish()
    }
}

impl NatsConnection {
    /// Connects to the servers at `urls` (comma-separated `nats://host:port`), failing over
    /// between them.
    pub fn connect(urls: &str) -> Result<Self, LogError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("episodic-nats")
            .enable_all()
            .build()
            .map_err(|e| remote(urls, format!("starting the client runtime: {e}")))?;
        let addrs: Vec<String> = urls.split(',').map(|u| u.trim().to_string()).collect();
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let connected = async_nats::ConnectOptions::new()
                .name("episodic")
                .connect(addrs.as_slice())
                .await
                .map(|client| {
                    // The context spawns its own task: it is made on the runtime.
                    let mut js = jetstream::new(client);
                    js.set_timeout(ACK_TIMEOUT);
                    js
                });
            let _ = tx.send(connected);
        });
        let js = rx
            .recv()
            .map_err(|_| remote(urls, "the client task stopped".to_string()))?
            .map_err(|e| remote(urls, format!("connecting: {e}")))?;
        Ok(NatsConnection {
            inner: Arc::new(Connected {
                runtime: Some(runtime),
                js,
                urls: urls.to_string(),
            }),
        })
    }

    /// The URLs this connection was made with.
    pub fn urls(&self) -> &str {
        &self.inner.urls
    }

    /// Runs `fut` on the client's runtime and waits for it on this thread; `log` names what
    /// the work is for in an error.
    pub(crate) fn run<T: Send + 'static>(
        &self,
        log: &str,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, LogError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .map_err(|_| remote(log, "the client task stopped".to_string()))
    }

    /// Runs `fut` on the client's runtime in the background.
    pub(crate) fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        if let Some(rt) = &self.inner.runtime {
            rt.spawn(fut);
        }
    }

    /// Opens the key-value bucket `bucket`, creating it when missing with `replicas` copies
    /// of file storage, one revision per key, and entries that expire `max_age` after their
    /// last write (`Duration::ZERO`: never).
    pub fn key_value(
        &self,
        bucket: &str,
        replicas: usize,
        max_age: Duration,
    ) -> Result<async_nats::jetstream::kv::Store, LogError> {
        let js = self.inner.js.clone();
        let name = bucket.to_string();
        self.run(bucket, async move {
            match js.get_key_value(&name).await {
                Ok(store) => Ok(store),
                Err(_) => js
                    .create_key_value(async_nats::jetstream::kv::Config {
                        bucket: name,
                        history: 1,
                        max_age,
                        storage: stream::StorageType::File,
                        num_replicas: replicas,
                        ..Default::default()
                    })
                    .await
                    .map_err(|e| e.to_string()),
            }
        })?
        .map_err(|reason| remote(bucket, format!("opening the bucket: {reason}")))
    }

    /// Deletes the stream `name` and everything in it, on every replica (a no-op when it
    /// does not exist).
    pub fn delete_stream(&self, name: &str) -> Result<(), LogError> {
        let js = self.inner.js.clone();
        let stream = name.to_string();
        self.run(name, async move { js.delete_stream(&stream).await })?
            .map(|_| ())
            .or_else(|e| match e.kind() {
                jetstream::context::DeleteStreamErrorKind::JetStream(ref j)
                    if j.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    Ok(())
                }
                _ => Err(remote(name, format!("deleting the stream: {e}"))),
            })
    }
}

/// Who decides which stream is a log's current generation (cluster mode: the shard's
/// record in the coordination bucket).
pub trait Generations: Send + Sync + std::fmt::Debug {
    /// The stream that would follow `current`.
    fn next_name(&self, current: &str) -> String;
    /// Makes `next` the log in place of `current` by compare-and-set; fails, changing
    /// nothing, if the record no longer names `current`.
    fn commit(&self, current: &str, next: &str) -> Result<(), String>;
}

/// A stream's state and its replicas' health, as its leader reports them.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamHealth {
    /// The stream.
    pub name: String,
    /// Messages held.
    pub messages: u64,
    /// Bytes held.
    pub bytes: u64,
    /// The last sequence written.
    pub last_seq: u64,
    /// The server leading its replicas, if any.
    pub leader: Option<String>,
    /// The other replicas.
    pub replicas: Vec<ReplicaHealth>,
}

/// One follower replica of a stream.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaHealth {
    /// The server holding it.
    pub server: String,
    /// Whether it is caught up with the leader.
    pub current: bool,
    /// Operations it is behind.
    pub lag: u64,
    /// Milliseconds since the leader last heard from it.
    pub active_ms: u64,
}

impl NatsConnection {
    /// The health of the stream `name`, or `None` when it does not exist.
    pub fn stream_health(&self, name: &str) -> Result<Option<StreamHealth>, LogError> {
        let js = self.inner.js.clone();
        let stream = name.to_string();
        let info = self.run(name, async move {
            match js.get_stream(&stream).await {
                Ok(mut s) => s.info().await.map(|i| Some(i.clone())).map_err(|e| e.to_string()),
                Err(e) if matches!(e.kind(), jetstream::context::GetStreamErrorKind::JetStream(ref j)
                    if j.error_code() == ErrorCode::STREAM_NOT_FOUND) => Ok(None),
                Err(e) => Err(e.to_string()),
            }
        })?
        .map_err(|reason| remote(name, format!("reading the stream's health: {reason}")))?;
        Ok(info.map(|info| {
            let cluster = info.cluster.unwrap_or_default();
            StreamHealth {
                name: name.to_string(),
                messages: info.state.messages,
                bytes: info.state.bytes,
                last_seq: info.state.last_sequence,
                leader: cluster.leader,
                replicas: cluster
                    .replicas
                    .into_iter()
                    .map(|r| ReplicaHealth {
                        server: r.name,
                        current: r.current,
                        lag: r.lag.unwrap_or(0),
                        active_ms: r.active.as_millis() as u64,
                    })
                    .collect(),
            }
        }))
    }
}

/// Until when a writer may append to a stream: its lease's TTL from its last renewal, less
/// a margin. Cheap to clone; the holder extends it on every renewal.
#[derive(Debug, Clone)]
pub struct WriteLease {
    base: Instant,
    /// Milliseconds after `base` until which appends are allowed.
    until_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl WriteLease {
    /// A lease valid until `until`.
    pub fn until(until: Instant) -> Self {
        let base = Instant::now();
        let lease = WriteLease {
            base,
            until_ms: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        };
        lease.extend_to(until);
        lease
    }

    /// Moves the end of the lease to `until` (never backwards).
    pub fn extend_to(&self, until: Instant) {
        let ms = until.saturating_duration_since(self.base).as_millis() as u64;
        self.until_ms
            .fetch_max(ms, std::sync::atomic::Ordering::SeqCst);
    }

    /// Ends the lease now.
    pub fn revoke(&self) {
        self.until_ms.store(0, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether appends are allowed now.
    pub fn valid(&self) -> bool {
        let until = self.until_ms.load(std::sync::atomic::Ordering::SeqCst);
        (self.base.elapsed().as_millis() as u64) < until
    }
}

/// One stream as an [`EventLog`].
pub struct NatsLog {
    /// Appends are refused once it lapses.
    lease: Option<WriteLease>,
    /// Rotation's compare-and-set, if this log may be compacted.
    generations: Option<Arc<dyn Generations>>,
    /// Copies the stream keeps.
    replicas: usize,
    /// The stream sequence of the last message this handle knows of.
    physical_last: u64,
    /// `(log sequence, stream sequence)` of every record read or written, when the two
    /// differ (a rotated stream); empty otherwise.
    shifted: Option<parking_lot::Mutex<Vec<(u64, u64)>>>,
    conn: NatsConnection,
    stream: Stream,
    name: String,
    subject: String,
    next: u64,
    /// Why appends are refused, once an append's outcome was unknown or fenced.
    stopped: Option<String>,
}

impl NatsLog {
    /// Opens the stream `name`, creating it (file storage, `replicas` copies) when it does
    /// not exist. Names are ASCII letters, digits, `-` and `_`.
    pub fn open(conn: &NatsConnection, name: &str, replicas: usize) -> Result<Self, LogError> {
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !valid {
            return Err(remote(
                name,
                "a stream name is ASCII letters, digits, - and _".into(),
            ));
        }
        let subject = format!("episodic.log.{name}");
        let config = stream::Config {
            name: name.to_string(),
            subjects: vec![subject.clone()],
            storage: stream::StorageType::File,
            num_replicas: replicas,
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        };
        let js = conn.inner.js.clone();
        let stream = conn
            .run(name, async move { js.get_or_create_stream(config).await })?
            .map_err(|e| remote(name, format!("opening the stream: {e}")))?;
        let mut log = NatsLog {
            lease: None,
            generations: None,
            replicas,
            physical_last: 0,
            shifted: None,
            conn: conn.clone(),
            stream,
            name: name.to_string(),
            subject,
            next: 0,
            stopped: None,
        };
        let (last, messages, _) = log.state()?;
        log.physical_last = last;
        log.next = last + 1;
        if messages > 0 {
            let logical = log.last_logical()?.unwrap_or(last);
            log.next = logical + 1;
            if logical != last {
                log.shifted = Some(parking_lot::Mutex::new(Vec::new()));
            }
        }
        Ok(log)
    }

    /// The log sequence of the stream's last message, if it has one.
    fn last_logical(&self) -> Result<Option<u64>, LogError> {
        let stream = self.stream.clone();
        let subject = self.subject.clone();
        let last = self.conn.run(&self.name, async move {
            stream.get_last_raw_message_by_subject(&subject).await
        })?;
        match last {
            Ok(message) => Ok(Some(
                logical_seq(&message.headers).unwrap_or(message.sequence),
            )),
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(remote(&self.name, format!("reading the last record: {e}"))),
        }
    }

    /// Lets [`EventLog::rewrite`] rotate the log to a new generation through `generations`.
    pub fn set_generations(&mut self, generations: Option<Arc<dyn Generations>>) {
        self.generations = generations;
    }

    /// The stream sequence of the record at log sequence `seq`, if known.
    fn physical(&self, seq: u64) -> Option<u64> {
        match &self.shifted {
            None => Some(seq),
            Some(map) => {
                let map = map.lock();
                map.binary_search_by_key(&seq, |(l, _)| *l)
                    .ok()
                    .map(|i| map[i].1)
            }
        }
    }

    /// Notes that log sequence `logical` is at stream sequence `physical` (in order).
    fn noted(&self, logical: u64, physical: u64) {
        if let Some(map) = &self.shifted {
            let mut map = map.lock();
            if map.last().is_none_or(|(l, _)| *l < logical) {
                map.push((logical, physical));
            }
        }
    }

    /// Publishes `records` with their own log sequences (increasing, above every record
    /// already here), in batches, fenced like any append: a rotation's new generation, or a
    /// tenant's records copied to the log of its own shard (called once per chunk).
    pub fn append_records(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        self.check_writable()?;
        let floor = self.next.max(1);
        if records.first().is_some_and(|r| r.seq < floor)
            || records.windows(2).any(|w| w[0].seq >= w[1].seq)
        {
            return Err(remote(
                &self.name,
                format!("copied records must have increasing sequences from {floor} on"),
            ));
        }
        let shifts = records
            .iter()
            .enumerate()
            .any(|(i, r)| r.seq != self.physical_last + 1 + i as u64);
        if shifts && self.shifted.is_none() {
            // Every record so far sat at its own sequence: say so before the first that
            // does not.
            let known = (1..=self.physical_last).map(|s| (s, s)).collect();
            self.shifted = Some(parking_lot::Mutex::new(known));
        }
        for chunk in records.chunks(READ_BATCH) {
            let batch: Vec<Outgoing> = chunk
                .iter()
                .enumerate()
                .map(|(i, r)| Outgoing {
                    seq: r.seq,
                    before: self.physical_last + i as u64,
                    id: message_id(&self.name, r.seq, &r.payload),
                    payload: Bytes::copy_from_slice(&r.payload),
                })
                .collect();
            self.publish(&batch)?;
        }
        if let Some(last) = records.last() {
            self.next = last.seq + 1;
        }
        Ok(())
    }

    /// Refuses appends once `lease` lapses (`None`: never).
    pub fn set_lease(&mut self, lease: Option<WriteLease>) {
        self.lease = lease;
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server that leads the stream's replicas now, if it has a leader.
    pub fn leader(&self) -> Result<Option<String>, LogError> {
        Ok(self.info()?.cluster.and_then(|c| c.leader))
    }

    /// The stream's state now: last sequence, messages held, bytes held.
    fn state(&self) -> Result<(u64, u64, u64), LogError> {
        let state = self.info()?.state;
        Ok((state.last_sequence, state.messages, state.bytes))
    }

    /// The stream's info, as its leader gives it now.
    fn info(&self) -> Result<stream::Info, LogError> {
        let mut stream = self.stream.clone();
        self.conn
            .run(&self.name, async move { stream.info().await.cloned() })?
            .map_err(|e| remote(&self.name, format!("reading the stream's state: {e}")))
    }

    /// Publishes `batch` (whose fences chain on this handle's last stream sequence) until
    /// it is stored, fenced, or its outcome stays unknown past [`RETRY_DEADLINE`].
    fn publish(&mut self, batch: &[Outgoing]) -> Result<(), LogError> {
        let Some(first) = batch.first().map(|m| m.before + 1) else {
            return Ok(());
        };
        let started = Instant::now();
        let deadline = started + RETRY_DEADLINE;
        loop {
            let (js, subject) = (self.conn.inner.js.clone(), self.subject.clone());
            let answers = self
                .conn
                .run(&self.name, publish_all(js, subject, batch.to_vec()))?;
            match judge(first, &answers) {
                Round::Stored => {
                    crate::telemetry::log_published(started.elapsed());
                    for (i, m) in batch.iter().enumerate() {
                        self.noted(m.seq, first + i as u64);
                    }
                    self.physical_last = first - 1 + batch.len() as u64;
                    return Ok(());
                }
                Round::Fenced { at: 0 } => {
                    let found = self.state().map_or(0, |(last, _, _)| last);
                    self.stopped = Some(format!("another writer appended after {}", first - 1));
                    return Err(LogError::Fenced {
                        log: self.name.clone(),
                        expected: first - 1,
                        found,
                    });
                }
                Round::Fenced { at } => {
                    return Err(self.stop(format!(
                        "another writer appended after record {}: {at} of this batch's {} \
                         records are stored, the rest refused",
                        first + at as u64 - 1,
                        batch.len()
                    )));
                }
                Round::Failed(why) => return Err(self.stop(why)),
                Round::Retry(why) if Instant::now() >= deadline => {
                    return Err(self.stop(format!(
                        "no acknowledgement within {} s ({why}); part of the batch may be \
                         stored",
                        RETRY_DEADLINE.as_secs()
                    )));
                }
                Round::Retry(why) => {
                    tracing::warn!(log = %self.name, reason = %why, "publishing the batch again");
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }

    /// Refuses to write once the handle stopped or its writer's lease lapsed.
    fn check_writable(&self) -> Result<(), LogError> {
        if let Some(why) = &self.stopped {
            return Err(remote(&self.name, format!("appends stopped: {why}")));
        }
        if self.lease.as_ref().is_some_and(|l| !l.valid()) {
            return Err(remote(
                &self.name,
                "this node's lease on the stream lapsed; another node may own it now".into(),
            ));
        }
        Ok(())
    }

    fn stop(&mut self, why: String) -> LogError {
        self.stopped = Some(why.clone());
        remote(&self.name, why)
    }
}

fn remote(log: &str, reason: String) -> LogError {
    LogError::Remote {
        log: log.to_string(),
        reason,
    }
}

/// The log sequence a message's headers carry, if any.
fn logical_seq(headers: &async_nats::HeaderMap) -> Option<u64> {
    headers.get(SEQ_HEADER)?.as_str().parse().ok()
}

/// The `Nats-Msg-Id` of the record at `seq`: its position and a digest of its content.
fn message_id(stream: &str, seq: u64, payload: &[u8]) -> String {
    let digest = Sha256::digest(payload);
    format!("{stream}:{seq}:{}", hex::encode(&digest[..12]))
}

/// One message of a batch, ready to publish (again).
#[derive(Clone)]
struct Outgoing {
    /// The record's log sequence.
    seq: u64,
    /// The stream sequence it must follow.
    before: u64,
    id: String,
    payload: Bytes,
}

/// What the server said of one message: its sequence, or the kind and text of the error.
type Answer = Result<u64, (PublishErrorKind, String)>;

/// Publishes every message (pipelined), then collects their acknowledgements in order.
/// The first message is acknowledged before the others are sent (see the module docs on
/// fencing), then the others are pipelined.
async fn publish_all(js: jetstream::Context, subject: String, batch: Vec<Outgoing>) -> Vec<Answer> {
    let publish = |m: Outgoing| {
        let msg = PublishMessage::build()
            .payload(m.payload)
            .message_id(m.id)
            .header(SEQ_HEADER, m.seq.to_string());
        let msg = match m.before {
            0 => msg.expected_last_subject_sequence(0),
            before => msg.expected_last_sequence(before),
        };
        js.send_publish(subject.clone(), msg)
    };
    let mut rest = batch.into_iter();
    let Some(first) = rest.next() else {
        return Vec::new();
    };
    let first = match publish(first).await {
        Ok(ack) => ack.await.map(|a| a.sequence),
        Err(e) => Err(e),
    };
    let mut answers = vec![first.map_err(|e| classify(&e))];
    if answers[0].is_err() {
        return answers;
    }
    let mut pending = Vec::new();
    for m in rest {
        pending.push(publish(m).await);
    }
    for sent in pending {
        let answer = match sent {
            Ok(ack) => ack.await.map(|a| a.sequence),
            Err(e) => Err(e),
        };
        answers.push(answer.map_err(|e| classify(&e)));
    }
    answers
}

/// The kind of a publish error, with the fence of an expected subject sequence (server
/// error 10164, which the client reports as `Other`) counted as a wrong last sequence.
fn classify(e: &async_nats::jetstream::context::PublishError) -> (PublishErrorKind, String) {
    let server_code = std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<jetstream::Error>())
        .map(|j| j.error_code());
    let kind = match server_code {
        Some(ErrorCode(10071 | 10164)) => PublishErrorKind::WrongLastSequence,
        _ => e.kind(),
    };
    (kind, e.to_string())
}

/// How a publish round ended.
enum Round {
    /// Every message is stored at its expected sequence.
    Stored,
    /// The fence refused message `at`; those before it are stored.
    Fenced { at: usize },
    /// Some acknowledgement did not come: publish the batch again.
    Retry(String),
    /// An answer that no retry changes.
    Failed(String),
}

fn judge(first: u64, answers: &[Answer]) -> Round {
    if answers.is_empty() {
        return Round::Retry("nothing was sent".into());
    }
    for (i, answer) in answers.iter().enumerate() {
        let want = first + i as u64;
        match answer {
            Ok(seq) if *seq == want => {}
            Ok(seq) => return Round::Failed(format!("record {want} was stored at {seq}")),
            Err((PublishErrorKind::WrongLastSequence, _)) => return Round::Fenced { at: i },
            Err((
                PublishErrorKind::TimedOut
                | PublishErrorKind::StreamNotFound
                | PublishErrorKind::BrokenPipe
                | PublishErrorKind::MaxAckPending
                | PublishErrorKind::Other,
                text,
            )) => return Round::Retry(text.clone()),
            Err((_, text)) => return Round::Failed(text.clone()),
        }
    }
    Round::Stored
}

impl EventLog for NatsLog {
    fn append_batch(&mut self, payloads: &[&[u8]]) -> Result<Vec<u64>, LogError> {
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        self.check_writable()?;
        let first = self.next;
        let batch: Vec<Outgoing> = payloads
            .iter()
            .zip(first..)
            .enumerate()
            .map(|(i, (p, seq))| Outgoing {
                seq,
                before: self.physical_last + i as u64,
                id: message_id(&self.name, seq, p),
                payload: Bytes::copy_from_slice(p),
            })
            .collect();
        let len = batch.len() as u64;
        self.publish(&batch)?;
        self.next = first + len;
        Ok((first..self.next).collect())
    }

    fn next_seq(&self) -> u64 {
        self.next
    }

    fn read_from(&self, from: u64) -> Result<Records<'_>, LogError> {
        let from = from.max(1);
        let (last, messages, _) = self.state()?;
        if messages == 0 || from >= self.next.max(last + 1) {
            return Ok(Box::new(std::iter::empty()));
        }
        // A rotated stream's records sit at stream sequences at or below their log
        // sequences: it is read from its start, skipping what comes before `from`.
        let start = match &self.shifted {
            None => from,
            Some(_) => self.physical(from).unwrap_or(1),
        };
        if start > last {
            return Ok(Box::new(std::iter::empty()));
        }
        let config = pull::Config {
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            ack_policy: AckPolicy::None,
            inactive_threshold: Duration::from_secs(60),
            num_replicas: 1,
            memory_storage: true,
            ..Default::default()
        };
        let stream = self.stream.clone();
        let consumer = self
            .conn
            .run(
                &self.name,
                async move { stream.create_consumer(config).await },
            )?
            .map_err(|e| remote(&self.name, format!("creating a reader: {e}")))?;
        Ok(Box::new(Reader {
            log: self,
            consumer,
            last,
            from,
            through: start - 1,
            buffer: VecDeque::new(),
            ended: false,
        }))
    }

    fn rewrite(&mut self, records: &[LogRecord]) -> Result<(), LogError> {
        let Some(generations) = self.generations.clone() else {
            return Err(LogError::Unsupported {
                log: self.name.clone(),
                what: "rewrite records in place (a stream numbers its own messages; compact it by \
                       rotating to a new stream, which needs the shard's generation record)",
            });
        };
        self.check_writable()?;
        // An empty log keeps no high-water mark (compaction hands it a marker at 0): there
        // is nothing to rotate.
        if self.next == 1 && records.iter().all(|r| r.seq == 0) {
            return Ok(());
        }
        let old = self.name.clone();
        let new_name = generations.next_name(&old);
        // A rotation that failed before its commit may have left the next stream behind.
        self.conn.delete_stream(&new_name)?;
        let mut next = NatsLog::open(&self.conn, &new_name, self.replicas)?;
        next.lease = self.lease.clone();
        next.generations = Some(Arc::clone(&generations));
        let published = next.append_records(records);
        if let Err(e) = published {
            let _ = self.conn.delete_stream(&new_name);
            return Err(e);
        }
        if let Err(why) = generations.commit(&old, &new_name) {
            let _ = self.conn.delete_stream(&new_name);
            return Err(self.stop(format!("the rotation was not committed: {why}")));
        }
        next.next = next.next.max(self.next);
        *self = next;
        // The new generation is the log now; the old one goes, on every replica (a replica
        // that is down drops it when it comes back).
        let mut deleted = self.conn.delete_stream(&old);
        for _ in 0..10 {
            if deleted.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
            deleted = self.conn.delete_stream(&old);
        }
        deleted.map_err(|e| {
            remote(
                &old,
                format!("rotated to {new_name}, but deleting the old generation failed: {e}"),
            )
        })
    }

    fn erases_in_place(&self) -> bool {
        true
    }

    fn refresh(&mut self) -> Result<(), LogError> {
        let (last, messages, _) = self.state()?;
        if last <= self.physical_last {
            return Ok(());
        }
        let logical = if messages > 0 {
            self.last_logical()?.unwrap_or(last)
        } else {
            last
        };
        if logical != last && self.shifted.is_none() {
            self.shifted = Some(parking_lot::Mutex::new(Vec::new()));
        }
        self.physical_last = last;
        self.next = self.next.max(logical + 1);
        Ok(())
    }

    fn erase(&mut self, seqs: &[u64]) -> Result<(), LogError> {
        if seqs.is_empty() {
            return Ok(());
        }
        let (last, _, _) = self.state()?;
        if seqs.contains(&(self.next - 1)) {
            return Err(remote(
                &self.name,
                format!(
                    "the last record ({}) holds the log's highest sequence and cannot be erased",
                    self.next - 1
                ),
            ));
        }
        let stream = self.stream.clone();
        // Past the end the server answers "store EOF", not "not found": nothing to erase.
        // A record whose stream sequence this handle has not seen is left to the next
        // rotation, which drops every erased record.
        let seqs: Vec<u64> = seqs
            .iter()
            .filter_map(|s| self.physical(*s))
            .filter(|s| *s <= last)
            .collect();
        self.conn
            .run(&self.name, async move {
                for seq in seqs {
                    match stream.delete_message(seq).await {
                        Ok(_) => {}
                        Err(e) => match e.kind() {
                            stream::DeleteMessageErrorKind::JetStream(ref j)
                                if j.error_code() == ErrorCode::SEQUENCE_NOT_FOUND => {}
                            _ => return Err(format!("erasing record {seq}: {e}")),
                        },
                    }
                }
                Ok(())
            })?
            .map_err(|why| remote(&self.name, why))
    }

    fn advance_to(&mut self, seq: u64) -> Result<(), LogError> {
        if seq <= self.next {
            return Ok(());
        }
        Err(LogError::Unsupported {
            log: self.name.clone(),
            what: "skip sequences (a stream numbers its own messages)",
        })
    }

    fn size_bytes(&self) -> u64 {
        self.state().map_or(0, |(_, _, bytes)| bytes)
    }
}

/// Reads a stream from a sequence up to the last sequence it held when the read began.
struct Reader<'a> {
    log: &'a NatsLog,
    consumer: jetstream::consumer::Consumer<pull::Config>,
    /// The stream sequence the read ends at.
    last: u64,
    /// The first log sequence wanted.
    from: u64,
    through: u64,
    buffer: VecDeque<LogRecord>,
    ended: bool,
}

impl Reader<'_> {
    /// Fetches the next records, waiting up to [`READ_STALL`] for the first of them.
    fn refill(&mut self) -> Result<(), LogError> {
        let started = Instant::now();
        loop {
            let consumer = self.consumer.clone();
            let fetched = self.log.conn.run(&self.log.name, async move {
                let mut out = Vec::new();
                let mut batch = consumer
                    .fetch()
                    .max_messages(READ_BATCH)
                    .messages()
                    .await
                    .map_err(|e| e.to_string())?;
                while let Some(message) = batch.next().await {
                    let message = message.map_err(|e| e.to_string())?;
                    let physical = message.info().map_err(|e| e.to_string())?.stream_sequence;
                    let logical = message
                        .headers
                        .as_ref()
                        .and_then(logical_seq)
                        .unwrap_or(physical);
                    out.push((
                        physical,
                        LogRecord {
                            seq: logical,
                            payload: message.payload.to_vec(),
                        },
                    ));
                }
                Ok::<_, String>(out)
            })?;
            // A reader that was just made may not answer yet (no responders), and an election
            // interrupts it: both pass, so a failure is retried until the stall limit.
            let records = match fetched {
                Ok(records) => records,
                Err(why) if started.elapsed() < READ_STALL => {
                    tracing::debug!(log = %self.log.name, reason = %why, "reading again");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(why) => return Err(remote(&self.log.name, format!("reading: {why}"))),
            };
            for (physical, record) in records {
                if physical > self.through && physical <= self.last {
                    self.through = physical;
                    self.log.noted(record.seq, physical);
                    if record.seq >= self.from {
                        self.buffer.push_back(record);
                    }
                }
            }
            if !self.buffer.is_empty() || self.through >= self.last {
                return Ok(());
            }
            if started.elapsed() >= READ_STALL {
                return Err(remote(
                    &self.log.name,
                    format!(
                        "reading stalled after record {} of {}",
                        self.through, self.last
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Iterator for Reader<'_> {
    type Item = Result<LogRecord, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(record) = self.buffer.pop_front() {
            return Some(Ok(record));
        }
        if self.ended || self.through >= self.last {
            return None;
        }
        match self.refill() {
            Ok(()) => self.buffer.pop_front().map(Ok),
            Err(e) => {
                self.ended = true;
                Some(Err(e))
            }
        }
    }
}

impl Drop for Reader<'_> {
    fn drop(&mut self) {
        let stream = self.log.stream.clone();
        let name = self.consumer.cached_info().name.clone();
        self.log.conn.spawn(async move {
            let _ = stream.delete_consumer(&name).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_ids_name_position_and_content() {
        let a = message_id("EPISODIC_1_G1", 7, b"one");
        assert_eq!(a, message_id("EPISODIC_1_G1", 7, b"one"));
        assert_ne!(a, message_id("EPISODIC_1_G1", 7, b"two"));
        assert_ne!(a, message_id("EPISODIC_1_G1", 8, b"one"));
        assert!(a.starts_with("EPISODIC_1_G1:7:"));
    }

    #[test]
    fn a_round_is_judged_by_its_first_failure() {
        let ok = |s| Ok::<u64, (PublishErrorKind, String)>(s);
        let err = |k| Err::<u64, _>((k, "x".to_string()));
        assert!(matches!(judge(5, &[ok(5), ok(6)]), Round::Stored));
        assert!(matches!(judge(5, &[ok(5), ok(7)]), Round::Failed(_)));
        assert!(matches!(
            judge(
                5,
                &[
                    err(PublishErrorKind::WrongLastSequence),
                    err(PublishErrorKind::WrongLastSequence)
                ]
            ),
            Round::Fenced { at: 0 }
        ));
        assert!(matches!(
            judge(5, &[ok(5), err(PublishErrorKind::WrongLastSequence)]),
            Round::Fenced { at: 1 }
        ));
        assert!(matches!(
            judge(5, &[ok(5), err(PublishErrorKind::TimedOut)]),
            Round::Retry(_)
        ));
        assert!(matches!(
            judge(5, &[err(PublishErrorKind::MaxPayloadExceeded)]),
            Round::Failed(_)
        ));
    }
}
