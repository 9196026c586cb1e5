//! End-to-end: axon serves a real Envoy acting as an Istio sidecar (`INTERCEPTION_MODE:
//! NONE`, so the application calls a bound Sidecar egress listener directly), from
//! ServiceEntry / DestinationRule / VirtualService / Sidecar files in a watched config
//! directory. The world is `support/sidecar.rs`; two proxies on one axon are
//! `e2e_sidecar_pruning.rs`.
//!
//! Checked: routing through the egress listener (mesh VirtualServices, the service's host
//! names), the Sidecar's namespace import limiting what the proxy sees, proxy-level push
//! pruning (a config change outside the proxy's scope sends it no xDS response at all), the
//! EDS-only fast path for endpoint changes, and that Envoy accepts every update.
//!
//! No request is sent before Envoy's own admin API shows the route in force; axon's side is
//! read from its debug endpoints and metrics, not its log. On a failure the harness prints
//! axon's and Envoy's logs.

use crate::support;
use crate::support::sidecar;

use std::time::{Duration, Instant};

use sidecar::*;
use support::*;

#[test]
fn sidecar_scenario() {
    let s = Scenario::start(false);
    let egress = s.egress_port;
    let cluster_v1 = format!("outbound|{SERVICE_PORT}|v1|{REVIEWS}");
    let cluster_v2 = format!("outbound|{SERVICE_PORT}|v2|{REVIEWS}");
    let cluster_all = format!("outbound|{SERVICE_PORT}||{REVIEWS}");

    // ---- 1. Routing through the egress listener, and what the proxy sees. ----
    // No request before Envoy has the route in force: the egress listener active, the
    // virtual host of reviews routing to both subsets, their clusters warm with endpoints.
    s.wait_reviews_route(&[&cluster_v1, &cluster_v2]);
    s.wait_for_body(REVIEWS, &[], "reviews-v1");
    assert!(
        s.axon.wait_synced(&[NODE_A], Duration::from_secs(10)),
        "axon never reported {NODE_A} synced (every type ACKed): {:?}",
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
    // request falls to `allow_any` (PassthroughCluster, ORIGINAL_DST), which has no
    // original destination on a directly-called listener and must not reach ratings.
    let ratings_hits = s.ratings.hits();
    for host in [RATINGS.to_string(), with_port(RATINGS)] {
        let r = http_request(
            s.egress(),
            "GET",
            "/",
            &[("Host", host.as_str())],
            Duration::from_secs(5),
        );
        eprintln!(
            "[e2e] Host {host} (not imported) -> {} {:?}",
            r.status, r.body
        );
        assert!(
            !(r.status == 200 && r.body == "ratings"),
            "Host {host} must not reach ratings (namespace b is not imported): {} {:?}",
            r.status,
            r.body
        );
        assert_ne!(r.status, 200, "Host {host} must not succeed: {:?}", r.body);
    }
    assert_eq!(
        s.ratings.hits(),
        ratings_hits,
        "the ratings upstream was reached"
    );

    let dump = s.envoy.config_dump();
    let listeners = dynamic_listener_names(&dump);
    let bind = s.egress_addr.to_string();
    let want_listener = format!("{bind}_{egress}");
    assert!(
        listeners.contains(&want_listener),
        "no listener {want_listener}: {listeners:?}"
    );
    for virtual_listener in ["virtualOutbound", "virtualInbound"] {
        assert!(
            !listeners.iter().any(|l| l == virtual_listener),
            "INTERCEPTION_MODE NONE must not get {virtual_listener}: {listeners:?}"
        );
    }
    let listener = dynamic_listener(&dump, &want_listener).unwrap();
    let addr = listener
        .pointer("/active_state/listener/address/socket_address")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (addr.get("address"), addr.get("port_value")),
        (
            Some(&serde_json::json!(bind)),
            Some(&serde_json::json!(egress))
        ),
        "listener {want_listener} address: {listener}"
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
    let before = XdsAttempts::read(&s.envoy);
    eprintln!("[e2e] xDS update_attempt before the ratings change: {before:?}");
    assert!(
        before.cds >= 1 && before.lds >= 1 && before.rds_total() >= 1,
        "Envoy has no CDS/LDS/RDS update_attempt yet: {before:?}"
    );
    let built = s.axon.built_version();
    let sent_before = s.axon.sent_nonces(NODE_A);
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
            .wait_push_reached(NODE_A, ratings_version, Duration::from_secs(10)),
        "the push of version {ratings_version} never reached {NODE_A}: {:?}",
        s.axon.syncz_of(NODE_A)
    );
    assert_eq!(
        s.axon.sent_nonces(NODE_A),
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
    let after = XdsAttempts::read(&s.envoy);
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
    let rds_name = format!(
        "http.outbound_{}_{egress}.rds.{egress}.update_attempt",
        s.egress_addr
    );
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
    let v2b = Upstream::start("reviews-v2b");
    let before = XdsAttempts::read(&s.envoy);
    let built = s.axon.built_version();
    let sent_before = s.axon.sent_nonces(NODE_A);
    let written = Instant::now();
    // Only the `endpoints:` change: the v2-labelled endpoint moves to reviews-v2b.
    s.config
        .write("reviews-se.yaml", &reviews_se_yaml(s.v1.port(), v2b.port()));
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
    let status = s.wait_push_context_built(built, "ServiceEntry reviews endpoints");
    eprintln!("[e2e] after the endpoint change, axon's push status: {status}");
    assert_eq!(
        status["request"]["full"], false,
        "an endpoint-only change must not be a full push: {status}"
    );
    let after = XdsAttempts::read(&s.envoy);
    let delta = after.delta(&before);
    eprintln!("[e2e] xDS update_attempt increase over the endpoint change: {delta:?}");
    assert_eq!(
        (delta.cds, delta.lds, s_sum(&delta.rds)),
        (0, 0, 0),
        "an endpoint-only change must send no CDS/LDS/RDS: {delta:?}\naxon's syncz: {:?}",
        s.axon.syncz_of(NODE_A)
    );
    // axon's own account: EDS was sent, nothing else.
    let sent = s.axon.sent_nonces(NODE_A);
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
    let dump = s.envoy.config_dump_with_eds();
    assert_eq!(
        endpoint_ports(&dump, &cluster_v2),
        vec![u64::from(v2b.port())],
        "Envoy's endpoints for {cluster_v2}"
    );
    let mut all_ports = endpoint_ports(&dump, &cluster_all);
    all_ports.sort();
    let mut want = vec![u64::from(s.v1.port()), u64::from(v2b.port())];
    want.sort();
    assert_eq!(all_ports, want, "Envoy's endpoints for {cluster_all}");
    assert_eq!(
        endpoint_ports(&dump, &cluster_v1),
        vec![u64::from(s.v1.port())],
        "Envoy's endpoints for {cluster_v1}"
    );
    // The v1 route still works: point the default route back at v1.
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v1"));
    let took = s.time_to_switch("VirtualService reviews → v1", written, &[], "reviews-v1");
    assert!(took < FAST, "the route change took {took:?}");

    // ---- 4. Envoy accepted every update; axon saw no NACK. ----
    assert_no_rejections(&s.envoy);
    assert_eq!(
        s.axon.total_rejects(),
        0.0,
        "axon counted NACKs (pilot_total_xds_rejects)"
    );
    let syncz = s.axon.syncz_of(NODE_A).expect("the a proxy in syncz");
    assert!(
        syncz["types"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["last_error"].is_null()),
        "axon recorded a NACK from {NODE_A}: {syncz}"
    );
    drop(v2b);
}
