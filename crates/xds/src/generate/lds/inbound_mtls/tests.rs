//! `virtualInbound` under PeerAuthentication, chain by chain, as istiod builds it
//! (`listener_inbound_test.go`'s expectations: names, matches, TLS and inspectors).

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use prost::Message;

use crate::generate::lds;
use axon_model::proxy::Proxy;
use axon_model::sidecar_scope::SidecarScope;

/// Workload 10.0.0.5 (`app: a`, namespace foo): HTTP 8080, TCP 9000, sniffed 7000.
const WORKLOAD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: foo}
spec:
  hosts: [a.foo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 8080, name: http, protocol: HTTP}
  - {number: 9000, name: tcp, protocol: TCP}
  - {number: 7000, name: other}
  endpoints: [{address: 10.0.0.5, labels: {app: a}}]
"#;

fn pa(namespace: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n"
    )
}

fn proxy(agent: bool) -> Proxy {
    let mut p = axon_model::fixtures::proxy("sidecar", "10.0.0.5", "foo", &[("app", "a")]);
    p.istio_agent = agent;
    p
}

fn virtual_inbound(policies: &str, agent: bool) -> Listener {
    let ctx = axon_model::fixtures::context(&format!("{WORKLOAD}{policies}"));
    let proxy = proxy(agent);
    let scope = SidecarScope::compute(&ctx, &proxy);
    lds::generate(&ctx, &proxy, &scope)
        .into_iter()
        .find(|r| r.name == "virtualInbound")
        .map(|r| Listener::decode(r.value.as_ref()).unwrap())
        .expect("virtualInbound")
}

/// Each chain as `name port transport [alpns] tls?`.
fn chains(l: &Listener) -> Vec<String> {
    l.filter_chains.iter().map(describe).collect()
}

fn describe(c: &FilterChain) -> String {
    let m = c.filter_chain_match.clone().unwrap_or_default();
    format!(
        "{} {} {} [{}]{}",
        c.name,
        m.destination_port.map_or(0, |p| p.value),
        m.transport_protocol,
        m.application_protocols.join(","),
        if c.transport_socket.is_some() {
            " mtls"
        } else {
            ""
        }
    )
}

fn of_port(l: &Listener, port: u32) -> Vec<String> {
    chains(l)
        .into_iter()
        .filter(|c| c.split(' ').nth(1) == Some(&port.to_string()))
        .collect()
}

fn inspector(l: &Listener, name: &str) -> Option<String> {
    l.listener_filters
        .iter()
        .find(|f| f.name == name)
        .map(|f| format!("{:?}", f.filter_disabled))
}

#[test]
fn permissive_by_default_every_port_takes_mtls_and_plaintext() {
    let l = virtual_inbound("", true);
    assert_eq!(
        of_port(&l, 8080),
        [
            "0.0.0.0_8080 8080 tls [istio,istio-peer-exchange,istio-http/1.0,istio-http/1.1,istio-h2] mtls",
            "0.0.0.0_8080 8080 raw_buffer []",
        ]
    );
    assert_eq!(
        of_port(&l, 9000),
        [
            "0.0.0.0_9000 9000 tls [istio,istio-peer-exchange,istio-http/1.0,istio-http/1.1,istio-h2] mtls",
            "0.0.0.0_9000 9000 tls []",
            "0.0.0.0_9000 9000 raw_buffer []",
        ]
    );
    assert_eq!(
        of_port(&l, 0),
        [
            "virtualInbound-catchall-http 0 tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls",
            "virtualInbound-catchall-http 0 raw_buffer [http/1.1,h2c]",
            "virtualInbound 0 tls [istio-peer-exchange,istio] mtls",
            "virtualInbound 0 raw_buffer []",
            "virtualInbound 0 tls []",
        ]
    );
    // The TLS inspector everywhere but 15006 itself (its blackhole chain needs none, as in
    // istiod); the HTTP inspector but where no chain sniffs HTTP.
    let tls = inspector(&l, "envoy.filters.listener.tls_inspector").unwrap();
    assert!(
        tls.contains("start: 15006") && !tls.contains("OrMatch"),
        "{tls}"
    );
    let http = inspector(&l, "envoy.filters.listener.http_inspector").unwrap();
    assert!(
        http.contains("start: 8080") && http.contains("start: 9000"),
        "{http}"
    );
    assert!(!http.contains("start: 7000"), "{http}");
}

#[test]
fn the_tls_a_chain_terminates() {
    let l = virtual_inbound("", true);
    let tls = |name: &str, port: u32| {
        let chain = l
            .filter_chains
            .iter()
            .find(|c| {
                c.name == name
                    && c.transport_socket.is_some()
                    && c.filter_chain_match
                        .as_ref()
                        .unwrap()
                        .destination_port
                        .map(|p| p.value)
                        == Some(port)
            })
            .unwrap();
        let envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
            any,
        ) = chain.transport_socket.clone().unwrap().config_type.unwrap();
        DownstreamTlsContext::decode(any.value.as_ref()).unwrap()
    };
    let http = tls("0.0.0.0_8080", 8080);
    assert_eq!(http.require_client_certificate.map(|b| b.value), Some(true));
    let common = http.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, ["h2", "http/1.1"]);
    let text = format!("{common:?}");
    for want in [
        "\"default\"",
        "\"ROOTCA\"",
        "sds-grpc",
        "spiffe://cluster.local/",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    let tcp = tls("0.0.0.0_9000", 9000).common_tls_context.unwrap();
    assert_eq!(
        tcp.alpn_protocols,
        ["istio-peer-exchange", "h2", "http/1.1"]
    );
    // Inbound HTTP appends the client's identity to x-forwarded-client-cert.
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        HttpConnectionManager, http_connection_manager::ForwardClientCertDetails,
    };
    let filter = &l
        .filter_chains
        .iter()
        .find(|c| c.name == "0.0.0.0_8080")
        .unwrap()
        .filters[0];
    let Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any)) =
        filter.config_type.clone()
    else {
        panic!("{filter:?}")
    };
    let hcm = HttpConnectionManager::decode(any.value.as_ref()).unwrap();
    assert_eq!(
        hcm.forward_client_cert_details,
        ForwardClientCertDetails::AppendForward as i32
    );
    let set = hcm.set_current_client_cert_details.unwrap();
    assert!(set.uri && set.dns && set.subject.is_some_and(|s| s.value));
}

#[test]
fn strict_serves_mtls_only_and_a_port_level_disable_plaintext_only() {
    let l = virtual_inbound(
        &format!(
            "{}{}",
            pa("foo", "ns", "{mtls: {mode: STRICT}}"),
            pa(
                "foo",
                "w",
                "{selector: {matchLabels: {app: a}}, portLevelMtls: {9000: {mode: DISABLE}, 7777: {mode: DISABLE}}}"
            )
        ),
        true,
    );
    assert_eq!(of_port(&l, 8080), ["0.0.0.0_8080 8080 tls [] mtls"]);
    assert_eq!(of_port(&l, 9000), ["0.0.0.0_9000 9000 raw_buffer []"]);
    assert_eq!(
        of_port(&l, 7000),
        [
            "0.0.0.0_7000 7000 tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls",
            "0.0.0.0_7000 7000 tls [] mtls",
        ]
    );
    assert_eq!(
        of_port(&l, 0),
        [
            "virtualInbound-catchall-http 0 tls [istio-http/1.0,istio-http/1.1,istio-h2] mtls",
            "virtualInbound 0 tls [] mtls",
        ]
    );
    // 7777 is no workload port: its own passthrough chains, plaintext.
    assert_eq!(
        of_port(&l, 7777),
        [
            "virtualInbound-catchall-http 7777 raw_buffer [http/1.1,h2c]",
            "virtualInbound 7777 raw_buffer []",
        ]
    );
    // The TLS inspector is on by default, off for the plaintext-only ports.
    let tls = inspector(&l, "envoy.filters.listener.tls_inspector").unwrap();
    assert!(
        tls.contains("start: 9000") && tls.contains("start: 7777"),
        "{tls}"
    );
    assert!(!tls.contains("start: 8080"), "{tls}");
}

#[test]
fn disable_everywhere_is_plaintext_and_needs_no_tls_inspector() {
    let l = virtual_inbound(&pa("istio-system", "mesh", "{mtls: {mode: DISABLE}}"), true);
    assert!(
        chains(&l).iter().all(|c| !c.contains(" tls ")),
        "{:?}",
        chains(&l)
    );
    assert_eq!(inspector(&l, "envoy.filters.listener.tls_inspector"), None);
}

#[test]
fn without_the_agent_strict_refuses_and_the_rest_is_plaintext() {
    let strict = virtual_inbound(&pa("foo", "ns", "{mtls: {mode: STRICT}}"), false);
    let blackholed: BTreeMap<String, String> = strict
        .filter_chains
        .iter()
        .map(|c| {
            let value = match c.filters[0].config_type.clone().unwrap() {
                envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(
                    a,
                ) => a.value,
                other => panic!("{other:?}"),
            };
            (describe(c), String::from_utf8_lossy(&value).into_owned())
        })
        .collect();
    assert_eq!(
        of_port(&strict, 8080),
        ["0.0.0.0_8080 8080  []"],
        "{blackholed:?}"
    );
    assert!(
        blackholed
            .iter()
            .all(|(_, f)| f.contains("BlackHoleCluster")),
        "STRICT without certificates must refuse: {blackholed:?}"
    );
    let permissive = virtual_inbound("", false);
    assert!(chains(&permissive).iter().all(|c| !c.contains(" tls ")));
}

#[test]
fn a_sidecar_ingress_tls_is_terminated_where_the_port_is_disable() {
    // istio.io's "ingress sidecar TLS termination": STRICT for the workload, DISABLE on
    // 9080, whose ingress listener terminates the application's own TLS.
    let sidecar = "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: s, namespace: foo}\nspec:\n  workloadSelector: {labels: {app: a}}\n  ingress:\n  - port: {number: 9080, protocol: HTTPS, name: external}\n    defaultEndpoint: 0.0.0.0:80\n    tls: {mode: MUTUAL, privateKey: /etc/k.pem, serverCertificate: /etc/c.pem, caCertificates: /etc/ca.pem}\n  - port: {number: 9081, protocol: HTTP, name: internal}\n    defaultEndpoint: 0.0.0.0:80\n";
    let strict = "{selector: {matchLabels: {app: a}}, mtls: {mode: STRICT}, portLevelMtls: {9080: {mode: DISABLE}}}";
    let l = virtual_inbound(&format!("{sidecar}{}", pa("foo", "w", strict)), true);
    assert_eq!(of_port(&l, 9080), ["0.0.0.0_9080 9080 tls [] mtls"]);
    assert_eq!(of_port(&l, 9081), ["0.0.0.0_9081 9081 tls [] mtls"]);
    let tls_of = |port: u32| {
        let chain = l
            .filter_chains
            .iter()
            .find(|c| {
                c.filter_chain_match
                    .as_ref()
                    .unwrap()
                    .destination_port
                    .map(|p| p.value)
                    == Some(port)
            })
            .unwrap();
        socket_text(chain)
    };
    // 9080: the application's certificate files (over SDS, by istio-agent's names), the HTTP
    // inside it; 9081: the mesh's mTLS.
    let external = tls_of(9080);
    assert!(
        external.contains("file-cert:/etc/c.pem~/etc/k.pem"),
        "{external}"
    );
    assert!(!tls_of(9081).contains("file-cert"));
    let hcm = &l
        .filter_chains
        .iter()
        .find(|c| c.name == "0.0.0.0_9080")
        .unwrap()
        .filters[0]
        .name;
    assert_eq!(hcm, "envoy.filters.network.http_connection_manager");
    // Without the DISABLE the port keeps the mesh's mTLS; the tls is not used.
    let l = virtual_inbound(
        &format!("{sidecar}{}", pa("foo", "ns", "{mtls: {mode: STRICT}}")),
        true,
    );
    let chain = l
        .filter_chains
        .iter()
        .find(|c| c.name == "0.0.0.0_9080")
        .unwrap();
    assert!(!socket_text(chain).contains("file-cert"));
}

/// A chain's transport socket's configuration bytes, as text (for the names in it).
fn socket_text(chain: &FilterChain) -> String {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    match chain.transport_socket.clone().and_then(|t| t.config_type) {
        Some(ConfigType::TypedConfig(a)) => String::from_utf8_lossy(&a.value).into_owned(),
        None => String::new(),
    }
}
