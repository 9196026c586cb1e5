//! End-to-end: which gateway host serves which VirtualService, as istiod decides, through a
//! real gateway Envoy to upstreams that say who they are ([`EchoUpstream`]). Each rule is
//! checked with a request it must catch and one it must not: two VirtualServices for one
//! host share its virtual host (`/api` reaches one's backend even though the other, first by
//! name, has a catch-all `/`, which still gets the rest); a `*.wild.test` VirtualService on a
//! server for `a.wild.test` serves `a.wild.test` and leaves `b.wild.test` to 404;
//! `Host: a.wild.test:80` is routed though the listener is on another port; a VirtualService
//! exported only to its own namespace is not served by a gateway proxy in another one, while
//! one exported to the proxy's namespace is.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

/// Gateway `ingress` in istio-system on `gw_port` for the hosts under test only.
fn gateway(gw_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: ingress
  namespace: istio-system
spec:
  selector:
    istio: ingressgateway
  servers:
  - port:
      number: {gw_port}
      name: http
      protocol: HTTP
    hosts:
    - shop.example.com
    - a.wild.test
    - private.example.com
    - exported.example.com
"#
    )
}

fn upstreams_yaml(site: u16, api: u16, wild: u16) -> String {
    documents(&[
        service_entry_yaml(
            "site",
            "demo",
            "site.demo.svc.cluster.local",
            http_port(80),
            &[(site, None)],
        ),
        service_entry_yaml(
            "api",
            "demo",
            "api.demo.svc.cluster.local",
            http_port(80),
            &[(api, None)],
        ),
        service_entry_yaml(
            "wild",
            "demo",
            "wild.demo.svc.cluster.local",
            http_port(80),
            &[(wild, None)],
        ),
    ])
}

/// `a-site` sorts before `b-api` (istiod's order, by name when creation times are equal) and
/// routes everything; `b-api` routes `/api` only.
const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a-site, namespace: demo}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/ingress]
  http: [{route: [{destination: {host: site}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b-api, namespace: demo}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /api}}]
    route: [{destination: {host: api}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wild, namespace: demo}
spec:
  hosts: ["*.wild.test"]
  gateways: [istio-system/ingress]
  http: [{route: [{destination: {host: wild}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: private, namespace: demo}
spec:
  hosts: [private.example.com]
  gateways: [istio-system/ingress]
  exportTo: ["."]
  http: [{route: [{destination: {host: wild}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: exported, namespace: demo}
spec:
  hosts: [exported.example.com]
  gateways: [istio-system/ingress]
  exportTo: [istio-system]
  http: [{route: [{destination: {host: wild}}]}]
"#;

#[test]
fn gateway_hosts_serve_the_virtual_services_istiod_would() {
    let site = EchoUpstream::start("site");
    let api = EchoUpstream::start("api");
    let wild = EchoUpstream::start("wild");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway(gw_port));
    config.write(
        "upstreams.yaml",
        &upstreams_yaml(site.port(), api.port(), wild.port()),
    );
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_envoy_listening(
        &axon,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway(port)),
        || Envoy::start(axon.xds_addr(), gateway_options()),
        CONVERGE,
    );
    let gw = Envoy::local(gw_port);
    let get = |host: &str, path: &str| {
        let r = http_request(gw, "GET", path, &[("host", host)], Duration::from_secs(10));
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    };
    wait_for_answer("/api on shop.example.com", CONVERGE, "api", &envoy, || {
        get("shop.example.com", "/api/items")
    });
    assert_no_rejected_updates(&envoy);
    let not_found = (404, String::new());

    // Two VirtualServices, one host: the catch-all of the first goes after the other's /api.
    assert_eq!(get("shop.example.com", "/api"), (200, "api".into()));
    assert_eq!(get("shop.example.com", "/home"), (200, "site".into()));
    assert_eq!(get("shop.example.com", "/"), (200, "site".into()));

    // `*.wild.test` on a server for `a.wild.test`: that host only.
    assert_eq!(get("a.wild.test", "/"), (200, "wild".into()));
    assert_eq!(
        get("b.wild.test", "/"),
        not_found,
        "{}",
        describe_envoy(&envoy)
    );

    // The port in Host is ignored, whatever it is.
    assert_eq!(get("a.wild.test:80", "/"), (200, "wild".into()));
    assert_eq!(get("shop.example.com:8443", "/api"), (200, "api".into()));
    assert_eq!(get("b.wild.test:80", "/"), not_found);

    // exportTo, against the gateway proxy's namespace (istio-system).
    assert_eq!(get("exported.example.com", "/"), (200, "wild".into()));
    assert_eq!(get("private.example.com", "/"), not_found);

    assert!(
        api.requests().iter().all(|r| r.path.starts_with("/api")),
        "only /api reached api: {:?}",
        api.requests()
    );
}
