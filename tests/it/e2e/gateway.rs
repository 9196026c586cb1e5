//! End-to-end: axon serves a real Envoy acting as an Istio ingress gateway,
//! from Gateway / VirtualService / DestinationRule / ServiceEntry /
//! WorkloadEntry files in a watched config directory.
//!
//! Every test has its own axon, Envoy, upstreams and ports, so the tests run
//! in parallel. On a failure the harness prints axon's and Envoy's logs.

use crate::support;
use crate::support::scenario;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

/// How long the first configuration may take to reach Envoy.
const CONVERGE: Duration = Duration::from_secs(30);

/// The backend (ServiceEntry with subsets v1 and v2, DestinationRule) and the `other`
/// service (a ServiceEntry selecting a WorkloadEntry on `other_port`).
fn services_yaml(v1_port: u16, v2_port: u16, other_port: u16) -> String {
    let other = service_entry_head(
        "other",
        "demo",
        "other.demo.svc.cluster.local",
        http_port(80),
    );
    format!(
        r#"{}---
{other}  workloadSelector:
    labels:
      app: other
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata:
  name: other
  namespace: demo
spec:
  address: 127.0.0.1
  ports:
    http: {other_port}
  labels:
    app: other
"#,
        backend_yaml(v1_port, v2_port)
    )
}

/// The VirtualService (`v1alpha3`): `x-version: v2` to v2, `/other` to other, the rest
/// split; `v1_weight` + `v2_weight` = 100.
fn routes_yaml(v1_weight: u32, v2_weight: u32) -> String {
    backend_routes_yaml(
        "v1alpha3",
        true,
        true,
        &[("v1", v1_weight), ("v2", v2_weight)],
    )
}

/// One test's world. Field order = drop order: Envoy dies before axon, and
/// both print their logs if the test panics.
struct Scenario {
    envoy: Envoy,
    axon: Axon,
    config: ConfigDir,
    gw_port: u16,
    _v1: Upstream,
    _v2: Upstream,
    _other: Upstream,
}

impl Scenario {
    /// Starts upstreams, writes the config (with `routes` as routes.yaml),
    /// starts axon and the gateway Envoy.
    fn start(routes: &str) -> Scenario {
        let v1 = Upstream::start("backend-v1");
        let v2 = Upstream::start("backend-v2");
        let other = Upstream::start("other");
        let gw_port = free_port();
        let config = ConfigDir::new();
        config.write("gateway.yaml", &gateway_yaml(gw_port));
        config.write(
            "backend.yaml",
            &services_yaml(v1.port(), v2.port(), other.port()),
        );
        config.write("routes.yaml", routes);
        let axon = Axon::start(config.path());
        let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
        Scenario {
            envoy,
            axon,
            config,
            gw_port,
            _v1: v1,
            _v2: v2,
            _other: other,
        }
    }

    /// Waits until Envoy has the route of `domain` to `clusters` in force on the gateway
    /// port (its own admin API), before any request is sent.
    fn wait_route(&self, domain: &str, clusters: &[&str]) {
        wait_gateway_route(&self.envoy, self.gw_port, domain, clusters, CONVERGE);
    }

    fn gw(&self) -> SocketAddr {
        Envoy::local(self.gw_port)
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        http_get(self.gw(), path, headers)
    }

    /// Waits until `GET path` with `headers` answers `(200, want_body)`;
    /// panics with a description of Envoy's state otherwise.
    fn wait_for_body(&self, what: &str, path: &str, headers: &[(&str, &str)], want: &str) {
        let what = format!("{what}: GET {path} {headers:?} on {}", self.gw());
        wait_for_answer(&what, CONVERGE, want, &self.envoy, || {
            self.get(path, headers)
        });
    }

    /// Sends `n` plain requests and counts the bodies.
    fn plain_distribution(&self, n: usize) -> BTreeMap<String, usize> {
        count_answers(n, || self.get("/", &[]))
    }
}

fn metric_value(metrics: &str, re: &str) -> Option<f64> {
    let re = regex::Regex::new(re).unwrap();
    re.captures(metrics)
        .and_then(|c| c.get(1))
        .and_then(|m| m.as_str().parse().ok())
}

fn is_problem_line(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    [
        "warn",
        "error",
        "fail",
        "invalid",
        "parse",
        "malformed",
        "reject",
        "skip",
    ]
    .iter()
    .any(|w| l.contains(w))
}

#[test]
fn gateway_scenario() {
    let s = Scenario::start(&routes_yaml(80, 20));

    // (a) Routing by header, by path prefix, and by weights; no request before Envoy has the
    // routes to every cluster in force.
    let (v1, v2) = (
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
    );
    s.wait_route(
        "*",
        &[&v1, &v2, "outbound|80||other.demo.svc.cluster.local"],
    );
    s.wait_for_body(
        "x-version: v2 route",
        "/",
        &[("x-version", "v2")],
        "backend-v2",
    );
    s.wait_for_body("/other route", "/other", &[], "other");
    s.wait_for_body("/other/deeper route", "/other/x?y=1", &[], "other");
    // The default route works (either subset).
    let mut last = (0, String::new());
    assert!(
        wait_until(CONVERGE, || {
            last = s.get("/", &[]);
            last.0 == 200 && (last.1 == "backend-v1" || last.1 == "backend-v2")
        }),
        "default route never answered; last {last:?}\n{}",
        describe_envoy(&s.envoy)
    );
    for _ in 0..20 {
        assert_eq!(
            s.get("/", &[("x-version", "v2")]),
            (200, "backend-v2".to_string()),
            "x-version: v2 must always reach backend-v2"
        );
    }
    let counts = s.plain_distribution(400);
    assert_v2_share(&counts, 400, 0.20, 0.07, "plain request");
    eprintln!("[e2e] 80/20 split: {counts:?}");

    // Envoy's view of the config.
    let dump = s.envoy.config_dump();
    let listeners = dynamic_listener_names(&dump);
    let routes = dynamic_route_config_names(&dump);
    let clusters = dynamic_cluster_names(&dump);
    let want_listener = format!("0.0.0.0_{}", s.gw_port);
    assert!(
        listeners.contains(&want_listener),
        "no dynamic listener {want_listener}: {listeners:?}"
    );
    let want_route = format!("http.{}", s.gw_port);
    assert!(
        routes.contains(&want_route),
        "no route config {want_route}: {routes:?}"
    );
    for c in [
        format!("outbound|80|v1|{BACKEND}"),
        format!("outbound|80|v2|{BACKEND}"),
        format!("outbound|80||{BACKEND}"),
    ] {
        assert!(clusters.contains(&c), "no cluster {c}: {clusters:?}");
    }

    // (b) Shift the default route to 100% v2: plain requests must reach only
    // backend-v2 within 2 s of the write.
    let written = Instant::now();
    s.config.write("routes.yaml", &routes_yaml(0, 100));
    let converged_after = settle_time(written, 20, "backend-v2", || s.get("/", &[]))
        .unwrap_or_else(|last| {
            panic!(
                "after rewriting routes.yaml to 100% v2, plain requests did not settle on \
             backend-v2 within 15 s; last {last:?}\n{}",
                describe_envoy(&s.envoy)
            )
        });
    eprintln!("[e2e] 100% v2 reached Envoy {converged_after:?} after the write");
    assert!(
        converged_after < Duration::from_secs(2),
        "route change took {converged_after:?} (>= 2 s) to take effect"
    );
    let counts = s.plain_distribution(50);
    assert_eq!(
        counts.get("backend-v2").copied(),
        Some(50),
        "after the shift every plain request must reach backend-v2: {counts:?}"
    );

    // (c) Broken files are reported with their path and do not disturb the
    // last good config.
    let broken = s.config.file("broken.yaml");
    let broken_str = broken.display().to_string();
    let canon_dir = std::fs::canonicalize(s.config.path()).unwrap();
    let broken_canon = canon_dir.join("broken.yaml").display().to_string();
    let offset = s.axon.log_len();
    s.config.write("broken.yaml", "kind: [unclosed\n");
    let line = s
        .axon
        .wait_for_log_line_after(offset, Duration::from_secs(10), |l| {
            l.contains(&broken_str) || l.contains(&broken_canon)
        });
    assert!(
        line.is_some(),
        "axon's log never mentioned the malformed file {broken_str}; lines mentioning \
         broken.yaml: {:?}",
        s.axon
            .logs()
            .lines()
            .filter(|l| l.contains("broken.yaml"))
            .collect::<Vec<_>>()
    );
    eprintln!("[e2e] axon on broken.yaml: {}", line.unwrap());
    assert!(
        s.axon
            .wait_config_error("broken.yaml", Duration::from_secs(10)),
        "/debug/configz holds no error for broken.yaml: {:?}",
        s.axon.config_errors()
    );

    let routes_path = s.config.file("routes.yaml").display().to_string();
    let routes_canon = canon_dir.join("routes.yaml").display().to_string();
    let offset = s.axon.log_len();
    s.config.write("routes.yaml", MALFORMED_ROUTES);
    let line = s
        .axon
        .wait_for_log_line_after(offset, Duration::from_secs(10), |l| {
            (l.contains(&routes_path) || l.contains(&routes_canon)) && is_problem_line(l)
        });
    assert!(
        line.is_some(),
        "axon's log never reported the malformed {routes_path}; new lines mentioning \
         routes.yaml: {:?}",
        s.axon.logs()[offset..]
            .lines()
            .filter(|l| l.contains("routes.yaml"))
            .collect::<Vec<_>>()
    );
    eprintln!("[e2e] axon on broken routes.yaml: {}", line.unwrap());
    assert!(
        s.axon
            .wait_config_error("routes.yaml", Duration::from_secs(10)),
        "/debug/configz holds no error for routes.yaml: {:?}",
        s.axon.config_errors()
    );

    // Routing keeps the last good routes.yaml (100% v2) and everything else.
    let counts = s.plain_distribution(50);
    assert_eq!(
        counts.get("backend-v2").copied(),
        Some(50),
        "after the broken routes.yaml, plain requests must still reach only backend-v2: \
         {counts:?}\n{}",
        describe_envoy(&s.envoy)
    );
    assert_eq!(
        s.get("/", &[("x-version", "v2")]),
        (200, "backend-v2".to_string())
    );
    assert_eq!(s.get("/other", &[]), (200, "other".to_string()));
    let dump = s.envoy.config_dump();
    assert!(dynamic_listener_names(&dump).contains(&want_listener));
    assert!(dynamic_route_config_names(&dump).contains(&want_route));

    // (d) Envoy accepted every update.
    assert_no_rejected_updates(&s.envoy);
    let cds = stat(&s.envoy, "cluster_manager.cds.update_success");
    let lds = stat(&s.envoy, "listener_manager.lds.update_success");
    assert!(cds >= 1, "cluster_manager.cds.update_success = {cds}");
    assert!(lds >= 1, "listener_manager.lds.update_success = {lds}");

    check_metrics(&s.axon);
}

/// axon's /metrics: one connected proxy, CDS pushes counted, the rejects
/// counter exposed.
fn check_metrics(axon: &Axon) {
    let xds = |m: &str| metric_value(m, r"(?m)^pilot_xds(?:\{\})? (\d+(?:\.\d+)?)\s*$");
    let cds = |m: &str| {
        metric_value(
            m,
            r#"(?m)^pilot_xds_pushes(?:_total)?\{[^}]*="cds"[^}]*\} (\d+(?:\.\d+)?(?:e\+?\d+)?)\s*$"#,
        )
    };
    let mut metrics = String::new();
    wait_until(Duration::from_secs(10), || {
        metrics = axon.metrics();
        xds(&metrics) == Some(1.0)
            && cds(&metrics).is_some_and(|v| v > 0.0)
            && metrics.contains("pilot_total_xds_rejects")
    });
    assert_eq!(
        xds(&metrics),
        Some(1.0),
        "axon /metrics must show `pilot_xds 1` (one connected proxy):\n{metrics}"
    );
    assert!(
        cds(&metrics).is_some_and(|v| v > 0.0),
        "axon /metrics must count CDS pushes (pilot_xds_pushes{{type=\"cds\"}} > 0):\n{metrics}"
    );
    assert!(
        metrics.contains("pilot_total_xds_rejects"),
        "axon /metrics must expose pilot_total_xds_rejects (even with no reject yet):\n{metrics}"
    );
}

#[test]
fn gateway_unmatched_host_gets_404() {
    let routes = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: demo
spec:
  hosts:
  - shop.example.com
  gateways:
  - istio-system/ingress
  http:
  - route:
    - destination:
        host: backend.demo.svc.cluster.local
        subset: v1
        port:
          number: 80
"#;
    let s = Scenario::start(routes);
    s.wait_route("shop.example.com", &[&format!("outbound|80|v1|{BACKEND}")]);
    s.wait_for_body(
        "shop.example.com route",
        "/",
        &[("Host", "shop.example.com")],
        "backend-v1",
    );
    let (status, body) = s.get("/", &[("Host", "nope.example.com")]);
    assert_eq!(
        status,
        404,
        "a host no VirtualService matches must get 404, got {status} {body:?}\n{}",
        describe_envoy(&s.envoy)
    );
    // Still routed for the known host.
    assert_eq!(
        s.get("/x", &[("Host", "shop.example.com")]),
        (200, "backend-v1".to_string())
    );
}

/// A header match with no match type (`x-canary: {}`) requires the header to be present, as
/// istiod translates it (`present_match`): a request with it reaches v2, one without stays
/// on v1 (before, the match was dropped and caught everything).
#[test]
fn a_header_match_without_a_value_requires_presence() {
    let routes = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: shop
  namespace: demo
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match:
    - headers:
        x-canary: {}
    route:
    - destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}
  - route:
    - destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}
"#;
    let s = Scenario::start(routes);
    s.wait_route(
        "*",
        &[
            &format!("outbound|80|v1|{BACKEND}"),
            &format!("outbound|80|v2|{BACKEND}"),
        ],
    );
    s.wait_for_body(
        "x-canary present",
        "/",
        &[("x-canary", "yes")],
        "backend-v2",
    );
    for _ in 0..10 {
        assert_eq!(
            s.get("/", &[]),
            (200, "backend-v1".to_string()),
            "a request without x-canary must not match"
        );
    }
}

/// A read failure is never a deletion: a VirtualService file that becomes unreadable (here
/// a non-UTF-8 byte in a comment) is reported with its path and reason, counted, shown in
/// `/debug/configz`, and its last good routes keep being served; nothing is pushed.
#[test]
fn an_unreadable_file_keeps_its_last_good_configs() {
    let s = Scenario::start(&routes_yaml(0, 100));
    s.wait_for_body(
        "x-version: v2 route",
        "/",
        &[("x-version", "v2")],
        "backend-v2",
    );
    s.wait_for_body("plain route to v2", "/", &[], "backend-v2");
    let updates = |a: &Axon| a.metric("pilot_inbound_updates{type=\"config\"}");
    let before = updates(&s.axon);
    assert_eq!(s.axon.metric("axon_config_read_errors "), Some(0.0));

    let mut bytes = b"# caf\xe9 (Latin-1, not UTF-8)\n".to_vec();
    bytes.extend_from_slice(routes_yaml(0, 100).as_bytes());
    std::fs::write(s.config.file("routes.yaml"), &bytes).expect("writing routes.yaml");
    assert!(
        s.axon
            .wait_config_error("routes.yaml", Duration::from_secs(10)),
        "/debug/configz holds no error for routes.yaml: {:?}",
        s.axon.config_errors()
    );
    let errors = s.axon.config_errors();
    assert!(
        errors.iter().any(|e| e.contains("invalid UTF-8 at line 1")),
        "the reason is given: {errors:?}"
    );
    assert_eq!(s.axon.metric("axon_config_read_errors "), Some(1.0));
    // The registry reports the error in the same reload in which it would have sent an
    // update: none was sent.
    assert_eq!(
        updates(&s.axon),
        before,
        "nothing was pushed for the unreadable file"
    );

    let counts = s.plain_distribution(50);
    assert_eq!(
        counts.get("backend-v2").copied(),
        Some(50),
        "the last good routes are served: {counts:?}\n{}",
        describe_envoy(&s.envoy)
    );
    assert_eq!(
        s.get("/", &[("x-version", "v2")]),
        (200, "backend-v2".to_string())
    );

    // Readable again: the error is gone and the same routes are served.
    s.config.write("routes.yaml", &routes_yaml(0, 100));
    assert!(
        wait_until(Duration::from_secs(10), || !s
            .axon
            .config_errors()
            .iter()
            .any(|e| e.contains("routes.yaml"))),
        "the error stays after the file was fixed: {:?}",
        s.axon.config_errors()
    );
    assert_eq!(s.get("/", &[]), (200, "backend-v2".to_string()));
    assert_no_rejected_updates(&s.envoy);
}
