//! End-to-end: axon serves a real Envoy acting as an Istio sidecar under iptables capture,
//! in a pod of the namespace mesh (`support::mesh`), from ServiceEntry / DestinationRule /
//! VirtualService / Sidecar files in a watched config directory. The world is
//! `support/sidecar.rs` ([`Scenario`]): the app's requests to a service name are captured
//! to 15001 and handed to `0.0.0.0_9080`; the apps answer from their own pods. Two proxies
//! on one axon are `sidecar_pruning.rs`; a sidecar without capture is `sidecar_bound.rs`.
//!
//! Checked: routing of captured requests (mesh VirtualServices, the service's host names),
//! the Sidecar's namespace import limiting what the proxy sees, proxy-level push pruning (a
//! config change outside the proxy's scope sends it no xDS response at all), the EDS-only
//! fast path for endpoint changes, and that Envoy accepts every update.
//!
//! No request is sent before Envoy's own admin API shows the route in force; axon's side is
//! read from its debug endpoints and metrics, not its log. On a failure the harness prints
//! axon's and Envoy's logs and the pods' nat tables.

use crate::support;
use crate::support::sidecar;

use std::time::{Duration, Instant};

use crate::support::mesh::PodSpec;
use crate::support::scenario::stat;

use sidecar::*;
use support::*;

#[test]
fn sidecar_scenario() {
    let s = Scenario::start(false);
    let egress = SERVICE_PORT;
    let node_a = s.node_a();
    let node_a = node_a.as_str();
    let cluster_v1 = format!("outbound|{SERVICE_PORT}|v1|{REVIEWS}");
    let cluster_v2 = format!("outbound|{SERVICE_PORT}|v2|{REVIEWS}");
    let cluster_all = format!("outbound|{SERVICE_PORT}||{REVIEWS}");

    // ---- 1. Routing of captured requests, and what the proxy sees. ----
    // No request before Envoy has the route in force: the captured listener active, the
    // virtual host of reviews routing to both subsets, their clusters warm with endpoints.
    s.wait_reviews_route(&[&cluster_v1, &cluster_v2]);
    s.wait_for_body(REVIEWS, &[], "reviews-v1");
    assert!(
        s.axon.wait_synced(&[node_a], Duration::from_secs(10)),
        "axon never reported {node_a} synced (every type ACKed): {:?}",
        s.axon.connections()
    );
    // Every name the virtual host of reviews answers to from namespace `a`.
    let with_port = |h: &str| format!("{h}:{egress}");
    let hosts = [
        REVIEWS.to_string(),
        with_port(REVIEWS),
        "reviews.a.svc".to_string(),
        with_port("reviews.a.svc"),
        "reviews.a".to_string(),
        with_port("reviews.a"),
        "reviews".to_string(),
        with_port("reviews"),
    ];
    for host in &hosts {
        s.assert_all(host, &[], "reviews-v1", 5);
        s.assert_all(host, &[("end-user", "jason")], "reviews-v2", 5);
    }
    // Another user, or no header, stays on v1.
    s.assert_all("reviews", &[("end-user", "bob")], "reviews-v1", 5);

    // ratings.b is not imported by the Sidecar (`./*`): it has no virtual host, so the
    // request falls to `allow_any`, the PassthroughCluster, to its original destination:
    // ratings' address, which nothing answers without a sidecar's route (the mesh has no
    // kube-proxy). It must not reach ratings.
    let ratings_hits = s.ratings.hits();
    let passthrough = "cluster.PassthroughCluster.upstream_cx_total";
    let passed_before = stat(s.envoy(), passthrough);
    for host in [RATINGS.to_string(), with_port(RATINGS)] {
        let r = s.request(&host, "/", &[]);
        eprintln!(
            "[e2e] Host {host} (not imported) -> {} {:?}",
            r.status, r.body
        );
        assert!(
            !(r.status == 200 && app_of(&r.body) == "ratings"),
            "Host {host} must not reach ratings (namespace b is not imported): {} {:?}",
            r.status,
            r.body
        );
        assert_ne!(r.status, 200, "Host {host} must not succeed: {:?}", r.body);
    }
    assert_eq!(
        s.ratings.hits(),
        ratings_hits,
        "the ratings app was reached"
    );
    assert!(
        wait_until(FAST, || stat(s.envoy(), passthrough) >= passed_before + 2),
        "the requests for ratings did not fall to the PassthroughCluster\n{}",
        s.client.describe()
    );

    let dump = s.envoy().config_dump();
    let listeners = dynamic_listener_names(&dump);
    let want_listener = CAPTURED_LISTENER.to_string();
    assert!(
        listeners.contains(&want_listener),
        "no listener {want_listener}: {listeners:?}"
    );
    for virtual_listener in ["virtualOutbound", "virtualInbound"] {
        assert!(
            listeners.iter().any(|l| l == virtual_listener),
            "a captured sidecar must get {virtual_listener}: {listeners:?}"
        );
    }
    let listener = dynamic_listener(&dump, &want_listener).unwrap();
    let active = listener
        .pointer("/active_state/listener")
        .cloned()
        .unwrap_or_default();
    let addr = active
        .pointer("/address/socket_address")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (addr.get("address"), addr.get("port_value")),
        (
            Some(&serde_json::json!("0.0.0.0")),
            Some(&serde_json::json!(egress))
        ),
        "listener {want_listener} address: {listener}"
    );
    // iptables brings its traffic through virtualOutbound: it binds no port of its own.
    assert_eq!(
        active.get("bind_to_port"),
        Some(&serde_json::json!(false)),
        "listener {want_listener}: {listener}"
    );
    let routes = dynamic_route_config_names(&dump);
    assert!(
        routes.contains(&egress.to_string()),
        "no route config {egress}: {routes:?}"
    );
    let route = route_config(&dump, &egress.to_string()).unwrap();
    let vhosts: Vec<String> = route
        .get("virtual_hosts")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .collect();
    assert!(
        vhosts.iter().any(|v| v.starts_with(REVIEWS)),
        "route config {egress} has no virtual host for {REVIEWS}: {vhosts:?}"
    );
    assert!(
        !vhosts.iter().any(|v| v.contains("ratings")),
        "route config {egress} must not have a virtual host for ratings: {vhosts:?}"
    );
    let clusters = dynamic_cluster_names(&dump);
    for c in [&cluster_v1, &cluster_v2, &cluster_all] {
        assert!(clusters.contains(c), "no cluster {c}: {clusters:?}");
    }
    assert!(
        !clusters.iter().any(|c| c.contains(RATINGS)),
        "namespace b is not imported, yet Envoy has a ratings cluster: {clusters:?}"
    );
    eprintln!("[e2e] listeners {listeners:?}, routes {routes:?}, clusters {clusters:?}");

    // ---- 2. An out-of-scope change sends the proxy nothing. ----
    let before = XdsAttempts::read(s.envoy());
    eprintln!("[e2e] xDS update_attempt before the ratings change: {before:?}");
    assert!(
        before.cds >= 1 && before.lds >= 1 && before.rds_total() >= 1,
        "Envoy has no CDS/LDS/RDS update_attempt yet: {before:?}"
    );
    let built = s.axon.built_version();
    let sent_before = s.axon.sent_nonces(node_a);
    s.config.write("ratings-vs.yaml", &ratings_vs_yaml(2));
    let status = s.wait_push_context_built(built, "VirtualService ratings in b");
    eprintln!("[e2e] after the ratings change, axon's push status: {status}");
    assert_eq!(
        status["request"]["full"], true,
        "a VirtualService change is a full (config) push: {status}"
    );
    let ratings_version = status["version"].as_u64().expect("a version");
    // axon's own account: the push reached this proxy's connection, which sent nothing
    // (every response carries a fresh nonce).
    assert!(
        s.axon
            .wait_push_reached(node_a, ratings_version, Duration::from_secs(10)),
        "the push of version {ratings_version} never reached {node_a}: {:?}",
        s.axon.syncz_of(node_a)
    );
    assert_eq!(
        s.axon.sent_nonces(node_a),
        sent_before,
        "axon sent responses after the out-of-scope ratings change"
    );
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v2"));
    let took = s.time_to_switch("VirtualService reviews → v2", written, &[], "reviews-v2");
    assert!(
        took < FAST,
        "the route change took {took:?} (>= {FAST:?}) to take effect"
    );
    s.assert_all("reviews", &[], "reviews-v2", 10);
    s.assert_all("reviews", &[("end-user", "jason")], "reviews-v2", 5);
    // The reviews push changes the routes only, and axon sends a proxy only the types whose
    // content changed: one RDS response, counted once the new route works.
    let after = XdsAttempts::read(s.envoy());
    let delta = after.delta(&before);
    eprintln!("[e2e] xDS update_attempt increase over both changes: {delta:?}");
    // Envoy counts an update_attempt for every response it gets on a subscription,
    // identical or not. Across the two changes the RDS counter rose by exactly 1, the one
    // response of the reviews push (which had to arrive: the new route is in force), and
    // nothing else moved: the ratings change sent this proxy nothing (axon's nonces said
    // so too, above), and the reviews change sent no unchanged type.
    assert_eq!(
        (delta.cds, delta.lds),
        (0, 0),
        "no CDS or LDS response for a route change: {delta:?}"
    );
    let rds_name = format!("http.outbound_{CAPTURED_LISTENER}.rds.{egress}.update_attempt");
    assert!(
        after.rds.contains_key(&rds_name),
        "no RDS stat {rds_name}: {:?}",
        after.rds
    );
    for (name, d) in &delta.rds {
        assert_eq!(
            *d, 1,
            "RDS {name} update_attempt must rise by exactly one push: {delta:?}"
        );
    }
    for (name, d) in &delta.eds {
        assert_eq!(
            *d, 0,
            "no EDS response for a route change ({name}): {delta:?}"
        );
    }

    // ---- 3. An endpoint-only change is an EDS-only push. ----
    let v2b_pod = s.mesh.pod(PodSpec::plain(
        "reviews-v2b",
        "a",
        &[("app", "reviews"), ("version", "v2")],
    ));
    let v2b = v2b_pod.serve_http(SERVICE_PORT, "reviews-v2b");
    let (v1_ip, v2_ip) = (s.app_pods[0].ip(), s.app_pods[1].ip());
    let before = XdsAttempts::read(s.envoy());
    let built = s.axon.built_version();
    let sent_before = s.axon.sent_nonces(node_a);
    let written = Instant::now();
    // Only the `endpoints:` change: the v2-labelled endpoint moves to pod reviews-v2b.
    s.config
        .write("reviews-se.yaml", &reviews_se_at(v1_ip, v2b_pod.ip()));
    let took = s.time_to_switch(
        "ServiceEntry reviews endpoints (v2 → reviews-v2b)",
        written,
        &[],
        "reviews-v2b",
    );
    assert!(
        took < FAST,
        "the endpoint change took {took:?} (>= {FAST:?}) to take effect"
    );
    s.assert_all("reviews", &[("end-user", "jason")], "reviews-v2b", 5);
    let v2_hits = s.v2.hits();
    s.assert_all(REVIEWS, &[], "reviews-v2b", 5);
    assert_eq!(
        s.v2.hits(),
        v2_hits,
        "the old v2 endpoint still gets requests"
    );
    assert_ne!(v2_ip, v2b_pod.ip());
    let status = s.wait_push_context_built(built, "ServiceEntry reviews endpoints");
    eprintln!("[e2e] after the endpoint change, axon's push status: {status}");
    assert_eq!(
        status["request"]["full"], false,
        "an endpoint-only change must not be a full push: {status}"
    );
    let after = XdsAttempts::read(s.envoy());
    let delta = after.delta(&before);
    eprintln!("[e2e] xDS update_attempt increase over the endpoint change: {delta:?}");
    assert_eq!(
        (delta.cds, delta.lds, s_sum(&delta.rds)),
        (0, 0, 0),
        "an endpoint-only change must send no CDS/LDS/RDS: {delta:?}\naxon's syncz: {:?}",
        s.axon.syncz_of(node_a)
    );
    // axon's own account: EDS was sent, nothing else.
    let sent = s.axon.sent_nonces(node_a);
    for t in ["cds", "lds", "rds"] {
        assert_eq!(sent[t], sent_before[t], "{t} sent for an endpoint change");
    }
    assert_ne!(
        sent["eds"], sent_before["eds"],
        "no EDS sent for the endpoint change"
    );
    assert!(
        delta.eds.get(&cluster_v2).copied().unwrap_or(0) >= 1,
        "the EDS update_attempt of {cluster_v2} did not rise: {delta:?}"
    );
    let dump = s.envoy().config_dump_with_eds();
    let at = |ip: std::net::Ipv4Addr| format!("{ip}:{SERVICE_PORT}");
    assert_eq!(
        endpoint_addresses(&dump, &cluster_v2),
        vec![at(v2b_pod.ip())],
        "Envoy's endpoints for {cluster_v2}"
    );
    let mut all = endpoint_addresses(&dump, &cluster_all);
    all.sort();
    let mut want = vec![at(v1_ip), at(v2b_pod.ip())];
    want.sort();
    assert_eq!(all, want, "Envoy's endpoints for {cluster_all}");
    assert_eq!(
        endpoint_addresses(&dump, &cluster_v1),
        vec![at(v1_ip)],
        "Envoy's endpoints for {cluster_v1}"
    );
    // The v1 route still works: point the default route back at v1.
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v1"));
    let took = s.time_to_switch("VirtualService reviews → v1", written, &[], "reviews-v1");
    assert!(took < FAST, "the route change took {took:?}");

    // ---- 4. Envoy accepted every update; axon saw no NACK. ----
    assert_no_rejections(s.envoy());
    assert_eq!(
        s.axon.total_rejects(),
        0.0,
        "axon counted NACKs (pilot_total_xds_rejects)"
    );
    let syncz = s.axon.syncz_of(node_a).expect("the a proxy in syncz");
    assert!(
        syncz["types"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["last_error"].is_null()),
        "axon recorded a NACK from {node_a}: {syncz}"
    );
    drop(v2b);
    drop(v2b_pod);
}
