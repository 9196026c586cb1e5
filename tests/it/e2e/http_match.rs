//! End-to-end: every field of a VirtualService's `HTTPMatchRequest`, through real Envoys.
//!
//! One axon serves two gateway Envoys: `ingress` (label `istio: ingressgateway`, namespace
//! istio-system) and `edge` (label `istio: edgegateway`, namespace edge), each selected by a
//! Gateway of its own. One VirtualService bound to both holds a rule per field, each sending
//! what it catches to backend v2; everything else falls through to v1. For each field a
//! request the rule must catch reaches v2 and one it must not stays on v1: `method`,
//! `authority` (istiod matches `:authority` as sent, port and all), `scheme`, `queryParams`
//! (a value, and `{}` for presence), `withoutHeaders`, `ignoreUriCase`; `sourceLabels` and
//! `sourceNamespace` apply on one gateway and not on the other; `name` and `statPrefix` are
//! the route's name and `stat_prefix` in Envoy's config_dump, and the prefix roots the
//! route's own stats.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

/// How long the first configuration may take to reach Envoy.
const CONVERGE: Duration = Duration::from_secs(30);

const EDGE_NODE_ID: &str = "router~127.0.0.1~edge-1.edge~edge.svc.cluster.local";

/// Gateway `edge/edge` on `istio: edgegateway`: HTTP on `port` for every host.
fn edge_gateway_yaml(port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: edge
  namespace: edge
spec:
  selector:
    istio: edgegateway
  servers:
  - port:
      number: {port}
      name: http
      protocol: HTTP
    hosts:
    - "*"
"#
    )
}

/// A rule per field, each to v2; the last rule sends the rest to v1.
const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: match-fields
  namespace: demo
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress, edge/edge]
  http:
  - name: method
    match: [{name: post, method: {exact: POST}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{authority: {exact: shop.example.com}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{queryParams: {a: {exact: b}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{uri: {prefix: /flag}, queryParams: {flag: {}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{uri: {prefix: /nohdr}, withoutHeaders: {x-skip: {}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{uri: {exact: /api}, ignoreUriCase: true}, {uri: {exact: /strict}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match:
    - {uri: {prefix: /plain}, scheme: {exact: http}}
    - {uri: {prefix: /tls}, scheme: {exact: https}}
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match:
    - {uri: {prefix: /src-labels}, sourceLabels: {istio: ingressgateway}}
    - {uri: {prefix: /src-ns}, sourceNamespace: edge}
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - name: stats
    match: [{name: counted, uri: {prefix: /counted}, statPrefix: counted_route}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - route: [{destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}}]
"#;

/// Field order = drop order: the Envoys die before axon, and print their logs on a panic.
struct Scenario {
    ingress: Envoy,
    edge: Envoy,
    _axon: Axon,
    _config: ConfigDir,
    ingress_port: u16,
    edge_port: u16,
    _v1: Upstream,
    _v2: Upstream,
}

impl Scenario {
    fn start() -> Scenario {
        let v1 = Upstream::start("backend-v1");
        let v2 = Upstream::start("backend-v2");
        let (ingress_port, edge_port) = (free_port(), free_port());
        let config = ConfigDir::new();
        config.write("gateway.yaml", &gateway_yaml(ingress_port));
        config.write("edge-gateway.yaml", &edge_gateway_yaml(edge_port));
        config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
        config.write("routes.yaml", ROUTES);
        let axon = Axon::start(config.path());
        let (ingress, ingress_port) =
            start_gateway_listening(&axon, &config, ingress_port, CONVERGE);
        let (edge, edge_port) = start_envoy_listening(
            &axon,
            edge_port,
            |port| format!("0.0.0.0_{port}"),
            |port| config.write("edge-gateway.yaml", &edge_gateway_yaml(port)),
            || {
                let options =
                    EnvoyOptions::gateway(EDGE_NODE_ID, &[("istio", "edgegateway")], "edge");
                Envoy::start(axon.xds_addr(), options)
            },
            CONVERGE,
        );
        Scenario {
            ingress,
            edge,
            _axon: axon,
            _config: config,
            ingress_port,
            edge_port,
            _v1: v1,
            _v2: v2,
        }
    }
}

/// One request: `(what it checks, method, path, headers, the upstream that must answer)`.
type Case<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

const V1: &str = "backend-v1";
const V2: &str = "backend-v2";

/// What both gateways must do, whichever sees the request.
const ON_BOTH: &[Case] = &[
    ("method POST", "POST", "/", &[], V2),
    ("method GET", "GET", "/", &[], V1),
    ("authority", "GET", "/", &[("Host", "shop.example.com")], V2),
    (
        "another authority",
        "GET",
        "/",
        &[("Host", "other.example.com")],
        V1,
    ),
    // istiod's `:authority` matcher is the StringMatch as written, and Envoy matches the
    // Host header as sent: with a port it is another authority.
    (
        "authority with a port",
        "GET",
        "/",
        &[("Host", "shop.example.com:8080")],
        V1,
    ),
    ("query a=b", "GET", "/?a=b", &[], V2),
    ("query a=c", "GET", "/?a=c", &[], V1),
    ("query without a", "GET", "/?c=b", &[], V1),
    ("query flag present", "GET", "/flag?flag", &[], V2),
    ("query flag with a value", "GET", "/flag?flag=1", &[], V2),
    ("query flag absent", "GET", "/flag?other=1", &[], V1),
    ("without x-skip", "GET", "/nohdr", &[], V2),
    ("with x-skip", "GET", "/nohdr", &[("x-skip", "1")], V1),
    ("ignoreUriCase /API", "GET", "/API", &[], V2),
    ("ignoreUriCase /api", "GET", "/api", &[], V2),
    ("ignoreUriCase, not a prefix", "GET", "/api/x", &[], V1),
    ("case-sensitive /strict", "GET", "/strict", &[], V2),
    ("case-sensitive /STRICT", "GET", "/STRICT", &[], V1),
    ("scheme http over plaintext", "GET", "/plain", &[], V2),
    ("scheme https over plaintext", "GET", "/tls", &[], V1),
    ("statPrefix route", "GET", "/counted", &[], V2),
];

fn send(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let r = http_request(
        Envoy::local(port),
        method,
        path,
        headers,
        Duration::from_secs(5),
    );
    (r.status, r.body)
}

/// Sends every case to the gateway on `port` and panics with each one that went wrong.
fn check(envoy: &Envoy, port: u16, cases: &[Case]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|&(what, method, path, headers, want)| {
            let got = send(port, method, path, headers);
            (got != (200, want.to_string())).then(|| {
                format!("{what}: {method} {path} {headers:?} answered {got:?}, not {want}")
            })
        })
        .collect();
    assert!(
        wrong.is_empty(),
        "gateway {}:\n{}\n{}",
        envoy.options.node_id,
        wrong.join("\n"),
        describe_envoy(envoy)
    );
}

/// The route of the gateway's `http.PORT` named `name`.
fn route_named(envoy: &Envoy, port: u16, name: &str) -> Option<serde_json::Value> {
    let config = route_config(&envoy.config_dump(), &format!("http.{port}"))?;
    config["virtual_hosts"]
        .as_array()?
        .iter()
        .flat_map(|v| v["routes"].as_array().into_iter().flatten())
        .find(|r| r["name"] == name)
        .cloned()
}

#[test]
fn every_http_match_field_routes_as_istiod_translates_it() {
    let s = Scenario::start();
    let clusters = [
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
    ];
    let clusters: Vec<&str> = clusters.iter().map(String::as_str).collect();
    for (envoy, port) in [(&s.ingress, s.ingress_port), (&s.edge, s.edge_port)] {
        wait_gateway_route(envoy, port, "*", &clusters, CONVERGE);
        // The route configuration comes whole: once one rule is in force, all are.
        wait_for_answer("POST to v2", CONVERGE, V2, envoy, || {
            send(port, "POST", "/", &[])
        });
        check(envoy, port, ON_BOTH);
    }

    // sourceLabels: the ingress gateway's labels include `istio: ingressgateway`, the edge
    // gateway's do not; sourceNamespace: only the edge gateway is in `edge`.
    check(
        &s.ingress,
        s.ingress_port,
        &[
            (
                "sourceLabels of this gateway",
                "GET",
                "/src-labels",
                &[],
                V2,
            ),
            ("sourceNamespace of the other", "GET", "/src-ns", &[], V1),
        ],
    );
    check(
        &s.edge,
        s.edge_port,
        &[
            ("sourceLabels of the other", "GET", "/src-labels", &[], V1),
            ("sourceNamespace of this gateway", "GET", "/src-ns", &[], V2),
        ],
    );

    // name and statPrefix, as Envoy has them.
    let port = s.ingress_port;
    let counted = route_named(&s.ingress, port, "stats.counted");
    assert_eq!(
        counted.as_ref().map(|r| r["stat_prefix"].clone()),
        Some(serde_json::json!("counted_route")),
        "no route stats.counted with stat_prefix counted_route: {counted:?}\n{}",
        describe_envoy(&s.ingress)
    );
    assert!(
        route_named(&s.ingress, port, "method.post").is_some(),
        "no route method.post\n{}",
        describe_envoy(&s.ingress)
    );
    // The prefix roots the route's own stats (`vhost.VHOST.route.PREFIX.*`).
    let counted_stats = || -> Vec<(String, u64)> {
        s.ingress
            .stats()
            .into_iter()
            .filter(|(k, _)| k.contains(".route.counted_route."))
            .collect()
    };
    assert!(
        wait_until(Duration::from_secs(10), || counted_stats()
            .iter()
            .any(|(k, v)| k.ends_with(".upstream_rq_total") && *v > 0)),
        "no route stats under counted_route after /counted: {:?}",
        counted_stats()
    );

    eprintln!("[e2e] stats under counted_route: {:?}", counted_stats());

    assert_no_rejected_updates(&s.ingress);
    assert_no_rejected_updates(&s.edge);
}
