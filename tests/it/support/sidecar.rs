//! The world of the real-Envoy sidecar tests (`e2e/sidecar.rs`, `e2e/sidecar_pruning.rs`,
//! `e2e/sidecar_routes.rs`, `e2e/delegate.rs`): the ServiceEntry / DestinationRule / VirtualService / Sidecar files of
//! namespaces `a` (reviews, with a Sidecar importing `./*` on its port) and `b` (ratings).
//!
//! [`Scenario`] runs it as istiod's sidecars run in a cluster: under iptables capture, in
//! pods of a [`Mesh`] (`support/mesh`). The apps (reviews v1 and v2, ratings) serve in pods
//! of their own, reached at their pod IPs; the services have addresses (VIPs) in the pods'
//! host tables; the client is pod `productpage` in `a` (and, when asked for, pod `client`
//! in `b`, which has no Sidecar resource, so it imports `*/*`), whose requests to a
//! service's name are captured to 15001 and handed to `0.0.0.0_9080`.
//!
//! The helpers of the tests that run a sidecar without capture (`INTERCEPTION_MODE: NONE`,
//! Sidecar listeners bound on loopback, `e2e/sidecar_bound.rs`: [`NODE_A`],
//! [`sidecar_options`], [`reviews_se_yaml`]) and Envoy's per-subscription `update_attempt` counters
//! ([`XdsAttempts`]) are here too.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::scenario::*;
use crate::support::*;

/// The bound (uncaptured) proxy of `e2e/sidecar_bound.rs`: workload `app-1` in namespace `a`.
pub const NODE_A: &str = "sidecar~127.0.0.2~app-1.a~a.svc.cluster.local";
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

pub fn sidecar_options(node_id: &str, app: &str, namespace: &str) -> EnvoyOptions {
    let mut o = EnvoyOptions::sidecar(node_id, &[("app", app)], namespace);
    o.extra_metadata
        .push(("INTERCEPTION_MODE".to_string(), serde_json::json!("NONE")));
    o
}

// ---------------------------------------------------------------------------
// Scenario: the world under capture
// ---------------------------------------------------------------------------

/// reviews' address (the pods resolve `reviews`, `reviews.a`, … to it). No kube-proxy in
/// the mesh: only a sidecar makes a service address answer.
pub const REVIEWS_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 9);
/// ratings' address.
pub const RATINGS_VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// The captured outbound listener of the services' port (istiod's name: wildcard, port).
pub const CAPTURED_LISTENER: &str = "0.0.0.0_9080";

/// The mesh config of the scenario's axon: a connection that cannot be made fails in a
/// second, not istiod's ten (a service address is answered only through a sidecar's route:
/// one passed through to it, as the original destination, is never accepted).
pub const MESH_CONFIG: &str = "connectTimeout: 1s\n";

/// A STATIC, MESH_INTERNAL ServiceEntry `name` in `ns` for `host` at address `vip`, one
/// `port`, one endpoint per `(pod IP, version label)` on that same port.
pub fn service_entry_at(
    name: &str,
    ns: &str,
    host: &str,
    vip: Ipv4Addr,
    port: Port,
    endpoints: &[(Ipv4Addr, Option<&str>)],
) -> String {
    let mut yaml = service_entry_head(name, ns, host, port);
    yaml.push_str(&format!("  addresses: [{vip}]\n  endpoints:\n"));
    for (ip, version) in endpoints {
        yaml.push_str(&format!("  - address: {ip}\n"));
        if let Some(version) = version {
            yaml.push_str(&format!("    labels: {{version: {version}}}\n"));
        }
    }
    yaml
}

/// ServiceEntry `reviews` in `a` at [`REVIEWS_VIP`]: the pods `v1` and `v2`, labelled so.
pub fn reviews_se_at(v1: Ipv4Addr, v2: Ipv4Addr) -> String {
    service_entry_at(
        "reviews",
        "a",
        REVIEWS,
        REVIEWS_VIP,
        http_port(SERVICE_PORT),
        &[(v1, Some("v1")), (v2, Some("v2"))],
    )
}

/// Sidecar `default` in `a` as a captured proxy has it: an egress listener on the services'
/// port (not bound: iptables brings the traffic) importing only namespace `a`.
pub fn captured_sidecar_yaml() -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  egress:
  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: egress-http}}
    hosts: ["./*"]
"#
    )
}

/// The name of the app that answered an [`EchoUpstream`] body, else the body itself.
pub fn app_of(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v["upstream"].as_str().map(str::to_string))
        .unwrap_or_else(|| body.to_string())
}

/// One test's world under capture. Field order = drop order: the apps stop, then their
/// pods and the sidecars' go, then the mesh, then axon; all print their state if the test
/// panics.
pub struct Scenario {
    pub v1: EchoUpstream,
    pub v2: EchoUpstream,
    pub ratings: EchoUpstream,
    /// The apps' pods, without sidecars: `reviews-v1`, `reviews-v2` (in `a`), `ratings` (in
    /// `b`).
    pub app_pods: Vec<Pod>,
    /// The proxy under test: pod `productpage` in `a`.
    pub client: Pod,
    /// Pod `client` in `b`, when the test asked for it.
    pub client_b: Option<Pod>,
    pub mesh: Mesh,
    pub axon: Axon,
    pub config: ConfigDir,
}

impl Scenario {
    /// The world, with the `b` proxy if `with_b_proxy`, once the `a` proxy has its
    /// captured listener of the services' port.
    pub fn start(with_b_proxy: bool) -> Scenario {
        let config = ConfigDir::new();
        let axon = Axon::start_with_mesh_config(config.path(), MESH_CONFIG);
        let mesh = Mesh::new(axon.xds_addr());
        assert_eq!(mesh.service("reviews", "a", REVIEWS_VIP), REVIEWS);
        assert_eq!(mesh.service("ratings", "b", RATINGS_VIP), RATINGS);
        let app_pod = |name: &str, ns: &str, labels: &[(&str, &str)]| {
            mesh.pod(PodSpec::plain(name, ns, labels))
        };
        let app_pods = vec![
            app_pod("reviews-v1", "a", &[("app", "reviews"), ("version", "v1")]),
            app_pod("reviews-v2", "a", &[("app", "reviews"), ("version", "v2")]),
            app_pod("ratings", "b", &[("app", "ratings")]),
        ];
        let serve = |i: usize| {
            let pod: &Pod = &app_pods[i];
            pod.serve_http(SERVICE_PORT, pod.name())
        };
        let (v1, v2, ratings) = (serve(0), serve(1), serve(2));
        config.write(
            "reviews-se.yaml",
            &reviews_se_at(app_pods[0].ip(), app_pods[1].ip()),
        );
        config.write(
            "reviews-dr.yaml",
            &destination_rule_yaml("reviews", "a", "reviews"),
        );
        config.write("reviews-vs.yaml", &reviews_vs_yaml("v1"));
        config.write(
            "ratings-se.yaml",
            &service_entry_at(
                "ratings",
                "b",
                RATINGS,
                RATINGS_VIP,
                http_port(SERVICE_PORT),
                &[(app_pods[2].ip(), None)],
            ),
        );
        config.write("ratings-vs.yaml", &ratings_vs_yaml(1));
        config.write("sidecar-a.yaml", &captured_sidecar_yaml());
        let client = mesh.pod(PodSpec::sidecar(
            "productpage",
            "a",
            &[("app", "productpage")],
        ));
        let client_b =
            with_b_proxy.then(|| mesh.pod(PodSpec::sidecar("client", "b", &[("app", "client")])));
        client.wait_listener(CAPTURED_LISTENER);
        Scenario {
            v1,
            v2,
            ratings,
            app_pods,
            client,
            client_b,
            mesh,
            axon,
            config,
        }
    }

    /// The `a` proxy's Envoy.
    pub fn envoy(&self) -> &Envoy {
        self.client.envoy()
    }

    /// The `b` proxy's Envoy (panics when the test did not ask for it).
    pub fn envoy_b(&self) -> &Envoy {
        self.client_b.as_ref().expect("the b proxy").envoy()
    }

    /// The `a` proxy's node id.
    pub fn node_a(&self) -> String {
        self.client.node_id()
    }

    /// The `b` proxy's node id.
    pub fn node_b(&self) -> String {
        self.client_b.as_ref().expect("the b proxy").node_id()
    }

    /// `GET path` from the `a` pod's app with `Host: host` and `headers`, to the address
    /// `host` (less any `:port`) resolves to on the services' port: captured. The status and
    /// the name of the app that answered (the body, when no app did).
    pub fn get(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let r = self.request(host, path, headers);
        (r.status, app_of(&r.body))
    }

    /// Like [`Scenario::get`], the whole response.
    pub fn request(&self, host: &str, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
        let name = host.split(':').next().unwrap_or(host);
        let mut all: Vec<(&str, &str)> = vec![("Host", host)];
        all.extend_from_slice(headers);
        self.client.http_request(name, SERVICE_PORT, path, &all)
    }

    /// Waits until a request answers `(200, want)`; panics with the pod's state otherwise.
    pub fn wait_for_body(&self, host: &str, headers: &[(&str, &str)], want: &str) {
        let what = format!("GET / Host {host} {headers:?} from pod productpage");
        wait_for_answer(&what, CONVERGE, want, self.envoy(), || {
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
                self.client.describe()
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
                self.client.describe()
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
    /// the captured listener of the port active, its route configuration with the virtual
    /// host of reviews routing to `clusters`, those clusters warm with endpoints, nothing
    /// warming, nothing rejected. Only then is a request worth sending.
    pub fn wait_reviews_route(&self, clusters: &[&str]) {
        let route_config = SERVICE_PORT.to_string();
        let want = RouteInForce {
            listener: CAPTURED_LISTENER,
            route_config: &route_config,
            domain: REVIEWS,
            clusters,
        };
        wait_for_route(self.envoy(), &want, CONVERGE);
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
