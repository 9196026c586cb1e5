//! `tls.mode: ISTIO_MUTUAL` as istiod builds it, for the proxies that can use it: beside
//! istio's agent (the workload certificate over `sds-grpc`), or with client certificate files
//! in the node metadata (as MUTUAL); for any other proxy, no TLS.

use super::*;
use axon_model::proxy::MetadataCerts;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::CommonTlsContext;

/// `SERVICES` in the mesh (`MESH_INTERNAL`) with a service account on the endpoint, and an
/// ISTIO_MUTUAL rule (`tls` is its `tls` flow mapping).
fn clusters_for(proxy: &Proxy, tls: &str) -> std::collections::BTreeMap<String, Cluster> {
    clusters_at(proxy, tls, "MESH_INTERNAL")
}

/// [`clusters_for`] with the ServiceEntry's `location`.
fn clusters_at(
    proxy: &Proxy,
    tls: &str,
    location: &str,
) -> std::collections::BTreeMap<String, Cluster> {
    let services = SERVICES
        .replace(
            "endpoints: [{address: 10.0.0.1, labels: {version: v1}}]",
            "endpoints: [{address: 10.0.0.1, labels: {version: v1}, serviceAccount: shop-sa}]",
        )
        .replace(
            "  resolution: STATIC\n",
            &format!("  resolution: STATIC\n  location: {location}\n"),
        );
    let yaml = format!(
        "{services}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n  host: shop.example.com\n  trafficPolicy: {{tls: {tls}}}\n  subsets: [{{name: v1, labels: {{version: v1}}}}]\n"
    );
    let ctx = context(&yaml);
    let scope = SidecarScope::compute(&ctx, proxy);
    generate(&ctx, proxy, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect()
}

fn gateway() -> Proxy {
    proxy("router", "10.1.0.1", "shop", &[("istio", "ingressgateway")])
}

#[allow(deprecated)]
fn sans(common: &CommonTlsContext) -> Vec<String> {
    let Some(ValidationContextType::CombinedValidationContext(v)) = &common.validation_context_type
    else {
        panic!("no combined validation context: {common:?}")
    };
    v.default_validation_context
        .as_ref()
        .unwrap()
        .match_subject_alt_names
        .iter()
        .map(|m| format!("{:?}", m.match_pattern))
        .collect()
}

#[test]
fn beside_the_agent_the_workload_certificate_over_sds_grpc() {
    let mut gw = gateway();
    gw.istio_agent = true;
    let cs = clusters_for(&gw, "{mode: ISTIO_MUTUAL}");
    let tls = tls_context(&cs[PLAIN]);
    assert_eq!(tls.sni, "outbound_.80_._.shop.example.com");
    let common = tls.common_tls_context.clone().unwrap();
    assert_eq!(common.alpn_protocols, ["istio-peer-exchange", "istio"]);
    let cert = &common.tls_certificate_sds_secret_configs[0];
    assert_eq!(cert.name, "default");
    let source = format!("{:?}", cert.sds_config);
    assert!(source.contains("sds-grpc"), "{source}");
    assert!(
        sans(&common)[0].contains("spiffe://cluster.local/ns/shop/sa/shop-sa"),
        "the endpoint's service account: {:?}",
        sans(&common)
    );
    let Some(ValidationContextType::CombinedValidationContext(v)) = &common.validation_context_type
    else {
        panic!()
    };
    assert_eq!(
        v.validation_context_sds_secret_config
            .as_ref()
            .unwrap()
            .name,
        "ROOTCA"
    );
    // A subset's SNI names it; an HTTP/2 port adds h2; the rule's SNI and SANs win.
    let sub = tls_context(&cs["outbound|80|v1|shop.example.com"]);
    assert_eq!(sub.sni, "outbound_.80_.v1_.shop.example.com");
    let grpc = tls_context(&cs["outbound|81||shop.example.com"]);
    assert_eq!(
        grpc.common_tls_context.unwrap().alpn_protocols,
        ["istio-peer-exchange", "istio", "h2"]
    );
    let cs = clusters_for(
        &gw,
        "{mode: ISTIO_MUTUAL, sni: mine.example.com, subjectAltNames: [spiffe://x/ns/y/sa/z]}",
    );
    let tls = tls_context(&cs[PLAIN]);
    assert_eq!(tls.sni, "mine.example.com");
    let got = sans(tls.common_tls_context.as_ref().unwrap());
    assert!(
        got.len() == 1 && got[0].contains("spiffe://x/ns/y/sa/z"),
        "{got:?}"
    );
}

#[test]
fn with_metadata_certificates_it_is_mutual_with_those_files() {
    let mut gw = gateway();
    gw.client_certs = Some(MetadataCerts {
        cert_chain: "/certs/chain.pem".into(),
        key: "/certs/key.pem".into(),
        root_cert: "/certs/root.pem".into(),
    });
    for mode in [
        "{mode: ISTIO_MUTUAL, sni: s.example.com}",
        "{mode: MUTUAL, clientCertificate: /other.pem, privateKey: /other.key, sni: s.example.com}",
    ] {
        let cs = clusters_for(&gw, mode);
        let tls = tls_context(&cs[PLAIN]);
        assert_eq!(tls.sni, "s.example.com", "{mode}");
        let common = tls.common_tls_context.unwrap();
        assert_eq!(
            common.tls_certificate_sds_secret_configs[0].name,
            "file-cert:/certs/chain.pem~/certs/key.pem",
            "{mode}"
        );
        let Some(ValidationContextType::CombinedValidationContext(v)) =
            &common.validation_context_type
        else {
            panic!("{mode}")
        };
        assert_eq!(
            v.validation_context_sds_secret_config
                .as_ref()
                .unwrap()
                .name,
            "file-root:/certs/root.pem"
        );
    }
    // SIMPLE keeps the rule's own settings.
    let cs = clusters_for(&gw, "{mode: SIMPLE, sni: s.example.com}");
    let common = tls_context(&cs[PLAIN]).common_tls_context.unwrap();
    assert!(common.tls_certificate_sds_secret_configs.is_empty());
}

/// istiod's `PREFER_DESTINATIONRULE_TLS_FOR_EXTERNAL_SERVICES` (on by default): to a
/// MESH_EXTERNAL service the rule's own settings win over the metadata certificates.
#[test]
fn to_a_mesh_external_service_the_rules_certificates_win_over_the_metadata_ones() {
    let mut gw = gateway();
    gw.client_certs = Some(MetadataCerts {
        cert_chain: "/certs/chain.pem".into(),
        key: "/certs/key.pem".into(),
        root_cert: "/certs/root.pem".into(),
    });
    let mutual = "{mode: MUTUAL, clientCertificate: /other.pem, privateKey: /other.key, caCertificates: /other-ca.pem}";
    let cs = clusters_at(&gw, mutual, "MESH_EXTERNAL");
    let common = tls_context(&cs[PLAIN]).common_tls_context.unwrap();
    assert_eq!(
        common.tls_certificate_sds_secret_configs[0].name,
        "file-cert:/other.pem~/other.key"
    );
    let Some(ValidationContextType::CombinedValidationContext(v)) = &common.validation_context_type
    else {
        panic!("{common:?}")
    };
    assert_eq!(
        v.validation_context_sds_secret_config
            .as_ref()
            .unwrap()
            .name,
        "file-root:/other-ca.pem"
    );
    // ISTIO_MUTUAL stays ISTIO_MUTUAL: without the agent, no TLS (not the metadata files).
    let cs = clusters_at(&gw, "{mode: ISTIO_MUTUAL}", "MESH_EXTERNAL");
    assert!(cs[PLAIN].transport_socket.is_none());
    // No `location` is MESH_EXTERNAL, the API's default.
    let cs = clusters_at(&gw, mutual, "MESH_EXTERNAL")
        .remove(PLAIN)
        .unwrap();
    let default = context(&format!(
        "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n  host: shop.example.com\n  trafficPolicy: {{tls: {mutual}}}\n"
    ));
    let scope = SidecarScope::compute(&default, &gw);
    let plain = generate(&default, &gw, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .find(|c| c.name == PLAIN)
        .unwrap();
    assert_eq!(plain.transport_socket, cs.transport_socket);
}

#[test]
fn any_other_proxy_sends_no_tls() {
    let cs = clusters_for(&gateway(), "{mode: ISTIO_MUTUAL}");
    assert!(cs[PLAIN].transport_socket.is_none());
}
