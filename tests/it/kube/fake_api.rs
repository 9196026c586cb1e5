//! End to end from a Kubernetes API to Envoy's routing: kube's real client (in the real
//! `axon serve --kubernetes`) against an in-process fake API server on loopback
//! (`support/fake_kube.rs`: list, watch with chunked events and bookmarks, 410 Gone), and a
//! real Envoy gateway routing to local upstreams through what axon made of the Services,
//! EndpointSlices, Pods and Istio objects it watched.
//!
//! Checked: `/ready` answers 503 until every initial list is served; routing by subsets
//! (pod labels); a namespace outside `--namespace-selector` is not served; a
//! resourceVersion-only update pushes nothing; a 410 in the middle of a watch, with changes
//! made while the relist is held back, loses nothing; a dropped watch resumes from its
//! resourceVersion without losing the change made meanwhile.

use crate::support;
use crate::support::fake_kube;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use fake_kube::*;
use support::*;

const NODE_ID: &str = "router~127.0.0.1~ingress-1.istio-system~istio-system.svc.cluster.local";
const BACKEND: &str = "backend.demo.svc.cluster.local";
const CONVERGE: Duration = Duration::from_secs(30);

fn gateway(gw_port: u16) -> serde_json::Value {
    istio(&format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: ingress, namespace: istio-system}}\nspec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  - port: {{number: {gw_port}, name: http, protocol: HTTP}}\n    hosts: ['*']\n"
    ))
}

fn destination_rule() -> serde_json::Value {
    istio(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: backend, namespace: demo}\nspec:\n  host: backend\n  subsets:\n  - {name: v1, labels: {version: v1}}\n  - {name: v2, labels: {version: v2}}\n",
    )
}

/// `x-version: v2` goes to subset v2; everything else to `default_subset`.
fn virtual_service(default_subset: &str) -> serde_json::Value {
    istio(&format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: backend, namespace: demo}}\nspec:\n  hosts: ['*']\n  gateways: [istio-system/ingress]\n  http:\n  - match: [{{headers: {{x-version: {{exact: v2}}}}}}]\n    route: [{{destination: {{host: {BACKEND}, subset: v2}}}}]\n  - route: [{{destination: {{host: {BACKEND}, subset: {default_subset}}}}}]\n"
    ))
}

/// A fake cluster with the demo mesh: namespaces `demo` and `istio-system` selected
/// (`mesh=on`), `other` not; Service `backend` with two EndpointSlices (one per version, to
/// local upstreams) and its Pods; a Gateway, DestinationRule and VirtualService.
struct Cluster {
    api: FakeKube,
    _dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    /// The gateway port (moved if it was taken before Envoy could bind it).
    gw_port: std::cell::Cell<u16>,
    v1: Upstream,
    v2: Upstream,
}

impl Cluster {
    fn start() -> Cluster {
        let api = FakeKube::start();
        let dir = tempfile::tempdir().expect("temp dir");
        let kubeconfig = api.write_kubeconfig(dir.path());
        let (v1, v2) = (Upstream::start("backend-v1"), Upstream::start("backend-v2"));
        let gw_port = free_port();
        api.apply(namespace("demo", &[("mesh", "on")]));
        api.apply(namespace("istio-system", &[("mesh", "on")]));
        api.apply(namespace("other", &[]));
        api.apply(service("demo", "backend", &[("http", 80)]));
        api.apply(pod(
            "demo",
            "backend-v1",
            &[("app", "backend"), ("version", "v1")],
        ));
        api.apply(pod(
            "demo",
            "backend-v2",
            &[("app", "backend"), ("version", "v2")],
        ));
        api.apply(endpoint_slice(
            "demo",
            "backend-v1",
            "backend",
            ("http", v1.port()),
            &[("127.0.0.1", "backend-v1")],
        ));
        api.apply(endpoint_slice(
            "demo",
            "backend-v2",
            "backend",
            ("http", v2.port()),
            &[("127.0.0.1", "backend-v2")],
        ));
        api.apply(service("other", "secret", &[("http", 80)]));
        api.apply(endpoint_slice(
            "other",
            "secret",
            "secret",
            ("http", v1.port()),
            &[("127.0.0.1", "s")],
        ));
        api.apply(gateway(gw_port));
        api.apply(destination_rule());
        api.apply(virtual_service("v1"));
        Cluster {
            api,
            _dir: dir,
            kubeconfig,
            gw_port: std::cell::Cell::new(gw_port),
            v1,
            v2,
        }
    }

    fn axon(&self, extra: &[&str], config_dir: Option<&std::path::Path>) -> Axon {
        let mut args = vec!["--kubernetes"];
        args.extend_from_slice(extra);
        let kubeconfig = self.kubeconfig.display().to_string();
        Axon::start_with_env(config_dir, &args, &[("KUBECONFIG", kubeconfig.as_str())])
    }

    fn gw(&self) -> SocketAddr {
        Envoy::local(self.gw_port.get())
    }
}

fn ready_status(axon: &Axon) -> u16 {
    axon.monitoring_get("/ready").status
}

/// Waits until `GET /` with `headers` through the gateway answers `want` (a body of a 200,
/// or `status N`) five times in a row.
fn wait_for(
    c: &Cluster,
    envoy: &Envoy,
    axon: &Axon,
    what: &str,
    headers: &[(&str, &str)],
    want: &str,
) {
    let mut last = (0, String::new());
    let mut streak = 0;
    let ok = wait_until(CONVERGE, || {
        last = http_get(c.gw(), "/", headers);
        let got = if last.0 == 200 {
            last.1.clone()
        } else {
            format!("status {}", last.0)
        };
        streak = if got == want { streak + 1 } else { 0 };
        streak >= 5
    });
    assert!(
        ok,
        "{what}: GET / {headers:?} never settled on {want:?}; last {last:?}\nclusters: {:?}\naxon log tail:\n{}",
        dynamic_cluster_names(&envoy.config_dump()),
        axon.logs()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn kubernetes_objects_route_through_envoy_and_survive_410_and_lost_watches() {
    let c = Cluster::start();
    c.api.hold_lists(ENDPOINT_SLICES);
    let axon = c.axon(&["--namespace-selector", "mesh=on"], None);

    // /ready is 503 while an initial list is held back, 200 once it is served.
    assert!(
        wait_until(CONVERGE, || c.api.list_requests(ENDPOINT_SLICES) >= 1),
        "axon never listed EndpointSlices"
    );
    let r = axon.monitoring_get("/ready");
    assert_eq!(
        r.status, 503,
        "ready before the EndpointSlices were listed: {}",
        r.body
    );
    assert!(r.body.contains("Kubernetes"), "{}", r.body);
    assert_eq!(axon.monitoring_get("/healthz").status, 200);
    assert_eq!(ready_status(&axon), 503);
    c.api.release_lists(ENDPOINT_SLICES);
    assert!(
        wait_until(CONVERGE, || ready_status(&axon) == 200),
        "/ready never turned 200 after the lists were served"
    );

    // Routing by subsets: the EndpointSlices' endpoints carry their Pods' labels.
    let (envoy, gw_port) = start_envoy_listening(
        &axon,
        c.gw_port.get(),
        |port| format!("0.0.0.0_{port}"),
        |port| {
            c.api.apply(gateway(port));
        },
        || {
            Envoy::start_gateway(
                axon.xds_addr(),
                NODE_ID,
                &[("istio", "ingressgateway")],
                "istio-system",
            )
        },
        CONVERGE,
    );
    c.gw_port.set(gw_port);
    // No request before Envoy has the routes to both subsets in force.
    let listener = format!("0.0.0.0_{gw_port}");
    let route_config = format!("http.{gw_port}");
    let (v1, v2) = (
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
    );
    let want = RouteInForce {
        listener: &listener,
        route_config: &route_config,
        domain: "*",
        clusters: &[&v1, &v2],
    };
    wait_for_route(&envoy, &want, CONVERGE);
    wait_for(&c, &envoy, &axon, "default route", &[], "backend-v1");
    wait_for(
        &c,
        &envoy,
        &axon,
        "header route",
        &[("x-version", "v2")],
        "backend-v2",
    );
    let clusters = dynamic_cluster_names(&envoy.config_dump());
    for want in [
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
    ] {
        assert!(clusters.contains(&want), "no {want}: {clusters:?}");
    }
    assert!(
        !clusters.iter().any(|n| n.contains("secret.other")),
        "namespace `other` is not selected, yet served: {clusters:?}"
    );

    // A resourceVersion-only update of the Service and a status-only update of a Pod push
    // nothing: the registry sees no change and sends nothing.
    let built = axon.built_version();
    let unchanged = || {
        axon.metric("axon_config_unchanged_updates{source=\"kubernetes\"}")
            .unwrap_or(0.0)
    };
    let quiet = unchanged();
    let svc = c.api.get(SERVICES, "demo", "backend").expect("the Service");
    c.api.apply(svc);
    let mut p = c.api.get(PODS, "demo", "backend-v1").expect("the Pod");
    p["status"]["phase"] = "Running".into();
    p["status"]["conditions"] = serde_json::json!([{"type": "Ready", "status": "True"}]);
    c.api.apply(p);
    assert!(
        wait_until(CONVERGE, || unchanged() >= quiet + 2.0),
        "axon never handled the resourceVersion-only updates"
    );
    assert_eq!(
        axon.built_version(),
        built,
        "a resourceVersion-only update caused a push: {}",
        axon.push_status()
    );

    // 410 Gone in the middle of the VirtualService watch; while the relist is held back, the
    // default route moves to v2. The relist brings the change: nothing is lost.
    let lists = c.api.list_requests(VIRTUAL_SERVICES);
    c.api.hold_lists(VIRTUAL_SERVICES);
    c.api.expire_watches(VIRTUAL_SERVICES);
    assert!(
        wait_until(CONVERGE, || c.api.list_requests(VIRTUAL_SERVICES) > lists),
        "the watcher never relisted after 410 Gone"
    );
    c.api.apply(virtual_service("v2"));
    c.api.release_lists(VIRTUAL_SERVICES);
    wait_for(
        &c,
        &envoy,
        &axon,
        "default route after the relist",
        &[],
        "backend-v2",
    );
    assert_eq!(
        ready_status(&axon),
        200,
        "a relist does not make axon unready"
    );
    assert!(
        axon.metric("axon_kubernetes_relists{reason=\"expired\"}")
            .is_some_and(|n| n >= 1.0),
        "the watcher saw no 410: {}",
        axon.metrics()
    );

    // The EndpointSlice watch is dropped (a lost connection) and a slice changes meanwhile:
    // the watch resumes from its resourceVersion, without a relist, and replays the change.
    let (lists, watches) = (
        c.api.lists_served(ENDPOINT_SLICES),
        c.api.watch_requests(ENDPOINT_SLICES),
    );
    c.api.drop_watches(ENDPOINT_SLICES);
    c.api.apply(endpoint_slice(
        "demo",
        "backend-v2",
        "backend",
        ("http", c.v1.port()),
        &[("127.0.0.1", "backend-v2")],
    ));
    wait_for(
        &c,
        &envoy,
        &axon,
        "subset v2 now at v1's port",
        &[("x-version", "v2")],
        "backend-v1",
    );
    assert!(c.api.watch_requests(ENDPOINT_SLICES) > watches);
    assert_eq!(
        c.api.lists_served(ENDPOINT_SLICES),
        lists,
        "a dropped watch resumes, it does not relist"
    );

    // 410 on the EndpointSlices; the v2 slice is deleted during the relist: subset v2 is
    // left with no endpoints (503), and v1 still routes.
    let lists = c.api.list_requests(ENDPOINT_SLICES);
    c.api.hold_lists(ENDPOINT_SLICES);
    c.api.expire_watches(ENDPOINT_SLICES);
    assert!(wait_until(CONVERGE, || c
        .api
        .list_requests(ENDPOINT_SLICES)
        > lists));
    c.api
        .delete("discovery.k8s.io/v1", "EndpointSlice", "demo", "backend-v2");
    c.api.release_lists(ENDPOINT_SLICES);
    wait_for(
        &c,
        &envoy,
        &axon,
        "subset v2 without endpoints",
        &[("x-version", "v2")],
        "status 503",
    );
    c.api.apply(virtual_service("v1"));
    wait_for(
        &c,
        &envoy,
        &axon,
        "default route back on v1",
        &[],
        "backend-v1",
    );
    assert!(c.v2.hits() > 0 && c.v1.hits() > 0);
}

#[test]
fn ready_waits_for_the_istio_lists_with_a_config_dir_beside() {
    let c = Cluster::start();
    c.api.hold_lists(VIRTUAL_SERVICES);
    let config = ConfigDir::new();
    let axon = c.axon(&[], Some(config.path()));
    assert!(
        wait_until(CONVERGE, || c.api.list_requests(VIRTUAL_SERVICES) >= 1),
        "axon never listed VirtualServices"
    );
    // Every other list is served and the config directory's snapshot is built: still 503.
    assert!(
        axon.wait_built_after(None, CONVERGE).is_some(),
        "no push context built: {}",
        axon.push_status()
    );
    assert_eq!(ready_status(&axon), 503);
    c.api.release_lists(VIRTUAL_SERVICES);
    assert!(wait_until(CONVERGE, || ready_status(&axon) == 200));
    // Both Kubernetes registries (Services, Istio config) report their lists synced.
    let configz = axon.debug_json("/debug/configz");
    let registries = configz["kubernetes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        registries.len() >= 2 && registries.iter().all(|r| r["synced"] == true),
        "{configz}"
    );
}

#[test]
fn without_istio_crds_axon_serves_the_services_and_is_ready() {
    let api = FakeKube::start_with(false);
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(dir.path()).display().to_string();
    api.apply(service("demo", "backend", &[("http", 80)]));
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    assert!(
        wait_until(CONVERGE, || ready_status(&axon) == 200),
        "{}",
        axon.logs()
    );
    // The documented log line, and the state behind it: the Istio registry serves no kind
    // and holds no config.
    assert!(axon.logs().contains("networking.istio.io is not served"));
    let configz = axon.debug_json("/debug/configz");
    let istio = configz["kubernetes"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["source"] == "kubernetes-istio"))
        .unwrap_or_else(|| panic!("no kubernetes-istio registry in {configz}"));
    let empty = |v: &serde_json::Value| {
        v.as_object().is_some_and(|o| o.is_empty()) || v.as_array().is_some_and(|a| a.is_empty())
    };
    // Secrets (TLS for SDS) and ConfigMaps (CAs) are watched all the same, from the core API.
    let versions: Vec<&String> = istio["versions"]
        .as_object()
        .map(|o| o.keys().collect())
        .unwrap_or_default();
    assert!(
        versions.iter().all(|k| *k == "Secret" || *k == "ConfigMap") && empty(&istio["configs"]),
        "{istio}"
    );
}

#[test]
fn serve_needs_a_config_dir_or_kubernetes() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_axon"))
        .args([
            "serve",
            "--xds-addr",
            "127.0.0.1:0",
            "--monitoring-addr",
            "127.0.0.1:0",
        ])
        .output()
        .expect("run axon");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--config-dir") && stderr.contains("--kubernetes"),
        "{stderr}"
    );
}
