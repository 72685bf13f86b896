//! The HTTP/1.1 listener: accepts TCP connections (optionally terminating TLS), serves the
//! router on each with hyper, bounds how long a client may take at every stage and how many
//! connections are open, and shuts down gracefully.
//!
//! Invariants:
//! - At most `max_connections` connections are served at once. A connection beyond the cap
//!   is accepted and answered at once with a complete `503` `too_many_connections`
//!   problem+json (`Retry-After`, `Connection: close`), then closed; at most
//!   [`REFUSAL_SLOTS`] such answers are in progress, beyond that a connection is closed
//!   unanswered. No client is ever left waiting in the accept queue because of the cap.
//! - The cap fits the open-file limit: at start-up the soft `RLIMIT_NOFILE` is raised (up to
//!   the hard limit) to cover the cap plus [`DESCRIPTOR_RESERVE`] descriptors kept for
//!   storage and the refusal slots; if it cannot be, the cap is lowered with a warning, and
//!   start-up fails if nothing is left for connections.
//! - Every stage of a connection has a deadline, enforced by a watchdog beside hyper:
//!   - header: from accept (after the TLS handshake), or from the first byte of a later
//!     request, until its head is complete (`header_timeout`); a client that trickles its
//!     head is cut off however steadily it sends. hyper's own `header_read_timeout` is not
//!     used: it starts when hyper starts reading a head, which for a kept-alive connection
//!     is right after the previous response, so it would bound idle time and head time
//!     together with one value;
//!   - body: from the first read of a request body until its end (`body_timeout`, a total,
//!     not a gap between bytes); a body that misses it fails the read, the request is
//!     answered 408 `request_timeout` with `Connection: close` (see `problem`);
//!   - idle: from the end of a response (its last byte the client took) until the first
//!     byte of the next request (`idle_timeout`);
//!   - write: a client that accepts no response bytes for `write_timeout` is cut off;
//!   - TLS: the handshake must finish within `tls_handshake_timeout`.
//!
//!   A request being handled has no deadline of its own; a connection cut by the watchdog
//!   is closed without an answer (none can be written: the client has not finished asking,
//!   or is not reading).
//! - Each request carries the peer address as `ConnectInfo<SocketAddr>` (the failed
//!   authentication limit counts by it) and a [`BodyDeadline`] in its extensions.
//! - Shutdown: the listening socket closes, idle connections and connections that have sent
//!   nothing are closed, each in-flight request finishes and its connection then closes;
//!   whatever is still open after `shutdown_grace` is dropped, and only then does `serve`
//!   return (so the engine shuts down after the last handler).
//! - No CPU work on the async threads: the TLS handshake is rustls's per-connection work
//!   (bounded by its deadline), the rest is bookkeeping.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use axum::Router;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tokio::time::{Instant, Sleep};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::problem::{self, PROBLEM_JSON};
use crate::error::{ErrorCode, Problem};

/// Descriptors kept free of connections for storage (log, indexes, model) and the process.
pub const DESCRIPTOR_RESERVE: usize = 128;
/// Connections over the cap that can be getting their 503 at once.
pub const REFUSAL_SLOTS: usize = 64;
/// `Retry-After` of the 503 answer to a connection over the cap, in seconds.
const REFUSAL_RETRY_AFTER_SECS: u64 = 1;
/// How long a refused connection may take to receive its answer and close.
const REFUSAL_TIME: Duration = Duration::from_secs(2);
/// Request bytes read (and dropped) from a refused connection before closing it, so the
/// close does not reset the connection before the client has read the answer.
const REFUSAL_DRAIN_BYTES: usize = 64 * 1024;

/// The listener's settings, validated by `config`.
#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Address to listen on.
    pub addr: SocketAddr,
    /// The stage deadlines.
    pub timeouts: Timeouts,
    /// Most connections served at once (lowered at start-up to fit the open-file limit).
    pub max_connections: usize,
    /// Certificate chain and key to terminate TLS with; plain HTTP without.
    pub tls: Option<TlsFiles>,
}

/// The deadlines of a connection's stages (see the module invariants).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From accept, or from the first byte of a later request, until its head is read.
    pub header: Duration,
    /// From the first read of a request body until its end.
    pub body: Duration,
    /// From the end of a response until the first byte of the next request.
    pub idle: Duration,
    /// Longest time the client may accept no response bytes.
    pub write: Duration,
    /// Longest TLS handshake.
    pub tls_handshake: Duration,
    /// How long in-flight requests may take to finish at shutdown.
    pub shutdown_grace: Duration,
}

/// PEM files for TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    /// Private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// The address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// A TLS file is missing or unusable.
    #[error("--tls-{what} {}: {detail}", path.display())]
    Tls {
        /// `cert` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The open-file limit leaves no descriptor for connections.
    #[error(
        "the open-file limit ({soft}) leaves no descriptors for connections after the {reserved} \
         kept for storage and refusals; raise it (ulimit -n)"
    )]
    DescriptorLimit {
        /// The soft limit.
        soft: u64,
        /// Descriptors kept back.
        reserved: usize,
    },
}

/// A bound listener, ready to serve.
pub struct Listener {
    tcp: TcpListener,
    tls: Option<TlsAcceptor>,
    timeouts: Timeouts,
    max_connections: usize,
}

impl Listener {
    /// Fits the connection cap to the open-file limit, loads the TLS files and binds.
    pub async fn bind(config: EdgeConfig) -> Result<Listener, ListenerError> {
        let max_connections = fit_descriptor_limit(config.max_connections)?;
        let tls = match config.tls {
            Some(files) => Some(load_tls(files).await?),
            None => None,
        };
        let tcp = TcpListener::bind(config.addr)
            .await
            .map_err(|source| ListenerError::Bind {
                addr: config.addr,
                source,
            })?;
        Ok(Listener {
            tcp,
            tls,
            timeouts: config.timeouts,
            max_connections,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// The connection cap in force (after fitting the open-file limit).
    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Whether connections are TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Serves `app` until `shutdown` resolves, then drains (see the module invariants).
    pub async fn serve(self, app: Router, shutdown: impl Future<Output = ()> + Send) {
        let (stop, stopped) = watch::channel(false);
        let slots = Arc::new(tokio::sync::Semaphore::new(self.max_connections));
        let refusals = Arc::new(tokio::sync::Semaphore::new(REFUSAL_SLOTS));
        let mut tasks = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break,
                Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
                accepted = self.tcp.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        accept_failed(&e).await;
                        continue;
                    }
                },
            };
            let _ = stream.set_nodelay(true);
            if let Ok(slot) = slots.clone().try_acquire_owned() {
                let conn = Connection {
                    app: app.clone(),
                    peer,
                    timeouts: self.timeouts,
                    stopped: stopped.clone(),
                };
                let tls = self.tls.clone();
                tasks.spawn(async move {
                    let _slot = slot;
                    let _open = crate::telemetry::ConnectionGuard::enter();
                    conn.run(stream, tls).await;
                });
            } else if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                let tls = self.tls.clone();
                let handshake = self.timeouts.tls_handshake;
                tasks.spawn(async move {
                    let _refusal = refusal;
                    refuse(stream, tls, handshake).await;
                });
            } else {
                crate::telemetry::connection_cut("over_limit_dropped");
            }
        }
        drop(self.tcp);
        let _ = stop.send(true);
        drain(tasks, self.timeouts.shutdown_grace).await;
    }
}

/// Waits for the connections to finish within `grace`, then drops the rest.
async fn drain(mut tasks: JoinSet<()>, grace: Duration) {
    let finished =
        tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if finished.is_err() {
        tracing::warn!(
            open = tasks.len(),
            grace_ms = grace.as_millis() as u64,
            "connections still open after the shutdown grace period; closing them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

/// An accept error: per-connection errors are skipped; others (out of descriptors or
/// memory) are logged and accepting pauses briefly instead of spinning.
async fn accept_failed(e: &io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    ) {
        return;
    }
    tracing::warn!(error = %e, "accepting a connection failed; pausing 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// One accepted connection within the cap.
struct Connection {
    app: Router,
    peer: SocketAddr,
    timeouts: Timeouts,
    stopped: watch::Receiver<bool>,
}

impl Connection {
    async fn run(mut self, stream: TcpStream, tls: Option<TlsAcceptor>) {
        let Some(acceptor) = tls else {
            return self.serve(stream).await;
        };
        let handshake = tokio::time::timeout(self.timeouts.tls_handshake, acceptor.accept(stream));
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::debug!(peer = %self.peer, error = %e, "tls handshake failed");
                    crate::telemetry::connection_cut("tls_handshake");
                    return;
                }
                Err(_) => {
                    crate::telemetry::connection_cut("tls_handshake");
                    return;
                }
            },
            _ = self.stopped.changed() => return,
        };
        self.serve(stream).await;
    }

    /// Serves HTTP/1.1 on `io` under the watchdog.
    async fn serve<IO>(mut self, io: IO)
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::new());
        let service = ConnService {
            app: self.app.clone(),
            peer: self.peer,
            activity: activity.clone(),
            body_timeout: self.timeouts.body,
        };
        let io = TokioIo::new(Tracked {
            io,
            activity: activity.clone(),
        });
        let mut builder = http1::Builder::new();
        // The watchdog bounds head, idle and write time (see the module invariants).
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(None)
            .keep_alive(true);
        let mut conn = std::pin::pin!(builder.serve_connection(io, service));
        let mut draining = false;
        loop {
            if draining && activity.untouched() {
                return;
            }
            let deadline = activity.deadline(&self.timeouts);
            let wake = async {
                match deadline {
                    Some((at, _)) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                result = conn.as_mut() => {
                    if let Err(e) = result {
                        tracing::debug!(peer = %self.peer, error = %e, "connection ended with an error");
                    }
                    return;
                }
                () = wake => {
                    if let Some((at, reason)) = activity.deadline(&self.timeouts) {
                        if at <= Instant::now() {
                            tracing::debug!(peer = %self.peer, reason, "closing the connection");
                            crate::telemetry::connection_cut(reason);
                            return;
                        }
                    }
                }
                () = activity.changed.notified() => {}
                _ = self.stopped.changed(), if !draining => {
                    draining = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// What a connection is doing, for the watchdog.
struct Activity {
    state: Mutex<ActivityState>,
    /// Woken when a deadline may have moved earlier (the watchdog recomputes it).
    changed: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request head to complete (deadline: header).
    Head,
    /// At least one request is being handled or answered (no deadline of its own).
    Busy,
    /// Between a response and the first byte of the next request (deadline: idle, counted
    /// from the last byte of the response the client took).
    Idle,
}

struct ActivityState {
    phase: Phase,
    since: Instant,
    in_flight: usize,
    /// Nothing has been read from the client yet.
    fresh: bool,
    /// Since when the client has not taken the bytes the server is writing.
    write_blocked_since: Option<Instant>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(ActivityState {
                phase: Phase::Head,
                since: Instant::now(),
                in_flight: 0,
                fresh: true,
                write_blocked_since: None,
            }),
            changed: Notify::new(),
        }
    }

    /// The next deadline and its name, if any.
    fn deadline(&self, t: &Timeouts) -> Option<(Instant, &'static str)> {
        let s = self.state.lock();
        let phase = match s.phase {
            Phase::Head => Some((s.since + t.header, "header_timeout")),
            Phase::Idle => Some((s.since + t.idle, "idle_timeout")),
            Phase::Busy => None,
        };
        let write = s
            .write_blocked_since
            .map(|since| (since + t.write, "write_timeout"));
        match (phase, write) {
            (Some(p), Some(w)) => Some(if w.0 < p.0 { w } else { p }),
            (p, w) => p.or(w),
        }
    }

    /// Nothing was ever read and nothing is in flight: closing loses nothing.
    fn untouched(&self) -> bool {
        let s = self.state.lock();
        s.fresh && s.in_flight == 0
    }

    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut s = self.state.lock();
        s.in_flight += 1;
        s.phase = Phase::Busy;
        InFlight(self.clone())
    }

    fn read(&self) {
        let mut s = self.state.lock();
        s.fresh = false;
        if s.phase == Phase::Idle {
            s.phase = Phase::Head;
            s.since = Instant::now();
            drop(s);
            self.changed.notify_one();
        }
    }

    fn write_blocked(&self) {
        let mut s = self.state.lock();
        if s.write_blocked_since.is_none() {
            s.write_blocked_since = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// The client took bytes: a stall is over, and an idle connection still sending the last
    /// response (hyper holds whole body chunks) is not idle yet.
    fn wrote(&self) {
        let mut s = self.state.lock();
        s.write_blocked_since = None;
        if s.phase == Phase::Idle {
            s.since = Instant::now();
        }
    }

    /// A flush or shutdown completed: whatever was stalled has gone out. (A flush moves no
    /// new bytes, so it does not count as activity: hyper flushes whenever it is polled.)
    fn flushed(&self) {
        self.state.lock().write_blocked_since = None;
    }
}

/// One request in flight; dropped when hyper has taken the whole response body (or the
/// request was abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.0.state.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.in_flight == 0 {
            s.phase = Phase::Idle;
            s.since = Instant::now();
            drop(s);
            self.0.changed.notify_one();
        }
    }
}

/// The client's stream, reporting reads and stalled writes to the watchdog.
struct Tracked<IO> {
    io: IO,
    activity: Arc<Activity>,
}

impl<IO: AsyncRead + Unpin> AsyncRead for Tracked<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(&mut this.io).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read();
        }
        result
    }
}

impl<IO: AsyncWrite + Unpin> Tracked<IO> {
    fn track_write(&self, result: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match result {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(Ok(n)) if n > 0 => self.activity.wrote(),
            Poll::Ready(_) => {}
        }
        result
    }

    fn track_flush(&self, result: Poll<io::Result<()>>) -> Poll<io::Result<()>> {
        match result {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(_) => self.activity.flushed(),
        }
        result
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Tracked<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write(cx, buf);
        this.track_write(result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.track_write(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_flush(cx);
        this.track_flush(result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.io).poll_shutdown(cx);
        this.track_flush(result)
    }
}

/// hyper's service for one connection: the router with the peer address, the body deadline
/// and in-flight tracking added.
#[derive(Clone)]
struct ConnService {
    app: Router,
    peer: SocketAddr,
    activity: Arc<Activity>,
    body_timeout: Duration,
}

type ServiceFuture =
    Pin<Box<dyn Future<Output = Result<hyper::Response<ResponseBody>, Infallible>> + Send>>;

impl hyper::service::Service<hyper::Request<Incoming>> for ConnService {
    type Response = hyper::Response<ResponseBody>;
    type Error = Infallible;
    type Future = ServiceFuture;

    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.request_started();
        let deadline = BodyDeadline {
            missed: Arc::new(AtomicBool::new(false)),
            timeout: self.body_timeout,
        };
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(ConnectInfo(self.peer));
        parts.extensions.insert(deadline.clone());
        let body = Body::new(TimedBody {
            inner: body,
            sleep: None,
            deadline,
        });
        let req = axum::extract::Request::from_parts(parts, body);
        let app = self.app.clone();
        Box::pin(async move {
            let Ok(resp) = app.oneshot(req).await;
            Ok(resp.map(|inner| ResponseBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// The response body, holding its request's in-flight mark until hyper drops it.
struct ResponseBody {
    inner: Body,
    _in_flight: InFlight,
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request's body deadline, in its extensions: whether the body missed it.
#[derive(Debug, Clone)]
pub struct BodyDeadline {
    missed: Arc<AtomicBool>,
    timeout: Duration,
}

impl BodyDeadline {
    /// Whether reading the body failed for lack of time.
    pub fn missed(&self) -> bool {
        self.missed.load(Ordering::Acquire)
    }

    /// The body timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

/// The error a body read fails with once the body timeout has passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within the body timeout")]
pub struct BodyTimeout;

/// The request body, failing with [`BodyTimeout`] if it has not ended `timeout` after it
/// was first read.
struct TimedBody {
    inner: Incoming,
    sleep: Option<Pin<Box<Sleep>>>,
    deadline: BodyDeadline,
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.inner.is_end_stream() {
            return Poll::Ready(None);
        }
        if this.deadline.missed() {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout))));
        }
        let timeout = this.deadline.timeout;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|r| r.map_err(Into::into)));
        }
        if sleep.as_mut().poll(cx).is_ready() {
            this.deadline.missed.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(Box::new(BodyTimeout))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Answers a connection over the cap with a 503 problem and closes it.
async fn refuse(stream: TcpStream, tls: Option<TlsAcceptor>, handshake: Duration) {
    crate::telemetry::connection_cut("over_limit");
    let answer = refusal_response();
    match tls {
        None => {
            let _ = tokio::time::timeout(REFUSAL_TIME, send_refusal(stream, &answer)).await;
        }
        Some(acceptor) => {
            if let Ok(Ok(stream)) = tokio::time::timeout(handshake, acceptor.accept(stream)).await {
                let _ = tokio::time::timeout(REFUSAL_TIME, send_refusal(stream, &answer)).await;
            }
        }
    }
}

/// The complete HTTP/1.1 answer to a connection over the cap.
fn refusal_response() -> Vec<u8> {
    let request_id = uuid::Uuid::new_v4().to_string();
    let problem = Problem::new(
        ErrorCode::TooManyConnections,
        "the server is serving as many connections as it is configured to; retry shortly",
    )
    .with_retry_after(REFUSAL_RETRY_AFTER_SECS);
    let (status, body) = problem::standalone(&problem, &request_id);
    let head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {PROBLEM_JSON}\r\ncontent-length: {}\r\n\
         retry-after: {REFUSAL_RETRY_AFTER_SECS}\r\nx-request-id: {request_id}\r\n\
         connection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    );
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// Writes the answer, ends the sending side, then reads what the client sent until it
/// closes (bounded), so the close is orderly.
async fn send_refusal<IO: AsyncRead + AsyncWrite + Unpin>(
    mut io: IO,
    answer: &[u8],
) -> io::Result<()> {
    io.write_all(answer).await?;
    io.flush().await?;
    io.shutdown().await?;
    let mut sink = [0u8; 4096];
    let mut drained = 0;
    while drained < REFUSAL_DRAIN_BYTES {
        let n = io.read(&mut sink).await?;
        if n == 0 {
            break;
        }
        drained += n;
    }
    Ok(())
}

/// Loads the PEM files off the async threads.
async fn load_tls(files: TlsFiles) -> Result<TlsAcceptor, ListenerError> {
    let cert = files.cert.clone();
    tokio::task::spawn_blocking(move || tls_acceptor(&files))
        .await
        .map_err(|e| ListenerError::Tls {
            what: "cert",
            path: cert,
            detail: e.to_string(),
        })?
}

/// The rustls acceptor for the PEM files (blocking: reads the files).
fn tls_acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ListenerError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};

    let cert_error = |detail: String| ListenerError::Tls {
        what: "cert",
        path: files.cert.clone(),
        detail,
    };
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| cert_error(e.to_string()))?;
    if certs.is_empty() {
        return Err(cert_error("no certificate in the file".into()));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| ListenerError::Tls {
        what: "key",
        path: files.key.clone(),
        detail: e.to_string(),
    })?;
    // ring builds here without cmake or nasm; rustls deprecates it only because it offers no
    // post-quantum key exchange (the handshake uses X25519 or P-256 ECDHE).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_error(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| cert_error(format!("does not match the key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The connection cap that fits the open-file limit (see the module invariants).
fn fit_descriptor_limit(wanted: usize) -> Result<usize, ListenerError> {
    let reserved = DESCRIPTOR_RESERVE + REFUSAL_SLOTS;
    let Some(soft) = raise_soft_limit(wanted.saturating_add(reserved)) else {
        return Ok(wanted);
    };
    let room = usize::try_from(soft)
        .unwrap_or(usize::MAX)
        .saturating_sub(reserved);
    if room == 0 {
        return Err(ListenerError::DescriptorLimit { soft, reserved });
    }
    if room < wanted {
        tracing::warn!(
            requested = wanted,
            lowered_to = room,
            open_file_limit = soft,
            reserved,
            "--max-connections lowered to fit the open-file limit (raise it with ulimit -n)"
        );
        return Ok(room);
    }
    Ok(wanted)
}

/// Raises the soft open-file limit towards `needed` (at most to the hard limit); returns
/// the soft limit now in force, `None` if unlimited.
#[cfg(unix)]
fn raise_soft_limit(needed: usize) -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

    let needed = u64::try_from(needed).unwrap_or(u64::MAX);
    let limit = getrlimit(Resource::Nofile);
    let soft = limit.current?;
    if soft >= needed {
        return Some(soft);
    }
    let target = limit.maximum.map_or(needed, |hard| hard.min(needed));
    if target <= soft {
        return Some(soft);
    }
    let raised = Rlimit {
        current: Some(target),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => {
            tracing::info!(
                from = soft,
                to = target,
                "raised the open-file soft limit for --max-connections"
            );
            Some(target)
        }
        Err(_) => Some(soft),
    }
}

#[cfg(not(unix))]
fn raise_soft_limit(_needed: usize) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeouts() -> Timeouts {
        Timeouts {
            header: Duration::from_secs(10),
            body: Duration::from_secs(30),
            idle: Duration::from_secs(60),
            write: Duration::from_secs(30),
            tls_handshake: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(10),
        }
    }

    #[test]
    fn each_phase_has_its_deadline() {
        let t = timeouts();
        let reason = |a: &Activity| a.deadline(&t).map(|(_, r)| r);
        let before = Instant::now();
        let a = Arc::new(Activity::new());
        let (head, _) = a.deadline(&t).expect("a new connection has one");
        assert!(head >= before + t.header && head <= Instant::now() + t.header);
        assert_eq!(reason(&a), Some("header_timeout"));
        assert!(a.untouched());
        a.read();
        assert_eq!(
            a.deadline(&t).map(|(at, _)| at),
            Some(head),
            "bytes do not extend the head deadline"
        );
        let in_flight = a.request_started();
        assert_eq!(a.deadline(&t), None, "a request being handled has none");
        let blocked = Instant::now();
        a.write_blocked();
        let (at, why) = a.deadline(&t).expect("a stalled write has one");
        assert_eq!(why, "write_timeout");
        assert!(at >= blocked + t.write && at <= Instant::now() + t.write);
        a.wrote();
        assert_eq!(a.deadline(&t), None);
        let done = Instant::now();
        drop(in_flight);
        let (at, why) = a.deadline(&t).expect("an idle connection has one");
        assert_eq!(why, "idle_timeout");
        assert!(at >= done + t.idle && at <= Instant::now() + t.idle);
        std::thread::sleep(Duration::from_millis(5));
        a.flushed();
        assert_eq!(
            a.deadline(&t).map(|(at, _)| at),
            Some(at),
            "a flush moving no bytes is not activity"
        );
        let sending = Instant::now();
        a.wrote();
        let (later, _) = a.deadline(&t).expect("still idle");
        assert!(
            later > at && later >= sending + t.idle,
            "bytes still leaving are not idle"
        );
        let next = Instant::now();
        a.read();
        let (at, why) = a.deadline(&t).expect("the next request's head has one");
        assert_eq!(why, "header_timeout");
        assert!(at >= next + t.header && at <= Instant::now() + t.header);
        assert!(!a.untouched());
    }

    #[test]
    fn the_refusal_is_a_complete_problem_response() {
        let bytes = refusal_response();
        let text = String::from_utf8(bytes).expect("utf-8");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        assert!(head.contains("content-type: application/problem+json"));
        assert!(head.contains("retry-after: 1"));
        assert!(head.contains("connection: close"));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).expect("json");
        assert_eq!(json["code"], "too_many_connections");
        assert_eq!(json["status"], 503);
        assert!(json["requestId"].is_string());
    }

    #[test]
    fn the_cap_fits_the_open_file_limit() {
        let fitted = fit_descriptor_limit(64).expect("a small cap fits");
        assert_eq!(fitted, 64);
        let huge = fit_descriptor_limit(usize::MAX / 2).expect("lowered, not refused");
        assert!(huge < usize::MAX / 2);
    }
}
