//! axon-transport: ADS served on the (vendored) h2 crate directly, one task per connection
//! (`server.rs`, `streams.rs`). [`AdsService`] routes the two ADS methods,
//! `StreamAggregatedResources` (SotW) and `DeltaAggregatedResources`, itself: no gRPC
//! framework's router or codec, and no HTTP server's task per stream, is in the way; tonic
//! lends only its `Status` (the trailers) and its body type (the CA's answers).
//!
//! For each stream it admits the stream ([`admission`]: token bucket, `max_streams`; until
//! its first request it is one of the pending streams (`pending.rs`), whose partial requests
//! draw from their own share of the buffers (`buffers.rs`)), makes its bounded response queue
//! ([`sink`]), and hands the stream, as decoded [`Request`]s and a [`ResponseSink`], to a
//! [`StreamStarter`]: the connection actor's side implements it, so this module never names
//! an actor. Requests are decoded by [`RequestReader`](axon_xds::decode::RequestReader);
//! responses are framed by [`axon_xds::wire`]: a small head per stream and the resources
//! encoded once per view, shared by reference. Mapping to `tonic::Status` happens here and
//! nowhere else.
//!
//! On the TLS port the same service answers istiod's CA call, `CreateCertificate`
//! (`ca_service.rs`), over the CA the wiring gives it (`with_ca`).

pub mod admission;
mod ages;
mod auth;
mod buffers;
mod ca_service;
mod pending;
mod requests;
pub mod server;
pub mod sink;
mod streams;
pub mod tls;
pub mod token_auth;

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tonic::Status;
use tonic::body::Body;

pub use admission::{StreamSlot, TokenBucket};
pub use ca_service::{CA_PATH, IstioCertificateRequest, IstioCertificateResponse};
pub use sink::{ResponseSink, SinkError};

use axon_metrics::Metrics;
use axon_xds::Request;
use axon_xds::protocol::stream::CloseReason;

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

/// A stream's requests, decoded as they arrive; an error ends the stream, as it says.
pub type RequestStream = Pin<Box<dyn Stream<Item = Result<Request, CloseReason>> + Send>>;

/// A newly admitted ADS stream.
pub struct AdsStream {
    /// Unique for the life of the process.
    pub id: u64,
    pub delta: bool,
    pub requests: RequestStream,
    pub responses: ResponseSink,
    /// Held for as long as the stream is served.
    pub slot: StreamSlot,
    /// The TLS port authorized the client's identity for the proxy its first request names.
    pub verified: bool,
}

/// A stream's place among the pending ones, and what tells it to close for a newer one.
struct Waiting {
    place: pending::Place,
    evicted: tokio::sync::oneshot::Receiver<()>,
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
    /// A stream must send its first request within this long; it takes no slot before.
    pub first_request_timeout: Duration,
    /// A request must arrive whole within this long of its first bytes.
    pub message_timeout: Duration,
    /// The largest request, bytes.
    pub max_message_size: usize,
    /// The bytes of partial requests buffered over every stream.
    pub max_request_buffer_bytes: usize,
    /// The bytes of partial requests buffered over one connection's streams.
    pub max_connection_request_buffer_bytes: usize,
    /// The bytes of partial requests buffered over the streams not yet admitted (the rest of
    /// `max_request_buffer_bytes` is kept for admitted streams).
    pub max_pending_request_buffer_bytes: usize,
    /// Streams waiting for their first request, over every connection; past it the
    /// connection holding the most is closed, or the oldest stream past
    /// `pending_stream_grace` (`pending.rs`).
    pub max_pending_streams: usize,
    pub pending_stream_grace: Duration,
    /// xDS connections open at once, over both ports; a connection past it is closed as soon
    /// as accepted, so that descriptors stay for the monitoring port and the registries.
    pub max_connections: usize,
}

/// Put in each request's extensions: its connection's budget of partial requests
/// (`max_connection_request_buffer_bytes`), and what closes the connection (when it holds
/// the most streams waiting for a first request past `max_pending_streams`).
#[derive(Clone)]
pub struct ConnectionHandle {
    id: u64,
    buffer: buffers::Budget,
    pub close: Arc<tokio::sync::Notify>,
}

/// The ADS service: each connection's task ([`server`]) gives it every new stream.
#[derive(Clone)]
pub struct AdsService {
    inner: Arc<Inner>,
}

struct Inner {
    starter: Arc<dyn StreamStarter>,
    /// The trust domain client identities on the TLS port must be of.
    trust_domain: String,
    /// Checks bearer tokens on the TLS port (`--token-auth`); without it only certificates.
    token_auth: Option<Arc<token_auth::TokenAuth>>,
    /// The CA served on the TLS port (`--ca-dir`).
    ca: Option<ca_service::CaServing>,
    /// Identities already logged as denied (bounded), so that each is logged once.
    denied_logged: std::sync::Mutex<std::collections::HashSet<String>>,
    next_id: AtomicU64,
    /// Numbers the connections (their [`ConnectionHandle`]s), apart from the streams' ids.
    next_connection: AtomicU64,
    streams: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    buffers: buffers::Budget,
    pending_buffers: buffers::Budget,
    pending: Arc<pending::Pending>,
    /// The open connections, oldest first, for a rebalance.
    ages: Arc<ages::Ages>,
    limits: AdsLimits,
    admission: TokenBucket,
    metrics: Metrics,
}

impl AdsService {
    pub fn new(starter: Arc<dyn StreamStarter>, limits: AdsLimits, metrics: Metrics) -> AdsService {
        AdsService {
            inner: Arc::new(Inner {
                starter,
                trust_domain: "cluster.local".to_string(),
                token_auth: None,
                ca: None,
                denied_logged: Default::default(),
                next_id: AtomicU64::new(1),
                next_connection: AtomicU64::new(1),
                streams: Arc::default(),
                connections: Arc::default(),
                buffers: buffers::Budget::new(
                    "max_request_buffer_bytes",
                    limits.max_request_buffer_bytes,
                    Some(metrics.request_buffer_bytes.clone()),
                ),
                pending_buffers: buffers::Budget::new(
                    "max_pending_request_buffer_bytes",
                    limits.max_pending_request_buffer_bytes,
                    Some(metrics.pending_request_buffer_bytes.clone()),
                ),
                pending: pending::Pending::new(
                    limits.max_pending_streams,
                    limits.pending_stream_grace,
                    metrics.pending_streams.clone(),
                ),
                admission: TokenBucket::new(limits.max_requests_per_second),
                ages: Arc::default(),
                limits,
                metrics,
            }),
        }
    }
}

impl AdsService {
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// A place for a newly accepted connection among `max_connections`, held for its life.
    pub fn take_connection(&self) -> Option<StreamSlot> {
        StreamSlot::take(&self.inner.connections, self.inner.limits.max_connections)
    }

    /// What the transport keeps of a newly accepted connection; the server puts it in each
    /// of the connection's requests, and closes the connection when told.
    pub fn connection_handle(&self) -> ConnectionHandle {
        self.inner.connection_handle()
    }

    /// ADS streams admitted and served now (each holds a `max_streams` slot).
    pub fn streams(&self) -> usize {
        self.inner.streams.load(Ordering::SeqCst)
    }

    /// Tells the `n` oldest connections that hold a stream to close as at
    /// `max_connection_age` (GOAWAY, streams ended with UNAVAILABLE), so that their proxies
    /// reconnect, through the Service, to another replica; returns how many were told.
    pub fn close_oldest(&self, n: usize) -> usize {
        self.inner.ages.close_oldest(n)
    }

    /// Enters an accepted connection into the age order; `close` closes it, `open` counts
    /// its streams. Held for the connection's life.
    fn enter_age(
        &self,
        handle: &ConnectionHandle,
        close: Arc<tokio::sync::Notify>,
        open: tokio::sync::watch::Receiver<usize>,
    ) -> ages::Aged {
        self.inner.ages.enter(handle.id, close, open)
    }

    /// `max_connections`.
    pub fn max_connections(&self) -> usize {
        self.inner.limits.max_connections
    }

    /// The trust domain client identities on the TLS port must be of (`--trust-domain`).
    /// Call before the service is cloned.
    pub fn with_trust_domain(mut self, trust_domain: &str) -> AdsService {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.trust_domain = trust_domain.to_string();
        }
        self
    }

    /// Bearer tokens on the TLS port are checked by `auth` (`--token-auth`). Call before the
    /// service is cloned.
    pub fn with_token_auth(mut self, auth: Arc<token_auth::TokenAuth>) -> AdsService {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.token_auth = Some(auth);
        }
        self
    }
}

impl AdsService {
    /// Serves istiod's CA call on the TLS port from `store`; requests of at most
    /// `max_request_bytes`. Call before the service is cloned.
    pub fn with_ca(mut self, store: Arc<axon_ca::CaStore>, max_request_bytes: usize) -> AdsService {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.ca = Some(ca_service::CaServing::new(store, max_request_bytes));
        }
        self
    }
}

/// How a request is answered (`Inner::serve`).
enum Served {
    /// An ADS stream: `application/grpc` headers, then its queue.
    Ads(sink::ResponseBody),
    /// An answer ready now (an unknown method).
    Now(http::Response<Body>),
    /// An answer to wait for (the CA's).
    Later(Pin<Box<dyn std::future::Future<Output = http::Response<Body>> + Send>>),
}

impl Inner {
    fn connection_handle(&self) -> ConnectionHandle {
        ConnectionHandle {
            id: self.next_connection.fetch_add(1, Ordering::Relaxed),
            buffer: buffers::Budget::new(
                "max_connection_request_buffer_bytes",
                self.limits.max_connection_request_buffer_bytes,
                None,
            ),
            close: Default::default(),
        }
    }

    /// Serves one request of a connection (`server.rs`): an ADS stream is started at once
    /// and answered with its queue's body; the CA's call is answered later.
    fn serve(self: &Arc<Self>, request: http::Request<streams::RecvBody>) -> Served {
        let delta = match request.uri().path() {
            SOTW_PATH => false,
            DELTA_PATH => true,
            ca_service::CA_PATH => {
                let inner = self.clone();
                return Served::Later(Box::pin(async move {
                    inner.create_certificate(request.map(Body::new)).await
                }));
            }
            other => {
                return Served::Now(
                    Status::unimplemented(format!("axon does not serve {other}")).into_http(),
                );
            }
        };
        let away = request.extensions().get::<server::GoingAway>().cloned();
        let token = auth::bearer(&request);
        let authn = request
            .extensions()
            .get::<server::Authn>()
            .cloned()
            .map(|authn| server::Authn { token, ..authn });
        let handle = match request.extensions().get::<ConnectionHandle>() {
            Some(handle) => handle.clone(),
            None => self.connection_handle(),
        };
        let (place, evicted, made_room) = self.pending.enter(handle.id, &handle.close);
        match made_room {
            pending::MadeRoom::Nothing => {}
            pending::MadeRoom::Stream => self.reject("max_pending_streams", 1),
            pending::MadeRoom::Connection(n) => self.reject("max_pending_streams", n as u64),
        }
        let connection = handle.buffer.share();
        let requests = requests::stream(
            request.into_body(),
            requests::Bounds {
                delta,
                max_message_size: self.limits.max_message_size,
                message_timeout: self.limits.message_timeout,
                shares: buffers::Shares {
                    connection,
                    pending: Some(self.pending_buffers.share()),
                    total: self.buffers.share(),
                },
                errors: self.metrics.request_errors.clone(),
            },
        );
        let away = away.map(|away| Box::pin(away.wait()) as sink::GoingAwayFuture);
        let (responses, body) = sink::channel(self.limits.queue_capacity, away);
        // The response headers go out at once (gRPC clients wait for them before their first
        // request); the stream is admitted once its first request is in.
        let pending = Waiting { place, evicted };
        tokio::spawn(
            self.clone()
                .admit_and_start(delta, requests, responses, authn, pending),
        );
        Served::Ads(body)
    }

    /// Waits for the stream's first request (within `first_request_timeout`, and while it
    /// is not made to close for a newer pending stream: a stream that never speaks holds no
    /// slot and is then closed), admits it, and hands it over.
    async fn admit_and_start(
        self: Arc<Self>,
        delta: bool,
        mut requests: RequestStream,
        responses: ResponseSink,
        authn: Option<server::Authn>,
        pending: Waiting,
    ) {
        let wait = self.limits.first_request_timeout;
        let Waiting { place, evicted } = pending;
        let first = tokio::select! {
            first = tokio::time::timeout(wait, requests.next()) => first,
            Ok(()) = evicted => {
                return responses.close(CloseReason::ResourceExhausted(format!(
                    "no request yet, and {} streams wait for theirs (max_pending_streams): \
                     the oldest is closed",
                    self.pending.max()
                )));
            }
        };
        drop(place);
        let first = match first {
            Ok(Some(Ok(first))) => first,
            Ok(Some(Err(reason))) => return responses.close(reason),
            Ok(None) => return,
            Err(_) => {
                self.reject("first_request_timeout", 1);
                return responses.close(CloseReason::DeadlineExceeded(format!(
                    "no request within {wait:?} (first_request_timeout)"
                )));
            }
        };
        let verified = authn.is_some();
        if let Some(authn) = authn
            && let Err(reason) = self.authorize(authn, &first).await
        {
            return responses.close(reason);
        }
        let slot = match self.admit().await {
            Ok(slot) => slot,
            Err(status) => {
                return responses.close(CloseReason::ResourceExhausted(status.message().into()));
            }
        };
        self.starter.start(AdsStream {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            delta,
            requests: Box::pin(futures::stream::once(async { Ok(first) }).chain(requests)),
            responses,
            slot,
            verified,
        });
    }

    /// Counts `n` streams refused or closed before admission, by the limit's key.
    fn reject(&self, reason: &str, n: u64) {
        self.metrics
            .rejected_streams
            .with_label_values(&[reason])
            .inc_by(n);
    }

    /// Admits a new stream: a token within `max_stream_wait`, and a slot of `max_streams`.
    async fn admit(&self) -> Result<StreamSlot, Status> {
        if !self.admission.acquire(self.limits.max_stream_wait).await {
            self.reject("max_requests_per_second", 1);
            return Err(Status::resource_exhausted(format!(
                "axon admits {} new streams per second (max_requests_per_second); retry later",
                self.limits.max_requests_per_second
            )));
        }
        StreamSlot::take(&self.streams, self.limits.max_streams).ok_or_else(|| {
            self.reject("max_streams", 1);
            Status::resource_exhausted(format!(
                "axon serves at most {} ADS streams (max_streams)",
                self.limits.max_streams
            ))
        })
    }
}
