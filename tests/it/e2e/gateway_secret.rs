//! End-to-end: a TLS gateway served from a directory, its certificate a Secret YAML beside the
//! Gateway (`credentialName`), through a real Envoy: HTTPS with the right SNI and the CA
//! (`curl --cacert`) reaches the route; rotating the Secret's file serves the new certificate
//! to new handshakes with no restart, and pushes SDS only (Envoy's LDS and CDS update counts
//! and its ADS connection stay). A terminating server whose Secret does not exist is named in a
//! warning with its Gateway. No update is rejected.

use crate::support;
use crate::support::pki;
use crate::support::scenario;

use std::process::Command;
use std::time::Duration;

use pki::Pki;
use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const HOST: &str = "shop.example.com";

/// The Gateway `istio-system/ingress` with an HTTPS server on `port` for [`HOST`] whose
/// certificate is the Secret `shop-cert`, and a route to the `web` service.
fn gateway_and_routes(port: u16, web: u16) -> String {
    documents(&[
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: ingress, namespace: istio-system}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {port}, name: https, protocol: HTTPS}}\n    hosts: [{HOST}]\n    tls: {{mode: SIMPLE, credentialName: shop-cert}}\n"
        ),
        service_entry_yaml(
            "web",
            "demo",
            "web.demo.svc.cluster.local",
            http_port(80),
            &[(web, None)],
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: shop, namespace: demo}}\nspec:\n  hosts: [{HOST}]\n  gateways: [istio-system/ingress]\n  http:\n  - route: [{{destination: {{host: web.demo.svc.cluster.local, port: {{number: 80}}}}}}]\n"
        ),
    ])
}

/// The Secret `istio-system/shop-cert` (the gateway's namespace) of the certificate `name`.
fn secret_yaml(pki: &Pki, name: &str) -> String {
    let read = |f: String| std::fs::read_to_string(pki.path(&f)).unwrap();
    let data = serde_json::json!({
        "tls.crt": read(format!("{name}.crt")),
        "tls.key": read(format!("{name}.key")),
    });
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-cert, namespace: istio-system}}\ntype: kubernetes.io/tls\nstringData: {data}\n"
    )
}

/// `https://HOST:PORT/` through the gateway (SNI HOST, checked against the test's CA).
fn https(pki: &Pki, port: u16) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", " %{http_code}", "--cacert"])
        .arg(pki.path("ca.crt"))
        .args(["--resolve", &format!("{HOST}:{port}:127.0.0.1")])
        .arg(format!("https://{HOST}:{port}/"))
        .output()
        .expect("curl must be installed");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The serial of the certificate the gateway presents for [`HOST`] on `port`.
fn served_serial(pki: &Pki, port: u16) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect 127.0.0.1:{port} -servername {HOST} -CAfile {} </dev/null 2>/dev/null | openssl x509 -noout -serial",
            pki.path("ca.crt").display()
        ))
        .output()
        .expect("openssl s_client");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn an_https_gateway_from_a_secret_beside_it_and_its_rotation_over_sds_only() {
    let pki = Pki::new();
    pki.issue_with_serial("shop", &format!("DNS:{HOST}"), 0x3001);
    let web = Upstream::start("web");
    let config = ConfigDir::new();
    let port = free_port();
    config.write("gateway.yaml", &gateway_and_routes(port, web.port()));
    config.write("shop-cert.yaml", &secret_yaml(&pki, "shop"));
    let axon = Axon::start(config.path());
    let (envoy, port) = start_envoy_listening(
        &axon,
        port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway_and_routes(port, web.port())),
        || Envoy::start(axon.xds_addr(), gateway_options()),
        CONVERGE,
    );
    let mut last = (false, String::new());
    let answered = wait_until(CONVERGE, || {
        last = https(&pki, port);
        last.0 && last.1.ends_with(" 200") && last.1.starts_with("web")
    });
    assert!(answered, "{last:?}\n{}", describe_envoy(&envoy));
    assert_eq!(served_serial(&pki, port), "serial=3001");

    let updates = |envoy: &Envoy| {
        (
            stat(envoy, "listener_manager.lds.update_success"),
            stat(envoy, "cluster_manager.cds.update_success"),
            stat(envoy, "cluster.xds-grpc.upstream_cx_total"),
        )
    };
    let before = updates(&envoy);
    pki.issue_with_serial("shop", &format!("DNS:{HOST}"), 0x3002);
    config.write("shop-cert.yaml", &secret_yaml(&pki, "shop"));
    let rotated = wait_until(CONVERGE, || served_serial(&pki, port) == "serial=3002");
    assert!(rotated, "{}\n{}", served_serial(&pki, port), axon.logs());
    assert_eq!(updates(&envoy), before, "(lds, cds, ADS connections) moved");
    let (ok, text) = https(&pki, port);
    assert!(ok && text.ends_with(" 200"), "{text}");

    // A terminating server whose Secret does not exist: not served, and axon names the
    // Gateway and the Secret.
    let other_port = free_port();
    config.write(
        "other.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: other, namespace: istio-system}}\nspec:\n  selector: {{istio: other}}\n  servers:\n  - port: {{number: {other_port}, name: https-other, protocol: HTTPS}}\n    hosts: [other.example.com]\n    tls: {{mode: SIMPLE, credentialName: absent-cert}}\n"
        ),
    );
    let named = wait_until(CONVERGE, || {
        let logs = axon.logs();
        logs.contains("Gateway server not served")
            && logs.contains("istio-system/other")
            && logs.contains("absent-cert")
    });
    assert!(named, "{}", axon.logs());
    assert!(
        axon.metric("pilot_sds_certificate_errors_total")
            .unwrap_or(0.0)
            >= 1.0
    );
    assert_no_rejected_updates(&envoy);
}
