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
use crate::error::ErrorCode;
use crate::wire::Problem;

mod activity;
mod body;
mod refuse;
mod tls;

use activity::*;
use body::*;
pub use body::{BodyDeadline, BodyTimeout};
use refuse::*;
use tls::*;

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

/// hyper's service for one connection: the router with the peer address, the body deadline
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
mod tests;
