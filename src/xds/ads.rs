//! The ADS gRPC service: a thin adapter between tonic and one ConnectionActor per stream.
//!
//! For each stream it checks the stream budget, starts a ConnectionActor on one of the
//! connection arbiters (round robin, so that streams spread over the cores), feeds it the
//! requests as [`XdsRequest`]s and turns its [`XdsResponse`]s back into protos. Mapping to
//! `tonic::Status` happens here and nowhere else.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    Resource as DeltaResource,
    aggregated_discovery_service_server::{
        AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
    },
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::resource::{
    DeltaRequest, DeltaResponse, Request as XdsStreamRequest, Response as XdsStreamResponse,
    XdsRequest, XdsResponse,
};
use crate::actors::connection::{ConnectionActor, ConnectionConfig};
use crate::actors::distribution::DistributionTracker;
use crate::actors::push_queue::PushQueue;
use crate::metrics::Metrics;
use crate::model::proxy::NodeInfo;

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

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

type SotwSender = mpsc::Sender<Result<DiscoveryResponse, Status>>;
type DeltaSender = mpsc::Sender<Result<DeltaDiscoveryResponse, Status>>;

/// The sending half of one ADS stream (SotW or Delta), bounded.
#[derive(Clone)]
pub enum ResponseSink {
    Sotw(SotwSender),
    Delta(DeltaSender),
}

impl ResponseSink {
    pub fn is_delta(&self) -> bool {
        matches!(self, ResponseSink::Delta(_))
    }

    /// Queues a response, waiting while the stream's queue is full.
    pub async fn send(&self, response: XdsStreamResponse) -> Result<(), SinkError> {
        let sent = match (self, response) {
            (ResponseSink::Sotw(tx), XdsStreamResponse::Sotw(r)) => {
                tx.send(Ok(r.into())).await.is_ok()
            }
            (ResponseSink::Delta(tx), XdsStreamResponse::Delta(r)) => {
                tx.send(Ok(r.into())).await.is_ok()
            }
            // A response of the other protocol cannot be produced by a ConnectionActor.
            _ => return Err(SinkError::Closed),
        };
        if sent { Ok(()) } else { Err(SinkError::Closed) }
    }

    /// Ends the stream with an error status (best effort: a full queue drops it and the
    /// stream just ends when the actor stops).
    pub fn close(&self, reason: CloseReason) {
        let status = match reason {
            CloseReason::InvalidArgument(m) => Status::invalid_argument(m),
            CloseReason::ResourceExhausted(m) => Status::resource_exhausted(m),
        };
        let _ = match self {
            ResponseSink::Sotw(tx) => tx.try_send(Err(status)).is_ok(),
            ResponseSink::Delta(tx) => tx.try_send(Err(status)).is_ok(),
        };
    }
}

impl From<XdsResponse> for DiscoveryResponse {
    fn from(r: XdsResponse) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: r.version_info,
            resources: r.resources.into_iter().map(|res| res.any).collect(),
            type_url: r.type_url,
            nonce: r.nonce,
            ..Default::default()
        }
    }
}

impl From<DeltaResponse> for DeltaDiscoveryResponse {
    fn from(r: DeltaResponse) -> DeltaDiscoveryResponse {
        DeltaDiscoveryResponse {
            system_version_info: r.system_version_info,
            resources: r
                .resources
                .into_iter()
                .map(|(res, version)| DeltaResource {
                    name: res.name,
                    version,
                    resource: Some(res.any),
                    ..Default::default()
                })
                .collect(),
            type_url: r.type_url,
            removed_resources: r.removed,
            nonce: r.nonce,
            ..Default::default()
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

impl From<DiscoveryRequest> for XdsRequest {
    fn from(r: DiscoveryRequest) -> XdsRequest {
        XdsRequest {
            node: r.node.as_ref().map(NodeInfo::from),
            error_detail: r
                .error_detail
                .map(|s| format!("{} (code {})", s.message, s.code)),
            type_url: r.type_url,
            version_info: r.version_info,
            response_nonce: r.response_nonce,
            resource_names: r.resource_names,
        }
    }
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

pub struct AdsService {
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

impl AdsService {
    pub fn new(
        push_queue: Addr<PushQueue>,
        arbiters: Vec<ArbiterHandle>,
        limits: AdsLimits,
        metrics: Metrics,
        distribution: Addr<DistributionTracker>,
    ) -> AggregatedDiscoveryServiceServer<AdsService> {
        assert!(!arbiters.is_empty(), "at least one connection arbiter");
        AggregatedDiscoveryServiceServer::new(AdsService {
            push_queue,
            arbiters,
            next_arbiter: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            streams: Arc::default(),
            admission: TokenBucket::new(limits.max_requests_per_second),
            limits,
            metrics,
            distribution,
        })
        .max_decoding_message_size(16 * 1024 * 1024)
        .max_encoding_message_size(usize::MAX)
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

    /// Starts the ConnectionActor of a new stream on the next arbiter.
    fn start_connection<S>(&self, incoming: S, sink: ResponseSink, slot: StreamSlot)
    where
        S: Stream<Item = Result<XdsStreamRequest, String>> + Send + Unpin + 'static,
    {
        let config = ConnectionConfig {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            sink,
            push_queue: self.push_queue.clone(),
            metrics: self.metrics.clone(),
            slot,
            write_timeout: self.limits.write_timeout,
            distribution: self.distribution.clone(),
        };
        let i = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len();
        ConnectionActor::start_in_arbiter(&self.arbiters[i], move |ctx| {
            ctx.add_stream(incoming);
            ConnectionActor::new(config)
        });
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsService {
    type StreamAggregatedResourcesStream = ResponseStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = ResponseStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let slot = self.admit().await?;
        let incoming = request.into_inner().map(|r| {
            r.map(|r| XdsStreamRequest::Sotw(r.into()))
                .map_err(|s| s.message().to_string())
        });
        let (tx, rx) = mpsc::channel(self.limits.queue_capacity);
        self.start_connection(incoming, ResponseSink::Sotw(tx), slot);
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        let slot = self.admit().await?;
        let incoming = request.into_inner().map(|r| {
            r.map(|r| XdsStreamRequest::Delta(r.into()))
                .map_err(|s| s.message().to_string())
        });
        let (tx, rx) = mpsc::channel(self.limits.queue_capacity);
        self.start_connection(incoming, ResponseSink::Delta(tx), slot);
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// A token bucket for new streams: `rate` tokens per second, bursts of `rate`.
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
