//! End-to-end: a mesh VirtualService whose host is no service (`api.example.com`, routed to
//! the `backend` service) through a real sidecar Envoy (`INTERCEPTION_MODE: NONE`, namespace
//! `a`, a Sidecar importing `./*` with a bound egress listener on backend's port 8080, on a
//! loopback address of the test's own). Port 80's route configuration (`80`) is read by a
//! static listener of the Envoy on a free port, fetching it over ADS as the outbound listener
//! of port 80 would: binding port 80 itself would need root.
//!
//! As istiod (`buildSidecarVirtualHostsForVirtualService`): such a host gets a virtual host
//! only on the route configuration of port 80, its domain the host alone (the port ignored in
//! host matching), so `Host: api.example.com` on port 80 reaches backend, and on the other
//! port (8080, backend's) falls to `allow_any` (the original destination, none on a directly-called listener)
//! and does not; an unknown host on port 80 does not either.

use crate::support;
use crate::support::scenario;
use crate::support::sidecar;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use scenario::*;
use sidecar::{CONVERGE, NODE_A, sidecar_options};
use support::*;

const BACKEND: &str = "backend.a.svc.cluster.local";
const BACKEND_PORT: u16 = 8080;

/// Sidecar `default` in `a`: a bound egress listener on `addr`:8080, and every other port
/// through the catch-all egress.
fn sidecar_yaml(addr: Ipv4Addr) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: a
spec:
  egress:
  - port: {{number: {BACKEND_PORT}, protocol: HTTP, name: http-backend}}
    bind: {addr}
    captureMode: NONE
    hosts: ["./*"]
  - hosts: ["./*"]
"#
    )
}

/// A listener on `addr`:`port` whose connection manager takes the route configuration `80`
/// over ADS, as the sidecar's outbound listener of port 80 does.
fn route_80_listener(addr: Ipv4Addr, port: u16) -> serde_json::Value {
    serde_json::json!({
        "name": "route-80",
        "address": {"socket_address": {"address": addr.to_string(), "port_value": port}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "route_80",
                "rds": {
                    "route_config_name": "80",
                    "config_source": {"ads": {}, "resource_api_version": "V3"}
                },
                "http_filters": [{
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                }]
            }
        }]}]
    })
}

/// A free port on `addr`.
fn free_port_on(addr: Ipv4Addr) -> u16 {
    std::net::TcpListener::bind(SocketAddr::from((addr, 0)))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on the loopback address")
}

const API_VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: api, namespace: a}\nspec:\n  hosts: [api.example.com]\n  http:\n  - route: [{destination: {host: backend, port: {number: 8080}}}]\n";

#[test]
fn a_virtual_service_host_that_is_no_service_is_routed_on_port_80_only() {
    let backend = Upstream::start("backend");
    let addr = own_loopback(&[BACKEND_PORT]);
    let port_80 = free_port_on(addr);
    let config = ConfigDir::new();
    config.write(
        "services.yaml",
        &service_entry_yaml(
            "backend",
            "a",
            BACKEND,
            http_port(BACKEND_PORT),
            &[(backend.port(), None)],
        ),
    );
    config.write("routes.yaml", API_VS);
    config.write("sidecar.yaml", &sidecar_yaml(addr));
    let axon = Axon::start(config.path());
    let mut options = sidecar_options(NODE_A, "productpage", "a");
    options
        .static_listeners
        .push(route_80_listener(addr, port_80));
    let envoy = Envoy::start(axon.xds_addr(), options);
    let name = format!("{addr}_{BACKEND_PORT}");
    assert!(
        wait_until(CONVERGE, || dynamic_listener(&envoy.config_dump(), &name)
            .is_some_and(|l| l.get("active_state").is_some())),
        "no active listener {name}\n{}",
        describe_envoy(&envoy)
    );
    let on_80 = SocketAddr::from((addr, port_80));
    let on_other = SocketAddr::from((addr, BACKEND_PORT));

    // Port 80: the host alone, and with a port (ignored in host matching), reach backend.
    wait_for_answer(
        "api.example.com on port 80",
        CONVERGE,
        "backend",
        &envoy,
        || http_get(on_80, "/", &[("Host", "api.example.com")]),
    );
    assert_eq!(
        http_get(on_80, "/", &[("Host", "api.example.com:80")]),
        (200, "backend".to_string())
    );
    // The service itself, on its port.
    assert_eq!(
        http_get(on_other, "/", &[("Host", BACKEND)]),
        (200, "backend".to_string())
    );

    // Not on the other port, and no unknown host on 80: `allow_any`, which has no original
    // destination here, so nothing reaches backend.
    let hits = backend.hits();
    for (addr, host) in [
        (on_other, "api.example.com"),
        (on_80, "unknown.example.com"),
    ] {
        let r = http_request(addr, "GET", "/", &[("Host", host)], Duration::from_secs(5));
        eprintln!("[e2e] {addr} Host {host} -> {} {:?}", r.status, r.body);
        assert_ne!(r.status, 200, "{addr} Host {host}: {:?}", r.body);
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
    assert_no_rejected_updates(&envoy);
}
