//! A cluster described in a config directory is served as the same cluster behind an API
//! server: one small cluster (a labelled Namespace selected by `--namespace-selector`, one
//! that is not, a ClusterIP Service with a named `http` port and a headless one, their
//! EndpointSlices and Pods with labels and service accounts), written once as
//! `kubectl get -o yaml` documents (a `kind: List` among them) in a directory and once
//! applied to the in-process fake API server (`support/fake_kube.rs`, read by kube's real
//! client in `axon serve --kubernetes`). Both axons give a sidecar the same clusters,
//! listeners and endpoints, and hold the same ServiceEntries (`/debug/configz`). Then an
//! EndpointSlice edit in the directory is pushed as EDS alone, without a full push.

use crate::support;
use crate::support::ads_client::{CDS, Client, EDS, LDS, runtime};
use crate::support::fake_kube::FakeKube;

use std::collections::BTreeMap;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::Message;
use support::{Axon, ConfigDir};

const NODE_ID: &str = "sidecar~10.1.0.1~web-1.shop~shop.svc.cluster.local";
const WEB: &str = "outbound|80||web.shop.svc.cluster.local";

const NAMESPACES: &str = "apiVersion: v1
items:
- apiVersion: v1
  kind: Namespace
  metadata:
    name: shop
    labels: {kubernetes.io/metadata.name: shop, mesh: 'on'}
    resourceVersion: '101'
  spec: {finalizers: [kubernetes]}
  status: {phase: Active}
- apiVersion: v1
  kind: Namespace
  metadata:
    name: other
    labels: {kubernetes.io/metadata.name: other}
kind: List
metadata: {resourceVersion: ''}
";

const SERVICES: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  creationTimestamp: 2024-05-01T10:00:00Z
  uid: 6f1c1a44-0000-4000-8000-000000000001
spec:
  type: ClusterIP
  clusterIP: 10.96.0.20
  clusterIPs: [10.96.0.20]
  ports:
  - {name: http, port: 80, protocol: TCP, targetPort: 8080}
  selector: {app: web}
status: {loadBalancer: {}}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: None
  ports:
  - {name: tcp-db, port: 5432, protocol: TCP, targetPort: 5432}
  selector: {app: db}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}}}
";

fn pod(name: &str, ip: &str, labels: &str, account: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: shop
  labels: {labels}
spec:
  serviceAccountName: {account}
  nodeName: node-a
  containers: [{{name: app, image: 'example/app:1', ports: [{{containerPort: 8080}}]}}]
status: {{phase: Running, podIP: {ip}, podIPs: [{{ip: {ip}}}]}}
"
    )
}

fn pods() -> String {
    [
        pod("web-1", "10.1.0.1", "{app: web, version: v1}", "web"),
        pod("web-2", "10.1.0.2", "{app: web, version: v2}", "web"),
        pod("db-0", "10.1.0.3", "{app: db}", "db"),
    ]
    .join("---\n")
}

/// The EndpointSlices: web's second endpoint at `web_2`.
fn slices(web_2: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-x7k2p
  namespace: shop
  labels: {{kubernetes.io/service-name: web, endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io}}
addressType: IPv4
ports: [{{name: http, port: 8080, protocol: TCP}}]
endpoints:
- addresses: [10.1.0.1]
  conditions: {{ready: true, serving: true, terminating: false}}
  nodeName: node-a
  targetRef: {{kind: Pod, name: web-1, namespace: shop}}
  zone: zone-a
- addresses: [{web_2}]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: web-2, namespace: shop}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: db-q9v4m
  namespace: shop
  labels: {{kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{{name: tcp-db, port: 5432, protocol: TCP}}]
endpoints:
- addresses: [10.1.0.3]
  conditions: {{ready: true}}
  targetRef: {{kind: Pod, name: db-0, namespace: shop}}
"
    )
}

/// A Service of the namespace the selector does not select.
const OTHER: &str = "apiVersion: v1
kind: Service
metadata: {name: hidden, namespace: other}
spec:
  clusterIP: 10.96.0.99
  ports: [{name: http, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: hidden-1
  namespace: other
  labels: {kubernetes.io/service-name: hidden}
addressType: IPv4
ports: [{name: http, port: 80}]
endpoints: [{addresses: [10.2.0.1]}]
";

/// The files of the directory, by name.
fn files(web_2: &str) -> Vec<(&'static str, String)> {
    vec![
        ("namespaces.yaml", NAMESPACES.to_string()),
        ("services.yaml", SERVICES.to_string()),
        ("pods.yaml", pods()),
        ("slices.yaml", slices(web_2)),
        ("other.yaml", OTHER.to_string()),
    ]
}

/// Every object of `text` (a List's items one by one) the fake API server serves.
fn objects(text: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for doc in text.split("\n---\n") {
        let value: serde_json::Value = serde_norway::from_str(doc).expect("valid YAML");
        let items = match value["kind"].as_str() {
            Some("List") => value["items"].as_array().cloned().unwrap_or_default(),
            _ => vec![value],
        };
        out.extend(items.into_iter().filter(|o| o["kind"] != "Deployment"));
    }
    out
}

const SELECTOR: [&str; 2] = ["--namespace-selector", "mesh=on"];

fn wait_ready(axon: &Axon) {
    assert!(
        support::wait_until(Duration::from_secs(30), || axon
            .monitoring_get("/ready")
            .status
            == 200),
        "axon never became ready:\n{}",
        axon.logs()
    );
}

/// The next response of `type_url` (skipping any other).
async fn next_of(c: &mut Client, type_url: &str) -> DiscoveryResponse {
    loop {
        let r = c.next().await;
        if r.type_url == type_url {
            return r;
        }
    }
}

/// What a sidecar of `web-1` is sent: every cluster, listener and load assignment by type
/// and name, as encoded.
async fn sidecar_view(axon: &Axon) -> BTreeMap<(String, String), Vec<u8>> {
    let node = crate::support::ads_client::istio_node(
        NODE_ID,
        "shop",
        &[("app", "web"), ("version", "v1")],
    );
    let mut c = Client::connect(axon).await;
    let cds = c.first_cds(node).await;
    c.ack(&cds, &[]).await;
    let mut view = BTreeMap::new();
    let mut eds_names = Vec::new();
    for any in &cds.resources {
        let cluster = Cluster::decode(any.value.as_slice()).expect("a Cluster");
        if cluster.eds_cluster_config.is_some() {
            eds_names.push(cluster.name.clone());
        }
        view.insert(("cds".into(), cluster.name), any.value.clone());
    }
    let names: Vec<&str> = eds_names.iter().map(String::as_str).collect();
    c.request(EDS, &names, "", None).await;
    let eds = next_of(&mut c, EDS).await;
    c.ack(&eds, &names).await;
    for any in &eds.resources {
        let cla = ClusterLoadAssignment::decode(any.value.as_slice()).expect("an assignment");
        view.insert(("eds".into(), cla.cluster_name), any.value.clone());
    }
    c.request(LDS, &[], "", None).await;
    let lds = next_of(&mut c, LDS).await;
    for any in &lds.resources {
        let listener = Listener::decode(any.value.as_slice()).expect("a Listener");
        view.insert(("lds".into(), listener.name), any.value.clone());
    }
    view
}

#[test]
fn a_cluster_in_a_config_directory_is_served_as_the_api_server_serves_it() {
    let dir = ConfigDir::new();
    for (name, text) in files("10.1.0.2") {
        dir.write(name, &text);
    }
    let from_files = Axon::start_with_args(dir.path(), &SELECTOR);

    let api = FakeKube::start();
    let kube_dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(kube_dir.path());
    for (_, text) in files("10.1.0.2") {
        for object in objects(&text) {
            api.apply(object);
        }
    }
    let mut args = vec!["--kubernetes"];
    args.extend(SELECTOR);
    let kubeconfig = kubeconfig.display().to_string();
    let from_api = Axon::start_with_env(None, &args, &[("KUBECONFIG", kubeconfig.as_str())]);
    wait_ready(&from_files);
    wait_ready(&from_api);

    // The same ServiceEntries, made by the one translation (the hidden namespace's dropped),
    // and the selected Namespace with its labels.
    let files_configz = from_files.debug_json("/debug/configz");
    let api_configz = from_api.debug_json("/debug/configz");
    let entries = &files_configz["configs"];
    let text = entries.to_string();
    assert_eq!(entries.as_array().map(Vec::len), Some(3), "{files_configz}");
    assert!(
        text.contains(r#""kind":"Namespace","name":"shop""#),
        "{files_configz}"
    );
    assert!(
        text.contains("svc:web") && text.contains("svc:db") && !text.contains("hidden"),
        "web and db only: {files_configz}"
    );
    assert_eq!(
        entries, &api_configz["kubernetes"][0]["configs"],
        "the directory's entries are the API server's"
    );
    assert_eq!(files_configz["objects"]["services"], 2, "{files_configz}");
    let skipped = files_configz["unsupported_kinds"].to_string();
    assert!(skipped.contains("Deployment"), "{files_configz}");

    runtime().block_on(async {
        let files_view = sidecar_view(&from_files).await;
        let api_view = sidecar_view(&from_api).await;
        let names = |v: &BTreeMap<(String, String), Vec<u8>>| -> Vec<String> {
            v.keys().map(|(t, n)| format!("{t} {n}")).collect()
        };
        for want in [
            format!("cds {WEB}"),
            "cds outbound|5432||db.shop.svc.cluster.local".to_string(),
            format!("eds {WEB}"),
        ] {
            assert!(
                names(&files_view).contains(&want),
                "{want}: {:?}",
                names(&files_view)
            );
        }
        assert!(
            !names(&files_view).iter().any(|n| n.contains("hidden")),
            "the unselected namespace is not served"
        );
        assert_eq!(names(&files_view), names(&api_view), "the same resources");
        for (key, bytes) in &files_view {
            assert!(
                api_view.get(key) == Some(bytes),
                "{key:?} differs between the directory and the API server"
            );
        }
    });
}

#[test]
fn an_endpoint_slice_edit_in_the_directory_is_pushed_as_eds_only() {
    let dir = ConfigDir::new();
    for (name, text) in files("10.1.0.2") {
        dir.write(name, &text);
    }
    let axon = Axon::start_with_args(dir.path(), &SELECTOR);
    wait_ready(&axon);
    let node = crate::support::ads_client::istio_node(
        NODE_ID,
        "shop",
        &[("app", "web"), ("version", "v1")],
    );
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let cds = c.first_cds(node).await;
        assert_eq!(cds.type_url, CDS);
        c.ack(&cds, &[]).await;
        c.request(EDS, &[WEB], "", None).await;
        let eds = next_of(&mut c, EDS).await;
        c.ack(&eds, &[WEB]).await;

        dir.write("slices.yaml", &slices("10.1.0.9"));
        let r = c.next().await;
        assert_eq!(r.type_url, EDS, "no CDS before it: an EDS-only push");
        assert_ne!(r.version_info, eds.version_info);
        let moved = r
            .resources
            .iter()
            .any(|a| a.value.windows(8).any(|w| w == b"10.1.0.9"));
        assert!(moved, "the new endpoint is sent");
        let status = axon.push_status();
        assert_eq!(
            status["request"]["full"],
            serde_json::json!(false),
            "an endpoint-only context: {status}"
        );
        assert_eq!(
            axon.metric("axon_endpoint_index_swaps "),
            Some(1.0),
            "{}",
            axon.metrics()
        );
    });
}
