//! End-to-end: a Gateway server with `tls.mode: ISTIO_MUTUAL` through a real gateway Envoy run
//! as pilot-agent runs it (`ISTIO_VERSION`, the agent's `sds-grpc`), its workload certificate
//! issued by axon's own CA: a client with a certificate of the mesh (from axon's CA, for its
//! service account) is served, one without a certificate is refused, and the gateway's
//! certificate chains to axon's root.

use std::process::Command;
use std::time::Duration;

use crate::support::agent::{Agent, AgentOptions, Identity};
use crate::support::axon_ca::AxonCa;
use crate::support::ca_client::{CaCall, Csr, write_chain};
use crate::support::scenario::{describe_envoy, gateway_options};
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(30);

fn config(gw_port: u16, upstream: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: ingress, namespace: istio-system}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {gw_port}, name: https-mesh, protocol: HTTPS}}
    hosts: ['*']
    tls: {{mode: ISTIO_MUTUAL}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: backend, namespace: demo}}
spec:
  hosts: [backend.demo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 127.0.0.1, ports: {{http: {upstream}}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: backend, namespace: demo}}
spec:
  hosts: ['*']
  gateways: [istio-system/ingress]
  http:
  - route: [{{destination: {{host: backend.demo.svc.cluster.local, port: {{number: 80}}}}}}]
"
    )
}

/// `curl -k` (the gateway's certificate names a SPIFFE identity, no host) with `extra`:
/// whether it succeeded, and its output.
fn curl(port: u16, extra: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "-k", "--max-time", "5", "-w", " %{http_code}"])
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}/"))
        .output()
        .expect("curl must be installed");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn an_istio_mutual_server_serves_mesh_clients_with_certificates_of_axons_ca() {
    let upstream = Upstream::start("backend");
    let config_dir = ConfigDir::new();
    let gw_port = free_port();
    config_dir.write("mesh.yaml", &config(gw_port, upstream.port()));
    let ca = AxonCa::start(&config_dir);
    let (ns, sa) = ("istio-system", "istio-ingressgateway-service-account");
    let agent = Agent::start(
        Identity::new("cluster.local", ns, sa),
        ca.access(ns, sa),
        AgentOptions::default(),
    );
    let mut options = gateway_options();
    options
        .extra_metadata
        .push(("ISTIO_VERSION".into(), "1.24.0".into()));
    options.static_clusters.push(agent.sds_cluster());
    let (envoy, port) = start_envoy_listening(
        &ca.axon,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config_dir.write("mesh.yaml", &config(port, upstream.port())),
        || Envoy::start(ca.axon.xds_addr(), options.clone()),
        CONVERGE,
    );

    // A client of the mesh: a certificate of axon's CA for its own service account.
    let work = tempfile::tempdir().unwrap();
    let csr = Csr::new(
        work.path(),
        "client",
        "URI:spiffe://cluster.local/ns/a/sa/client",
    );
    let tls = ca.axon.xds_tls_addr().expect("the TLS port");
    let chain = CaCall::new(&ca.root_path, "istiod.istio-system.svc")
        .with_token(&ca.token("a", "client"))
        .create_certificate(tls, &csr.pem, 0)
        .expect("a certificate for the client");
    let cert = write_chain(work.path(), "client", &chain);
    let (cert, key) = (cert.display().to_string(), csr.key.display().to_string());
    let mut last = (false, String::new());
    let served = wait_until(CONVERGE, || {
        last = curl(port, &["--cert", &cert, "--key", &key]);
        last.0 && last.1.ends_with(" 200")
    });
    assert!(
        served,
        "mesh client not served: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    assert!(upstream.hits() >= 1);

    // Without a certificate: the handshake is refused.
    let (ok, text) = curl(port, &[]);
    assert!(
        !ok && !text.ends_with(" 200"),
        "served without a certificate: {text}"
    );

    // The gateway presents the agent's workload certificate, of axon's CA.
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-CAfile", &ca.root_path.display().to_string()])
        .args(["-cert", &cert, "-key", &key, "-verify_return_error"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("Verify return code: 0 (ok)"),
        "the gateway's certificate does not chain to axon's root:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(agent);
}
