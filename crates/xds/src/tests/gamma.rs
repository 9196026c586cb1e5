//! Sidecar routes of VirtualServices made from Gateway API routes (GAMMA), as istiod's
//! `route.go` (`buildSidecarVirtualHostsForVirtualService`, `separateVSHostsAndServices`) and
//! `SelectVirtualServices` serve them: a route applies where its service or the client is in
//! its namespace, a consumer route (the client's namespace) before the producer's, and a
//! wildcard names no service. Each against the same VirtualServices without the mark.

use envoy_types::pb::envoy::config::route::v3::VirtualHost;

use super::*;
use axon_config::config::{Config, Spec};
use axon_config::istio::RouteSemantics;
use axon_model::fixtures::{context_marked, proxy};

/// Services `web` and `api` in `prod` (port 80); a producer route `producer` (in `prod`) and
/// a consumer route `consumer` (in `client`) for `web`; a route `wild` (in `prod`) for
/// `*.prod.svc.cluster.local`.
const GAMMA: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: services, namespace: prod}
spec:
  hosts: [web.prod.svc.cluster.local, api.prod.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: producer, namespace: prod}
spec:
  hosts: [web.prod.svc.cluster.local]
  http: [{name: producer, route: [{destination: {host: web.prod.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: consumer, namespace: client}
spec:
  hosts: [web.prod.svc.cluster.local]
  http: [{name: consumer, route: [{destination: {host: web.prod.svc.cluster.local}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wild, namespace: prod}
spec:
  hosts: ["*.prod.svc.cluster.local"]
  http: [{name: wild, route: [{destination: {host: api.prod.svc.cluster.local}}]}]
"#;

fn mark(c: &mut Config) {
    if let Spec::VirtualService(vs) = &mut c.spec {
        vs.semantics = RouteSemantics::Gateway;
        vs.parents = vec![format!("HTTPRoute/{}.{}", c.key.name, c.key.namespace)];
    }
}

/// The sidecar virtual hosts of port 80 for a client in `ns`.
fn vhosts(yaml: &str, marked: bool, ns: &str) -> Vec<VirtualHost> {
    let ctx = if marked {
        context_marked(yaml, mark)
    } else {
        context(yaml)
    };
    let client = proxy("sidecar", "10.0.9.9", ns, &[]);
    let configs: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &client,
        &names(&["80"]),
    ));
    configs[0].virtual_hosts.clone()
}

/// The name of the first route of the virtual host `HOST:80`.
fn route_of(vhosts: &[VirtualHost], host: &str) -> String {
    let name = format!("{host}:80");
    let v = vhosts
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no {name} in {vhosts:?}"));
    v.routes[0].name.clone()
}

const WEB: &str = "web.prod.svc.cluster.local";
const API: &str = "api.prod.svc.cluster.local";

#[test]
fn a_consumer_route_applies_to_its_own_namespaces_clients_only() {
    // A client elsewhere: the consumer route (client ≠ prod, and `web` is in prod) does not
    // apply, the producer's does. Unmarked, the first by name (`consumer`) wins.
    assert_eq!(route_of(&vhosts(GAMMA, true, "third"), WEB), "producer");
    assert_eq!(route_of(&vhosts(GAMMA, false, "third"), WEB), "consumer");
}

#[test]
fn a_consumer_route_overrides_the_producers_in_its_namespace() {
    // Renamed so that the producer comes first by name: in `client`, the consumer route of
    // the client's namespace is taken first all the same.
    let yaml = GAMMA.replace("name: producer, namespace", "name: a-producer, namespace");
    assert_eq!(route_of(&vhosts(&yaml, true, "client"), WEB), "consumer");
    assert_eq!(route_of(&vhosts(&yaml, false, "client"), WEB), "producer");
    // In `prod`, the producer's.
    assert_eq!(route_of(&vhosts(&yaml, true, "prod"), WEB), "producer");
}

#[test]
fn a_gateway_api_wildcard_names_no_service() {
    // `api` goes straight to its cluster, and the wildcard has no virtual host of its own.
    let marked = vhosts(GAMMA, true, "third");
    assert_eq!(route_of(&marked, API), "default");
    assert!(
        marked.iter().all(|v| !v.name.starts_with('*')),
        "{marked:?}"
    );
    assert_eq!(route_of(&vhosts(GAMMA, false, "third"), API), "wild");
}

#[test]
fn a_gateway_api_routes_short_host_names_no_service_of_its_namespace() {
    // A TCP service `db` in prod and a route naming it by its short name: a user's
    // VirtualService resolves it in prod and routes `db` to `api`; a Gateway API route's
    // host is taken as it is, so names no service, and `db` goes to its own cluster.
    use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
        TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster,
    };
    let yaml = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: prod}
spec:
  hosts: [db.prod.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: prod}
spec:
  hosts: [db]
  tcp: [{route: [{destination: {host: api.prod.svc.cluster.local, port: {number: 80}}}]}]
";
    let cluster = |marked: bool| -> String {
        let ctx = if marked {
            context_marked(yaml, mark)
        } else {
            context(yaml)
        };
        let client = proxy("sidecar", "10.0.9.9", "prod", &[]);
        let listeners: Vec<Listener> = decode(&generate_for(
            ResourceType::Listener,
            &ctx,
            &client,
            &names(&[]),
        ));
        let l = listeners
            .iter()
            .find(|l| l.name == "0.0.0.0_5432")
            .unwrap_or_else(|| {
                panic!(
                    "{:?}",
                    listeners.iter().map(|l| &l.name).collect::<Vec<_>>()
                )
            });
        let Some(filter::ConfigType::TypedConfig(any)) = &l.filter_chains[0].filters[0].config_type
        else {
            panic!("{l:?}")
        };
        let p = TcpProxy::decode(any.value.as_ref()).unwrap();
        match p.cluster_specifier {
            Some(TcpCluster::Cluster(c)) => c,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(cluster(false), "outbound|80||api.prod.svc.cluster.local");
    assert_eq!(cluster(true), "outbound|5432||db.prod.svc.cluster.local");
}
