//! End-to-end: VirtualService delegation through a real gateway Envoy, merged as istiod's
//! `MergeHTTPRoutes`.
//!
//! The root VirtualService (`demo/root`, hosts `*` on the ingress Gateway) delegates
//! `/api` requests carrying `x-team: a` to `team/api-routes`, a VirtualService without
//! hosts: its `/api/v2` route reaches backend v2 only when the root's conditions hold too
//! (the header), and takes the root route's response header; its `/other` route lies
//! outside the root's match, so istiod drops it (and axon reports it). A route delegating to
//! a child exported only to its own namespace is dropped too. Everything else reaches v1.
//! The same through a sidecar Envoy under iptables capture (a pod of the namespace mesh,
//! `support/sidecar.rs`), where a change to the child alone reaches it.

use crate::support;
use crate::support::scenario;
use crate::support::sidecar;

use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: root
  namespace: demo
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - name: api
    match: [{uri: {prefix: /api}, headers: {x-team: {exact: a}}}]
    delegate: {name: api-routes, namespace: team}
    headers: {response: {set: {x-from-root: "yes"}}}
  - name: hidden
    match: [{uri: {prefix: /hidden}}]
    delegate: {name: private-routes, namespace: team}
  - name: rest
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: api-routes
  namespace: team
spec:
  http:
  - name: v2
    match: [{uri: {prefix: /api/v2}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - name: outside
    match: [{uri: {prefix: /other}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: private-routes
  namespace: team
spec:
  exportTo: ["."]
  http:
  - route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
"#;

/// `(what it checks, path, headers, the upstream that must answer)`.
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a str);

const V1: &str = "backend-v1";
const V2: &str = "backend-v2";

fn send(port: u16, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    http_request(
        Envoy::local(port),
        "GET",
        path,
        headers,
        Duration::from_secs(5),
    )
}

#[test]
fn delegated_routes_are_merged_into_the_root_as_istiod_merges_them() {
    let v1 = Upstream::start(V1);
    let v2 = Upstream::start(V2);
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let (envoy, port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let clusters = [
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
    ];
    let clusters: Vec<&str> = clusters.iter().map(String::as_str).collect();
    wait_gateway_route(&envoy, port, "*", &clusters, CONVERGE);
    wait_for_answer("the merged route", CONVERGE, V2, &envoy, || {
        let r = send(port, "/api/v2/items", &[("x-team", "a")]);
        (r.status, r.body)
    });

    let cases: &[Case] = &[
        // The child's route, within the root's conditions.
        (
            "child route, root header",
            "/api/v2/items",
            &[("x-team", "a")],
            V2,
        ),
        // The root's header condition is the merged route's too.
        ("child route, no root header", "/api/v2/items", &[], V1),
        (
            "child route, other team",
            "/api/v2/items",
            &[("x-team", "b")],
            V1,
        ),
        // Inside the root match, but no child route: the next root route.
        (
            "root match, no child route",
            "/api/v1",
            &[("x-team", "a")],
            V1,
        ),
        // The child's route outside the root's match was dropped.
        (
            "child route outside the root",
            "/other",
            &[("x-team", "a")],
            V1,
        ),
        // A child not exported to the root's namespace is not merged.
        ("hidden child", "/hidden", &[], V1),
    ];
    let mut wrong = Vec::new();
    for &(what, path, headers, want) in cases {
        let r = send(port, path, headers);
        if (r.status, r.body.as_str()) != (200, want) {
            wrong.push(format!(
                "{what}: GET {path} {headers:?} answered {} {:?}, not {want}",
                r.status, r.body
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{}\n{}",
        wrong.join("\n"),
        describe_envoy(&envoy)
    );

    // The root route's response header, on the child's route only.
    let merged = send(port, "/api/v2/items", &[("x-team", "a")]);
    assert_eq!(merged.header("x-from-root"), Some("yes"));
    assert_eq!(send(port, "/api/v2/items", &[]).header("x-from-root"), None);

    // The merged route is named ROOT-CHILD; the dropped routes are reported.
    let dump = envoy.config_dump();
    let names: Vec<String> = dynamic_route_configs(&dump)
        .iter()
        .flat_map(|c| c["virtual_hosts"].as_array().cloned().unwrap_or_default())
        .flat_map(|v| v["routes"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["name"].as_str().map(str::to_string))
        .collect();
    assert_eq!(names, ["api-v2", "rest"]);
    let problems = axon.push_status()["virtual_service_problems"].clone();
    let problems: Vec<&str> = problems
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str()).collect())
        .unwrap_or_default();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("\"outside\""), "{problems:?}");
    assert!(
        problems[1].contains("is not exported to demo"),
        "{problems:?}"
    );
    assert!(axon.wait_for_log("VirtualService not applied in full", CONVERGE));
    assert_no_rejected_updates(&envoy);
}

/// The root for the mesh, in `a`: `end-user: jason` is delegated to `team/reviews-child`,
/// everything else to v1.
const MESH_ROOT: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
  namespace: a
spec:
  hosts: [reviews]
  http:
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    delegate: {name: reviews-child, namespace: team}
  - route: [{destination: {host: reviews, subset: v1}}]
"#;

/// The child, in `team`: `PREFIX` to v2 (its hosts resolved in `team`, so written in full).
fn mesh_child(prefix: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews-child
  namespace: team
spec:
  http:
  - match: [{{uri: {{prefix: {prefix}}}}}]
    route: [{{destination: {{host: reviews.a.svc.cluster.local, subset: v2}}}}]
"#
    )
}

#[test]
fn a_sidecar_serves_the_merged_routes_and_follows_a_change_to_the_child() {
    // The sidecar world under capture (`support/sidecar.rs`), reviews routed by the root
    // and its child instead of its own VirtualService.
    let s = sidecar::Scenario::start(false);
    s.config.remove("reviews-vs.yaml");
    s.config.write("root.yaml", MESH_ROOT);
    s.config.write("child.yaml", &mesh_child("/v2"));
    let get = |path: &str, headers: &[(&str, &str)]| s.get(sidecar::REVIEWS, path, headers);
    let jason = [("end-user", "jason")];
    let (v1, v2) = (
        (200, "reviews-v1".to_string()),
        (200, "reviews-v2".to_string()),
    );
    // The merge is in force once jason outside the child's prefix is no longer sent to v2
    // (reviews' own VirtualService did that).
    let mut last = Default::default();
    assert!(
        wait_until(CONVERGE, || {
            last = (get("/v2/x", &jason), get("/other", &jason));
            last == (v2.clone(), v1.clone())
        }),
        "the merged route never in force: {last:?}\n{}",
        s.client.describe()
    );
    // The root's header is the merged route's condition; outside the child's prefix, the
    // next root route.
    assert_eq!(get("/v2/x", &[]), v1);
    assert_eq!(get("/other", &jason), v1);

    // Only the child changes: the sidecar is pushed the new merge.
    s.config.write("child.yaml", &mesh_child("/v3"));
    wait_for_answer(
        "the changed child",
        CONVERGE,
        "reviews-v2",
        s.envoy(),
        || get("/v3/x", &jason),
    );
    assert_eq!(get("/v2/x", &jason), (200, "reviews-v1".to_string()));
    assert_no_rejected_updates(s.envoy());
}
