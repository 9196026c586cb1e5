//! The ADS gRPC service: a thin adapter between HTTP/2 (served by tonic's server) and one
//! ConnectionActor per stream.
//!
//! For each stream of `StreamAggregatedResources` (SotW) or `DeltaAggregatedResources` it
//! admits the stream (token bucket, `max_streams`), starts a ConnectionActor on the arbiter
//! that serves the stream's connection (the server runs on every connection arbiter), feeds it
//! the requests as [`Request`]s (SotW ones read by [`super::decode`]), and writes its responses
//! as gRPC messages framed by [`wire`]: a small head per stream and the resources encoded once
//! per view, shared by reference. Nothing is kept per stream between messages. Mapping to
//! `tonic::Status` happens here and nowhere else.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use actix::prelude::*;
use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use futures::Stream;
use http_body::Frame;
use http_body_util::BodyExt;
use tokio::sync::mpsc;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;

use super::decode::SotwDecoder;
use super::resource::{DeltaRequest, Request, Response};
use super::wire::{self, FrameReader, Framed};
use crate::actors::connection::{ConnectionActor, ConnectionConfig};
use crate::actors::distribution::DistributionTracker;
use crate::actors::push_queue::PushQueue;
use crate::metrics::Metrics;
use crate::model::proxy::NodeInfo;

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// Why a stream is closed by the server.
#[derive(Debug, Clone, PartialEq)]
pub enum CloseReason {
    InvalidArgument(String),
    ResourceExhausted(String),
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SinkError {
    #[error("the stream's send queue stayed full past the write timeout")]
    Full,
    #[error("the stream is closed")]
    Closed,
}

/// The sending half of one ADS stream, bounded.
#[derive(Clone)]
pub struct ResponseSink {
    /// Framed gRPC messages.
    tx: mpsc::Sender<Framed>,
    /// The status the stream ends with, if the server closes it.
    close: Arc<Mutex<Option<Status>>>,
    delta: bool,
}

impl ResponseSink {
    pub fn is_delta(&self) -> bool {
        self.delta
    }

    /// A response as the message the stream sends: at most two buffers (a chunk per resource
    /// would be an HTTP/2 frame per resource), the stream's own fields and the view's shared
    /// resources.
    pub fn encode(response: &Response) -> Framed {
        match response {
            Response::Sotw(r) => wire::encode_sotw(r),
            Response::Delta(r) => wire::encode_delta(r),
        }
    }

    /// Queues a message if the stream's queue has room; else gives it back (`Full`).
    pub fn try_send(&self, message: Framed) -> Result<(), (SinkError, Option<Framed>)> {
        self.tx.try_send(message).map_err(|e| match e {
            mpsc::error::TrySendError::Full(m) => (SinkError::Full, Some(m)),
            mpsc::error::TrySendError::Closed(_) => (SinkError::Closed, None),
        })
    }

    /// Queues a message, waiting while the stream's queue is full.
    pub async fn send(&self, message: Framed) -> Result<(), SinkError> {
        self.tx.send(message).await.map_err(|_| SinkError::Closed)
    }

    /// Ends the stream with an error status, ahead of anything still queued.
    pub fn close(&self, reason: CloseReason) {
        let status = match reason {
            CloseReason::InvalidArgument(m) => Status::invalid_argument(m),
            CloseReason::ResourceExhausted(m) => Status::resource_exhausted(m),
        };
        if let Ok(mut close) = self.close.lock() {
            close.get_or_insert(status);
        }
    }
}

/// The response body of one stream: queued messages as DATA frames, then the trailers.
struct ResponseBody {
    rx: mpsc::Receiver<Framed>,
    /// The shared part of the message whose head was just written.
    rest: Option<Bytes>,
    close: Arc<Mutex<Option<Status>>>,
    done: bool,
}

impl ResponseBody {
    fn closing(&self) -> Option<Status> {
        self.close.lock().ok().and_then(|mut c| c.take())
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
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(message)) => {
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
            Poll::Pending => Poll::Pending,
        }
    }
}

impl From<DeltaDiscoveryRequest> for DeltaRequest {
    fn from(r: DeltaDiscoveryRequest) -> DeltaRequest {
        DeltaRequest {
            node: r.node.as_ref().map(NodeInfo::from),
            error_detail: r
                .error_detail
                .map(|s| format!("{} (code {})", s.message, s.code)),
            type_url: r.type_url,
            subscribe: r.resource_names_subscribe,
            unsubscribe: r.resource_names_unsubscribe,
            initial_versions: r.initial_resource_versions.into_iter().collect(),
            response_nonce: r.response_nonce,
        }
    }
}

type RequestStream = Pin<Box<dyn Stream<Item = Result<Request, String>> + Send>>;

/// The requests of a stream, decoded from its body as they arrive.
fn requests(body: Body, delta: bool) -> RequestStream {
    let state = (body, FrameReader::default(), SotwDecoder::default(), false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut body, mut reader, mut sotw, ended)| async move {
            if ended {
                return None;
            }
            loop {
                let decoded = if delta {
                    reader
                        .next_message::<DeltaDiscoveryRequest>()
                        .map(|m| m.map(|r| Request::Delta(r.into())))
                } else {
                    reader.next_frame().and_then(|frame| {
                        frame.map(|m| sotw.decode(m).map(Request::Sotw)).transpose()
                    })
                };
                match decoded {
                    Ok(Some(request)) => return Some((Ok(request), (body, reader, sotw, false))),
                    Err(e) => return Some((Err(e.to_string()), (body, reader, sotw, true))),
                    Ok(None) => {}
                }
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            reader.push(data);
                        }
                    }
                    Some(Err(e)) => return Some((Err(e.to_string()), (body, reader, sotw, true))),
                    None => return None,
                }
            }
        },
    ))
}

/// A slot in the stream budget, given back when dropped (when the ConnectionActor stops).
pub struct StreamSlot(Arc<AtomicUsize>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Limits of the ADS server, from the limits file.
#[derive(Debug, Clone)]
pub struct AdsLimits {
    pub max_streams: usize,
    pub queue_capacity: usize,
    pub write_timeout: Duration,
    /// New streams admitted per second (a token bucket with this burst).
    pub max_requests_per_second: u32,
    /// How long a new stream waits for a token before RESOURCE_EXHAUSTED.
    pub max_stream_wait: Duration,
}

/// The ADS service, as tonic's server routes it.
#[derive(Clone)]
pub struct AdsService {
    inner: Arc<Inner>,
}

struct Inner {
    push_queue: Addr<PushQueue>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: AtomicUsize,
    next_id: AtomicU64,
    streams: Arc<AtomicUsize>,
    limits: AdsLimits,
    admission: TokenBucket,
    metrics: Metrics,
    distribution: Addr<DistributionTracker>,
}

impl NamedService for AdsService {
    const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
}

impl AdsService {
    pub fn new(
        push_queue: Addr<PushQueue>,
        arbiters: Vec<ArbiterHandle>,
        limits: AdsLimits,
        metrics: Metrics,
        distribution: Addr<DistributionTracker>,
    ) -> AdsService {
        assert!(!arbiters.is_empty(), "at least one connection arbiter");
        AdsService {
            inner: Arc::new(Inner {
                push_queue,
                arbiters,
                next_arbiter: AtomicUsize::new(0),
                next_id: AtomicU64::new(1),
                streams: Arc::default(),
                admission: TokenBucket::new(limits.max_requests_per_second),
                limits,
                metrics,
                distribution,
            }),
        }
    }
}

impl tower_service::Service<http::Request<Body>> for AdsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let inner = self.inner.clone();
        Box::pin(async move { Ok(inner.serve(request).await) })
    }
}

impl Inner {
    async fn serve(&self, request: http::Request<Body>) -> http::Response<Body> {
        let delta = match request.uri().path() {
            SOTW_PATH => false,
            DELTA_PATH => true,
            other => {
                return Status::unimplemented(format!("axon does not serve {other}")).into_http();
            }
        };
        let slot = match self.admit().await {
            Ok(slot) => slot,
            Err(status) => return status.into_http(),
        };
        let (tx, rx) = mpsc::channel(self.limits.queue_capacity);
        let close = Arc::new(Mutex::new(None));
        let sink = ResponseSink {
            tx,
            close: close.clone(),
            delta,
        };
        self.start_connection(requests(request.into_body(), delta), sink, slot);
        let body = ResponseBody {
            rx,
            rest: None,
            close,
            done: false,
        };
        let mut response = http::Response::new(Body::new(body));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/grpc"),
        );
        response
    }

    /// Admits a new stream: a token within `max_stream_wait`, and a slot of `max_streams`.
    async fn admit(&self) -> Result<StreamSlot, Status> {
        if !self.admission.acquire(self.limits.max_stream_wait).await {
            self.metrics.rejected_streams.inc();
            return Err(Status::resource_exhausted(format!(
                "axon admits {} new streams per second (max_requests_per_second); retry later",
                self.limits.max_requests_per_second
            )));
        }
        let prev = self.streams.fetch_add(1, Ordering::AcqRel);
        let slot = StreamSlot(self.streams.clone());
        if prev >= self.limits.max_streams {
            drop(slot);
            self.metrics.rejected_streams.inc();
            return Err(Status::resource_exhausted(format!(
                "axon serves at most {} ADS streams (max_streams)",
                self.limits.max_streams
            )));
        }
        Ok(slot)
    }

    /// Starts the ConnectionActor of a new stream.
    fn start_connection(&self, incoming: RequestStream, sink: ResponseSink, slot: StreamSlot) {
        let config = ConnectionConfig {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            sink,
            push_queue: self.push_queue.clone(),
            metrics: self.metrics.clone(),
            slot,
            write_timeout: self.limits.write_timeout,
            distribution: self.distribution.clone(),
        };
        // On the arbiter that serves this stream's HTTP/2 connection (the server runs on the
        // connection arbiters): the stream's reads, writes and actor then share a thread.
        // Served from elsewhere (a plain tokio runtime), on the next connection arbiter.
        let arbiter = actix_rt::Arbiter::try_current().unwrap_or_else(|| {
            let i = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len();
            self.arbiters[i].clone()
        });
        ConnectionActor::start_in_arbiter(&arbiter, move |ctx| {
            ctx.add_stream(incoming);
            ConnectionActor::new(config)
        });
    }
}

pub struct TokenBucket {
    rate: u32,
    state: tokio::sync::Mutex<(f64, tokio::time::Instant)>,
}

impl TokenBucket {
    pub fn new(rate: u32) -> TokenBucket {
        TokenBucket {
            rate: rate.max(1),
            state: tokio::sync::Mutex::new((f64::from(rate.max(1)), tokio::time::Instant::now())),
        }
    }

    /// Takes a token, waiting at most `max_wait` for one.
    pub async fn acquire(&self, max_wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            let wait = {
                let mut state = self.state.lock().await;
                let now = tokio::time::Instant::now();
                let rate = f64::from(self.rate);
                let (tokens, last) = *state;
                let tokens = (tokens + now.duration_since(last).as_secs_f64() * rate).min(rate);
                if tokens >= 1.0 {
                    *state = (tokens - 1.0, now);
                    return true;
                }
                *state = (tokens, now);
                Duration::from_secs_f64((1.0 - tokens) / rate)
            };
            if tokio::time::Instant::now() + wait > deadline {
                return false;
            }
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_token_bucket_admits_its_rate_and_waits_bounded() {
        let bucket = TokenBucket::new(10);
        for _ in 0..10 {
            assert!(bucket.acquire(Duration::ZERO).await, "a burst of 10");
        }
        assert!(
            !bucket.acquire(Duration::from_millis(50)).await,
            "no token within 50 ms"
        );
        assert!(
            bucket.acquire(Duration::from_millis(200)).await,
            "one token per 100 ms"
        );
    }
}
