//! The watchdog's view of a connection: what it is doing and since when, fed by the
//! I/O wrapper around its stream.

use super::*;

/// What a connection is doing, for the watchdog.
pub(super) struct Activity {
    pub(super) state: Mutex<ActivityState>,
    /// Woken when a deadline may have moved earlier (the watchdog recomputes it).
    pub(super) changed: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting for a request head to complete (deadline: header).
    Head,
    /// At least one request is being handled or answered (no deadline of its own).
    Busy,
    /// Between a response and the first byte of the next request (deadline: idle, counted
    /// from the last byte of the response the client took).
    Idle,
}

pub(super) struct ActivityState {
    pub(super) phase: Phase,
    pub(super) since: Instant,
    pub(super) in_flight: usize,
    /// Nothing has been read from the client yet.
    pub(super) fresh: bool,
    /// Since when the client has not taken the bytes the server is writing.
    pub(super) write_blocked_since: Option<Instant>,
}

impl Activity {
    pub(super) fn new() -> Activity {
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
    pub(super) fn deadline(&self, t: &Timeouts) -> Option<(Instant, &'static str)> {
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
    pub(super) fn untouched(&self) -> bool {
        let s = self.state.lock();
        s.fresh && s.in_flight == 0
    }

    pub(super) fn request_started(self: &Arc<Self>) -> InFlight {
        let mut s = self.state.lock();
        s.in_flight += 1;
        s.phase = Phase::Busy;
        InFlight(self.clone())
    }

    pub(super) fn read(&self) {
        let mut s = self.state.lock();
        s.fresh = false;
        if s.phase == Phase::Idle {
            s.phase = Phase::Head;
            s.since = Instant::now();
            drop(s);
            self.changed.notify_one();
        }
    }

    pub(super) fn write_blocked(&self) {
        let mut s = self.state.lock();
        if s.write_blocked_since.is_none() {
            s.write_blocked_since = Some(Instant::now());
            drop(s);
            self.changed.notify_one();
        }
    }

    /// The client took bytes: a stall is over, and an idle connection still sending the last
    /// response (hyper holds whole body chunks) is not idle yet.
    pub(super) fn wrote(&self) {
        let mut s = self.state.lock();
        s.write_blocked_since = None;
        if s.phase == Phase::Idle {
            s.since = Instant::now();
        }
    }

    /// A flush or shutdown completed: whatever was stalled has gone out. (A flush moves no
    /// new bytes, so it does not count as activity: hyper flushes whenever it is polled.)
    pub(super) fn flushed(&self) {
        self.state.lock().write_blocked_since = None;
    }
}

/// One request in flight; dropped when hyper has taken the whole response body (or the
/// request was abandoned).
pub(super) struct InFlight(Arc<Activity>);

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
pub(super) struct Tracked<IO> {
    pub(super) io: IO,
    pub(super) activity: Arc<Activity>,
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
    pub(super) fn track_write(&self, result: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        match result {
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(Ok(n)) if n > 0 => self.activity.wrote(),
            Poll::Ready(_) => {}
        }
        result
    }

    pub(super) fn track_flush(&self, result: Poll<io::Result<()>>) -> Poll<io::Result<()>> {
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
