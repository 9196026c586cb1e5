//! What a proxyless gRPC client's clusters keep of a DestinationRule policy, as istiod's
//! `grpcgen` builds them (`pilot/pkg/networking/grpcgen/cds.go`): a consistent hash (RING_HASH
//! or MAGLEV) or an explicit LEAST_REQUEST, else gRPC's own round robin; a circuit breaker on
//! `http2MaxRequests` only (gRFC A32); nothing else: gRPC rejects a cluster whose load
//! balancer it does not know, and istiod sends it none of the Envoy defaults.

use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::Thresholds;
use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::cluster::v3::{CircuitBreakers, Cluster};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::{HTTP_PROTOCOL_OPTIONS, http2_options};
use crate::resource::any;
use axon_config::istio::traffic_policy::SimpleLb;
use axon_model::traffic_policy::ClusterPolicy;

/// Reduces an Envoy cluster built for `policy` to what istiod sends a gRPC client; `http2`:
/// whether the port speaks HTTP/2 (its upstream options are kept).
pub(super) fn for_grpc(cluster: &mut Cluster, policy: &ClusterPolicy, http2: bool) {
    let lb = policy.load_balancer;
    if lb.and_then(|lb| lb.consistent_hash.as_ref()).is_none() {
        cluster.lb_config = None;
        let least_request = lb.and_then(|lb| lb.simple) == Some(SimpleLb::LeastRequest);
        if cluster.lb_policy != LbPolicy::ClusterProvided as i32 {
            cluster.lb_policy = if least_request {
                LbPolicy::LeastRequest as i32
            } else {
                LbPolicy::RoundRobin as i32
            };
        }
    }
    let max_requests = policy
        .connection_pool
        .and_then(|p| p.http.as_ref())
        .and_then(|h| h.http2_max_requests)
        .filter(|n| *n > 0);
    cluster.circuit_breakers = max_requests.map(|n| CircuitBreakers {
        thresholds: vec![Thresholds {
            max_requests: Some(UInt32Value {
                value: u32::try_from(n).unwrap_or(u32::MAX),
            }),
            ..Default::default()
        }],
        ..Default::default()
    });
    cluster.outlier_detection = None;
    cluster.transport_socket = None;
    cluster.upstream_connection_options = None;
    cluster.common_lb_config = None;
    cluster.typed_extension_protocol_options.clear();
    if http2 {
        cluster
            .typed_extension_protocol_options
            .insert(HTTP_PROTOCOL_OPTIONS.to_string(), any(&http2_options()));
    }
}
