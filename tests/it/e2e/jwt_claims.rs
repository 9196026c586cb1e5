//! End-to-end: header matches on JWT claims (`@request.auth.claims.*`) through a real
//! gateway Envoy. axon applies no RequestAuthentication, so its Envoys carry no JWT filter,
//! and istiod's dynamic-metadata matchers see no claims: a `headers` claim match catches no
//! request (not even one with a header of that name), a `withoutHeaders` one excludes none;
//! neither widens nor narrows anything silently, since both are reported at load as not
//! applied.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: claims
  namespace: demo
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /claims}, headers: {"@request.auth.claims.group": {exact: admin}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - match: [{uri: {prefix: /without}, withoutHeaders: {"@request.auth.claims.group": {exact: admin}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - route: [{destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}}]
"#;

#[test]
fn jwt_claim_matches_see_no_claims_without_a_jwt_filter_and_are_reported() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let (envoy, port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let get = |path: &str| http_get(Envoy::local(port), path, &[("x-group", "admin")]);
    wait_for_answer(
        "the withoutHeaders claim route",
        CONVERGE,
        "backend-v2",
        &envoy,
        || get("/without"),
    );
    // The claim match catches nothing: the request falls through to v1.
    assert_eq!(get("/claims"), (200, "backend-v1".to_string()));
    assert_eq!(get("/other"), (200, "backend-v1".to_string()));
    assert_no_rejected_updates(&envoy);
    // Reported at load, with the path of each claim match.
    for path in [
        "spec.http[0].match[0].headers[@request.auth.claims.group]",
        "spec.http[1].match[0].withoutHeaders[@request.auth.claims.group]",
    ] {
        assert!(axon.wait_for_log(path, CONVERGE), "{path} not reported");
    }
}
