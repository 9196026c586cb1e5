//! The two halves of one stream's responses: the [`ResponseSink`] a stream's owner queues
//! framed messages on (bounded: `stream_queue_capacity`), and the [`ResponseBody`] that
//! the connection's task writes to h2 as DATA frames, then the trailers (`streams.rs`).

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use tokio::sync::mpsc;
use tonic::Status;

use axon_xds::protocol::stream::CloseReason;
use axon_xds::wire::Framed;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    #[error("the stream's send queue stayed full past the write timeout")]
    Full,
    #[error("the stream is closed")]
    Closed,
}

/// The sending half of one ADS stream, bounded.
///
/// Messages are queued boxed: tokio's channel allocates its slots 32 at a time, with the
/// channel, so a slot of a 64-byte `Framed` kept 2 KiB per stream (20 MiB at 10,000 streams)
/// resident; a box a message costs 8 bytes a slot and one small allocation per response.
#[derive(Clone)]
pub struct ResponseSink {
    /// Framed gRPC messages.
    tx: mpsc::Sender<Box<Framed>>,
    /// The status the stream ends with, if the server closes it.
    close: Arc<Close>,
}

/// The status a stream is closed with, and whether there is one: the body looks at the flag
/// on every poll, and takes the lock only once it is set.
#[derive(Default)]
struct Close {
    set: AtomicBool,
    status: Mutex<Option<Status>>,
}

/// Resolves when the stream's connection is going away.
pub type GoingAwayFuture = Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A sink and the body it feeds, with room for `capacity` messages. When `away` resolves the
/// body ends with UNAVAILABLE, so that the proxy opens a new stream on a new connection.
pub fn channel(capacity: usize, away: Option<GoingAwayFuture>) -> (ResponseSink, ResponseBody) {
    let (tx, rx) = mpsc::channel(capacity);
    let close = Arc::new(Close::default());
    let sink = ResponseSink {
        tx,
        close: close.clone(),
    };
    let body = ResponseBody {
        rx,
        rest: None,
        close,
        away,
        done: false,
    };
    (sink, body)
}

impl ResponseSink {
    /// Queues a message if the stream's queue has room; else gives it back (`Full`).
    pub fn try_send(&self, message: Framed) -> Result<(), (SinkError, Option<Framed>)> {
        self.tx.try_send(Box::new(message)).map_err(|e| match e {
            mpsc::error::TrySendError::Full(m) => (SinkError::Full, Some(*m)),
            mpsc::error::TrySendError::Closed(_) => (SinkError::Closed, None),
        })
    }

    /// Queues a message, waiting while the stream's queue is full.
    pub async fn send(&self, message: Framed) -> Result<(), SinkError> {
        self.tx
            .send(Box::new(message))
            .await
            .map_err(|_| SinkError::Closed)
    }

    /// Ends the stream with an error status, ahead of anything still queued.
    pub fn close(&self, reason: CloseReason) {
        let status = match reason {
            CloseReason::InvalidArgument(m) => Status::invalid_argument(m),
            CloseReason::ResourceExhausted(m) => Status::resource_exhausted(m),
            CloseReason::DeadlineExceeded(m) => Status::deadline_exceeded(m),
            CloseReason::Unauthenticated(m) => Status::unauthenticated(m),
            CloseReason::PermissionDenied(m) => Status::permission_denied(m),
            CloseReason::Unavailable(m) => Status::unavailable(m),
        };
        if let Ok(mut close) = self.close.status.lock() {
            close.get_or_insert(status);
            self.close.set.store(true, Ordering::Release);
        }
    }
}

/// The response body of one stream: queued messages as DATA frames, then the trailers.
pub struct ResponseBody {
    rx: mpsc::Receiver<Box<Framed>>,
    /// The shared part of the message whose head was just written.
    rest: Option<Bytes>,
    close: Arc<Close>,
    away: Option<GoingAwayFuture>,
    done: bool,
}

impl ResponseBody {
    fn closing(&self) -> Option<Status> {
        if !self.close.set.load(Ordering::Acquire) {
            return None;
        }
        self.close.status.lock().ok().and_then(|mut c| c.take())
    }

    fn trailers(status: &Status) -> Frame<Bytes> {
        let mut headers = http::HeaderMap::new();
        // A status always renders into headers; an unrenderable message becomes its code.
        let _ = status.add_header(&mut headers);
        Frame::trailers(headers)
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        // A message is finished before anything else, so the stream never ends inside one.
        if let Some(rest) = self.rest.take() {
            return Poll::Ready(Some(Ok(Frame::data(rest))));
        }
        if let Some(status) = self.closing() {
            self.done = true;
            return Poll::Ready(Some(Ok(Self::trailers(&status))));
        }
        // What is queued goes out before the connection's going away is looked at (only when
        // the queue is empty): polling that watch on every message registered its waker
        // anew each time, and the queue is bounded.
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(message)) => {
                let message = *message;
                if !message.shared.is_empty() {
                    self.rest = Some(message.shared);
                }
                Poll::Ready(Some(Ok(Frame::data(message.head))))
            }
            Poll::Ready(None) => {
                self.done = true;
                let status = self.closing().unwrap_or_else(|| Status::ok(""));
                Poll::Ready(Some(Ok(Self::trailers(&status))))
            }
            Poll::Pending => match self.away.as_mut().map(|away| away.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => {
                    self.done = true;
                    let status = Status::unavailable(
                        "axon is closing this connection (draining, or max_connection_age); reconnect",
                    );
                    Poll::Ready(Some(Ok(Self::trailers(&status))))
                }
                _ => Poll::Pending,
            },
        }
    }
}
