//! End-to-end: upstream TLS from a DestinationRule, as istiod translates `tls` with
//! certificates from files, through a real gateway Envoy to HTTPS upstreams that record each
//! handshake ([`TlsEchoUpstream`]; certificates made by the test with openssl). `SIMPLE`: the
//! upstream sees TLS and the rule's `sni`; a `subjectAltNames` the upstream's certificate
//! does not have fails the request. `MUTUAL`: the upstream that requires a client
//! certificate gets the rule's and answers; `SIMPLE` to it (no client certificate) fails.
//! A rule with a `workloadSelector` gives its TLS to the gateway it selects (over Delta ADS,
//! its CA secret over Delta SDS) and not to another, which sends plaintext. No update is
//! rejected.

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

/// ServiceEntry `name` (host `name.example.com`, port 443, HTTP inside the TLS) with one endpoint on
/// `port`, a DestinationRule with `tls` (a flow mapping), and a gateway route for the host
/// `name.test` to it.
fn backend(name: &str, port: u16, tls: &str) -> String {
    let host = format!("{name}.example.com");
    documents(&[
        service_entry_yaml(name, "demo", &host, http_port(443), &[(port, None)]),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: demo}}\nspec:\n  host: {host}\n  trafficPolicy:\n    tls: {tls}\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: demo}}\nspec:\n  hosts: [{name}.test]\n  gateways: [istio-system/ingress]\n  http:\n  - retries: {{attempts: 0}}\n    route: [{{destination: {{host: {host}, port: {{number: 443}}}}}}]\n"
        ),
    ])
}

#[test]
fn simple_and_mutual_tls_to_the_upstream() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    pki.issue("client", "URI:spiffe://cluster.local/ns/demo/sa/gateway");
    let (cert, key, ca) = (
        pki.path("server.crt"),
        pki.path("server.key"),
        pki.path("ca.crt"),
    );
    let https = TlsEchoUpstream::start("https", &cert, &key, None);
    let mtls = TlsEchoUpstream::start("mtls", &cert, &key, Some(&ca));
    let ca = pki.file("ca.crt");
    let (client_cert, client_key) = (pki.file("client.crt"), pki.file("client.key"));

    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write(
        "mesh.yaml",
        &documents(&[
            backend(
                "simple",
                https.port(),
                &format!(
                    "{{mode: SIMPLE, caCertificates: {ca}, sni: server.example.com, subjectAltNames: [server.example.com]}}"
                ),
            ),
            backend(
                "wrong-san",
                https.port(),
                &format!(
                    "{{mode: SIMPLE, caCertificates: {ca}, sni: server.example.com, subjectAltNames: [other.example.com]}}"
                ),
            ),
            backend(
                "mutual",
                mtls.port(),
                &format!(
                    "{{mode: MUTUAL, caCertificates: {ca}, clientCertificate: {client_cert}, privateKey: {client_key}, sni: mutual.example.com}}"
                ),
            ),
            backend(
                "no-client-cert",
                mtls.port(),
                &format!("{{mode: SIMPLE, caCertificates: {ca}, sni: server.example.com}}"),
            ),
        ]),
    );
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let get = |host: &str| {
        http_request(
            Envoy::local(gw_port),
            "GET",
            "/",
            &[("host", host)],
            Duration::from_secs(10),
        )
    };

    // SIMPLE: TLS with the rule's SNI, the certificate checked against the CA and the SAN.
    wait_for_answer("simple", CONVERGE, "https", &envoy, || {
        let r = get("simple.test");
        (r.status, r.body)
    });
    let seen = https.handshakes();
    assert!(
        seen.iter()
            .all(|h| h.sni.as_deref() == Some("server.example.com") && !h.client_certificate),
        "{seen:?}"
    );

    // A SAN the certificate does not have: the request fails, Envoy counts the SAN failure.
    let wrong = get("wrong-san.test");
    assert_eq!(wrong.status, 503, "{wrong:?}");
    let san_failures = "cluster.outbound|443||wrong-san.example.com.ssl.fail_verify_san";
    assert!(
        wait_until(CONVERGE, || stat(&envoy, san_failures) >= 1),
        "{}",
        describe_envoy(&envoy)
    );

    // MUTUAL: the upstream that requires a client certificate gets one and answers.
    wait_for_answer("mutual", CONVERGE, "mtls", &envoy, || {
        let r = get("mutual.test");
        (r.status, r.body)
    });
    let seen = mtls.handshakes();
    assert!(
        seen.iter()
            .any(|h| h.sni.as_deref() == Some("mutual.example.com") && h.client_certificate),
        "{seen:?}"
    );
    // Without the client certificate the same upstream refuses the handshake.
    let refused = get("no-client-cert.test");
    assert_eq!(refused.status, 503, "{refused:?}");
    let attempts = "cluster.outbound|443||no-client-cert.example.com.upstream_cx_total";
    assert!(stat(&envoy, attempts) >= 1, "{}", describe_envoy(&envoy));
    assert!(
        mtls.handshakes().iter().all(|h| h.client_certificate),
        "a handshake without a client certificate completed"
    );
    assert_no_rejected_updates(&envoy);
}

/// A Gateway `name` in istio-system on `port` for the proxies labelled `istio: SELECTOR`.
fn gateway_named(name: &str, selector: &str, port: u16) -> String {
    gateway_yaml(port)
        .replace("name: ingress\n", &format!("name: {name}\n"))
        .replace("istio: ingressgateway", &format!("istio: {selector}"))
}

#[test]
fn a_rule_with_a_workload_selector_applies_to_the_selected_proxies_only() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    let https = TlsEchoUpstream::start(
        "https",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        None,
    );
    let ca = pki.file("ca.crt");
    let config = ConfigDir::new();
    let (plain_port, canary_port) = (free_port(), free_port());
    config.write(
        "gateways.yaml",
        &documents(&[
            gateway_named("plain", "plain-gateway", plain_port),
            gateway_named("canary", "canary-gateway", canary_port),
        ]),
    );
    let host = "selected.example.com";
    config.write(
        "mesh.yaml",
        &documents(&[
            service_entry_yaml("selected", "demo", host, http_port(443), &[(https.port(), None)]),
            format!(
                "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: canary-tls, namespace: istio-system}}\nspec:\n  host: {host}\n  workloadSelector: {{matchLabels: {{istio: canary-gateway}}}}\n  trafficPolicy:\n    tls: {{mode: SIMPLE, caCertificates: {ca}, sni: server.example.com}}\n"
            ),
            format!(
                "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: selected, namespace: demo}}\nspec:\n  hosts: ['*']\n  gateways: [istio-system/plain, istio-system/canary]\n  http:\n  - retries: {{attempts: 0}}\n    route: [{{destination: {{host: {host}, port: {{number: 443}}}}}}]\n"
            ),
        ]),
    );
    let axon = Axon::start(config.path());
    let options = |id: &str, selector: &str| {
        EnvoyOptions::gateway(id, &[("istio", selector)], "istio-system")
    };
    // The selected one over Delta ADS: its CA secret comes over Delta SDS.
    let canary = Envoy::start(
        axon.xds_addr(),
        options(
            "router~10.0.0.21~canary-1.istio-system~istio-system.svc.cluster.local",
            "canary-gateway",
        )
        .delta(),
    );
    let plain = Envoy::start(
        axon.xds_addr(),
        options(
            "router~10.0.0.22~plain-1.istio-system~istio-system.svc.cluster.local",
            "plain-gateway",
        ),
    );
    let get = |port: u16| {
        http_request(
            Envoy::local(port),
            "GET",
            "/",
            &[("host", "any.test")],
            Duration::from_secs(10),
        )
    };
    // The selected gateway talks TLS to the upstream.
    wait_for_answer("the selected gateway", CONVERGE, "https", &canary, || {
        let r = get(canary_port);
        (r.status, r.body)
    });
    // The other has no rule for the host: plaintext, which the HTTPS upstream does not
    // answer; its cluster has no transport socket.
    let cluster = format!("outbound|443||{host}");
    let ok = wait_until(CONVERGE, || {
        let dump = plain.config_dump();
        dynamic_cluster_names(&dump).contains(&cluster)
    });
    assert!(ok, "{}", describe_envoy(&plain));
    let plain_answer = get(plain_port);
    assert_ne!(plain_answer.status, 200, "{plain_answer:?}");
    let ours = dynamic_cluster(&plain.config_dump(), &cluster).expect("the cluster");
    assert!(
        ours.get("transport_socket").is_none(),
        "the plain gateway got the rule's TLS: {ours}"
    );
    assert_no_rejected_updates(&canary);
    assert_no_rejected_updates(&plain);
}

/// ServiceEntry `name` (host `name.example.com`, port 443) at `location` with one endpoint
/// on `port`, a MUTUAL rule with the given client certificate, and a route for `name.test`.
fn located_backend(name: &str, location: &str, port: u16, tls: &str) -> String {
    backend(name, port, tls).replace(
        "  location: MESH_INTERNAL\n",
        &format!("  location: {location}\n"),
    )
}

/// istiod's `buildUpstreamTLSSettings` with `PREFER_DESTINATIONRULE_TLS_FOR_EXTERNAL_SERVICES`:
/// a gateway whose metadata names client certificates (of a CA the upstream does not trust)
/// uses them for a MUTUAL rule to a MESH_INTERNAL service, which the upstream refuses, and the
/// rule's own certificate for a MESH_EXTERNAL one, which it accepts; the external service's
/// cluster carries `istio: {external: true}`.
#[test]
fn to_a_mesh_external_service_the_rules_certificates_not_the_proxys_metadata_ones() {
    let pki = Pki::new();
    pki.issue("server", "DNS:server.example.com");
    pki.issue("client", "URI:spiffe://cluster.local/ns/demo/sa/rule");
    let other = Pki::new();
    other.issue(
        "client",
        "URI:spiffe://cluster.local/ns/istio-system/sa/gateway",
    );
    let mtls = TlsEchoUpstream::start(
        "mtls",
        &pki.path("server.crt"),
        &pki.path("server.key"),
        Some(&pki.path("ca.crt")),
    );
    let tls = format!(
        "{{mode: MUTUAL, caCertificates: {}, clientCertificate: {}, privateKey: {}, sni: server.example.com}}",
        pki.file("ca.crt"),
        pki.file("client.crt"),
        pki.file("client.key"),
    );
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write(
        "mesh.yaml",
        &documents(&[
            located_backend("inside", "MESH_INTERNAL", mtls.port(), &tls),
            located_backend("outside", "MESH_EXTERNAL", mtls.port(), &tls),
        ]),
    );
    let axon = Axon::start(config.path());
    let mut options = gateway_options();
    options.extra_metadata = vec![
        (
            "TLS_CLIENT_CERT_CHAIN".into(),
            other.file("client.crt").into(),
        ),
        ("TLS_CLIENT_KEY".into(), other.file("client.key").into()),
        ("TLS_CLIENT_ROOT_CERT".into(), pki.file("ca.crt").into()),
    ];
    let (envoy, gw_port) =
        start_gateway_listening_with(&axon, &config, gw_port, axon.xds_addr(), &options, CONVERGE);
    let get = |host: &str| {
        http_request(
            Envoy::local(gw_port),
            "GET",
            "/",
            &[("host", host)],
            Duration::from_secs(10),
        )
    };

    // MESH_EXTERNAL: the rule's certificate, which the upstream's CA signed.
    wait_for_answer("the external service", CONVERGE, "mtls", &envoy, || {
        let r = get("outside.test");
        (r.status, r.body)
    });
    let outside = dynamic_cluster(&envoy.config_dump(), "outbound|443||outside.example.com")
        .expect("the external cluster");
    assert_eq!(
        outside.pointer("/metadata/filter_metadata/istio/external"),
        Some(&serde_json::Value::Bool(true)),
        "{outside}"
    );

    // MESH_INTERNAL: the metadata certificate, of another CA: the handshake fails.
    let inside = get("inside.test");
    assert_eq!(inside.status, 503, "{inside:?}");
    let attempts = "cluster.outbound|443||inside.example.com.upstream_cx_total";
    assert!(stat(&envoy, attempts) >= 1, "{}", describe_envoy(&envoy));
    let cluster = dynamic_cluster(&envoy.config_dump(), "outbound|443||inside.example.com")
        .expect("the internal cluster");
    assert!(
        cluster.to_string().contains(&other.file("client.crt")),
        "the internal cluster does not use the metadata certificate: {cluster}"
    );
    assert!(cluster.pointer("/metadata").is_none(), "{cluster}");
    assert_no_rejected_updates(&envoy);
}
