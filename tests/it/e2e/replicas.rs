//! End-to-end: three axon replicas on one config directory behind a local TCP load balancer
//! (a real Envoy as an L4 proxy, `tcp_proxy` over the three xDS ports, with TCP health
//! checks), many simulated proxies (`axon-load run --reconnect`, 300 by default;
//! `AXON_E2E_REPLICA_PROXIES` sets fewer on a small machine) and two real gateway Envoys
//! (one on SotW ADS, one on Delta, each with its Gateway) whose xDS goes through the balancer
//! and which route traffic the whole time.
//!
//! One replica is stopped with SIGTERM (drained), then another with `kill -9`: every proxy
//! reconnects to the survivors and is synced again (the fleet-wide `/debug/syncz?fleet=true`
//! says so, the stopped replica named unreachable), and the real Envoys lose no request.
//! Each time the replica is started again and the three end within the slack of an even
//! share (their `/fleet/replica` counts). Then a mesh VirtualService change is reported by
//! `/debug/distribution?fleet=true` as ACKed by every proxy, across the three replicas.
//! The simulated proxies resume on reconnecting (SotW, the versions they have): a moved proxy
//! is sent nothing. The reconnect and rebalance times, and the bytes on reconnect against a
//! full re-push, are printed (`[replicas] …`) for BENCHMARKS.md.

use crate::support;
use crate::support::scenario;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use scenario::*;
use serde_json::{Value, json};
use support::*;

pub(super) const SLACK: f64 = 0.1;
/// How long every proxy may take to be synced again after a replica stops.
const RECONNECT: Duration = Duration::from_secs(60);
/// How long the fleet may take to be back within the slack after a replica restarts.
const REBALANCE: Duration = Duration::from_secs(60);

fn proxies() -> usize {
    std::env::var("AXON_E2E_REPLICA_PROXIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}

/// The L4 balancer's bootstrap: `lb_port` → the three xDS ports by `lb_policy`
/// (`LEAST_REQUEST`, `ROUND_ROBIN`), a replica that does not accept left out by a TCP health
/// check.
fn balancer_bootstrap(lb_port: u16, xds: &[u16], lb_policy: &str) -> Value {
    let endpoints: Vec<Value> = xds
        .iter()
        .map(|p| {
            json!({"endpoint": {"address": {"socket_address": {
                "address": "127.0.0.1", "port_value": p}}}})
        })
        .collect();
    json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {
            "listeners": [{
                "name": "xds-lb",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": lb_port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.tcp_proxy",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "xds_lb",
                        "cluster": "axons",
                        "max_connect_attempts": 5
                    }
                }]}]
            }],
            "clusters": [{
                "name": "axons",
                "type": "STATIC",
                "connect_timeout": "1s",
                "lb_policy": lb_policy,
                "health_checks": [{
                    "timeout": "1s",
                    "interval": "0.5s",
                    "unhealthy_threshold": 1,
                    "healthy_threshold": 1,
                    "tcp_health_check": {}
                }],
                "load_assignment": {"cluster_name": "axons", "endpoints": [{"lb_endpoints": endpoints}]}
            }]
        }
    })
}

pub(super) struct Fleet {
    config: ConfigDir,
    limits: ConfigDir,
    xds: [u16; 3],
    monitoring: [u16; 3],
    pub(super) replicas: [Option<Axon>; 3],
    /// Stopped replicas, kept so that their logs are printed if the test fails.
    stopped: Vec<Axon>,
}

/// The replicas' limits: polls every 200 ms, up to 50 closes a second, a slack of 0.1, a
/// total settled for 1 s, a 2 s drain.
pub(super) fn fleet_limits() -> ConfigDir {
    let limits = ConfigDir::new();
    limits.write(
        "limits.toml",
        "peer_poll_interval = \"200ms\"\nrebalance_rate = 50\nrebalance_slack = 0.1\n\
         rebalance_settle = \"1s\"\n\
         drain_duration = \"2s\"\nclose_grace = \"2s\"\n",
    );
    limits
}

impl Fleet {
    /// Three replicas of `config` with `limits`, each on ports of its own, started.
    pub(super) fn start_three(config: ConfigDir, limits: ConfigDir) -> Fleet {
        let mut fleet = Fleet {
            config,
            limits,
            xds: [free_port(), free_port(), free_port()],
            monitoring: [free_port(), free_port(), free_port()],
            replicas: [None, None, None],
            stopped: Vec::new(),
        };
        for i in 0..3 {
            fleet.start(i);
        }
        fleet
    }

    /// A real Envoy balancing TCP over the three xDS ports by `lb_policy`, and its address.
    pub(super) fn balancer(&self, lb_policy: &str) -> (Envoy, SocketAddr) {
        let lb_port = free_port();
        let mut options = gateway_options();
        options.bootstrap_override = Some(balancer_bootstrap(lb_port, &self.xds, lb_policy));
        options.wait_live = true;
        let balancer = Envoy::start(Envoy::local(lb_port), options);
        (balancer, SocketAddr::from(([127, 0, 0, 1], lb_port)))
    }

    pub(super) fn start(&mut self, i: usize) {
        let peers = self
            .monitoring
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let limits = self.limits.path().join("limits.toml");
        let name = format!("r{i}");
        let axon = Axon::start_at(
            self.config.path(),
            self.xds[i],
            self.monitoring[i],
            &[
                "--replica-name",
                &name,
                "--peers",
                &peers,
                "--limits",
                limits.to_str().unwrap(),
            ],
        );
        self.replicas[i] = Some(axon);
    }

    pub(super) fn any(&self) -> &Axon {
        self.replicas
            .iter()
            .flatten()
            .next()
            .expect("a replica runs")
    }

    /// Each running replica's stream count (`/fleet/replica`).
    pub(super) fn counts(&self) -> Vec<u64> {
        self.replicas
            .iter()
            .flatten()
            .map(|a| {
                let r = a.monitoring_get("/fleet/replica");
                serde_json::from_str::<Value>(&r.body).unwrap_or_default()["streams"]
                    .as_u64()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Proxies synced across the fleet, as the fleet view of a running replica says, and the
    /// peers it could not reach.
    pub(super) fn synced(&self) -> (usize, usize, usize) {
        let view = self.any().debug_json("/debug/syncz?fleet=true");
        let proxies = view["proxies"].as_array().cloned().unwrap_or_default();
        let synced = proxies.iter().filter(|p| p["synced"] == true).count();
        let unreachable = view["unreachable"].as_array().map_or(0, Vec::len);
        (synced, proxies.len(), unreachable)
    }

    /// Waits until all `want` proxies are connected once each and synced; returns how long.
    pub(super) fn wait_all_synced(&self, want: usize, what: &str) -> Duration {
        let start = Instant::now();
        let mut last = (0, 0, 0);
        let ok = wait_until(RECONNECT, || {
            last = self.synced();
            last.0 == want && last.1 == want
        });
        assert!(
            ok,
            "{what}: not every proxy synced again: (synced, connected, unreachable peers) = \
             {last:?} of {want}; counts {:?}",
            self.counts()
        );
        start.elapsed()
    }

    /// Waits until the three replicas hold within the slack of the even share, above and
    /// below; returns how long it took.
    fn wait_balanced(&self, total: usize, what: &str) -> Duration {
        let start = Instant::now();
        let share = total.div_ceil(3) as f64;
        let (low, high) = (
            (share * (1.0 - SLACK)).floor() as u64,
            (share * (1.0 + SLACK)).ceil() as u64,
        );
        let mut last = Vec::new();
        let ok = wait_until(REBALANCE, || {
            last = self.counts();
            last.len() == 3
                && last.iter().sum::<u64>() == total as u64
                && last.iter().all(|c| (low..=high).contains(c))
        });
        assert!(
            ok,
            "{what}: the replicas are not within [{low}, {high}] of {total} streams: {last:?}"
        );
        start.elapsed()
    }
}

#[test]
fn three_replicas_lose_no_proxy_and_rebalance_after_a_restart() {
    let n = proxies();
    let total = n + 2; // and the two real gateway Envoys
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let gw_b_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("gateway-b.yaml", &gateway_b_yaml(gw_b_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write(
        "routes.yaml",
        &backend_routes_yaml("v1", false, false, &[("v1", 100)]),
    );
    config.write("mesh-routes.yaml", &mesh_routes("5s"));
    let mut fleet = Fleet::start_three(config, fleet_limits());
    let (_balancer, lb) = fleet.balancer("LEAST_REQUEST");

    let mut options = gateway_options();
    options.xds_retry_back_off = Some(("0.1s".to_string(), "0.5s".to_string()));
    let envoy = Envoy::start(lb, options);
    let gw = wait_gateway_serves_v1(&envoy, gw_port, "initial route", RECONNECT);
    // A second real Envoy, on Delta ADS, with a Gateway of its own.
    let mut options = EnvoyOptions::gateway(
        GATEWAY_B_NODE_ID,
        &[("istio", "ingressgateway-b")],
        "istio-system",
    )
    .delta();
    options.xds_retry_back_off = Some(("0.1s".to_string(), "0.5s".to_string()));
    let envoy_b = Envoy::start(lb, options);
    let gw_b = wait_gateway_serves_v1(&envoy_b, gw_b_port, "initial route (Delta)", RECONNECT);

    let load = Load::start(lb, n, 4, &[]);
    let first = fleet.wait_all_synced(total, "at start");
    eprintln!(
        "[replicas] {total} proxies synced over 3 replicas in {first:?}: {:?}",
        fleet.counts()
    );
    fleet.wait_balanced(total, "at start");

    // Traffic through both gateways the whole time: every request must be answered by v1.
    let stop = Arc::new(AtomicBool::new(false));
    let (served, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let traffic = {
        let (stop, served, failed) = (stop.clone(), served.clone(), failed.clone());
        std::thread::spawn(move || {
            let mut bad = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                for to in [gw, gw_b] {
                    let r = http_get(to, "/", &[]);
                    if r == (200, "backend-v1".to_string()) {
                        served.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if bad.len() < 5 {
                            bad.push((to, r));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            bad
        })
    };

    // SIGTERM: replica 1 drains; its proxies move to the other two.
    let before_drain = load.line();
    let drained = Instant::now();
    let mut r1 = fleet.replicas[1].take().unwrap();
    r1.signal_term();
    let status = r1.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "the drained replica exits 0: {status}");
    fleet.stopped.push(r1);
    let after_drain = fleet.wait_all_synced(total, "after SIGTERM");
    wait_connected(&envoy, "after SIGTERM");
    wait_connected(&envoy_b, "after SIGTERM (Delta)");
    let reconnect_drain = drained.elapsed();
    assert_eq!(
        fleet.synced().2,
        1,
        "the stopped replica is named unreachable"
    );
    eprintln!(
        "[replicas] SIGTERM: every proxy synced again {reconnect_drain:?} after the signal \
         ({after_drain:?} after the drain's exit); counts {:?}",
        fleet.counts()
    );
    assert_resumed_with_nothing(&load, &before_drain, "SIGTERM");
    let before_restart = load.line();
    let restarted = Instant::now();
    fleet.start(1);
    let rebalance_1 = fleet.wait_balanced(total, "after restarting the drained replica");
    fleet.wait_all_synced(total, "after the rebalance");
    // The proxies the survivors closed to rebalance moved too, and were sent nothing.
    assert_resumed_with_nothing(&load, &before_restart, "rebalance after SIGTERM");
    eprintln!(
        "[replicas] restart after SIGTERM: within the slack {:?} after the start ({rebalance_1:?} \
         of waiting); counts {:?}",
        restarted.elapsed(),
        fleet.counts()
    );

    // The survivors got there by closing connections (nothing else closes them here).
    let closed: u64 = [0, 2]
        .iter()
        .map(|&i| rebalance_closed(fleet.replicas[i].as_ref().unwrap()))
        .sum();
    assert!(
        closed > 0,
        "the survivors closed no connection to rebalance"
    );
    eprintln!("[replicas] the survivors closed {closed} connections to rebalance");

    // kill -9: replica 2 vanishes without a GOAWAY.
    let before_kill = load.line();
    let killed = Instant::now();
    let mut r2 = fleet.replicas[2].take().unwrap();
    r2.stop();
    fleet.stopped.push(r2);
    fleet.wait_all_synced(total, "after kill -9");
    wait_connected(&envoy, "after kill -9");
    wait_connected(&envoy_b, "after kill -9 (Delta)");
    let reconnect_kill = killed.elapsed();
    eprintln!(
        "[replicas] kill -9: every proxy synced again {reconnect_kill:?} after the kill; counts {:?}",
        fleet.counts()
    );
    assert_resumed_with_nothing(&load, &before_kill, "kill -9");
    let before_restart = load.line();
    let restarted = Instant::now();
    fleet.start(2);
    fleet.wait_balanced(total, "after restarting the killed replica");
    let rebalance_2 = restarted.elapsed();
    eprintln!(
        "[replicas] restart after kill -9: within the slack {rebalance_2:?} after the start; \
         counts {:?}",
        fleet.counts()
    );
    fleet.wait_all_synced(total, "after the restarts");
    assert_resumed_with_nothing(&load, &before_restart, "rebalance after kill -9");
    wait_connected(&envoy, "after the restarts");
    wait_connected(&envoy_b, "after the restarts (Delta)");

    stop.store(true, Ordering::Relaxed);
    let bad = traffic.join().unwrap();
    let (served, failed) = (
        served.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
    );
    eprintln!("[replicas] gateway traffic: {served} requests served, {failed} failed");
    assert!(served > 100, "traffic ran: {served}");
    assert_eq!(failed, 0, "the real Envoys lost requests: {bad:?}");

    // A mesh VirtualService change, ACKed by every simulated proxy across the three. A
    // proxy that the rebalance moved while the change went out reconnects after it and is
    // never "affected": it counts once it is synced on a context that holds the change
    // (its replica's version of the change, which the fleet-wide distribution names).
    fleet.config.write("mesh-routes.yaml", &mesh_routes("7s"));
    let key = "VirtualService/demo/backend-mesh";
    let mut last = Value::Null;
    let mut holding = 0;
    let done = wait_until(RECONNECT, || {
        last = fleet
            .any()
            .debug_json(&format!("/debug/distribution?fleet=true&key={key}"));
        let d = &last["distribution"][0];
        let Some(parts) = d["replicas"].as_array().filter(|r| r.len() == 3) else {
            return false;
        };
        if d["key"] != key || d["complete"] != true {
            return false;
        }
        let version_of = |replica: &Value| {
            parts
                .iter()
                .find(|p| p["replica"] == *replica)
                .and_then(|p| p["version"].as_u64())
        };
        let view = fleet.any().debug_json("/debug/syncz?fleet=true");
        let proxies = view["proxies"].as_array().cloned().unwrap_or_default();
        holding = proxies
            .iter()
            .filter(|p| {
                p["synced"] == true
                    && p["context_version"].as_u64() >= version_of(&p["replica"])
                    && p["types"].as_array().is_some_and(|types| {
                        types.iter().all(|t| t["nonce_sent"] == t["nonce_acked"])
                    })
            })
            .count();
        holding == total && proxies.len() == total
    });
    assert!(
        done,
        "the change was not ACKed by every proxy across the three ({holding} of {total} streams hold it): {last}"
    );
    eprintln!(
        "[replicas] mesh VirtualService change ACKed by {n} proxies over 3 replicas in {}s",
        last["distribution"][0]["seconds_to_last_ack"]
    );
    // /debug/connections names each proxy's replica.
    let connections = fleet.any().debug_json("/debug/connections?fleet=true");
    let replicas: std::collections::BTreeSet<_> = connections["connections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["replica"].as_str().map(str::to_string))
        .collect();
    assert_eq!(replicas.len(), 3, "{connections}");
    assert_no_rejected_updates(&envoy);
    assert_no_rejected_updates(&envoy_b);
}

/// The second gateway Envoy's node id.
const GATEWAY_B_NODE_ID: &str =
    "router~127.0.0.2~ingress-b-1.istio-system~istio-system.svc.cluster.local";

/// A Gateway for the second gateway Envoy (`istio: ingressgateway-b`) on `port`, and a
/// VirtualService that binds to it and routes everything to backend v1.
fn gateway_b_yaml(port: u16) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata:\n  name: ingress-b\n  \
         namespace: istio-system\nspec:\n  selector:\n    istio: ingressgateway-b\n  servers:\n  \
         - port:\n      number: {port}\n      name: http\n      protocol: HTTP\n    hosts:\n    \
         - \"*\"\n---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  \
         name: backend-b\n  namespace: demo\nspec:\n  hosts:\n  - \"*\"\n  gateways:\n  \
         - istio-system/ingress-b\n  http:\n  - route:\n    - destination:\n        host: \
         {BACKEND}\n        subset: v1\n"
    )
}

/// The simulated proxies moved since `before` (every one synced again) resumed and were sent
/// nothing: no config changes during a move, and their versions are content hashes, equal
/// in every replica. Prints the bytes on reconnect against a full re-push of the moved ones.
fn assert_resumed_with_nothing(load: &Load, before: &LoadLine, what: &str) {
    let moved = load.line().since(before);
    assert!(
        moved.resumed > 0,
        "{what}: no simulated proxy moved: {moved:?}"
    );
    assert_eq!(
        (moved.resume_bytes, moved.resume_resources),
        (0, 0),
        "{what}: the moved proxies were sent something: {moved:?}"
    );
    eprintln!(
        "[replicas] {what}: bytes on reconnect: {} (a full re-push would be {}), {} streams \
         resumed",
        moved.resume_bytes, moved.full_resync_bytes, moved.resumed
    );
}

/// Waits until the real Envoy says it is connected to a control plane (its own stats).
fn wait_connected(envoy: &Envoy, what: &str) {
    assert!(
        wait_until(RECONNECT, || stat(envoy, "control_plane.connected_state")
            == 1),
        "{what}: the gateway Envoy is not connected to a replica\n{}",
        describe_envoy(envoy)
    );
}

/// `axon_rebalance_closed_connections` of a replica.
pub(super) fn rebalance_closed(axon: &Axon) -> u64 {
    axon.metrics()
        .lines()
        .find_map(|l| l.strip_prefix("axon_rebalance_closed_connections "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// A mesh VirtualService for the backend (every simulated sidecar imports it), with a
/// `timeout` to change.
pub(super) fn mesh_routes(timeout: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: \
         backend-mesh\n  namespace: demo\nspec:\n  hosts:\n  - {BACKEND}\n  http:\n  - timeout: \
         {timeout}\n    route:\n    - destination:\n        host: {BACKEND}\n        subset: v1\n"
    )
}
