//! End-to-end: a DestinationRule `tls.mode: ISTIO_MUTUAL`, through real gateway Envoys to an
//! upstream that requires a client certificate of the test's CA (certificates made by the
//! test with openssl). A proxy whose node metadata names client certificate files
//! (`TLS_CLIENT_CERT_CHAIN`, `TLS_CLIENT_KEY`, `TLS_CLIENT_ROOT_CERT`) uses them, as istiod's
//! `metadataCerts`: the upstream sees the client certificate and the rule's SNI, and answers.
//! A proxy with neither those files nor istio's agent sends plaintext, which the upstream
//! refuses. A proxy of istio's agent (`ISTIO_VERSION`) gets istiod's context, the workload
//! certificate over the agent's `sds-grpc` cluster, and accepts it. No update is rejected.

use crate::support;
use crate::support::pki;
use crate::support::scenario;
use crate::support::tls_upstream;

use std::time::Duration;

use pki::Pki;
use scenario::*;
use support::*;
use tls_upstream::*;

const CONVERGE: Duration = Duration::from_secs(30);
const HOST: &str = "backend.example.com";
const CLUSTER: &str = "outbound|443||backend.example.com";

/// ServiceEntry `backend` on `port` (HTTP inside the TLS, service account `backend`), its
/// ISTIO_MUTUAL rule, and a gateway route for `backend.test` to it without retries.
fn mesh(port: u16) -> String {
    documents(&[
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: backend, namespace: demo}}\nspec:\n  hosts: [{HOST}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 443, name: http, protocol: HTTP}}]\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {port}}}, serviceAccount: backend}}]\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: backend, namespace: demo}}\nspec:\n  host: {HOST}\n  trafficPolicy:\n    tls: {{mode: ISTIO_MUTUAL, sni: {HOST}, subjectAltNames: [spiffe://cluster.local/ns/demo/sa/backend]}}\n"
        ),
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: backend, namespace: demo}\nspec:\n  hosts: [backend.test]\n  gateways: [istio-system/ingress]\n  http:\n  - retries: {attempts: 0}\n    route: [{destination: {host: backend.example.com, port: {number: 443}}}]\n".to_string(),
    ])
}

/// The gateway Envoy with `options`, listening on `gw_port`, once `CLUSTER` is in.
fn gateway(axon: &Axon, config: &ConfigDir, gw_port: u16, options: EnvoyOptions) -> (Envoy, u16) {
    let (envoy, port) =
        start_gateway_listening_with(axon, config, gw_port, axon.xds_addr(), &options, CONVERGE);
    let ok = wait_until(CONVERGE, || {
        envoy.config_dump().to_string().contains(CLUSTER)
    });
    assert!(ok, "{CLUSTER} never arrived:\n{}", describe_envoy(&envoy));
    (envoy, port)
}

fn get(gw_port: u16) -> HttpResponse {
    http_request(
        Envoy::local(gw_port),
        "GET",
        "/",
        &[("host", "backend.test")],
        Duration::from_secs(10),
    )
}

#[test]
fn istio_mutual_with_metadata_certificates_plaintext_without_and_the_agents_sds() {
    let pki = Pki::new();
    pki.issue("server", "URI:spiffe://cluster.local/ns/demo/sa/backend");
    pki.issue(
        "client",
        "URI:spiffe://cluster.local/ns/istio-system/sa/gateway",
    );
    let upstream = TlsEchoUpstream::start(
        "mtls",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        Some(&pki.path("ca.crt")),
    );
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", &mesh(upstream.port()));
    let axon = Axon::start(config.path());

    // Metadata certificates: MUTUAL with them; the upstream sees the certificate and SNI.
    let mut options = gateway_options();
    options.extra_metadata = vec![
        (
            "TLS_CLIENT_CERT_CHAIN".into(),
            pki.file("client.crt").into(),
        ),
        ("TLS_CLIENT_KEY".into(), pki.file("client.key").into()),
        ("TLS_CLIENT_ROOT_CERT".into(), pki.file("ca.crt").into()),
    ];
    let (envoy, port) = gateway(&axon, &config, gw_port, options);
    wait_for_answer(
        "ISTIO_MUTUAL with metadata certificates",
        CONVERGE,
        "mtls",
        &envoy,
        || {
            let r = get(port);
            (r.status, r.body)
        },
    );
    let seen = upstream.handshakes();
    assert!(
        seen.iter()
            .all(|h| h.client_certificate && h.sni.as_deref() == Some(HOST)),
        "{seen:?}"
    );
    assert_no_rejected_updates(&envoy);
    drop(envoy);

    // Neither certificates nor an agent: plaintext, refused by the upstream.
    let (envoy, port) = gateway(&axon, &config, gw_port, gateway_options());
    let cluster = dynamic_cluster(&envoy.config_dump(), CLUSTER).unwrap_or_default();
    assert!(
        cluster.get("transport_socket").is_none(),
        "TLS without a certificate: {cluster}"
    );
    let before = upstream.handshakes().len();
    let r = get(port);
    assert_ne!(r.status, 200, "{r:?}");
    assert_eq!(
        upstream.handshakes().len(),
        before,
        "a handshake without TLS?"
    );
    assert_no_rejected_updates(&envoy);
    drop(envoy);

    // A proxy of istio's agent: istiod's context, over the agent's `sds-grpc` (here a
    // cluster to a port nobody listens on), accepted by Envoy.
    let mut options = gateway_options();
    options.extra_metadata = vec![("ISTIO_VERSION".into(), "1.28.0".into())];
    options.static_clusters.push(serde_json::json!({
        "name": "sds-grpc",
        "type": "STATIC",
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}}
            }
        },
        "load_assignment": {
            "cluster_name": "sds-grpc",
            "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                "socket_address": {"address": "127.0.0.1", "port_value": free_port()}
            }}}]}]
        }
    }));
    let envoy = Envoy::start(axon.xds_addr(), options);
    let ok = wait_until(CONVERGE, || {
        let dump = envoy.config_dump().to_string();
        dump.contains(CLUSTER) && dump.contains("sds-grpc") && dump.contains("istio-peer-exchange")
    });
    assert!(ok, "no ISTIO_MUTUAL cluster:\n{}", describe_envoy(&envoy));
    assert_no_rejected_updates(&envoy);
}
