//! End-to-end: axon serves real Envoys acting as Istio sidecars (`INTERCEPTION_MODE: NONE`,
//! so the application calls a bound Sidecar egress listener directly), from ServiceEntry /
//! DestinationRule / VirtualService / Sidecar files in a watched config directory.
//!
//! Checked: routing through the egress listener (mesh VirtualServices, the service's host
//! names), the Sidecar's namespace import limiting what the proxy sees, proxy-level push
//! pruning (a config change outside the proxy's scope sends it no xDS response at all), the
//! EDS-only fast path for endpoint changes, and that Envoy accepts every update.
//!
//! Every test has its own axon, Envoys, upstreams, config dir and ports, so the tests run in
//! parallel. On a failure the harness prints axon's and Envoy's logs.

#[path = "support/ads_client.rs"]
mod ads_client;
#[path = "support/scenario.rs"]
mod scenario;
mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

/// The proxy under test: workload `app-1` in namespace `a`.
const NODE_A: &str = "sidecar~127.0.0.2~app-1.a~a.svc.cluster.local";
/// A second proxy, in namespace `b`, which has no Sidecar resource (so it imports `*/*`).
const NODE_B: &str = "sidecar~127.0.0.3~app-2.b~b.svc.cluster.local";
const REVIEWS: &str = "reviews.a.svc.cluster.local";
const RATINGS: &str = "ratings.b.svc.cluster.local";
const SERVICE_PORT: u16 = 9080;

/// How long the first configuration may take to reach Envoy.
const CONVERGE: Duration = Duration::from_secs(30);
/// How quickly a config change must be visible through Envoy.
const FAST: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

/// ServiceEntry `reviews` in `a`: two STATIC endpoints on 127.0.0.1, labelled v1 and v2.
fn reviews_se_yaml(v1_port: u16, v2_port: u16) -> String {
    service_entry_yaml(
        "reviews",
        "a",
        REVIEWS,
        http_port(SERVICE_PORT),
        &[(v1_port, Some("v1")), (v2_port, Some("v2"))],
    )
}

/// VirtualService `reviews` in `a` (a mesh one: no `gateways`): `end-user: jason` goes to
/// v2, everything else to `default_subset`.
fn reviews_vs_yaml(default_subset: &str) -> String {
    header_to_v2_yaml(
        "reviews",
        "a",
        "reviews",
        SERVICE_PORT,
        ("end-user", "jason"),
        default_subset,
    )
}

fn ratings_se_yaml(port: u16) -> String {
    service_entry_yaml(
        "ratings",
        "b",
        RATINGS,
        http_port(SERVICE_PORT),
        &[(port, None)],
    )
}

/// VirtualService `ratings` in `b`; `revision` changes its first route (a prefix match on
/// `/rev-REVISION`), so every revision is a different config.
fn ratings_vs_yaml(revision: u32) -> String {
    let to_ratings = || vec![destination("ratings", None, SERVICE_PORT, None)];
    virtual_service_yaml(
        "v1",
        "ratings",
        "b",
        &["ratings"],
        &[],
        &[
            http_rule(&prefix_match(&format!("/rev-{revision}")), &to_ratings()),
            http_rule("", &to_ratings()),
        ],
    )
}

/// Sidecar `default` in `a`: one bound egress listener on 127.0.0.1:EGRESS_PORT importing
/// only namespace `a`.
fn sidecar_yaml(egress_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: a
spec:
  egress:
  - port:
      number: {egress_port}
      protocol: HTTP
      name: egress-http
    bind: 127.0.0.1
    captureMode: NONE
    hosts:
    - "./*"
"#
    )
}

fn sidecar_options(node_id: &str, app: &str, namespace: &str) -> EnvoyOptions {
    let mut o = EnvoyOptions::sidecar(node_id, &[("app", app)], namespace);
    o.extra_metadata
        .push(("INTERCEPTION_MODE".to_string(), serde_json::json!("NONE")));
    o
}

// ---------------------------------------------------------------------------
// Scenario
// ---------------------------------------------------------------------------

/// One test's world. Field order = drop order: the Envoys die before axon, and all print
/// their logs if the test panics.
struct Scenario {
    envoy: Envoy,
    /// The namespace-`b` sidecar, when the test asked for one.
    envoy_b: Option<Envoy>,
    axon: Axon,
    config: ConfigDir,
    egress_port: u16,
    v1: Upstream,
    v2: Upstream,
    ratings: Upstream,
}

impl Scenario {
    fn start(with_b_proxy: bool) -> Scenario {
        let v1 = Upstream::start("reviews-v1");
        let v2 = Upstream::start("reviews-v2");
        let ratings = Upstream::start("ratings");
        let egress_port = free_port();
        let config = ConfigDir::new();
        config.write("reviews-se.yaml", &reviews_se_yaml(v1.port(), v2.port()));
        config.write(
            "reviews-dr.yaml",
            &destination_rule_yaml("reviews", "a", "reviews"),
        );
        config.write("reviews-vs.yaml", &reviews_vs_yaml("v1"));
        config.write("ratings-se.yaml", &ratings_se_yaml(ratings.port()));
        config.write("ratings-vs.yaml", &ratings_vs_yaml(1));
        config.write("sidecar-a.yaml", &sidecar_yaml(egress_port));
        let axon = Axon::start(config.path());
        let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
        let envoy_b = with_b_proxy
            .then(|| Envoy::start(axon.xds_addr(), sidecar_options(NODE_B, "client", "b")));
        Scenario {
            envoy,
            envoy_b,
            axon,
            config,
            egress_port,
            v1,
            v2,
            ratings,
        }
    }

    fn egress(&self) -> SocketAddr {
        Envoy::local(self.egress_port)
    }

    /// `GET path` through the egress listener with `Host: host` and `headers`.
    fn get(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut all: Vec<(&str, &str)> = vec![("Host", host)];
        all.extend_from_slice(headers);
        http_get(self.egress(), path, &all)
    }

    /// Waits until a request answers `(200, want)`; panics with Envoy's state otherwise.
    fn wait_for_body(&self, host: &str, headers: &[(&str, &str)], want: &str) {
        let what = format!("GET / Host {host} {headers:?} on {}", self.egress());
        wait_for_answer(&what, CONVERGE, want, &self.envoy, || {
            self.get(host, "/", headers)
        });
    }

    /// Asserts that `n` requests in a row answer `(200, want)`.
    fn assert_all(&self, host: &str, headers: &[(&str, &str)], want: &str, n: usize) {
        for i in 0..n {
            let got = self.get(host, "/", headers);
            assert_eq!(
                got,
                (200, want.to_string()),
                "request {i} with Host {host:?} {headers:?} must reach {want}\n{}",
                describe_envoy(&self.envoy)
            );
        }
    }

    /// After a config write at `written`: waits (up to 15 s) until 10 requests in a row
    /// reach `want`, and returns how long after the write the first of them was sent.
    fn time_to_switch(
        &self,
        what: &str,
        written: Instant,
        headers: &[(&str, &str)],
        want: &str,
    ) -> Duration {
        match settle_time(written, 10, want, || self.get(REVIEWS, "/", headers)) {
            Ok(took) => {
                eprintln!("[e2e] {what}: reached {want} {took:?} after the write");
                took
            }
            Err(last) => panic!(
                "{what}: requests {headers:?} did not settle on {want} within 15 s of the write; \
                 last answer {last:?}\n{}",
                describe_envoy(&self.envoy)
            ),
        }
    }

    /// Waits until axon has built a push context after log offset `offset`, returning the
    /// log line.
    fn wait_push_context_built(&self, offset: usize, what: &str) -> String {
        self.axon
            .wait_for_log_line_after(offset, Duration::from_secs(10), |l| {
                l.contains("push context built")
            })
            .unwrap_or_else(|| {
                panic!("{what}: axon logged no `push context built` within 10 s of the write")
            })
    }
}

// ---------------------------------------------------------------------------
// Envoy state helpers
// ---------------------------------------------------------------------------

/// The `update_attempt` counters of every xDS subscription of one Envoy. Envoy counts an
/// `update_attempt` for every response it receives on a subscription, even one identical to
/// the previous, so these count the responses axon sent.
#[derive(Debug, Clone, Default, PartialEq)]
struct XdsAttempts {
    /// `cluster_manager.cds.update_attempt`
    cds: u64,
    /// `listener_manager.lds.update_attempt`
    lds: u64,
    /// `http.STAT_PREFIX.rds.ROUTE.update_attempt`, by stat name.
    rds: BTreeMap<String, u64>,
    /// `cluster.CLUSTER.update_attempt` (EDS subscriptions), by cluster name.
    eds: BTreeMap<String, u64>,
}

impl XdsAttempts {
    fn read(envoy: &Envoy) -> XdsAttempts {
        let mut out = XdsAttempts::default();
        for (name, value) in envoy.stats() {
            let Some(stem) = name.strip_suffix(".update_attempt") else {
                continue;
            };
            if stem == "cluster_manager.cds" {
                out.cds = value;
            } else if stem == "listener_manager.lds" {
                out.lds = value;
            } else if stem.starts_with("http.") && stem.contains(".rds.") {
                out.rds.insert(name, value);
            } else if let Some(cluster) = stem.strip_prefix("cluster.") {
                out.eds.insert(cluster.to_string(), value);
            }
        }
        out
    }

    fn rds_total(&self) -> u64 {
        self.rds.values().sum()
    }

    /// Per-counter increase from `before` (counters that appeared count from 0).
    fn delta(&self, before: &XdsAttempts) -> XdsAttempts {
        let sub = |now: &BTreeMap<String, u64>, was: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.saturating_sub(was.get(k).copied().unwrap_or(0)),
                    )
                })
                .collect::<BTreeMap<_, _>>()
        };
        XdsAttempts {
            cds: self.cds.saturating_sub(before.cds),
            lds: self.lds.saturating_sub(before.lds),
            rds: sub(&self.rds, &before.rds),
            eds: sub(&self.eds, &before.eds),
        }
    }

    /// Whether no counter rose (of an increase from [`XdsAttempts::delta`]).
    fn is_zero(&self) -> bool {
        self.cds == 0
            && self.lds == 0
            && self.rds.values().all(|v| *v == 0)
            && self.eds.values().all(|v| *v == 0)
    }
}

fn route_config(dump: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    dynamic_route_configs(dump)
        .into_iter()
        .find(|r| r.get("name").and_then(|n| n.as_str()) == Some(name))
}

/// The dynamic active listener named `name`.
fn dynamic_listener(dump: &serde_json::Value, name: &str) -> Option<serde_json::Value> {
    dump_section(dump, "ListenersConfigDump")?
        .get("dynamic_listeners")?
        .as_array()?
        .iter()
        .find(|l| l.get("name").and_then(|n| n.as_str()) == Some(name))
        .cloned()
}

/// The `ClusterLoadAssignment` of `cluster` from a config_dump with EDS.
fn endpoint_ports(dump: &serde_json::Value, cluster: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let Some(sec) = dump_section(dump, "EndpointsConfigDump") else {
        return out;
    };
    for key in ["dynamic_endpoint_configs", "static_endpoint_configs"] {
        for c in sec
            .get(key)
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
        {
            let cfg = c.get("endpoint_config").unwrap_or(c);
            if cfg.get("cluster_name").and_then(|n| n.as_str()) != Some(cluster) {
                continue;
            }
            for le in cfg
                .get("endpoints")
                .and_then(|e| e.as_array())
                .into_iter()
                .flatten()
            {
                for lb in le
                    .get("lb_endpoints")
                    .and_then(|e| e.as_array())
                    .into_iter()
                    .flatten()
                {
                    if let Some(p) = lb
                        .pointer("/endpoint/address/socket_address/port_value")
                        .and_then(|p| p.as_u64())
                    {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// Asserts that Envoy rejected no update (and that it has `update_rejected` stats at all).
fn assert_no_rejections(envoy: &Envoy) {
    assert_no_rejected_updates(envoy);
    let stats = envoy.stats();
    for k in [
        "cluster_manager.cds.update_rejected",
        "listener_manager.lds.update_rejected",
    ] {
        assert!(stats.contains_key(k), "Envoy has no stat {k}");
    }
    assert!(
        stats.keys().any(|k| k.starts_with("http.")
            && k.contains(".rds.")
            && k.ends_with("update_rejected")),
        "Envoy has no RDS update_rejected stat"
    );
}

/// Lines of axon's log after `offset` saying a response was sent to `node_id`.
fn sent_lines_after(axon: &Axon, offset: usize, node_id: &str) -> Vec<String> {
    axon.logs()
        .get(offset..)
        .unwrap_or("")
        .lines()
        .filter(|l| l.contains("ADS: sent") && l.contains(node_id))
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn sidecar_scenario() {
    let s = Scenario::start(false);
    let egress = s.egress_port;
    let cluster_v1 = format!("outbound|{SERVICE_PORT}|v1|{REVIEWS}");
    let cluster_v2 = format!("outbound|{SERVICE_PORT}|v2|{REVIEWS}");
    let cluster_all = format!("outbound|{SERVICE_PORT}||{REVIEWS}");

    // ---- 1. Routing through the egress listener, and what the proxy sees. ----
    s.wait_for_body(REVIEWS, &[], "reviews-v1");
    assert!(
        s.axon
            .wait_for_log("ADS: full sync complete", Duration::from_secs(10)),
        "axon never logged `ADS: full sync complete`"
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
    let want_listener = format!("127.0.0.1_{egress}");
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
            Some(&serde_json::json!("127.0.0.1")),
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
    let offset = s.axon.log_len();
    s.config.write("ratings-vs.yaml", &ratings_vs_yaml(2));
    let line = s.wait_push_context_built(offset, "VirtualService ratings in b");
    eprintln!("[e2e] after the ratings change, axon: {line}");
    assert!(
        line.contains("full=true"),
        "a VirtualService change is a full (config) push: {line}"
    );
    let in_scope_offset = s.axon.log_len();
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v2"));
    let took = s.time_to_switch("VirtualService reviews → v2", written, &[], "reviews-v2");
    assert!(
        took < FAST,
        "the route change took {took:?} (>= {FAST:?}) to take effect"
    );
    s.assert_all("reviews", &[], "reviews-v2", 10);
    s.assert_all("reviews", &[("end-user", "jason")], "reviews-v2", 5);
    // The reviews push is CDS, EDS, LDS, RDS in that order over the one ADS stream, and
    // Envoy handles them in order, so once the new route works its CDS/LDS/EDS responses
    // were counted too.
    let after = XdsAttempts::read(&s.envoy);
    let delta = after.delta(&before);
    eprintln!("[e2e] xDS update_attempt increase over both changes: {delta:?}");
    // Why this proves the ratings change sent this proxy no response: Envoy counts an
    // update_attempt for every response it gets on a subscription, identical or not; axon
    // pushes a proxy either nothing or every type (CDS, EDS, LDS, RDS). Across the two
    // changes each CDS/LDS/RDS counter rose by exactly 1, the one response of the reviews
    // push (which had to arrive: the new route is in force). Had the ratings change reached
    // this proxy it would have been a separate push (axon had finished building it — the
    // `push context built` line above — and had handed it to the connection, a
    // sub-millisecond step, long before the reviews file was even written, watched and
    // debounced), so CDS and LDS would show 2.
    assert_eq!(
        delta.cds, 1,
        "CDS update_attempt must rise by exactly one push: {delta:?}"
    );
    assert_eq!(
        delta.lds, 1,
        "LDS update_attempt must rise by exactly one push: {delta:?}"
    );
    let rds_name = format!("http.outbound_127.0.0.1_{egress}.rds.{egress}.update_attempt");
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
        // The one push carries an EDS response with every watched cluster (the reviews
        // clusters); the static clusters have no EDS subscription.
        let want = u64::from(name.starts_with("outbound|"));
        assert_eq!(
            *d, want,
            "EDS {name} update_attempt must rise by exactly one push: {delta:?}"
        );
    }
    // axon's own account: between the two changes, nothing was sent to this proxy.
    let sent = s
        .axon
        .logs()
        .get(offset..in_scope_offset)
        .unwrap_or("")
        .lines()
        .filter(|l| l.contains("ADS: sent"))
        .map(str::to_string)
        .collect::<Vec<_>>();
    assert!(
        sent.is_empty(),
        "axon sent responses after the out-of-scope ratings change: {sent:#?}"
    );

    // ---- 3. An endpoint-only change is an EDS-only push. ----
    let v2b = Upstream::start("reviews-v2b");
    let before = XdsAttempts::read(&s.envoy);
    let offset = s.axon.log_len();
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
    let line = s.wait_push_context_built(offset, "ServiceEntry reviews endpoints");
    eprintln!("[e2e] after the endpoint change, axon: {line}");
    assert!(
        line.contains("full=false"),
        "an endpoint-only change must not be a full push: {line}"
    );
    let after = XdsAttempts::read(&s.envoy);
    let delta = after.delta(&before);
    eprintln!("[e2e] xDS update_attempt increase over the endpoint change: {delta:?}");
    assert_eq!(
        (delta.cds, delta.lds, s_sum(&delta.rds)),
        (0, 0, 0),
        "an endpoint-only change must send no CDS/LDS/RDS: {delta:?}\naxon sent: {:#?}",
        sent_lines_after(&s.axon, offset, NODE_A)
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
    let nacks: Vec<String> = s
        .axon
        .logs()
        .lines()
        .filter(|l| l.contains("NACK"))
        .map(str::to_string)
        .collect();
    assert!(nacks.is_empty(), "axon logged NACKs: {nacks:#?}");
    drop(v2b);
}

fn s_sum(m: &BTreeMap<String, u64>) -> u64 {
    m.values().sum()
}

/// Two sidecars on one axon: `a` (Sidecar importing `./*`) and `b` (no Sidecar: `*/*`). A
/// change in namespace `b` reaches the `b` proxy and sends the `a` proxy nothing; a change in
/// `a` reaches both.
#[test]
fn sidecar_pruning_between_two_proxies() {
    let s = Scenario::start(true);
    let b = s.envoy_b.as_ref().unwrap();
    let b_route = SERVICE_PORT.to_string();

    s.wait_for_body(REVIEWS, &[], "reviews-v1");
    // The `b` proxy (catch-all egress, no capture) gets the unbound outbound listener
    // 0.0.0.0_9080 with route config `9080` holding both services.
    let mut last = String::new();
    let ok = wait_until(CONVERGE, || {
        let dump = b.config_dump();
        last = route_config(&dump, &b_route)
            .map(|r| r.to_string())
            .unwrap_or_default();
        last.contains(REVIEWS) && last.contains(RATINGS) && last.contains("/rev-1")
    });
    assert!(
        ok,
        "the b proxy never got route config {b_route} with reviews, ratings and /rev-1: \
         {last}\n{}",
        describe_envoy(b)
    );
    assert!(
        wait_until(Duration::from_secs(10), || s
            .axon
            .count_log("ADS: full sync complete")
            >= 2),
        "axon did not log `ADS: full sync complete` for both proxies"
    );
    let b_clusters = dynamic_cluster_names(&b.config_dump());
    assert!(
        b_clusters.iter().any(|c| c.contains(RATINGS)),
        "the b proxy imports */* and must have a ratings cluster: {b_clusters:?}"
    );
    let a_listeners = dynamic_listener_names(&s.envoy.config_dump());
    assert!(
        !a_listeners.iter().any(|l| l.ends_with("_9080")),
        "the a proxy's Sidecar declares only port {}: {a_listeners:?}",
        s.egress_port
    );

    // A change in `b`: the b proxy's route shows it; the a proxy is sent nothing.
    let a_before = XdsAttempts::read(&s.envoy);
    let b_before = XdsAttempts::read(b);
    let offset = s.axon.log_len();
    s.config.write("ratings-vs.yaml", &ratings_vs_yaml(2));
    let ok = wait_until(Duration::from_secs(10), || {
        let dump = b.config_dump();
        last = route_config(&dump, &b_route)
            .map(|r| r.to_string())
            .unwrap_or_default();
        last.contains("/rev-2")
    });
    assert!(
        ok,
        "the b proxy never saw the new ratings route: {last}\n{}",
        describe_envoy(b)
    );
    let b_delta = XdsAttempts::read(b).delta(&b_before);
    eprintln!("[e2e] b proxy, ratings change: {b_delta:?}");
    assert_eq!(
        (b_delta.cds, b_delta.lds),
        (1, 1),
        "the b proxy must get one full push: {b_delta:?}"
    );
    // axon has pushed the b proxy; it handled the a proxy in the same fan-out.
    let a_delta = XdsAttempts::read(&s.envoy).delta(&a_before);
    eprintln!("[e2e] a proxy, ratings change: {a_delta:?}");
    assert!(
        a_delta.is_zero(),
        "a change in namespace b (not imported by a's Sidecar) sent the a proxy responses: \
         {a_delta:?}\naxon sent to it: {:#?}",
        sent_lines_after(&s.axon, offset, NODE_A)
    );
    let sent_a = sent_lines_after(&s.axon, offset, NODE_A);
    assert!(sent_a.is_empty(), "axon sent the a proxy: {sent_a:#?}");
    let sent_b = sent_lines_after(&s.axon, offset, NODE_B);
    assert!(
        !sent_b.is_empty(),
        "axon logged no `ADS: sent` for the b proxy (is debug logging on?)"
    );

    // A change in `a`: both proxies get exactly one push.
    let b_before = XdsAttempts::read(b);
    let written = Instant::now();
    s.config.write("reviews-vs.yaml", &reviews_vs_yaml("v2"));
    let took = s.time_to_switch("VirtualService reviews → v2", written, &[], "reviews-v2");
    assert!(took < FAST, "the route change took {took:?}");
    let a_delta = XdsAttempts::read(&s.envoy).delta(&a_before);
    eprintln!("[e2e] a proxy, over both changes: {a_delta:?}");
    assert_eq!(
        (a_delta.cds, a_delta.lds, s_sum(&a_delta.rds)),
        (1, 1, 1),
        "over both changes the a proxy must have had exactly one push: {a_delta:?}"
    );
    let ok = wait_until(Duration::from_secs(10), || {
        let b_delta = XdsAttempts::read(b).delta(&b_before);
        b_delta.cds >= 1 && b_delta.lds >= 1 && s_sum(&b_delta.rds) >= 1
    });
    let b_delta = XdsAttempts::read(b).delta(&b_before);
    assert!(
        ok,
        "the b proxy (imports */*) got no push for the reviews change: {b_delta:?}"
    );
    assert_eq!(
        (b_delta.cds, b_delta.lds),
        (1, 1),
        "the b proxy must get exactly one push for the reviews change: {b_delta:?}"
    );

    // Config distribution status, as an operator asks it: the ratings change (namespace b)
    // counted only the b proxy; the reviews change (namespace a) both, and both ACKed it.
    let distribution = |key: &str| {
        let mut last = serde_json::Value::Null;
        let complete = wait_until(Duration::from_secs(10), || {
            last = ads_client::debug_json(&s.axon, &format!("/debug/distribution?key={key}"));
            last[0]["complete"] == true
        });
        assert!(complete, "{key} reached every affected proxy: {last}");
        last[0].clone()
    };
    let ratings = distribution("VirtualService/b/ratings");
    assert_eq!(
        ratings["affected"], 1,
        "the a proxy is not counted: {ratings}"
    );
    let reviews = distribution("VirtualService/a/reviews");
    assert_eq!(reviews["affected"], 2, "{reviews}");
    assert_eq!(reviews["acked"], 2, "{reviews}");

    assert_no_rejections(&s.envoy);
    assert_no_rejections(b);
}
