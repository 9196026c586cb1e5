//! End-to-end: a real gateway Envoy rides out an axon restart. While axon is
//! down Envoy keeps serving its last config; when axon is back on the same xDS
//! port Envoy reconnects, fully syncs, and a VirtualService change made after
//! the restart is routed within 2 s of the write.

use crate::support;
use crate::support::scenario;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

/// How long the first configuration (or a reconnect) may take to reach Envoy.
const CONVERGE: Duration = Duration::from_secs(30);

/// The VirtualService sending every request to `subset`.
fn routes_yaml(subset: &str) -> String {
    backend_routes_yaml("v1", false, false, &[(subset, 100)])
}

/// Field order = drop order: Envoy dies before axon.
struct Scenario {
    envoy: Envoy,
    axon: Axon,
    /// Stopped axons, kept so that their logs are printed if the test fails.
    _previous: Vec<Axon>,
    config: ConfigDir,
    xds_port: u16,
    gw_port: u16,
    _v1: Upstream,
    _v2: Upstream,
}

impl Scenario {
    fn gw(&self) -> SocketAddr {
        Envoy::local(self.gw_port)
    }

    fn get(&self) -> (u16, String) {
        http_get(self.gw(), "/", &[])
    }

    fn wait_for_body(&self, what: &str, want: &str) {
        let what = format!("{what}: GET / on {}", self.gw());
        wait_for_answer(&what, CONVERGE, want, &self.envoy, || self.get());
    }
}

#[test]
fn envoy_rides_out_an_axon_restart() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml("v1"));
    let xds_port = free_port();
    let axon = Axon::start_on(config.path(), xds_port, &[]);
    assert_eq!(axon.xds_addr().port(), xds_port);
    let mut options = gateway_options();
    // Reconnect quickly once axon is back (Envoy's default backoff grows to 30 s).
    options.xds_retry_back_off = Some(("0.1s".to_string(), "0.5s".to_string()));
    let (envoy, gw_port) = start_gateway_listening_with(
        &axon,
        &config,
        gw_port,
        SocketAddr::from(([127, 0, 0, 1], xds_port)),
        &options,
        CONVERGE,
    );
    let mut s = Scenario {
        envoy,
        axon,
        _previous: Vec::new(),
        config,
        xds_port,
        gw_port,
        _v1: v1,
        _v2: v2,
    };

    // Traffic is routed (everything to v1), once Envoy has the route in force.
    let v1_cluster = format!("outbound|80|v1|{BACKEND}");
    wait_gateway_route(&s.envoy, gw_port, "*", &[&v1_cluster], CONVERGE);
    s.wait_for_body("initial route", "backend-v1");
    assert!(
        s.axon
            .wait_synced(&[GATEWAY_NODE_ID], Duration::from_secs(10)),
        "the first axon never reported the gateway synced: {:?}",
        s.axon.connections()
    );

    // Kill axon. Envoy notices, retries, and keeps serving its last config.
    let killed = Instant::now();
    s.axon.stop();
    assert!(!s.axon.is_running());
    let fails_before = stat(&s.envoy, "cluster.xds-grpc.upstream_cx_connect_fail");
    let mut served_while_down = 0usize;
    let mut bad = Vec::new();
    let down_long_enough = wait_until(Duration::from_secs(20), || {
        let r = s.get();
        if r == (200, "backend-v1".to_string()) {
            served_while_down += 1;
        } else {
            bad.push(r);
        }
        let stats = s.envoy.stats();
        let fails = stats
            .get("cluster.xds-grpc.upstream_cx_connect_fail")
            .copied()
            .unwrap_or(0);
        // Disconnected, at least 3 failed reconnects, and a fair number of requests.
        stats.get("control_plane.connected_state") == Some(&0)
            && fails >= fails_before + 3
            && served_while_down >= 50
    });
    assert!(
        down_long_enough,
        "while axon was down Envoy should have failed to reconnect at least 3 times \
         (served {served_while_down})\n{}",
        describe_envoy(&s.envoy)
    );
    assert!(
        bad.is_empty(),
        "requests failed while axon was down: {:?}",
        &bad[..bad.len().min(10)]
    );
    // A burst more, to be sure nothing was dropped.
    for _ in 0..50 {
        assert_eq!(s.get(), (200, "backend-v1".to_string()), "axon is down");
        served_while_down += 1;
    }
    let down_for = killed.elapsed();
    eprintln!(
        "[resilience] axon down {down_for:?}: {served_while_down} requests all served by \
         backend-v1; xds-grpc connect failures {}",
        stat(&s.envoy, "cluster.xds-grpc.upstream_cx_connect_fail") - fails_before
    );

    // Restart axon on the same port with the same config dir.
    let restarted = Instant::now();
    let new_axon = Axon::start_on(s.config.path(), s.xds_port, &[]);
    assert_eq!(new_axon.xds_addr().port(), s.xds_port);
    let old = std::mem::replace(&mut s.axon, new_axon);
    s._previous.push(old);
    let listening_after = restarted.elapsed();
    assert!(
        wait_until(CONVERGE, || s
            .axon
            .connections()
            .iter()
            .any(|c| c["proxy"] == GATEWAY_NODE_ID)),
        "Envoy never reconnected to the restarted axon\n{}",
        describe_envoy(&s.envoy)
    );
    let connected_after = restarted.elapsed();
    assert!(
        s.axon.wait_synced(&[GATEWAY_NODE_ID], CONVERGE),
        "Envoy reconnected but never fully synced with the restarted axon: {:?}\n{}",
        s.axon.connections(),
        describe_envoy(&s.envoy)
    );
    let synced_after = restarted.elapsed();
    // What an operator sees of the reconnect: axon's documented log lines.
    for line in ["ADS: connected", "ADS: full sync complete"] {
        assert!(
            s.axon.wait_for_log(line, Duration::from_secs(10)),
            "the restarted axon never logged `{line}`"
        );
    }
    assert!(
        wait_until(Duration::from_secs(10), || stat(
            &s.envoy,
            "control_plane.connected_state"
        ) == 1),
        "Envoy does not report itself connected\n{}",
        describe_envoy(&s.envoy)
    );
    eprintln!(
        "[resilience] restarted axon listening after {listening_after:?}; Envoy connected \
         after {connected_after:?}, full sync after {synced_after:?}"
    );
    // Exactly one stream from the one Envoy: the restarted axon's first connection id, and
    // one `ADS: connected` line.
    let connections = s.axon.connections();
    assert_eq!(
        (connections.len(), connections[0]["connection_id"].as_u64()),
        (1, Some(1)),
        "exactly one stream from the one Envoy: {connections:?}"
    );
    assert_eq!(
        s.axon.count_log("ADS: connected"),
        1,
        "exactly one stream from the one Envoy"
    );
    for _ in 0..20 {
        assert_eq!(
            s.get(),
            (200, "backend-v1".to_string()),
            "after the reconnect"
        );
    }

    // A VirtualService change after the restart is routed within 2 s.
    let written = Instant::now();
    s.config.write("routes.yaml", &routes_yaml("v2"));
    let converged_after =
        settle_time(written, 20, "backend-v2", || s.get()).unwrap_or_else(|last| {
            panic!(
                "after the restart, switching routes.yaml to v2 did not settle within 15 s; \
             last {last:?}\n{}",
                describe_envoy(&s.envoy)
            )
        });
    eprintln!(
        "[resilience] route change after the restart reached Envoy {converged_after:?} after the write"
    );
    assert!(
        converged_after < Duration::from_secs(2),
        "route change after the restart took {converged_after:?} (>= 2 s)"
    );

    // Envoy accepted every update, from both axons.
    assert_no_rejected_updates(&s.envoy);
    eprintln!(
        "[resilience] envoy: cds.update_success {}, lds.update_success {}, no update_rejected",
        stat(&s.envoy, "cluster_manager.cds.update_success"),
        stat(&s.envoy, "listener_manager.lds.update_success")
    );
}
