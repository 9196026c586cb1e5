//! A change's blast radius, before it merges (`axon impact`): what a push of a new context
//! would send one proxy, decided by the very state machine a stream runs. A [`StreamState`]
//! is connected with the proxy's node, given the old context and subscribed as Envoy
//! subscribes (CDS and LDS wildcard, EDS for the EDS clusters it got, RDS for the route
//! configurations its listeners name, SDS for the secrets over ADS their TLS contexts
//! name), every response ACKed; then it is pushed the new
//! context with the request the server would build. What it answers is what the server would
//! send: ProxyNeedsPush, the only-changed-types rule (a type whose set is unchanged is not
//! sent), EDS skipped for kinds that cannot change it, the changed configs it reports as
//! affecting the proxy.

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster::DiscoveryType};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use prost::{Message, Name};

use crate::protocol::stream::{Event, Output, Protocol, StreamState};
use crate::resource::{Request, ResourceType, Response, XdsRequest};
use axon_config::config::ConfigKey;
use axon_model::proxy::NodeInfo;
use axon_model::push_context::PushContext;
use axon_model::push_request::PushRequest;

/// What a push would do to one proxy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Impact {
    /// The changed configs the push carries to it (its scope depends on them, before or
    /// after): those `/debug/distribution` would list it under.
    pub configs: Vec<ConfigKey>,
    /// The types it would be sent, in push order.
    pub types: Vec<ResourceType>,
}

/// Why a proxy cannot be simulated.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ImpactError {
    #[error("the node is refused: {0}")]
    Node(String),
}

/// What pushing `new` (built from `old` for `request`) would do to the proxy of `node`.
pub fn impact(
    old: &Arc<PushContext>,
    new: &Arc<PushContext>,
    request: &PushRequest,
    node: NodeInfo,
) -> Result<Impact, ImpactError> {
    let mut stream = StreamState::new(Protocol::Sotw, Arc::default());
    let first = request_of(ResourceType::Cluster, Vec::new(), Some(node));
    stream
        .connect(&first)
        .map_err(|e| ImpactError::Node(format!("{e:?}")))?;
    stream.on_request(first);
    let mut pending = stream.on_context(old.clone()).responses;
    // Subscribe as Envoy does, ACKing every response, until nothing new is asked.
    let mut asked = BTreeSet::from([ResourceType::Cluster]);
    let mut secrets: BTreeSet<String> = BTreeSet::new();
    for _ in 0..8 {
        let mut next = Vec::new();
        let secrets_before = secrets.len();
        for response in std::mem::take(&mut pending) {
            let Response::Sotw(r) = response else {
                continue;
            };
            let Some(type_url) = ResourceType::parse(&r.type_url) else {
                continue;
            };
            let names = stream.subscribed(type_url).cloned().unwrap_or_default();
            let ack = Request::Sotw(XdsRequest {
                type_url: r.type_url.clone(),
                version_info: r.version_info.clone(),
                response_nonce: r.nonce.clone(),
                resource_names: names.iter().map(String::as_str).collect(),
                ..Default::default()
            });
            next.extend(stream.on_request(ack).responses);
            if matches!(type_url, ResourceType::Cluster | ResourceType::Listener) {
                secrets.extend(sds_names(type_url, &r.resources));
            }
            let follow = match type_url {
                ResourceType::Cluster => Some((ResourceType::Endpoint, eds_names(&r.resources))),
                ResourceType::Listener => Some((ResourceType::Route, rds_names(&r.resources))),
                _ => None,
            };
            if let Some((then, names)) = follow
                && !names.is_empty()
            {
                asked.insert(then);
                next.extend(stream.on_request(request_of(then, names, None)).responses);
            }
            if type_url == ResourceType::Cluster && asked.insert(ResourceType::Listener) {
                let lds = request_of(ResourceType::Listener, Vec::new(), None);
                next.extend(stream.on_request(lds).responses);
            }
        }
        if secrets.len() > secrets_before {
            let names = secrets.iter().cloned().collect();
            let sds = request_of(ResourceType::Secret, names, None);
            next.extend(stream.on_request(sds).responses);
        }
        if next.is_empty() {
            break;
        }
        pending = next;
    }
    let out = stream.on_push(new.clone(), request);
    Ok(summarize(&out))
}

fn summarize(out: &Output) -> Impact {
    let mut impact = Impact::default();
    for event in &out.events {
        if let Event::Affected { keys, .. } = event {
            impact.configs.extend(keys.iter().cloned());
        }
    }
    for response in &out.responses {
        let url = match response {
            Response::Sotw(r) => &r.type_url,
            Response::Delta(r) => &r.type_url,
        };
        if let Some(t) = ResourceType::parse(url)
            && !impact.types.contains(&t)
        {
            impact.types.push(t);
        }
    }
    impact
}

fn request_of(type_url: ResourceType, names: Vec<String>, node: Option<NodeInfo>) -> Request {
    Request::Sotw(XdsRequest {
        type_url: type_url.url(),
        resource_names: names.iter().map(String::as_str).collect(),
        node,
        ..Default::default()
    })
}

/// The EDS clusters of a CDS answer: the names Envoy then asks EDS for.
fn eds_names(resources: &[crate::resource::Resource]) -> Vec<String> {
    resources
        .iter()
        .filter_map(|r| Cluster::decode(r.value.as_ref()).ok())
        .filter(|c| {
            matches!(
                c.cluster_discovery_type,
                Some(envoy_types::pb::envoy::config::cluster::v3::cluster::ClusterDiscoveryType::Type(t))
                    if t == DiscoveryType::Eds as i32
            )
        })
        .map(|c| match c.eds_cluster_config {
            Some(eds) if !eds.service_name.is_empty() => eds.service_name,
            _ => c.name,
        })
        .collect()
}

/// The secrets served over ADS that clusters' (upstream) and listeners' (downstream) TLS
/// contexts name: what Envoy asks SDS for (the agent's `default` and `ROOTCA`, on
/// `sds-grpc`, are not axon's).
fn sds_names(type_url: ResourceType, resources: &[crate::resource::Resource]) -> Vec<String> {
    use envoy_types::pb::envoy::config::core::v3::TransportSocket;
    use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier;
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
        CommonTlsContext, DownstreamTlsContext, SdsSecretConfig, UpstreamTlsContext,
        common_tls_context::ValidationContextType,
    };
    fn ads(config: &SdsSecretConfig) -> Option<String> {
        matches!(
            config.sds_config.as_ref()?.config_source_specifier,
            Some(ConfigSourceSpecifier::Ads(_))
        )
        .then(|| config.name.clone())
    }
    fn names(common: &CommonTlsContext, out: &mut Vec<String>) {
        out.extend(
            common
                .tls_certificate_sds_secret_configs
                .iter()
                .filter_map(ads),
        );
        match &common.validation_context_type {
            Some(ValidationContextType::ValidationContextSdsSecretConfig(c)) => out.extend(ads(c)),
            Some(ValidationContextType::CombinedValidationContext(c)) => out.extend(
                c.validation_context_sds_secret_config
                    .as_ref()
                    .and_then(ads),
            ),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut socket = |s: &TransportSocket| {
        let Some(ConfigType::TypedConfig(any)) = &s.config_type else {
            return;
        };
        let common = if any.type_url == UpstreamTlsContext::type_url() {
            UpstreamTlsContext::decode(any.value.as_slice())
                .ok()
                .and_then(|t| t.common_tls_context)
        } else if any.type_url == DownstreamTlsContext::type_url() {
            DownstreamTlsContext::decode(any.value.as_slice())
                .ok()
                .and_then(|t| t.common_tls_context)
        } else {
            None
        };
        if let Some(common) = common {
            names(&common, &mut out);
        }
    };
    for r in resources {
        match type_url {
            ResourceType::Cluster => {
                let Ok(c) = Cluster::decode(r.value.as_ref()) else {
                    continue;
                };
                c.transport_socket.iter().for_each(&mut socket);
                c.transport_socket_matches
                    .iter()
                    .filter_map(|m| m.transport_socket.as_ref())
                    .for_each(&mut socket);
            }
            ResourceType::Listener => {
                let Ok(l) = Listener::decode(r.value.as_ref()) else {
                    continue;
                };
                l.filter_chains
                    .iter()
                    .chain(l.default_filter_chain.iter())
                    .filter_map(|c| c.transport_socket.as_ref())
                    .for_each(&mut socket);
            }
            _ => {}
        }
    }
    out
}

/// The route configurations an LDS answer's connection managers name (RDS).
fn rds_names(resources: &[crate::resource::Resource]) -> Vec<String> {
    let mut names = BTreeSet::new();
    for listener in resources
        .iter()
        .filter_map(|r| Listener::decode(r.value.as_ref()).ok())
    {
        let chains = listener
            .filter_chains
            .iter()
            .chain(listener.default_filter_chain.iter());
        for filter in chains.flat_map(|c| c.filters.iter()) {
            let Some(
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any),
            ) = &filter.config_type
            else {
                continue;
            };
            if any.type_url != HttpConnectionManager::type_url() {
                continue;
            }
            if let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice())
                && let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier
            {
                names.insert(rds.route_config_name);
            }
        }
    }
    names.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::config::ConfigKind;
    use axon_model::fixtures::configs;
    use axon_model::push_request::TriggerReason;
    use std::time::Instant;

    const GATEWAY: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: istio-system}\nspec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: [\"*\"]}]\n---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: shop}\nspec:\n  hosts: [a.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]\n";

    fn route(prefix: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: a, namespace: shop}}\nspec:\n  hosts: [\"*\"]\n  gateways: [istio-system/gw]\n  http: [{{match: [{{uri: {{prefix: {prefix}}}}}], route: [{{destination: {{host: a.shop.svc.cluster.local}}}}]}}]\n"
        )
    }

    fn contexts(before: &str, after: &str) -> (Arc<PushContext>, Arc<PushContext>, PushRequest) {
        let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
        let old = Arc::new(PushContext::build(
            None,
            &configs(before),
            &full,
            &Arc::default(),
        ));
        let (changed, endpoints_only) =
            axon_config::config_set::compare(&configs(before), &configs(after));
        let request = if endpoints_only {
            PushRequest::endpoint_change(changed, Instant::now())
        } else {
            PushRequest::config_change(changed, Instant::now())
        };
        let new = Arc::new(PushContext::build(
            Some(&old),
            &configs(after),
            &request,
            &old.mesh,
        ));
        (old, new, request)
    }

    fn gateway_node() -> NodeInfo {
        NodeInfo {
            id: "router~10.0.0.9~gw-1.istio-system~istio-system.svc.cluster.local".into(),
            namespace: Some("istio-system".into()),
            labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_route_edit_sends_the_gateway_its_routes_alone() {
        let (old, new, request) = contexts(
            &(GATEWAY.to_string() + &route("/a")),
            &(GATEWAY.to_string() + &route("/b")),
        );
        let impact = impact(&old, &new, &request, gateway_node()).unwrap();
        assert_eq!(impact.types, [ResourceType::Route]);
        assert_eq!(
            impact.configs,
            [ConfigKey::new(ConfigKind::VirtualService, "shop", "a")]
        );
    }

    #[test]
    fn an_unrelated_change_sends_nothing() {
        let before = GATEWAY.to_string() + &route("/a");
        let other = "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: elsewhere}\nspec:\n  egress: [{hosts: [\"./*\"]}]\n";
        let (old, new, request) = contexts(&before, &(before.clone() + other));
        assert_eq!(
            impact(&old, &new, &request, gateway_node()).unwrap(),
            Impact::default()
        );
    }

    /// The gateway serving HTTPS with the Secret `istio-system/cert` (made with subject `cn`).
    fn tls_gateway(cn: &str) -> String {
        let (cert, key) = axon_config::fixtures::self_signed(cn, 2);
        let data = serde_json::json!({"tls.crt": cert, "tls.key": key});
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: istio-system}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers: [{{port: {{number: 8443, name: https, protocol: HTTPS}}, hosts: [\"*\"], tls: {{mode: SIMPLE, credentialName: cert}}}}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: istio-system}}\nstringData: {data}\n"
        )
    }

    #[test]
    fn a_rotated_certificate_sends_the_gateway_its_secret_alone() {
        let (old, new, request) = contexts(&tls_gateway("one"), &tls_gateway("two"));
        let impact = impact(&old, &new, &request, gateway_node()).unwrap();
        assert_eq!(impact.types, [ResourceType::Secret]);
        assert_eq!(
            impact.configs,
            [ConfigKey::new(ConfigKind::Secret, "istio-system", "cert")]
        );
    }

    #[test]
    fn a_node_that_is_no_proxy_is_an_error() {
        let (old, new, request) = contexts(GATEWAY, GATEWAY);
        let node = NodeInfo {
            id: "not-an-istio-id".into(),
            ..Default::default()
        };
        assert!(impact(&old, &new, &request, node).is_err());
    }
}
