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
//! - **no in-place rewrite**: a stream assigns its own sequences, so [`EventLog::rewrite`]
//!   and [`EventLog::advance_to`] past the end are refused ([`LogError::Unsupported`]);
//!   compaction of a stream is a rotation to a new one.
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
            conn: conn.clone(),
            stream,
            name: name.to_string(),
            subject,
            next: 0,
            stopped: None,
        };
        let (last, _, _) = log.state()?;
        log.next = last + 1;
        Ok(log)
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

/// The `Nats-Msg-Id` of the record at `seq`: its position and a digest of its content.
fn message_id(stream: &str, seq: u64, payload: &[u8]) -> String {
    let digest = Sha256::digest(payload);
    format!("{stream}:{seq}:{}", hex::encode(&digest[..12]))
}

/// One message of a batch, ready to publish (again).
#[derive(Clone)]
struct Outgoing {
    seq: u64,
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
        let msg = PublishMessage::build().payload(m.payload).message_id(m.id);
        let msg = match m.seq - 1 {
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
        if let Some(why) = &self.stopped {
            return Err(remote(&self.name, format!("appends stopped: {why}")));
        }
        if self.lease.as_ref().is_some_and(|l| !l.valid()) {
            return Err(remote(
                &self.name,
                "this node's lease on the stream lapsed; another node may own it now".into(),
            ));
        }
        let first = self.next;
        let batch: Vec<Outgoing> = payloads
            .iter()
            .zip(first..)
            .map(|(p, seq)| Outgoing {
                seq,
                id: message_id(&self.name, seq, p),
                payload: Bytes::copy_from_slice(p),
            })
            .collect();
        let started = Instant::now();
        let deadline = started + RETRY_DEADLINE;
        loop {
            let (js, subject) = (self.conn.inner.js.clone(), self.subject.clone());
            let answers = self
                .conn
                .run(&self.name, publish_all(js, subject, batch.clone()))?;
            match judge(first, &answers) {
                Round::Stored => {
                    crate::telemetry::log_published(started.elapsed());
                    self.next = first + batch.len() as u64;
                    return Ok((first..self.next).collect());
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

    fn next_seq(&self) -> u64 {
        self.next
    }

    fn read_from(&self, from: u64) -> Result<Records<'_>, LogError> {
        let from = from.max(1);
        let (last, messages, _) = self.state()?;
        if messages == 0 || from > last {
            return Ok(Box::new(std::iter::empty()));
        }
        let config = pull::Config {
            deliver_policy: DeliverPolicy::ByStartSequence {
                start_sequence: from,
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
            through: from - 1,
            buffer: VecDeque::new(),
            ended: false,
        }))
    }

    fn rewrite(&mut self, _records: &[LogRecord]) -> Result<(), LogError> {
        Err(LogError::Unsupported {
            log: self.name.clone(),
            what: "rewrite records in place (a stream numbers its own messages; compact it by \
                   rotating to a new stream)",
        })
    }

    fn erase(&mut self, seqs: &[u64]) -> Result<(), LogError> {
        if seqs.is_empty() {
            return Ok(());
        }
        let (last, _, _) = self.state()?;
        if seqs.contains(&last) {
            return Err(remote(
                &self.name,
                format!("the last record ({last}) holds the log's highest sequence and cannot be erased"),
            ));
        }
        let stream = self.stream.clone();
        // Past the end the server answers "store EOF", not "not found": nothing to erase.
        let seqs: Vec<u64> = seqs.iter().copied().filter(|s| *s <= last).collect();
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
    last: u64,
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
                    let seq = message.info().map_err(|e| e.to_string())?.stream_sequence;
                    out.push(LogRecord {
                        seq,
                        payload: message.payload.to_vec(),
                    });
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
            for record in records {
                if record.seq > self.through && record.seq <= self.last {
                    self.through = record.seq;
                    self.buffer.push_back(record);
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
