//! Auto mTLS (MeshConfig `enableAutoMtls`, istiod's default), as istiod decides it
//! (`cluster_tls.go` `buildUpstreamTLSSettings` and `applyUpstreamTLSSettings`,
//! `push_context.go` `BestEffortInferServiceMTLSMode`): a cluster whose DestinationRule sets
//! no `tls` calls the destination with ISTIO_MUTUAL unless the service is MESH_EXTERNAL, its
//! namespace's PeerAuthentication (or the mesh's) is DISABLE, or, for a passthrough service,
//! some endpoint's workload runs without istio's agent (none at all counts as that).
//!
//! The TLS is chosen per endpoint (`transport_socket_matches`): `tlsMode-istio` for the
//! endpoints whose metadata says `tlsMode: istio` (their workload's label
//! `security.istio.io/tlsMode`, carried by EDS), plaintext (`tlsMode-disabled`) for the rest.
//! An original-destination cluster has no endpoints to match: it keeps the TLS for all.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster::TransportSocketMatch};
use envoy_types::pb::envoy::config::core::v3::{TransportSocket, transport_socket::ConfigType};
use envoy_types::pb::envoy::extensions::transport_sockets::raw_buffer::v3::RawBuffer;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};

use crate::resource::any;
use axon_model::peer_authn::MtlsMode;
use axon_model::push_context::PushContext;
use axon_model::service::{Service, TLS_MODE_DISABLED, TLS_MODE_ISTIO};

/// istiod's `BestEffortInferServiceMTLSMode` and the conditions of `buildUpstreamTLSSettings`:
/// whether the cluster of `service:port` (`passthrough`: an original-destination service or
/// a PASSTHROUGH load balancer) is called with auto mTLS.
pub(super) fn applies(ctx: &PushContext, service: &Service, port: u32, passthrough: bool) -> bool {
    if !ctx.mesh.enable_auto_mtls || service.mesh_external {
        return false;
    }
    if passthrough {
        let endpoints = ctx.endpoints(&service.hostname, port);
        if endpoints.is_empty() || endpoints.iter().any(|e| e.tls_mode() == TLS_MODE_DISABLED) {
            return false;
        }
    }
    ctx.peer_authn
        .namespace_mode(&service.namespace)
        .unwrap_or(MtlsMode::Permissive)
        != MtlsMode::Disable
}

/// Moves the cluster's TLS into istiod's transport socket matches (not for an
/// original-destination cluster, whose TLS stays for every connection).
pub(super) fn match_endpoints(cluster: &mut Cluster, original_dst: bool) {
    if original_dst {
        return;
    }
    let Some(tls) = cluster.transport_socket.take() else {
        return;
    };
    let tls_mode = Struct {
        fields: [(
            "tlsMode".to_string(),
            Value {
                kind: Some(Kind::StringValue(TLS_MODE_ISTIO.to_string())),
            },
        )]
        .into(),
    };
    cluster.transport_socket_matches = vec![
        TransportSocketMatch {
            name: format!("tlsMode-{TLS_MODE_ISTIO}"),
            r#match: Some(tls_mode),
            transport_socket: Some(tls),
        },
        TransportSocketMatch {
            name: format!("tlsMode-{TLS_MODE_DISABLED}"),
            r#match: Some(Struct::default()),
            transport_socket: Some(TransportSocket {
                name: "envoy.transport_sockets.raw_buffer".to_string(),
                config_type: Some(ConfigType::TypedConfig(any(&RawBuffer::default()))),
            }),
        },
    ];
}
