//! The ADS gRPC service: a thin adapter between tonic and one ConnectionActor per stream.
//!
//! For each stream it checks the stream budget, starts a ConnectionActor on one of the
//! connection arbiters (round robin, so that streams spread over the cores), feeds it the
//! requests as [`XdsRequest`]s and turns its [`XdsResponse`]s back into protos. Mapping to
//! `tonic::Status` happens here and nowhere else.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use actix::prelude::*;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_server::{
        AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
    },
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::resource::{XdsRequest, XdsResponse};
use crate::actors::connection::ConnectionActor;
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
    #[error("the stream's send queue is full")]
    Full,
    #[error("the stream is closed")]
    Closed,
}

/// The sending half of one ADS stream, bounded.
pub struct ResponseSink(mpsc::Sender<Result<DiscoveryResponse, Status>>);

impl ResponseSink {
    pub fn send(&self, response: XdsResponse) -> Result<(), SinkError> {
        self.0.try_send(Ok(response.into())).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => SinkError::Full,
            mpsc::error::TrySendError::Closed(_) => SinkError::Closed,
        })
    }

    /// Ends the stream with an error status (best effort: a full queue drops it and the
    /// stream just ends when the actor stops).
    pub fn close(&self, reason: CloseReason) {
        let status = match reason {
            CloseReason::InvalidArgument(m) => Status::invalid_argument(m),
            CloseReason::ResourceExhausted(m) => Status::resource_exhausted(m),
        };
        let _ = self.0.try_send(Err(status));
    }
}

impl From<XdsResponse> for DiscoveryResponse {
    fn from(r: XdsResponse) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: r.version_info,
            resources: r.resources.into_iter().map(|res| res.any).collect(),
            type_url: r.type_url.url(),
            nonce: r.nonce,
            ..Default::default()
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

pub struct AdsService {
    push_queue: Addr<PushQueue>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: AtomicUsize,
    next_id: AtomicU64,
    streams: Arc<AtomicUsize>,
    max_streams: usize,
    queue_capacity: usize,
    metrics: Metrics,
}

impl AdsService {
    pub fn new(
        push_queue: Addr<PushQueue>,
        arbiters: Vec<ArbiterHandle>,
        max_streams: usize,
        queue_capacity: usize,
        metrics: Metrics,
    ) -> AggregatedDiscoveryServiceServer<AdsService> {
        assert!(!arbiters.is_empty(), "at least one connection arbiter");
        AggregatedDiscoveryServiceServer::new(AdsService {
            push_queue,
            arbiters,
            next_arbiter: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            streams: Arc::default(),
            max_streams,
            queue_capacity,
            metrics,
        })
        .max_decoding_message_size(16 * 1024 * 1024)
        .max_encoding_message_size(usize::MAX)
    }

    fn acquire_slot(&self) -> Result<StreamSlot, Status> {
        let prev = self.streams.fetch_add(1, Ordering::AcqRel);
        let slot = StreamSlot(self.streams.clone());
        if prev >= self.max_streams {
            drop(slot);
            return Err(Status::resource_exhausted(format!(
                "axon serves at most {} ADS streams (max_streams)",
                self.max_streams
            )));
        }
        Ok(slot)
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
        let slot = self.acquire_slot()?;
        let peer = request.remote_addr();
        let incoming = request
            .into_inner()
            .map(|r| r.map(XdsRequest::from).map_err(|s| s.message().to_string()));
        let (tx, rx) = mpsc::channel(self.queue_capacity);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let arbiter =
            &self.arbiters[self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len()];
        let push_queue = self.push_queue.clone();
        let metrics = self.metrics.clone();
        tracing::debug!(id, ?peer, "ADS stream opened");
        ConnectionActor::start_in_arbiter(arbiter, move |ctx| {
            ctx.add_stream(incoming);
            ConnectionActor::new(id, ResponseSink(tx), push_queue, metrics, slot)
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented(
            "axon does not serve Delta xDS yet; use api_type GRPC (state of the world)",
        ))
    }
}
