//! A cluster's upstream PROXY protocol, as istiod's `applyUpstreamProxyProtocol` sets it
//! (`cluster_traffic_policy.go`): the cluster's transport socket (plaintext, or the TLS one
//! `tls` set) wrapped in Envoy's `upstream_proxy_protocol` socket with the policy's version.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    ProxyProtocolConfig, TransportSocket, proxy_protocol_config::Version,
    transport_socket::ConfigType,
};
use envoy_types::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;

use crate::resource::any;
use axon_config::istio::traffic_policy::{ProxyProtocol, ProxyProtocolVersion};

/// Envoy's name of the PROXY protocol transport socket.
const PROXY_SOCKET: &str = "envoy.transport_sockets.upstream_proxy_protocol";

/// Wraps `cluster`'s transport socket for `proxy_protocol` (none: unchanged).
pub(super) fn apply(cluster: &mut Cluster, proxy_protocol: Option<&ProxyProtocol>) {
    let Some(pp) = proxy_protocol else { return };
    let inner = cluster
        .transport_socket
        .take()
        .unwrap_or_else(|| TransportSocket {
            name: "envoy.transport_sockets.raw_buffer".to_string(),
            config_type: Some(ConfigType::TypedConfig(any(&RawBuffer {}))),
        });
    let version = match pp.version {
        ProxyProtocolVersion::V1 => Version::V1,
        ProxyProtocolVersion::V2 => Version::V2,
    };
    let wrapper = ProxyProtocolUpstreamTransport {
        config: Some(ProxyProtocolConfig {
            version: version as i32,
            ..Default::default()
        }),
        transport_socket: Some(inner),
        ..Default::default()
    };
    cluster.transport_socket = Some(TransportSocket {
        name: PROXY_SOCKET.to_string(),
        config_type: Some(ConfigType::TypedConfig(any(&wrapper))),
    });
}
