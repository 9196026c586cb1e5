//! The automated deployment of Gateways (`--gateway-deployment`, on by default with
//! `--kubernetes`), against the fake API server: a managed Gateway of class `istio` gets the
//! ServiceAccount, Deployment and Service `NAME-istio` (server-side applied, owned by the
//! Gateway, labelled and selected by its name); an edit of its listeners reaches the
//! Service's ports; an event that renders the same objects writes nothing; a deployed object
//! deleted by someone else is put back, and not those of a deleted Gateway (the garbage
//! collector's, emulated by the fake); a Gateway with a
//! Hostname address gets nothing, and one that switches to such an address loses its
//! objects. With `--namespace-selector`, only the selected namespaces' Gateways are deployed.
//! An object of the same name that the controller does not manage is left alone.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fake_kube::*;
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const GROUP_V1: &str = "gateway.networking.k8s.io/v1";
const KINDS: [&str; 3] = [SERVICE_ACCOUNTS, DEPLOYMENTS, SERVICES];

fn gateway(name: &str, listeners: Value, addresses: Value) -> Value {
    gateway_in("shop", name, listeners, addresses)
}

fn gateway_in(ns: &str, name: &str, listeners: Value, addresses: Value) -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "Gateway",
           "metadata": {"name": name, "namespace": ns, "uid": format!("{ns}-{name}-uid"),
                        "labels": {"team": "web"}},
           "spec": {"gatewayClassName": "istio", "listeners": listeners, "addresses": addresses}})
}

fn listeners(extra: bool) -> Value {
    let mut l = vec![
        json!({"name": "http", "port": 8080, "protocol": "HTTP"}),
        json!({"name": "db", "port": 5432, "protocol": "TCP"}),
    ];
    if extra {
        l.push(json!({"name": "admin.ui", "port": 9090, "protocol": "HTTP"}));
    }
    Value::Array(l)
}

fn hostname() -> Value {
    json!([{"type": "Hostname", "value": "edge.example.com"}])
}

/// The Service's ports as `(name, port, appProtocol)`.
fn ports(api: &FakeKube, name: &str) -> Vec<(String, i64, String)> {
    let Some(svc) = api.get(SERVICES, "shop", name) else {
        return Vec::new();
    };
    svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                p["port"].as_i64().unwrap_or_default(),
                p["appProtocol"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn exists_all(api: &FakeKube, name: &str) -> bool {
    exists_all_in(api, "shop", name)
}

fn exists_all_in(api: &FakeKube, ns: &str, name: &str) -> bool {
    KINDS.iter().all(|k| api.get(k, ns, name).is_some())
}

fn exists_any(api: &FakeKube, name: &str) -> bool {
    KINDS.iter().any(|k| api.get(k, "shop", name).is_some())
}

/// axon with `--kubernetes` and `args`, on the fake API server; the kubeconfig's directory
/// lives as long as the second value.
fn start(api: &FakeKube, args: &[&str]) -> (Axon, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(dir.path()).display().to_string();
    let args: Vec<&str> = std::iter::once("--kubernetes")
        .chain(args.iter().copied())
        .collect();
    let axon = Axon::start_with_env(None, &args, &[("KUBECONFIG", kubeconfig.as_str())]);
    (axon, dir)
}

fn writes(api: &FakeKube) -> Vec<u64> {
    KINDS.iter().map(|k| api.writes(k)).collect()
}

#[test]
fn a_managed_gateway_is_deployed_updated_and_removed_when_it_turns_manual() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    api.apply(gateway("gw", listeners(false), json!([])));
    api.apply(gateway("manual", listeners(false), hostname()));
    let (axon, _kubeconfig) = start(&api, &["--gateway-proxy-image", "proxy:test"]);
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "gw-istio")),
        "never deployed:\n{}",
        axon.logs()
    );

    let owner =
        json!([{"apiVersion": GROUP_V1, "kind": "Gateway", "name": "gw", "uid": "shop-gw-uid"}]);
    for kind in KINDS {
        let object = api.get(kind, "shop", "gw-istio").unwrap();
        let meta = &object["metadata"];
        assert_eq!(meta["ownerReferences"], owner, "{kind}");
        assert_eq!(meta["labels"]["team"], "web", "{kind}");
        assert_eq!(
            meta["labels"]["gateway.networking.k8s.io/gateway-name"],
            "gw"
        );
        assert_eq!(
            meta["labels"]["gateway.networking.k8s.io/gateway-class-name"],
            "istio"
        );
        assert_eq!(
            meta["labels"]["gateway.istio.io/managed"],
            "istio.io-gateway-controller"
        );
    }
    let deployment = api.get(DEPLOYMENTS, "shop", "gw-istio").unwrap();
    let selector = json!({"gateway.networking.k8s.io/gateway-name": "gw"});
    assert_eq!(deployment["spec"]["selector"]["matchLabels"], selector);
    let pod = &deployment["spec"]["template"];
    assert_eq!(
        pod["metadata"]["labels"]["sidecar.istio.io/inject"],
        "false"
    );
    assert_eq!(pod["spec"]["serviceAccountName"], "gw-istio");
    assert_eq!(pod["spec"]["containers"][0]["image"], "proxy:test");
    let service = api.get(SERVICES, "shop", "gw-istio").unwrap();
    assert_eq!(service["spec"]["selector"], selector);
    assert_eq!(service["spec"]["type"], "LoadBalancer");
    let port = |n: &str, p: i64, a: &str| (n.to_string(), p, a.to_string());
    assert_eq!(
        ports(&api, "gw-istio"),
        [
            port("status-port", 15021, "tcp"),
            port("http", 8080, "http"),
            port("db", 5432, "tcp")
        ]
    );

    // A listener added: the Service follows.
    api.apply(gateway("gw", listeners(true), json!([])));
    assert!(
        wait_until(CONVERGE, || ports(&api, "gw-istio").len() == 4),
        "ports never updated: {:?}\n{}",
        ports(&api, "gw-istio"),
        axon.logs()
    );
    assert_eq!(ports(&api, "gw-istio")[3], port("admin-ui", 9090, "http"));

    // An event that renders the same objects writes nothing: once a later Gateway's objects
    // exist (events are handled in order), only those were written.
    let before = writes(&api);
    let mut same = gateway("gw", listeners(true), json!([]));
    same["status"] = json!({"conditions": []});
    api.apply(same);
    api.apply(gateway("zz", listeners(false), json!([])));
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "zz-istio")),
        "zz never deployed:\n{}",
        axon.logs()
    );
    let after: Vec<u64> = writes(&api);
    assert_eq!(
        after,
        before.iter().map(|w| w + 1).collect::<Vec<_>>(),
        "writes per kind (SA, Deployment, Service)"
    );
    // The Gateway with a Hostname address got nothing.
    assert!(!exists_any(&api, "manual-istio"));

    // A deployed object deleted by someone else is put back.
    let uid = api.get(DEPLOYMENTS, "shop", "zz-istio").unwrap()["metadata"]["uid"].clone();
    api.delete("apps/v1", "Deployment", "shop", "zz-istio");
    assert!(
        wait_until(CONVERGE, || api
            .get(DEPLOYMENTS, "shop", "zz-istio")
            .is_some_and(|d| d["metadata"]["uid"] != uid)),
        "never put back:\n{}",
        axon.logs()
    );

    // A deleted Gateway's objects go with it (the garbage collector) and are not put back:
    // once a live Gateway's objects, deleted after them on each kind's watch, are back.
    api.apply(gateway("marker", listeners(false), json!([])));
    assert!(wait_until(CONVERGE, || exists_all(&api, "marker-istio")));
    let uids: Vec<Value> = KINDS
        .iter()
        .map(|k| api.get(k, "shop", "marker-istio").unwrap()["metadata"]["uid"].clone())
        .collect();
    api.delete(GROUP_V1, "Gateway", "shop", "zz");
    assert!(
        !exists_any(&api, "zz-istio"),
        "the fake's garbage collector"
    );
    api.delete("v1", "ServiceAccount", "shop", "marker-istio");
    api.delete("apps/v1", "Deployment", "shop", "marker-istio");
    api.delete("v1", "Service", "shop", "marker-istio");
    assert!(
        wait_until(CONVERGE, || KINDS.iter().zip(&uids).all(|(k, uid)| api
            .get(k, "shop", "marker-istio")
            .is_some_and(|o| o["metadata"]["uid"] != *uid))),
        "marker never put back:\n{}",
        axon.logs()
    );
    assert!(!exists_any(&api, "zz-istio"), "put back:\n{}", axon.logs());

    // Switched to a Hostname address: its objects are deleted.
    api.apply(gateway("gw", listeners(true), hostname()));
    assert!(
        wait_until(CONVERGE, || !exists_any(&api, "gw-istio")),
        "never deleted:\n{}",
        axon.logs()
    );
    assert!(exists_all(&api, "marker-istio"));
}

#[test]
fn only_the_gateways_of_selected_namespaces_are_deployed() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[("mesh", "on")]));
    api.apply(namespace("other", &[]));
    api.apply(gateway_in("other", "gw", listeners(false), json!([])));
    api.apply(gateway_in("shop", "gw", listeners(false), json!([])));
    let (axon, _kubeconfig) = start(&api, &["--namespace-selector", "mesh=on"]);
    assert!(
        wait_until(CONVERGE, || exists_all_in(&api, "shop", "gw-istio")),
        "never deployed:\n{}",
        axon.logs()
    );
    // Listed first, and left out.
    assert!(
        KINDS
            .iter()
            .all(|k| api.get(k, "other", "gw-istio").is_none())
    );
    // Selected once labelled.
    api.apply(namespace("other", &[("mesh", "on")]));
    assert!(
        wait_until(CONVERGE, || exists_all_in(&api, "other", "gw-istio")),
        "never deployed once selected:\n{}",
        axon.logs()
    );
}

#[test]
fn an_object_of_the_same_name_made_by_someone_else_is_left_alone() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    api.apply(service("shop", "gw-istio", &[("http", 80)]));
    api.apply(gateway("gw", listeners(false), json!([])));
    // Listed after gw: once its objects exist, gw's were handled.
    api.apply(gateway("zz", listeners(false), json!([])));
    let (axon, _kubeconfig) = start(&api, &[]);
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "zz-istio")),
        "never deployed:\n{}",
        axon.logs()
    );
    assert!(api.get(DEPLOYMENTS, "shop", "gw-istio").is_some());
    assert!(api.get(SERVICE_ACCOUNTS, "shop", "gw-istio").is_some());
    // istiod's canManage: the Service without the managed label is not taken over.
    assert_eq!(api.writes(SERVICES), 1, "zz-istio's only");
    assert_eq!(
        ports(&api, "gw-istio"),
        [("http".to_string(), 80, String::new())]
    );
}

const LEASES: &str = "/apis/coordination.k8s.io/v1/leases";
const GATEWAY_CLASSES: &str = "/apis/gateway.networking.k8s.io/v1/gatewayclasses";

/// The Lease `name` of axon's namespace, held by `holder` since now for an hour.
fn lease_held_by(name: &str, holder: &str) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string();
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"holderIdentity": holder, "leaseDurationSeconds": 3600,
                    "acquireTime": now, "renewTime": now, "leaseTransitions": 0}})
}

/// Only the holder of the Lease `axon-gateway-deployment` deploys (istiod's
/// `istio-gateway-deployment`): while another replica holds it, nothing is written; once it
/// is free, this replica takes it, creates the missing GatewayClass `istio` (again when it is
/// deleted), marks the Gateway with istiod's controller version and deploys it. A Gateway a
/// newer controller marked is left alone.
#[test]
fn the_lease_holder_deploys_creates_the_class_and_marks_the_controller_version() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    api.apply(lease_held_by("axon-gateway-deployment", "another-replica"));
    api.apply(gateway("gw", listeners(false), json!([])));
    let mut newer = gateway("newer", listeners(false), json!([]));
    newer["metadata"]["annotations"] = json!({"gateway.istio.io/controller-version": "6"});
    api.apply(newer);
    let (axon, _kubeconfig) = start(&api, &["--replica-name", "axon-a"]);
    // The status writer's Lease is free and taken: axon is up and leading that one, and has
    // listed the Gateways; the deployment's is another replica's, so nothing is deployed.
    let holder = |name: &str| {
        api.get(LEASES, "default", name)
            .map(|l| l["spec"]["holderIdentity"].clone())
    };
    assert!(
        wait_until(CONVERGE, || {
            holder("axon-gateway-status-leader") == Some(json!("axon-a"))
                && api
                    .get(KUBERNETES_GATEWAYS, "shop", "gw")
                    .is_some_and(|g| g["status"]["conditions"].is_array())
        }),
        "status never written:\n{}",
        axon.logs()
    );
    assert!(!exists_any(&api, "gw-istio"), "deployed without the Lease");
    assert!(api.get(GATEWAY_CLASSES, "", "istio").is_none());

    // The Lease freed: taken at the next renewal (10 s), then the class, the mark, the objects.
    api.delete(
        "coordination.k8s.io/v1",
        "Lease",
        "default",
        "axon-gateway-deployment",
    );
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "gw-istio")),
        "never deployed once the Lease was free:\n{}",
        axon.logs()
    );
    assert_eq!(holder("axon-gateway-deployment"), Some(json!("axon-a")));
    let class = api.get(GATEWAY_CLASSES, "", "istio").expect("the class");
    assert_eq!(
        class["spec"]["controllerName"],
        "istio.io/gateway-controller"
    );
    assert_eq!(
        class["spec"]["description"],
        "The default Istio GatewayClass"
    );
    assert_eq!(
        api.get(KUBERNETES_GATEWAYS, "shop", "gw").unwrap()["metadata"]["annotations"]["gateway.istio.io/controller-version"],
        "5"
    );
    assert!(!exists_any(&api, "newer-istio"), "a newer controller's");
    assert_eq!(
        api.get(KUBERNETES_GATEWAYS, "shop", "newer").unwrap()["metadata"]["annotations"]["gateway.istio.io/controller-version"],
        "6"
    );

    // The class deleted: made again.
    api.delete(GROUP_V1, "GatewayClass", "", "istio");
    assert!(
        wait_until(CONVERGE, || api.get(GATEWAY_CLASSES, "", "istio").is_some()),
        "the class never made again:\n{}",
        axon.logs()
    );
}

fn config_map(ns: &str, name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "data": data})
}

/// istiod's overlays: the class defaults (a ConfigMap of axon's namespace labelled
/// `gateway.istio.io/defaults-for-class: istio`), then the Gateway's
/// `infrastructure.parametersRef` ConfigMap, patch the rendered objects; an autoscaler exists
/// while an overlay asks for it; an edit of a ConfigMap re-renders; an invalid overlay writes
/// nothing.
#[test]
fn parameters_and_class_defaults_overlay_the_deployed_objects() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    api.apply(config_map(
        "default",
        "istio-defaults",
        json!({"gateway.istio.io/defaults-for-class": "istio"}),
        json!({"deployment": "spec:\n  replicas: 2\n",
               "service": "metadata:\n  annotations:\n    team: edge\n"}),
    ));
    api.apply(config_map(
        "shop",
        "gw-options",
        json!({}),
        json!({"deployment": "spec:\n  replicas: 3\n",
               "horizontalPodAutoscaler": "spec:\n  minReplicas: 2\n  maxReplicas: 5\n"}),
    ));
    let with_params = |name: &str, cm: &str| {
        let mut gw = gateway(name, listeners(false), json!([]));
        gw["spec"]["infrastructure"] =
            json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": cm}});
        gw
    };
    api.apply(with_params("gw", "gw-options"));
    api.apply(config_map(
        "shop",
        "bad",
        json!({}),
        json!({"statefulSet": "spec: {}"}),
    ));
    api.apply(with_params("broken", "bad"));
    api.apply(gateway("plain", listeners(false), json!([])));
    let (axon, _kubeconfig) = start(&api, &[]);
    let replicas = |name: &str| {
        api.get(DEPLOYMENTS, "shop", name)
            .map(|d| d["spec"]["replicas"].clone())
    };
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "gw-istio")
            && exists_all(&api, "plain-istio")),
        "never deployed:\n{}",
        axon.logs()
    );
    // The parametersRef wins over the class defaults; the defaults alone for the other.
    assert_eq!(replicas("gw-istio"), Some(json!(3)));
    assert_eq!(replicas("plain-istio"), Some(json!(2)));
    assert_eq!(
        api.get(SERVICES, "shop", "plain-istio").unwrap()["metadata"]["annotations"]["team"],
        "edge"
    );
    let hpa = api
        .get(HORIZONTAL_POD_AUTOSCALERS, "shop", "gw-istio")
        .expect("the autoscaler an overlay asks for");
    assert_eq!(hpa["spec"]["minReplicas"], 2);
    assert_eq!(hpa["spec"]["maxReplicas"], 5);
    assert_eq!(hpa["spec"]["scaleTargetRef"]["name"], "gw-istio");
    assert_eq!(hpa["metadata"]["ownerReferences"][0]["name"], "gw");
    assert!(
        api.get(HORIZONTAL_POD_AUTOSCALERS, "shop", "plain-istio")
            .is_none()
    );
    assert!(
        api.get(POD_DISRUPTION_BUDGETS, "shop", "gw-istio")
            .is_none()
    );
    // An overlay of a kind istiod does not know: nothing written for that Gateway.
    assert!(!exists_any(&api, "broken-istio"), "{}", axon.logs());

    // The ConfigMap edited: a disruption budget instead of the autoscaler, 4 replicas.
    api.apply(config_map(
        "shop",
        "gw-options",
        json!({}),
        json!({"deployment": "spec:\n  replicas: 4\n",
               "podDisruptionBudget": "spec:\n  minAvailable: 1\n"}),
    ));
    assert!(
        wait_until(CONVERGE, || replicas("gw-istio") == Some(json!(4))
            && api
                .get(POD_DISRUPTION_BUDGETS, "shop", "gw-istio")
                .is_some()
            && api
                .get(HORIZONTAL_POD_AUTOSCALERS, "shop", "gw-istio")
                .is_none()),
        "the edit never reached the objects:\n{}",
        axon.logs()
    );
    // The class defaults edited: the Gateway without parameters follows.
    api.apply(config_map(
        "default",
        "istio-defaults",
        json!({"gateway.istio.io/defaults-for-class": "istio"}),
        json!({"deployment": "spec:\n  replicas: 5\n"}),
    ));
    assert!(
        wait_until(CONVERGE, || replicas("plain-istio") == Some(json!(5))),
        "the class defaults' edit never reached the objects:\n{}",
        axon.logs()
    );
    // The bad ConfigMap mended: deployed.
    api.apply(config_map(
        "shop",
        "bad",
        json!({}),
        json!({"deployment": "spec:\n  replicas: 1\n"}),
    ));
    assert!(
        wait_until(CONVERGE, || exists_all(&api, "broken-istio")),
        "never deployed once mended:\n{}",
        axon.logs()
    );
}
