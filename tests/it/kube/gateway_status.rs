//! The Gateway API status written to the API server, as istiod writes it: by the holder of
//! the Lease `axon-gateway-status-leader` (taken by the one replica here), the Gateway's and
//! the HTTPRoute's conditions (Accepted, per listener with attachedRoutes; per parent) with
//! times and observedGeneration; a rebuild that changes no status writes nothing; a route
//! edit that does change its status is written.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_kube::*;
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const GROUP_V1: &str = "gateway.networking.k8s.io/v1";
const GATEWAYS: &str = "/apis/gateway.networking.k8s.io/v1/gateways";
const ROUTES: &str = "/apis/gateway.networking.k8s.io/v1/httproutes";
const LEASES: &str = "/apis/coordination.k8s.io/v1/leases";

fn route(section: &str) -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "HTTPRoute",
           "metadata": {"name": "web", "namespace": "shop", "generation": 2},
           "spec": {"parentRefs": [{"name": "gw", "sectionName": section}],
                    "rules": [{"backendRefs": [{"name": "web", "port": 8080}]}]}})
}

fn condition<'a>(conditions: &'a Value, kind: &str) -> &'a Value {
    conditions
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .unwrap_or(&Value::Null)
}

#[test]
fn the_lease_holder_writes_status_only_when_it_changes() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    api.apply(service("shop", "web", &[("http", 8080)]));
    api.apply(json!({"apiVersion": GROUP_V1, "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop", "generation": 1},
        "spec": {"gatewayClassName": "istio",
                 "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}}));
    api.apply(route("http"));
    let dir = ConfigDir::new();
    let kubeconfig = api.write_kubeconfig(dir.path()).display().to_string();
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    let accepted = |path: &str, name: &str, at: &dyn Fn(&Value) -> Value| {
        api.get(path, "shop", name)
            .map(|o| at(&o["status"]))
            .map(|c| condition(&c, "Accepted")["status"].clone())
    };
    let route_accepted = || accepted(ROUTES, "web", &|s| s["parents"][0]["conditions"].clone());
    assert!(
        wait_until(CONVERGE, || route_accepted() == Some(json!("True"))
            && accepted(GATEWAYS, "gw", &|s| s["conditions"].clone())
                == Some(json!("True"))),
        "no status written: gateway {:?}, route {:?}\n{}",
        api.get(GATEWAYS, "shop", "gw"),
        api.get(ROUTES, "shop", "web"),
        axon.logs()
    );
    let lease = api
        .get(LEASES, "default", "axon-gateway-status-leader")
        .expect("the Lease");
    assert!(
        lease["spec"]["holderIdentity"]
            .as_str()
            .is_some_and(|h| !h.is_empty()),
        "{lease}"
    );
    let gw = api.get(GATEWAYS, "shop", "gw").unwrap();
    let listener = &gw["status"]["listeners"][0];
    assert_eq!(listener["attachedRoutes"], 1, "{gw}");
    let c = condition(&gw["status"]["conditions"], "Accepted");
    assert_eq!(c["observedGeneration"], 1, "{gw}");
    assert!(c["lastTransitionTime"].as_str().is_some(), "{gw}");
    let parent = &api.get(ROUTES, "shop", "web").unwrap()["status"]["parents"][0];
    assert_eq!(parent["controllerName"], "istio.io/gateway-controller");
    assert_eq!(
        condition(&parent["conditions"], "Accepted")["observedGeneration"],
        2
    );

    // A change that moves no status (another Service) writes nothing; then a route edit that
    // does (its parent no longer accepts it, the listener has no route attached) writes the
    // route's status and the Gateway's, exactly those two.
    let before = api.status_writes();
    let version = axon.built_version();
    api.apply(service("shop", "other", &[("http", 9090)]));
    assert!(
        axon.wait_built_after(version, CONVERGE).is_some(),
        "no rebuild"
    );
    api.apply(route("nope"));
    assert!(
        wait_until(CONVERGE, || route_accepted() == Some(json!("False"))),
        "the route's new status was not written: {:?}",
        api.get(ROUTES, "shop", "web")
    );
    let gw = api.get(GATEWAYS, "shop", "gw").unwrap();
    assert_eq!(gw["status"]["listeners"][0]["attachedRoutes"], 0, "{gw}");
    assert_eq!(
        api.status_writes(),
        before + 2,
        "unchanged statuses were rewritten"
    );
}
