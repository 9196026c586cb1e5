//! End-to-end: a mesh VirtualService whose host is no service (`api.example.com`, routed to
//! the `backend` service) through a real sidecar Envoy under iptables capture (pod
//! `productpage` in namespace `a` of the namespace mesh, a Sidecar importing `./*` with an
//! egress port for backend's 8080 and the catch-all egress). Another service, `web`, has
//! HTTP port 80, so the sidecar has the captured listener `0.0.0.0_80` and its route
//! configuration `80`, as in any cluster with a port-80 service.
//!
//! As istiod (`buildSidecarVirtualHostsForVirtualService`): such a host gets a virtual host
//! only on the route configuration of port 80, its domain the host alone (the port ignored in
//! host matching), so `Host: api.example.com` captured on port 80 reaches backend, and on
//! the other port (8080, backend's) falls to `allow_any` (the PassthroughCluster, to the
//! original destination: an address only a sidecar's route answers in the mesh) and does
//! not; an unknown host on port 80 does not either.

use crate::support;
use crate::support::mesh::{Mesh, PodSpec};
use crate::support::scenario;
use crate::support::sidecar;

use std::net::Ipv4Addr;

use scenario::*;
use sidecar::{CONVERGE, MESH_CONFIG, app_of, service_entry_at};
use support::*;

const BACKEND: &str = "backend.a.svc.cluster.local";
const BACKEND_PORT: u16 = 8080;
const BACKEND_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 40);
const WEB: &str = "web.a.svc.cluster.local";
const WEB_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 41);

/// Sidecar `default` in `a`: an egress port for 8080, and every other port through the
/// catch-all egress. No `bind`: iptables brings the traffic.
const SIDECAR: &str = "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: a}\nspec:\n  egress:\n  - port: {number: 8080, protocol: HTTP, name: http-backend}\n    hosts: [\"./*\"]\n  - hosts: [\"./*\"]\n";

const API_VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: api, namespace: a}\nspec:\n  hosts: [api.example.com]\n  http:\n  - route: [{destination: {host: backend, port: {number: 8080}}}]\n";

#[test]
fn a_virtual_service_host_that_is_no_service_is_routed_on_port_80_only() {
    let config = ConfigDir::new();
    let axon = Axon::start_with_mesh_config(config.path(), MESH_CONFIG);
    let mesh = Mesh::new(axon.xds_addr());
    let backend_pod = mesh.pod(PodSpec::plain("backend", "a", &[("app", "backend")]));
    let web_pod = mesh.pod(PodSpec::plain("web", "a", &[("app", "web")]));
    let backend = backend_pod.serve_http(BACKEND_PORT, "backend");
    let _web = web_pod.serve_http(80, "web");
    config.write(
        "services.yaml",
        &documents(&[
            service_entry_at(
                "backend",
                "a",
                BACKEND,
                BACKEND_VIP,
                http_port(BACKEND_PORT),
                &[(backend_pod.ip(), None)],
            ),
            service_entry_at(
                "web",
                "a",
                WEB,
                WEB_VIP,
                http_port(80),
                &[(web_pod.ip(), None)],
            ),
        ]),
    );
    config.write("routes.yaml", API_VS);
    config.write("sidecar.yaml", SIDECAR);
    let client = mesh.pod(PodSpec::sidecar(
        "productpage",
        "a",
        &[("app", "productpage")],
    ));
    client.wait_listener("0.0.0.0_80");
    client.wait_listener(&format!("0.0.0.0_{BACKEND_PORT}"));
    let envoy = client.envoy();
    // Captured requests to an address on a port, with a Host.
    let get = |ip: Ipv4Addr, port: u16, host: &str| {
        let r = client.http_request(&ip.to_string(), port, "/", &[("Host", host)]);
        (r.status, app_of(&r.body))
    };

    // Port 80: the host alone, and with a port (ignored in host matching), reach backend.
    wait_for_answer(
        "api.example.com on port 80",
        CONVERGE,
        "backend",
        envoy,
        || get(WEB_VIP, 80, "api.example.com"),
    );
    assert_eq!(
        get(WEB_VIP, 80, "api.example.com:80"),
        (200, "backend".to_string())
    );
    // The service itself, on its port.
    assert_eq!(
        get(BACKEND_VIP, BACKEND_PORT, BACKEND),
        (200, "backend".to_string())
    );

    // Not on the other port, and no unknown host on 80: `allow_any`, to the original
    // destination (a service address, which nothing answers but a sidecar's route), so
    // nothing reaches backend.
    let hits = backend.hits();
    for (ip, port, host) in [
        (BACKEND_VIP, BACKEND_PORT, "api.example.com"),
        (WEB_VIP, 80, "unknown.example.com"),
    ] {
        let (status, body) = get(ip, port, host);
        eprintln!("[e2e] {ip}:{port} Host {host} -> {status} {body:?}");
        assert_ne!(status, 200, "{ip}:{port} Host {host}: {body:?}");
    }
    assert_eq!(backend.hits(), hits, "backend was reached");

    // What Envoy holds: the virtual host of port 80, by istiod's name, the host its domain.
    let dump = envoy.config_dump();
    let routes = dump_section(&dump, "RoutesConfigDump").expect("a routes dump");
    let config_80 = routes["dynamic_route_configs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| &r["route_config"])
        .find(|r| r["name"] == "80")
        .cloned()
        .unwrap_or_default();
    let vhost = config_80["virtual_hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "api.example.com:80")
        .cloned();
    assert_eq!(
        vhost.as_ref().map(|v| v["domains"].clone()),
        Some(serde_json::json!(["api.example.com"])),
        "{config_80}"
    );
    assert_eq!(
        config_80["ignore_port_in_host_matching"], true,
        "{config_80}"
    );
    // The 8080 route configuration has no virtual host for it.
    let config_8080 = route_config(&dump, &BACKEND_PORT.to_string()).unwrap_or_default();
    assert!(
        !config_8080.to_string().contains("api.example.com"),
        "{config_8080}"
    );
    assert_no_rejected_updates(envoy);
}
