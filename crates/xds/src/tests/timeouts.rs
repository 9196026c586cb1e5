//! istiod's route timeouts: a VirtualService `timeout` is `max_grpc_timeout` for Envoy and
//! `max_stream_duration` for a proxyless gRPC client (`setTimeout`); the default outbound
//! and `allow_any` routes have none (`max_grpc_timeout` 0); the inbound route has no timeout,
//! an unbounded stream duration, and the default inbound retries but on gRPC ports.

use envoy_types::pb::envoy::config::route::v3::{Route, RouteAction};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};

use super::*;

const TIMED: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-timed, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - timeout: 2s
    route: [{destination: {host: reviews}}]
"#;

fn action(route: &Route) -> &RouteAction {
    match &route.action {
        Some(Action::Route(a)) => a,
        other => panic!("not a route action: {other:?}"),
    }
}

fn seconds(d: Option<envoy_types::pb::google::protobuf::Duration>) -> Option<i64> {
    d.map(|d| d.seconds)
}

#[test]
#[allow(deprecated)]
fn a_timeout_bounds_the_grpc_stream_for_envoy_and_for_proxyless_clients() {
    let ctx = context(&format!("{MESH}---{TIMED}"));
    // An Envoy sidecar: `max_grpc_timeout` follows the timeout.
    let envoy = axon_model::fixtures::proxy("sidecar", "10.9.0.1", "web", &[]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &envoy,
        &names(&["9080"]),
    ));
    let vhost = |rc: &RouteConfiguration, name: &str| {
        rc.virtual_hosts
            .iter()
            .find(|v| v.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let reviews = vhost(&routes[0], "reviews.shop.svc.cluster.local:9080");
    let a = action(&reviews.routes[0]);
    assert_eq!(seconds(a.timeout), Some(2));
    assert_eq!(seconds(a.max_grpc_timeout), Some(2));
    assert!(a.max_stream_duration.is_none());
    // Without a VirtualService, and for unknown hosts: no timeout, `grpc-timeout` unbounded.
    for name in ["ratings.shop.svc.cluster.local:9080", "allow_any"] {
        let a = action(&vhost(&routes[0], name).routes[0]).clone();
        assert_eq!(
            (seconds(a.timeout), seconds(a.max_grpc_timeout)),
            (Some(0), Some(0)),
            "{name}"
        );
    }

    // A proxyless gRPC client: `max_stream_duration` instead.
    let mut grpc = axon_model::fixtures::proxy("sidecar", "10.9.0.2", "web", &[]);
    grpc.generator = Some("grpc".into());
    let target = "reviews.shop.svc.cluster.local:9080";
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &grpc,
        &names(&[target]),
    ));
    let a = action(&routes[0].virtual_hosts[0].routes[0]);
    assert_eq!(seconds(a.timeout), Some(2));
    assert!(a.max_grpc_timeout.is_none());
    assert_eq!(
        a.max_stream_duration
            .as_ref()
            .and_then(|m| seconds(m.max_stream_duration)),
        Some(2)
    );
}

/// The inbound route of `virtualInbound`'s chain for `port`.
fn inbound_route(listeners: &[Listener], port: u32) -> RouteConfiguration {
    let inbound = listeners
        .iter()
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound");
    let chain = inbound
        .filter_chains
        .iter()
        .find(|c| c.name == format!("0.0.0.0_{port}"))
        .expect("a chain for the port");
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any)) =
        &chain.filters[0].config_type
    else {
        panic!("no typed config")
    };
    let hcm = HttpConnectionManager::decode(any.value.as_slice()).expect("an HCM");
    match hcm.route_specifier {
        Some(RouteSpecifier::RouteConfig(rc)) => rc,
        other => panic!("no inline routes: {other:?}"),
    }
}

#[test]
fn the_inbound_route_has_no_timeout_and_retries_but_on_grpc_ports() {
    const GRPC_WORKLOAD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 7070, name: grpc, protocol: GRPC}]
  endpoints: [{address: 10.0.0.1}]
"#;
    let ctx = context(&format!("{MESH}---{GRPC_WORKLOAD}"));
    // 10.0.0.1 is a reviews endpoint (HTTP, target port 9081) and an echo one (GRPC, 7070).
    let proxy = axon_model::fixtures::proxy("sidecar", "10.0.0.1", "shop", &[]);
    let listeners: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &proxy,
        &names(&[]),
    ));
    let http = inbound_route(&listeners, 9081);
    let route = &http.virtual_hosts[0].routes[0];
    assert_eq!(route.name, "default");
    let a = action(route);
    assert_eq!(seconds(a.timeout), Some(0), "not Envoy's 15 s");
    let msd = a.max_stream_duration.expect("a max stream duration");
    assert_eq!(
        (
            seconds(msd.max_stream_duration),
            seconds(msd.grpc_timeout_header_max)
        ),
        (Some(0), Some(0))
    );
    let retry = a.retry_policy.clone().expect("the inbound retries");
    assert_eq!(retry.retry_on, "reset-before-request");
    assert_eq!(retry.num_retries.map(|n| n.value), Some(2));
    let grpc = inbound_route(&listeners, 7070);
    assert!(
        action(&grpc.virtual_hosts[0].routes[0])
            .retry_policy
            .is_none()
    );
}

#[test]
fn the_idle_timeout_of_the_node_metadata_is_its_connection_managers() {
    let ctx = context(MESH);
    let hcm_idle = |idle: Option<&str>| -> Vec<Option<i64>> {
        let proxy = Proxy::from_node(NodeInfo {
            id: "router~10.1.1.1~gw-1.istio-system~istio-system.svc.cluster.local".into(),
            labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
            idle_timeout: idle.map(str::to_string),
            ..Default::default()
        })
        .unwrap();
        let listeners: Vec<Listener> = decode(&generate_for(
            ResourceType::Listener,
            &ctx,
            &proxy,
            &names(&[]),
        ));
        listeners
            .iter()
            .flat_map(|l| &l.filter_chains)
            .flat_map(|c| &c.filters)
            .filter_map(|f| match &f.config_type {
                Some(
                    envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(
                        any,
                    ),
                ) => HttpConnectionManager::decode(any.value.as_slice()).ok(),
                _ => None,
            })
            .map(|hcm| {
                hcm.common_http_protocol_options
                    .and_then(|o| o.idle_timeout)
                    .map(|d| d.seconds)
            })
            .collect()
    };
    assert_eq!(hcm_idle(Some("90s")), [Some(90)]);
    assert_eq!(hcm_idle(Some("1h")), [Some(3600)]);
    assert_eq!(hcm_idle(None), [None]);
    // As istiod: one that does not parse is none.
    assert_eq!(hcm_idle(Some("banana")), [None]);
}
