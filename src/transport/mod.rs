//! The ADS transport: the gRPC service tonic's server routes `StreamAggregatedResources`
//! (SotW) and `DeltaAggregatedResources` to, with no codec of tonic's in the way.
//!
//! For each stream it admits the stream ([`admission`]: token bucket, `max_streams`), makes
//! its bounded response queue ([`sink`]), and hands the stream, as decoded [`Request`]s and
//! a [`ResponseSink`], to a [`StreamStarter`]: the connection actor's side implements it, so
//! this module never names an actor. Requests are decoded by [`RequestReader`]; responses
//! are framed by [`crate::xds::wire`]: a small head per stream and the resources encoded once
//! per view, shared by reference. Mapping to `tonic::Status` happens here and nowhere else.

pub mod admission;
pub mod server;
pub mod sink;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use http_body_util::BodyExt;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;

pub use admission::{StreamSlot, TokenBucket};
pub use sink::{ResponseSink, SinkError};

use crate::metrics::Metrics;
use crate::xds::Request;
use crate::xds::decode::RequestReader;

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// A stream's requests, decoded as they arrive; an error ends the stream.
pub type RequestStream = Pin<Box<dyn Stream<Item = Result<Request, String>> + Send>>;

/// A newly admitted ADS stream.
pub struct AdsStream {
    /// Unique for the life of the process.
    pub id: u64,
    pub delta: bool,
    pub requests: RequestStream,
    pub responses: ResponseSink,
    /// Held for as long as the stream is served.
    pub slot: StreamSlot,
}

/// Takes over the streams the transport admits (implemented by the connection actors).
pub trait StreamStarter: Send + Sync + 'static {
    fn start(&self, stream: AdsStream);
}

/// Limits of the ADS server, from the limits file.
#[derive(Debug, Clone)]
pub struct AdsLimits {
    pub max_streams: usize,
    pub queue_capacity: usize,
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
    starter: Arc<dyn StreamStarter>,
    next_id: AtomicU64,
    streams: Arc<AtomicUsize>,
    limits: AdsLimits,
    admission: TokenBucket,
    metrics: Metrics,
}

impl NamedService for AdsService {
    const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
}

impl AdsService {
    pub fn new(starter: Arc<dyn StreamStarter>, limits: AdsLimits, metrics: Metrics) -> AdsService {
        AdsService {
            inner: Arc::new(Inner {
                starter,
                next_id: AtomicU64::new(1),
                streams: Arc::default(),
                admission: TokenBucket::new(limits.max_requests_per_second),
                limits,
                metrics,
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
        let away = request
            .extensions()
            .get::<server::GoingAway>()
            .map(|away| Box::pin(away.wait()) as sink::GoingAwayFuture);
        let (responses, body) = sink::channel(self.limits.queue_capacity, away);
        self.starter.start(AdsStream {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            delta,
            requests: requests(request.into_body(), delta),
            responses,
            slot,
        });
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
        StreamSlot::take(&self.streams, self.limits.max_streams).ok_or_else(|| {
            self.metrics.rejected_streams.inc();
            Status::resource_exhausted(format!(
                "axon serves at most {} ADS streams (max_streams)",
                self.limits.max_streams
            ))
        })
    }
}

/// The requests of a stream, decoded from its body as they arrive.
fn requests(body: Body, delta: bool) -> RequestStream {
    let state = (body, RequestReader::new(delta), false);
    Box::pin(futures::stream::unfold(
        state,
        move |(mut body, mut reader, ended)| async move {
            if ended {
                return None;
            }
            loop {
                match reader.next_request() {
                    Ok(Some(request)) => return Some((Ok(request), (body, reader, false))),
                    Err(e) => return Some((Err(e.to_string()), (body, reader, true))),
                    Ok(None) => {}
                }
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            reader.push(data);
                        }
                    }
                    Some(Err(e)) => return Some((Err(e.to_string()), (body, reader, true))),
                    None => return None,
                }
            }
        },
    ))
}
