//! The world of the real-Envoy sidecar tests (`e2e_sidecar.rs`, `e2e_sidecar_pruning.rs`):
//! the ServiceEntry / DestinationRule / VirtualService / Sidecar files of namespaces `a`
//! (reviews, with a Sidecar importing `./*` and a bound egress listener) and `b` (ratings),
//! the Envoys acting as sidecars (`INTERCEPTION_MODE: NONE`), the upstreams, and Envoy's
//! per-subscription `update_attempt` counters ([`XdsAttempts`]).
//! Include with `#[path = "support/sidecar.rs"] mod sidecar;` beside `mod support;` and
//! `#[path = "support/scenario.rs"] mod scenario;`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::scenario::*;
use crate::support::*;

/// The proxy under test: workload `app-1` in namespace `a`.
pub const NODE_A: &str = "sidecar~127.0.0.2~app-1.a~a.svc.cluster.local";
/// A second proxy, in namespace `b`, which has no Sidecar resource (so it imports `*/*`).
pub const NODE_B: &str = "sidecar~127.0.0.3~app-2.b~b.svc.cluster.local";
pub const REVIEWS: &str = "reviews.a.svc.cluster.local";
pub const RATINGS: &str = "ratings.b.svc.cluster.local";
pub const SERVICE_PORT: u16 = 9080;

/// How long the first configuration may take to reach Envoy.
pub const CONVERGE: Duration = Duration::from_secs(30);
/// How quickly a config change must be visible through Envoy.
pub const FAST: Duration = Duration::from_secs(2);

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

/// ServiceEntry `reviews` in `a`: two STATIC endpoints on 127.0.0.1, labelled v1 and v2.
pub fn reviews_se_yaml(v1_port: u16, v2_port: u16) -> String {
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
pub fn reviews_vs_yaml(default_subset: &str) -> String {
    header_to_v2_yaml(
        "reviews",
        "a",
        "reviews",
        SERVICE_PORT,
        ("end-user", "jason"),
        default_subset,
    )
}

pub fn ratings_se_yaml(port: u16) -> String {
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
pub fn ratings_vs_yaml(revision: u32) -> String {
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

/// Sidecar `default` in `a`: one bound egress listener on `bind`:SERVICE_PORT (istiod serves
/// on a declared listener only the services with its port) importing only namespace `a`.
pub fn sidecar_yaml(bind: std::net::Ipv4Addr) -> String {
    let egress_port = SERVICE_PORT;
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
    bind: {bind}
    captureMode: NONE
    hosts:
    - "./*"
"#
    )
}

pub fn sidecar_options(node_id: &str, app: &str, namespace: &str) -> EnvoyOptions {
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
pub struct Scenario {
    pub envoy: Envoy,
    /// The namespace-`b` sidecar, when the test asked for one.
    pub envoy_b: Option<Envoy>,
    pub axon: Axon,
    pub config: ConfigDir,
    /// The egress listener's address (its port is [`SERVICE_PORT`]).
    pub egress_addr: std::net::Ipv4Addr,
    pub egress_port: u16,
    pub v1: Upstream,
    pub v2: Upstream,
    pub ratings: Upstream,
}

impl Scenario {
    pub fn start(with_b_proxy: bool) -> Scenario {
        let v1 = Upstream::start("reviews-v1");
        let v2 = Upstream::start("reviews-v2");
        let ratings = Upstream::start("ratings");
        let egress_addr = own_loopback(&[SERVICE_PORT]);
        let egress_port = SERVICE_PORT;
        let config = ConfigDir::new();
        config.write("reviews-se.yaml", &reviews_se_yaml(v1.port(), v2.port()));
        config.write(
            "reviews-dr.yaml",
            &destination_rule_yaml("reviews", "a", "reviews"),
        );
        config.write("reviews-vs.yaml", &reviews_vs_yaml("v1"));
        config.write("ratings-se.yaml", &ratings_se_yaml(ratings.port()));
        config.write("ratings-vs.yaml", &ratings_vs_yaml(1));
        config.write("sidecar-a.yaml", &sidecar_yaml(egress_addr));
        let axon = Axon::start(config.path());
        let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
        let listener = format!("{egress_addr}_{egress_port}");
        assert!(
            wait_until(CONVERGE, || dynamic_listener(
                &envoy.config_dump(),
                &listener
            )
            .is_some_and(|l| l.get("active_state").is_some())),
            "no active listener {listener}\n{}",
            describe_envoy(&envoy)
        );
        let envoy_b = with_b_proxy
            .then(|| Envoy::start(axon.xds_addr(), sidecar_options(NODE_B, "client", "b")));
        Scenario {
            envoy,
            envoy_b,
            axon,
            config,
            egress_addr,
            egress_port,
            v1,
            v2,
            ratings,
        }
    }

    pub fn egress(&self) -> SocketAddr {
        SocketAddr::from((self.egress_addr, self.egress_port))
    }

    /// `GET path` through the egress listener with `Host: host` and `headers`.
    pub fn get(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut all: Vec<(&str, &str)> = vec![("Host", host)];
        all.extend_from_slice(headers);
        http_get(self.egress(), path, &all)
    }

    /// Waits until a request answers `(200, want)`; panics with Envoy's state otherwise.
    pub fn wait_for_body(&self, host: &str, headers: &[(&str, &str)], want: &str) {
        let what = format!("GET / Host {host} {headers:?} on {}", self.egress());
        wait_for_answer(&what, CONVERGE, want, &self.envoy, || {
            self.get(host, "/", headers)
        });
    }

    /// Asserts that `n` requests in a row answer `(200, want)`.
    pub fn assert_all(&self, host: &str, headers: &[(&str, &str)], want: &str, n: usize) {
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
    pub fn time_to_switch(
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

    /// Waits until axon has built a push context newer than `after` (its version before
    /// the change), returning its `/debug/push_status`.
    pub fn wait_push_context_built(&self, after: Option<u64>, what: &str) -> serde_json::Value {
        self.axon
            .wait_built_after(after, Duration::from_secs(10))
            .unwrap_or_else(|| {
                panic!(
                    "{what}: axon built no push context within 10 s of the write \
                     (/debug/push_status: {})",
                    self.axon.push_status()
                )
            })
    }

    /// Waits until the `a` proxy's Envoy has the reviews route in force (its own admin API):
    /// the egress listener active, its route configuration with
    /// the virtual host of reviews routing to `clusters`, those clusters warm with endpoints,
    /// nothing warming, nothing rejected. Only then is a request worth sending.
    pub fn wait_reviews_route(&self, clusters: &[&str]) {
        let listener = format!("{}_{}", self.egress_addr, self.egress_port);
        let route_config = self.egress_port.to_string();
        let want = RouteInForce {
            listener: &listener,
            route_config: &route_config,
            domain: REVIEWS,
            clusters,
        };
        wait_for_route(&self.envoy, &want, CONVERGE);
    }
}

// ---------------------------------------------------------------------------
// Envoy state helpers
// ---------------------------------------------------------------------------

/// The `update_attempt` counters of every xDS subscription of one Envoy. Envoy counts an
/// `update_attempt` for every response it receives on a subscription, even one identical to
/// the previous, so these count the responses axon sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct XdsAttempts {
    /// `cluster_manager.cds.update_attempt`
    pub cds: u64,
    /// `listener_manager.lds.update_attempt`
    pub lds: u64,
    /// `http.STAT_PREFIX.rds.ROUTE.update_attempt`, by stat name.
    pub rds: BTreeMap<String, u64>,
    /// `cluster.CLUSTER.update_attempt` (EDS subscriptions), by cluster name.
    pub eds: BTreeMap<String, u64>,
}

impl XdsAttempts {
    pub fn read(envoy: &Envoy) -> XdsAttempts {
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

    pub fn rds_total(&self) -> u64 {
        self.rds.values().sum()
    }

    /// Per-counter increase from `before` (counters that appeared count from 0).
    pub fn delta(&self, before: &XdsAttempts) -> XdsAttempts {
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
    pub fn is_zero(&self) -> bool {
        self.cds == 0
            && self.lds == 0
            && self.rds.values().all(|v| *v == 0)
            && self.eds.values().all(|v| *v == 0)
    }
}

/// Asserts that Envoy rejected no update (and that it has `update_rejected` stats at all).
pub fn assert_no_rejections(envoy: &Envoy) {
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

pub fn s_sum(m: &BTreeMap<String, u64>) -> u64 {
    m.values().sum()
}
