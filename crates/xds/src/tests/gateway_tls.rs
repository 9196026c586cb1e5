//! Gateway TLS and L4 servers: listeners (filter chains by SNI, TLS contexts, tcp_proxy to
//! weighted clusters) and the route configurations of HTTPS servers and `httpsRedirect`.

use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpCluster,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use prost::Message;

use super::*;

const MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [a.example.com]
    tls: {httpsRedirect: true}
  - port: {number: 443, name: https-a, protocol: HTTPS}
    hosts: [a.example.com]
    tls: {mode: SIMPLE, credentialName: a-cert}
  - port: {number: 443, name: https-b, protocol: HTTPS}
    hosts: [b.example.com]
    tls: {mode: MUTUAL, serverCertificate: /b.crt, privateKey: /b.key, caCertificates: /ca.crt}
  - port: {number: 8443, name: pass, protocol: TLS}
    hosts: ["*.example.org"]
    tls: {mode: PASSTHROUGH}
  - port: {number: 9000, name: tcp, protocol: TCP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: echo, namespace: shop}
spec:
  hosts: [echo.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9000, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}, {address: 10.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [a.example.com, b.example.com]
  gateways: [istio-system/edge]
  http: [{route: [{destination: {host: echo.shop.svc.cluster.local, port: {number: 9000}}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: l4, namespace: shop}
spec:
  hosts: ["*"]
  gateways: [istio-system/edge]
  tcp:
  - match: [{port: 9000}]
    route:
    - {destination: {host: echo.shop.svc.cluster.local, subset: v1}, weight: 80}
    - {destination: {host: echo.shop.svc.cluster.local, subset: v2}, weight: 20}
  tls:
  - match: [{port: 8443, sniHosts: [x.example.org]}]
    route: [{destination: {host: echo.shop.svc.cluster.local}}]
  - match: [{port: 8443, sniHosts: [y.example.org]}]
    route: [{destination: {host: echo.shop.svc.cluster.local, port: {number: 9000}, subset: v2}}]
"#;

/// `yaml` with a valid TLS Secret of istio-system (the gateway proxy's namespace) for each
/// of `names`: a terminating server whose credential is missing gets no filter chain.
fn with_secrets(yaml: &str, names: &[&str]) -> String {
    let (cert, key) = axon_config::fixtures::self_signed("gateway", 2);
    let data = serde_json::json!({"tls.crt": cert, "tls.key": key, "ca.crt": cert});
    let mut out = yaml.to_string();
    for name in names {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: istio-system}}\nstringData: {data}\n"
        ));
    }
    out
}

fn listeners() -> Vec<Listener> {
    let ctx = context(&with_secrets(MESH, &["a-cert"]));
    decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ))
}

fn typed<M: Message + Default>(config: &Option<filter::ConfigType>) -> M {
    let Some(filter::ConfigType::TypedConfig(any)) = config else {
        panic!("no typed config")
    };
    M::decode(any.value.as_ref()).unwrap()
}

#[test]
fn https_servers_are_filter_chains_by_sni_each_with_its_routes_and_certificate() {
    let all = listeners();
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        ["0.0.0.0_80", "0.0.0.0_443", "0.0.0.0_8443", "0.0.0.0_9000"]
    );
    let https = &all[1];
    assert_eq!(
        https.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
    assert_eq!(https.filter_chains.len(), 2);
    for (chain, (sni, route, cert)) in https.filter_chains.iter().zip([
        (
            "a.example.com",
            "https.443.https-a.edge.istio-system",
            "kubernetes://a-cert",
        ),
        (
            "b.example.com",
            "https.443.https-b.edge.istio-system",
            "file-cert:/b.crt~/b.key",
        ),
    ]) {
        assert_eq!(
            chain.filter_chain_match.as_ref().unwrap().server_names,
            [sni]
        );
        let hcm: HttpConnectionManager = typed(&chain.filters[0].config_type);
        let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier else {
            panic!()
        };
        assert_eq!(rds.route_config_name, route);
        let socket = chain.transport_socket.as_ref().unwrap();
        let Some(
            envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
                any,
            ),
        ) = &socket.config_type
        else {
            panic!()
        };
        let tls = DownstreamTlsContext::decode(any.value.as_ref()).unwrap();
        let common = tls.common_tls_context.unwrap();
        assert_eq!(common.tls_certificate_sds_secret_configs[0].name, cert);
    }
}

#[test]
fn tcp_routes_are_weighted_clusters_and_tls_routes_chains_by_sni() {
    let all = listeners();
    let tcp = &all[3];
    assert!(tcp.listener_filters.is_empty());
    let proxy: TcpProxy = typed(&tcp.filter_chains[0].filters[0].config_type);
    assert_eq!(proxy.stat_prefix, "l4.shop");
    let Some(TcpCluster::WeightedClusters(w)) = proxy.cluster_specifier else {
        panic!()
    };
    let clusters: Vec<(&str, u32)> = w
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.weight))
        .collect();
    assert_eq!(
        clusters,
        [
            ("outbound|9000|v1|echo.shop.svc.cluster.local", 80),
            ("outbound|9000|v2|echo.shop.svc.cluster.local", 20)
        ]
    );
    let pass = &all[2];
    assert_eq!(
        pass.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
    let chains: Vec<(Vec<String>, String)> = pass
        .filter_chains
        .iter()
        .map(|c| {
            assert!(
                c.transport_socket.is_none(),
                "passthrough terminates nothing"
            );
            let p: TcpProxy = typed(&c.filters[0].config_type);
            let Some(TcpCluster::Cluster(cluster)) = p.cluster_specifier else {
                panic!()
            };
            (c.filter_chain_match.clone().unwrap().server_names, cluster)
        })
        .collect();
    assert_eq!(
        chains,
        [
            (
                vec!["x.example.org".to_string()],
                "outbound|9000||echo.shop.svc.cluster.local".to_string()
            ),
            (
                vec!["y.example.org".to_string()],
                "outbound|9000|v2|echo.shop.svc.cluster.local".to_string()
            ),
        ]
    );
}

#[test]
fn https_routes_and_the_redirect_of_the_plaintext_server() {
    let ctx = context(MESH);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[
            "http.80",
            "https.443.https-a.edge.istio-system",
            "https.443.https-b.edge.istio-system",
        ]),
    ));
    let http = &routes[0];
    assert_eq!(http.virtual_hosts.len(), 1);
    assert_eq!(http.virtual_hosts[0].domains, ["a.example.com"]);
    assert_eq!(http.virtual_hosts[0].require_tls, 2, "ALL: 301 to https");
    let a = &routes[1];
    assert_eq!(a.virtual_hosts[0].domains, ["a.example.com"]);
    assert_eq!(a.virtual_hosts[0].require_tls, 0);
    assert_eq!(a.virtual_hosts[0].routes.len(), 1);
    let b = &routes[2];
    assert_eq!(b.virtual_hosts[0].domains, ["b.example.com"]);
}

#[test]
fn a_tls_server_terminates_before_its_tcp_route_and_grpc_web_gets_its_filter() {
    let yaml = MESH.replace(
        "  - port: {number: 9000, name: tcp, protocol: TCP}\n    hosts: [\"*\"]\n",
        "  - port: {number: 9000, name: tls-term, protocol: TLS}\n    hosts: [t.example.com]\n    tls: {mode: SIMPLE, credentialName: t}\n  - port: {number: 8081, name: grpc-web, protocol: GRPC-WEB}\n    hosts: [\"*\"]\n",
    );
    let ctx = context(&with_secrets(&yaml, &["a-cert", "t"]));
    let all: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ));
    let tls = all.iter().find(|l| l.name == "0.0.0.0_9000").unwrap();
    let chain = &tls.filter_chains[0];
    assert_eq!(
        chain.filter_chain_match.as_ref().unwrap().server_names,
        ["t.example.com"]
    );
    assert!(chain.transport_socket.is_some(), "TLS terminated");
    let proxy: TcpProxy = typed(&chain.filters[0].config_type);
    assert!(matches!(
        proxy.cluster_specifier,
        Some(TcpCluster::WeightedClusters(_))
    ));
    let web = all.iter().find(|l| l.name == "0.0.0.0_8081").unwrap();
    let hcm: HttpConnectionManager = typed(&web.filter_chains[0].filters[0].config_type);
    assert_eq!(hcm.http_filters[0].name, "envoy.filters.http.grpc_web");
    let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier else {
        panic!()
    };
    assert_eq!(rds.route_config_name, "http.8081");
}

#[test]
fn a_server_whose_credential_is_missing_gets_no_filter_chain() {
    // No Secret a-cert in the gateway's namespace: only the file-backed server of 443 stays.
    let ctx = context(MESH);
    let all: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ));
    let https = all.iter().find(|l| l.name == "0.0.0.0_443").unwrap();
    let sni: Vec<&Vec<String>> = https
        .filter_chains
        .iter()
        .map(|c| &c.filter_chain_match.as_ref().unwrap().server_names)
        .collect();
    assert_eq!(sni, [&vec!["b.example.com".to_string()]]);
}

/// A terminating TLS server on 9443 and a VirtualService `tls-route` with only a `tls` block
/// for it, marked with `parents`; the listeners of the gateway.
fn terminated_tls_route(parents: &[&str]) -> Vec<Listener> {
    let yaml = MESH.replace(
        "  - port: {number: 9000, name: tcp, protocol: TCP}\n    hosts: [\"*\"]\n",
        "  - port: {number: 9443, name: tls-term, protocol: TLS}\n    hosts: [t.example.com]\n    tls: {mode: SIMPLE, credentialName: t}\n",
    ) + "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: tls-route, namespace: shop}\nspec:\n  hosts: [t.example.com]\n  gateways: [istio-system/edge]\n  tls:\n  - match: [{sniHosts: [t.example.com]}]\n    route: [{destination: {host: echo.shop.svc.cluster.local, port: {number: 9000}}}]\n";
    let parents: Vec<String> = parents.iter().map(|p| p.to_string()).collect();
    let ctx = axon_model::fixtures::context_marked(&with_secrets(&yaml, &["a-cert", "t"]), |c| {
        if let axon_config::config::Spec::VirtualService(vs) = &mut c.spec
            && c.key.name == "tls-route"
        {
            vs.semantics = axon_config::istio::RouteSemantics::Gateway;
            vs.parents = parents.clone();
        }
    });
    decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &gateway_proxy(&[("istio", "ingressgateway")]),
        &names(&[]),
    ))
}

#[test]
fn a_tls_routes_tls_blocks_are_tcp_routes_on_a_terminating_server() {
    let all = terminated_tls_route(&["TLSRoute/tls-route.shop"]);
    let tls = all
        .iter()
        .find(|l| l.name == "0.0.0.0_9443")
        .expect("a listener for the terminating server");
    let chain = &tls.filter_chains[0];
    assert!(chain.transport_socket.is_some(), "TLS terminated");
    let proxy: TcpProxy = typed(&chain.filters[0].config_type);
    assert_eq!(
        proxy.cluster_specifier,
        Some(TcpCluster::Cluster(
            "outbound|9000||echo.shop.svc.cluster.local".into()
        ))
    );
    // Not from a TLSRoute (a user's, or another route kind's): no `tcp` route, no listener.
    for parents in [&[][..], &["HTTPRoute/tls-route.shop"][..]] {
        let all = terminated_tls_route(parents);
        assert!(all.iter().all(|l| l.name != "0.0.0.0_9443"), "{parents:?}");
    }
}
