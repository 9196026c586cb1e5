//! The pieces of pilot-agent's Envoy bootstrap (`tools/packaging/common/envoy_bootstrap.json`)
//! that make Envoy talk to its agent: the static cluster `sds-grpc` (HTTP/2 over the agent's
//! Unix socket), and a listener whose TLS names the secrets `default` and `ROOTCA` through
//! it, as the bootstrap's secure-metrics listener does, so that Envoy loads them before any
//! xDS resource asks for them.

use std::path::Path;

use serde_json::{Value, json};

use super::{ROOT_SECRET, WORKLOAD_SECRET};

/// The name of the agent's cluster in the bootstrap.
pub const SDS_CLUSTER: &str = "sds-grpc";

/// The static cluster `sds-grpc` to the agent's socket at `socket`.
pub fn sds_cluster(socket: &Path) -> Value {
    json!({
        "name": SDS_CLUSTER,
        "alt_stat_name": "sds-grpc;",
        "type": "STATIC",
        "connect_timeout": "1s",
        "lb_policy": "ROUND_ROBIN",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        },
        "load_assignment": {
            "cluster_name": SDS_CLUSTER,
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "pipe": {"path": socket.display().to_string()}
            }}}]}]
        }
    })
}

/// An SDS source through `sds-grpc`, as the bootstrap's listeners name it.
fn sds_config() -> Value {
    json!({
        "api_config_source": {
            "api_type": "GRPC",
            "grpc_services": [{"envoy_grpc": {"cluster_name": SDS_CLUSTER}}],
            "set_node_on_first_message_only": true,
            "transport_api_version": "V3"
        },
        "resource_api_version": "V3"
    })
}

/// A listener `name` on `address`:`port` (port 0: any) serving mutual TLS with the
/// agent's `default` and `ROOTCA` (pilot-agent's secure-metrics listener, answering 200
/// with a direct response instead of Envoy's stats).
pub fn sds_listener(name: &str, address: &str, port: u16) -> Value {
    json!({
        "name": name,
        "address": {"socket_address": {"protocol": "TCP", "address": address, "port_value": port}},
        "filter_chains": [{
            "transport_socket": {
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
                    "require_client_certificate": true,
                    "common_tls_context": {
                        "tls_certificate_sds_secret_configs": [
                            {"name": WORKLOAD_SECRET, "sds_config": sds_config()}
                        ],
                        "combined_validation_context": {
                            "default_validation_context": {},
                            "validation_context_sds_secret_config": {
                                "name": ROOT_SECRET,
                                "sds_config": sds_config()
                            }
                        }
                    }
                }
            },
            "filters": [{
                "name": "envoy.filters.network.http_connection_manager",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "stat_prefix": name,
                    "route_config": {"virtual_hosts": [{
                        "name": "agent",
                        "domains": ["*"],
                        "routes": [{"match": {"prefix": "/"}, "direct_response": {"status": 200, "body": {"inline_string": "ok\n"}}}]
                    }]},
                    "http_filters": [{
                        "name": "envoy.filters.http.router",
                        "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                    }]
                }
            }]
        }]
    })
}
