//! The Gateway API from the API server (`gateway.networking.k8s.io`, found by discovery and
//! watched as the Istio kinds are): a Gateway of class `istio` and an HTTPRoute to it are
//! held, and the routes derived from them reach the gateway's proxy (a router labelled
//! `gateway.networking.k8s.io/gateway-name`); an HTTPRoute with an unknown field is refused
//! with its reason and the last valid one kept; an edit of its path is pushed, and so is its
//! deletion. The same objects in a config directory are the same configs (the GatewayClass
//! of no namespace in both). Without the Gateway API's CRDs the Istio kinds are watched
//! alone.

use std::time::Duration;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::Message;
use serde_json::{Value, json};

use crate::support::ads_client::{Client, RDS, istio_node, runtime};
use crate::support::fake_kube::*;
use crate::support::*;

const NODE_ID: &str = "router~10.1.0.9~gw-istio-0.shop~shop.svc.cluster.local";
const ROUTE: &str = "http.8080";
const CONVERGE: Duration = Duration::from_secs(30);
const GROUP_V1: &str = "gateway.networking.k8s.io/v1";

/// The config kinds (as configz names them) of the Gateway API.
const KINDS: [&str; 8] = [
    "GatewayClass",
    "KubernetesGateway",
    "HttpRoute",
    "GrpcRoute",
    "TlsRoute",
    "TcpRoute",
    "ReferenceGrant",
    "BackendTlsPolicy",
];

/// The class `istio` (cluster-scoped), as istiod creates it.
fn gateway_class() -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "GatewayClass",
           "metadata": {"name": "istio"},
           "spec": {"controllerName": "istio.io/gateway-controller"}})
}

fn gateway() -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "Gateway",
           "metadata": {"name": "gw", "namespace": "shop"},
           "spec": {"gatewayClassName": "istio",
                    "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}})
}

/// HTTPRoute `web` on `gw`: `web.example.com` with `path` (a prefix) to Service `web`.
fn http_route(path: &str) -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "HTTPRoute",
           "metadata": {"name": "web", "namespace": "shop"},
           "spec": {"parentRefs": [{"name": "gw"}],
                    "hostnames": ["web.example.com"],
                    "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}],
                               "backendRefs": [{"name": "web", "port": 8080}]}]}})
}

fn reference_grant() -> Value {
    json!({"apiVersion": GROUP_V1, "kind": "ReferenceGrant",
           "metadata": {"name": "from-shop", "namespace": "backends"},
           "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "shop"}],
                    "to": [{"group": "", "kind": "Service"}]}})
}

/// An API server holding the objects, and axon serving it.
fn start(api: &FakeKube, dir: &std::path::Path) -> Axon {
    let kubeconfig = api.write_kubeconfig(dir).display().to_string();
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    assert!(
        wait_until(CONVERGE, || axon.monitoring_get("/ready").status == 200),
        "never ready:\n{}",
        axon.logs()
    );
    axon
}

fn apply_world(api: &FakeKube) {
    api.apply(namespace("shop", &[]));
    api.apply(service("shop", "web", &[("http", 8080)]));
    api.apply(endpoint_slice(
        "shop",
        "web-1",
        "web",
        ("http", 8080),
        &[("10.1.0.7", "web-1")],
    ));
    api.apply(gateway_class());
    api.apply(gateway());
    api.apply(http_route("/api"));
    api.apply(reference_grant());
}

/// The `kubernetes-istio` registry of configz.
fn istio_registry(axon: &Axon) -> Value {
    let configz = axon.debug_json("/debug/configz");
    configz["kubernetes"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["source"] == "kubernetes-istio"))
        .cloned()
        .unwrap_or_else(|| panic!("no kubernetes-istio registry in {configz}"))
}

/// The Gateway API configs of a configz list, in its order.
fn gateway_api_configs(configs: &Value) -> Vec<Value> {
    configs
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| KINDS.contains(&c["key"]["kind"].as_str().unwrap_or_default()))
        .cloned()
        .collect()
}

/// The path prefixes of the routes of the virtual hosts for `web.example.com`.
fn prefixes(rds: &DiscoveryResponse) -> Vec<String> {
    rds.resources
        .iter()
        .map(|any| RouteConfiguration::decode(any.value.as_slice()).expect("a RouteConfiguration"))
        .filter(|rc| rc.name == ROUTE)
        .flat_map(|rc| rc.virtual_hosts)
        .filter(|vh| vh.domains.iter().any(|d| d.starts_with("web.example.com")))
        .flat_map(|vh| vh.routes)
        .filter_map(|r| match r.r#match?.path_specifier? {
            PathSpecifier::Prefix(p) | PathSpecifier::PathSeparatedPrefix(p) => Some(p),
            PathSpecifier::Path(p) => Some(p),
            _ => None,
        })
        .collect()
}

/// The next RDS response, the others ACKed.
async fn next_rds(c: &mut Client) -> DiscoveryResponse {
    loop {
        let r = c.next().await;
        if r.type_url == RDS {
            break r;
        }
        c.ack(&r, &[]).await;
    }
}

#[test]
fn gateway_api_objects_from_the_api_server_route_the_gateway_and_a_bad_edit_is_refused() {
    let api = FakeKube::start();
    let dir = tempfile::tempdir().expect("temp dir");
    apply_world(&api);
    let axon = start(&api, dir.path());

    // Every kind watched at the version istiod prefers, and the objects held.
    let registry = istio_registry(&axon);
    for kind in KINDS {
        assert_eq!(registry["versions"][kind], GROUP_V1, "{kind}: {registry}");
    }
    let held: Vec<String> = gateway_api_configs(&registry["configs"])
        .iter()
        .map(|c| {
            let key = &c["key"];
            format!(
                "{}/{}",
                key["kind"].as_str().unwrap_or_default(),
                key["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        held,
        [
            "GatewayClass/istio",
            "KubernetesGateway/gw",
            "HttpRoute/web",
            "ReferenceGrant/from-shop"
        ],
        "{registry}"
    );

    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let node = istio_node(
            NODE_ID,
            "shop",
            &[("gateway.networking.k8s.io/gateway-name", "gw")],
        );
        let cds = c.first_cds(node).await;
        c.ack(&cds, &[]).await;
        c.request(RDS, &[ROUTE], "", None).await;
        let rds = next_rds(&mut c).await;
        assert_eq!(prefixes(&rds), ["/api"], "{rds:?}");
        c.ack(&rds, &[ROUTE]).await;

        // An unknown field: refused with its reason, the last valid route kept.
        let mut bad = http_route("/bad");
        bad["spec"]["rules"][0]["colour"] = json!("blue");
        api.apply(bad);
        let refused = wait_until(CONVERGE, || {
            axon.logs().lines().any(|l| {
                l.contains("invalid config")
                    && l.contains("HTTPRoute shop/web")
                    && l.contains("colour")
                    && l.contains("kept")
            })
        });
        assert!(refused, "no rejection logged:\n{}", axon.logs());
        let registry = istio_registry(&axon);
        assert!(
            registry["errors"].to_string().contains("colour"),
            "{registry}"
        );
        assert!(
            registry["configs"].to_string().contains("/api")
                && !registry["configs"].to_string().contains("/bad"),
            "{registry}"
        );

        // A valid edit of the path is pushed.
        api.apply(http_route("/v2"));
        let rds = loop {
            let rds = next_rds(&mut c).await;
            c.ack(&rds, &[ROUTE]).await;
            if prefixes(&rds) != ["/api"] {
                break rds;
            }
        };
        assert_eq!(prefixes(&rds), ["/v2"], "{rds:?}");
        let registry = istio_registry(&axon);
        assert_eq!(registry["errors"], json!([]), "{registry}");

        // Deleted: the host's routes go with it.
        api.delete(GROUP_V1, "HTTPRoute", "shop", "web");
        let rds = next_rds(&mut c).await;
        assert!(prefixes(&rds).is_empty(), "{rds:?}");
    });
}

#[test]
fn the_same_gateway_api_objects_in_a_directory_are_the_same_configs() {
    let api = FakeKube::start();
    let dir = tempfile::tempdir().expect("temp dir");
    apply_world(&api);
    let from_api = start(&api, dir.path());

    let config = ConfigDir::new();
    let docs: Vec<String> = [
        gateway_class(),
        gateway(),
        http_route("/api"),
        reference_grant(),
    ]
    .iter()
    .map(|d| serde_norway::to_string(d).expect("YAML"))
    .collect();
    config.write("gateway-api.yaml", &docs.join("---\n"));
    let from_files = Axon::start(config.path());
    assert!(
        wait_until(CONVERGE, || from_files.monitoring_get("/ready").status
            == 200),
        "never ready:\n{}",
        from_files.logs()
    );
    let files = gateway_api_configs(&from_files.debug_json("/debug/configz")["configs"]);
    let kube = gateway_api_configs(&istio_registry(&from_api)["configs"]);
    assert_eq!(files.len(), 4, "{files:?}");
    assert_eq!(files, kube, "the directory's configs are the API server's");
}

#[test]
fn without_the_gateway_api_crds_the_istio_kinds_are_watched_alone() {
    let api = FakeKube::start_serving(true, false);
    let dir = tempfile::tempdir().expect("temp dir");
    api.apply(namespace("shop", &[]));
    let axon = start(&api, dir.path());
    assert!(
        axon.logs().lines().any(|l| l
            .contains("Gateway API kinds not served (CRDs not installed): not watched")
            && l.contains("HTTPRoute")),
        "{}",
        axon.logs()
    );
    let registry = istio_registry(&axon);
    let versions = registry["versions"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        versions.contains_key("VirtualService") && !KINDS.iter().any(|k| versions.contains_key(*k)),
        "{registry}"
    );
    // Nothing of the group was listed.
    assert_eq!(api.list_requests(HTTP_ROUTES), 0);
}

/// A ConfigMap with a CA (`ca.crt`) is held as the `configmap://` roots a BackendTLSPolicy
/// or a Gateway's client validation names; one without is held only as present (a Gateway's
/// `infrastructure.parametersRef` names one).
#[test]
fn a_config_map_holding_a_ca_is_read_as_its_roots() {
    let api = FakeKube::start();
    api.apply(namespace("shop", &[]));
    let (ca, _) = axon_config::fixtures::self_signed("ca", 2);
    api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "backend-ca", "namespace": "shop"},
                     "data": {"ca.crt": ca}}));
    api.apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "settings", "namespace": "shop"},
                     "data": {"a": "b"}}));
    let dir = ConfigDir::new();
    let axon = start(&api, dir.path());
    let held_as = |kind: &str, name: &str| {
        istio_registry(&axon)["configs"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["key"]["kind"] == kind && c["key"]["name"] == name)
    };
    let held = |name: &str| held_as("Secret", name);
    assert!(
        wait_until(CONVERGE, || held("configmap/backend-ca")),
        "the CA ConfigMap is not held: {}",
        istio_registry(&axon)
    );
    assert!(!held("configmap/settings"));
    assert!(
        held_as("ConfigMap", "settings"),
        "{}",
        istio_registry(&axon)
    );
}
