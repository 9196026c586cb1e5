//! The sidecar TCP listeners against the Envoy protos: per-port listeners with `tcp_proxy`,
//! `tcp` routes by port and weight, TLS chains by SNI, conflicts, and the fall-through.

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use prost::Message;

use axon_model::fixtures::{context, proxy};
use axon_model::sidecar_scope::SidecarScope;

const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: a}
spec:
  hosts: [db.a.svc.cluster.local]
  resolution: STATIC
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}, {address: 10.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: other-db, namespace: a}
spec:
  hosts: [other-db.a.svc.cluster.local]
  resolution: STATIC
  ports: [{number: 5432, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: a}
spec:
  hosts: [api.example.com, web.example.com]
  resolution: DNS
  ports: [{number: 443, name: tls, protocol: TLS}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: a}
spec:
  hosts: [web.a.svc.cluster.local]
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.4}]
"#;

const TCP_ROUTE: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: a}
spec:
  hosts: [db]
  tcp:
  - match: [{port: 5432, sourceLabels: {app: batch}}]
    route: [{destination: {host: db, subset: v2}}]
  - match: [{port: 5432}]
    route:
    - {destination: {host: db, subset: v1}, weight: 80}
    - {destination: {host: db, subset: v2}, weight: 20}
"#;

fn listeners(yaml: &str, labels: &[(&str, &str)]) -> Vec<Listener> {
    let ctx = context(yaml);
    let p = proxy("sidecar", "10.1.0.1", "a", labels);
    let scope = SidecarScope::of(&ctx, &p);
    super::super::generate(&ctx, &p, &scope)
        .iter()
        .map(|r| Listener::decode(r.value.as_ref()).unwrap())
        .collect()
}

fn named<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter().find(|l| l.name == name).unwrap_or_else(|| {
        panic!(
            "no {name} in {:?}",
            ls.iter().map(|l| &l.name).collect::<Vec<_>>()
        )
    })
}

fn tcp_proxy_of(filters: &[envoy_types::pb::envoy::config::listener::v3::Filter]) -> TcpProxy {
    let f = filters
        .iter()
        .find(|f| f.name == "envoy.filters.network.tcp_proxy")
        .expect("a tcp_proxy");
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any)) =
        &f.config_type
    else {
        panic!("typed config")
    };
    TcpProxy::decode(any.value.as_slice()).unwrap()
}

fn cluster(p: &TcpProxy) -> String {
    match &p.cluster_specifier {
        Some(ClusterSpecifier::Cluster(c)) => c.clone(),
        Some(ClusterSpecifier::WeightedClusters(w)) => w
            .clusters
            .iter()
            .map(|c| format!("{}={}", c.name, c.weight))
            .collect::<Vec<_>>()
            .join(","),
        None => String::new(),
    }
}

#[test]
fn a_tcp_port_gets_a_listener_whose_first_service_wins() {
    let ls = listeners(SERVICES, &[]);
    let db = named(&ls, "0.0.0.0_5432");
    assert_eq!(db.bind_to_port.map(|b| b.value), Some(false));
    assert!(db.listener_filters.is_empty());
    // db and other-db both match every connection: the first by host wins (istiod's
    // TCP-over-TCP conflict), and there is no fall-through chain.
    assert_eq!(db.filter_chains.len(), 1);
    assert!(db.default_filter_chain.is_none());
    let proxy = tcp_proxy_of(&db.filter_chains[0].filters);
    assert_eq!(cluster(&proxy), "outbound|5432||db.a.svc.cluster.local");
    assert_eq!(proxy.stat_prefix, "outbound|5432||db.a.svc.cluster.local");
    // The HTTP port keeps its HTTP listener.
    assert!(ls.iter().any(|l| l.name == "0.0.0.0_80"));
}

#[test]
fn tcp_routes_by_port_and_source_labels_with_weights() {
    let yaml = format!("{SERVICES}---{TCP_ROUTE}");
    let ls = listeners(&yaml, &[]);
    let proxy = tcp_proxy_of(&named(&ls, "0.0.0.0_5432").filter_chains[0].filters);
    assert_eq!(
        cluster(&proxy),
        "outbound|5432|v1|db.a.svc.cluster.local=80,outbound|5432|v2|db.a.svc.cluster.local=20"
    );
    assert_eq!(proxy.stat_prefix, "db.a");
    // A proxy labelled app=batch takes the first route.
    let ls = listeners(&yaml, &[("app", "batch")]);
    let proxy = tcp_proxy_of(&named(&ls, "0.0.0.0_5432").filter_chains[0].filters);
    assert_eq!(cluster(&proxy), "outbound|5432|v2|db.a.svc.cluster.local");
    // A route matching another port is not taken.
    let yaml = format!(
        "{SERVICES}---{}",
        TCP_ROUTE.replace("port: 5432", "port: 1")
    );
    let ls = listeners(&yaml, &[]);
    let proxy = tcp_proxy_of(&named(&ls, "0.0.0.0_5432").filter_chains[0].filters);
    assert_eq!(cluster(&proxy), "outbound|5432||db.a.svc.cluster.local");
}

#[test]
fn tls_ports_get_chains_by_sni_and_fall_through() {
    let ls = listeners(SERVICES, &[]);
    let tls = named(&ls, "0.0.0.0_443");
    assert_eq!(
        tls.listener_filters
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["envoy.filters.listener.tls_inspector"]
    );
    // One service with two hosts: a chain per host, by SNI (the listener is on the wildcard).
    let sni: Vec<Vec<String>> = tls
        .filter_chains
        .iter()
        .map(|c| c.filter_chain_match.clone().unwrap().server_names)
        .collect();
    assert_eq!(sni, [["api.example.com"], ["web.example.com"]]);
    let fallthrough = tls.default_filter_chain.as_ref().expect("a fall-through");
    assert_eq!(fallthrough.name, "PassthroughFilterChain");
    assert_eq!(
        cluster(&tcp_proxy_of(&fallthrough.filters)),
        "PassthroughCluster"
    );

    // A `tls` route by SNI host replaces the service's own chain.
    let route = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: a}
spec:
  hosts: [api.example.com]
  tls:
  - match: [{port: 443, sniHosts: [api.example.com]}]
    route: [{destination: {host: db.a.svc.cluster.local, port: {number: 5432}}}]
"#;
    let ls = listeners(&format!("{SERVICES}---{route}"), &[]);
    let tls = named(&ls, "0.0.0.0_443");
    let api = tls
        .filter_chains
        .iter()
        .find(|c| c.filter_chain_match.as_ref().unwrap().server_names == ["api.example.com"])
        .unwrap();
    assert_eq!(
        cluster(&tcp_proxy_of(&api.filters)),
        "outbound|5432||db.a.svc.cluster.local"
    );
}

#[test]
fn registry_only_falls_through_to_the_black_hole_and_egress_proxy_replaces_passthrough() {
    let sidecar = |policy: &str| {
        format!(
            "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec:\n  outboundTrafficPolicy: {policy}\n"
        )
    };
    let fall = |ls: &[Listener], name: &str| {
        let l = named(ls, name);
        let chain = l.default_filter_chain.as_ref().unwrap_or_else(|| {
            l.filter_chains
                .iter()
                .find(|c| c.filter_chain_match.is_none())
                .unwrap()
        });
        cluster(&tcp_proxy_of(&chain.filters))
    };
    let ls = listeners(&sidecar("{mode: REGISTRY_ONLY}"), &[]);
    assert_eq!(fall(&ls, "0.0.0.0_443"), "BlackHoleCluster");
    assert_eq!(fall(&ls, "virtualOutbound"), "BlackHoleCluster");
    let ls = listeners(
        &sidecar("{mode: ALLOW_ANY, egressProxy: {host: egress.example.com, port: {number: 443}}}"),
        &[],
    );
    assert_eq!(fall(&ls, "0.0.0.0_443"), "outbound|443||egress.example.com");
    assert_eq!(
        fall(&ls, "virtualOutbound"),
        "outbound|443||egress.example.com"
    );
}

#[test]
fn an_egress_listener_declared_tcp_is_a_bound_tcp_listener() {
    let sidecar = |port: u32| {
        format!(
            "
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  egress:
  - port: {{number: {port}, protocol: TCP, name: db}}
    captureMode: NONE
    hosts: [./db.a.svc.cluster.local]
"
        )
    };
    let ls = listeners(
        &format!("{SERVICES}---{TCP_ROUTE}---{}", sidecar(5432)),
        &[],
    );
    let l = named(&ls, "127.0.0.1_5432");
    assert_eq!(l.bind_to_port, None);
    // The routes match port 5432: the 80/20 split.
    assert_eq!(
        cluster(&tcp_proxy_of(&l.filter_chains[0].filters)),
        "outbound|5432|v1|db.a.svc.cluster.local=80,outbound|5432|v2|db.a.svc.cluster.local=20"
    );
    // A port the service does not have: istiod's egress listener takes no service there
    // (`serviceMatchingListenerPort`), so there is no listener.
    let ls = listeners(
        &format!("{SERVICES}---{TCP_ROUTE}---{}", sidecar(15432)),
        &[],
    );
    assert!(ls.iter().all(|l| !l.name.ends_with("_15432")));
}

#[test]
fn chains_sharing_an_sni_host_conflict() {
    use super::ChainOpts;
    let chain = |hosts: &[&str]| ChainOpts {
        sni_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        destination_subnets: Vec::new(),
        filters: Vec::new(),
    };
    assert!(chain(&["a.example.org"]).conflicts_with(&chain(&["b.example.org", "a.example.org"])));
    assert!(!chain(&["a.example.org"]).conflicts_with(&chain(&["c.example.org"])));
    assert!(chain(&[]).conflicts_with(&chain(&["*"])));
    assert!(!chain(&["c.example.org"]).conflicts_with(&chain(&[])));
}
