//! hyper's per-connection service and the request body with its total deadline.

use super::*;

/// and in-flight tracking added.
#[derive(Clone)]
pub(super) struct ConnService {
    pub(super) app: Router,
    pub(super) peer: SocketAddr,
    pub(super) activity: Arc<Activity>,
    pub(super) body_timeout: Duration,
}

pub(super) type ServiceFuture =
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
pub(super) struct ResponseBody {
    pub(super) inner: Body,
    pub(super) _in_flight: InFlight,
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
    pub(super) missed: Arc<AtomicBool>,
    pub(super) timeout: Duration,
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
pub(super) struct TimedBody {
    pub(super) inner: Incoming,
    pub(super) sleep: Option<Pin<Box<Sleep>>>,
    pub(super) deadline: BodyDeadline,
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
