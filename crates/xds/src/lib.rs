//! axon-xds: Envoy's side of axon. The only place that knows Envoy's protos (`envoy_types`).
//!
//! - [`generate`](mod@generate): pure generators, `PushContext` + `Proxy` in, resources out: CDS, EDS,
//!   LDS, RDS, SDS, and what proxyless gRPC clients get, one per type behind
//!   [`generate::generate`], memoized per scope by [`generate::generate_shared`].
//! - [`protocol`]: the per-stream protocol state machine (SotW and Delta), over its
//!   subscriptions (istiod's `ShouldRespond`, per type), with the name sets streams share.
//! - [`resource`], [`wire`], [`decode`]: type URLs and encoded resources, responses framed by
//!   hand, requests decoded.
//! - [`node`]: Envoy `Node` → `axon_model::proxy::NodeInfo`.
//! - [`debug`]: istioctl's debug types over xDS (syncz, config_dump), Envoy's admin
//!   `ConfigDump` of a stream and its proto3 JSON; [`csds`]: streams' sync state as CSDS
//!   `ClientConfig`s (syncz's answer); [`impact`]: what a push of a new context would send a
//!   proxy, by the stream state machine itself (`axon impact`).
//!
//! Pure: no actix, tokio or tonic; it knows only `axon-model` and `axon-config`.

pub mod csds;
pub mod debug;
pub mod decode;
pub mod generate;
pub mod impact;
pub mod node;
pub mod protocol;
pub mod resource;
pub mod wire;

#[cfg(test)]
mod tests;

pub use generate::{NamesDigest, generate, generate_shared, generate_shared_digest, names_digest};
pub use resource::{
    DeltaRequest, DeltaResponse, Request, Resource, ResourceNames, ResourceSet, ResourceType,
    Response, XdsRequest, XdsResponse,
};

/// Protocols served through an HTTP connection manager.
pub fn is_http(protocol: &str) -> bool {
    axon_model::service::is_http_protocol(protocol)
}

/// A readable rendering of an encoded resource (its decoded protobuf, debug-formatted).
pub fn describe(resource: &Resource) -> String {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use prost::Message;
    let bytes = resource.value.as_ref();
    let decoded = match ResourceType::parse(&resource.type_url) {
        Some(ResourceType::Cluster) => Cluster::decode(bytes).map(|m| format!("{m:?}")),
        Some(ResourceType::Endpoint) => {
            ClusterLoadAssignment::decode(bytes).map(|m| format!("{m:?}"))
        }
        Some(ResourceType::Listener) => Listener::decode(bytes).map(|m| format!("{m:?}")),
        Some(ResourceType::Route) => RouteConfiguration::decode(bytes).map(|m| format!("{m:?}")),
        // Never the bytes of a Secret: its inline data is shown as its size.
        Some(ResourceType::Secret) => {
            envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret::decode(bytes)
                .map(|m| format!("{:?}", generate::sds::redacted(m)))
        }
        None => return format!("{} bytes of {}", bytes.len(), resource.type_url),
    };
    decoded.unwrap_or_else(|e| format!("undecodable: {e}"))
}
