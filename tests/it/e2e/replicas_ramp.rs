//! End-to-end: replicas that never thrash. Three replicas behind a real Envoy balancing
//! connections round robin, and 300 simulated proxies connecting at once: the ramp ends
//! within the slack of the even share, so no replica may close a connection to rebalance,
//! though while the proxies connect each replica sees its peers' counts a poll late. And two
//! replicas given one name: the younger refuses to serve and says why; two left to name
//! themselves on one host pick distinct names.

use crate::support;
use crate::support::scenario;

use std::time::Duration;

use scenario::*;
use support::*;

use super::replicas::{Fleet, SLACK, fleet_limits, mesh_routes, rebalance_closed};

fn mesh() -> ConfigDir {
    let config = ConfigDir::new();
    config.write("backend.yaml", &backend_yaml(free_port(), free_port()));
    config.write("mesh-routes.yaml", &mesh_routes("5s"));
    config
}

#[test]
fn a_ramp_that_ends_within_the_slack_closes_nothing() {
    let n = 300;
    let fleet = Fleet::start_three(mesh(), fleet_limits());
    let (balancer, lb) = fleet.balancer("ROUND_ROBIN");
    // Every replica is healthy in the balancer before the ramp: round robin over three.
    assert!(
        wait_until(Duration::from_secs(30), || {
            stat(&balancer, "cluster.axons.membership_healthy") == 3
        }),
        "the balancer does not see the three replicas healthy\n{}",
        describe_envoy(&balancer)
    );
    let _load = Load::start(lb, n, 4, &[]);
    fleet.wait_all_synced(n, "the ramp");
    let counts = fleet.counts();
    let share = n.div_ceil(3) as f64;
    let high = (share * (1.0 + SLACK)).ceil() as u64;
    assert!(
        counts.iter().all(|c| *c <= high),
        "round robin ended outside the slack ({high}): {counts:?}"
    );
    // Each replica has since polled its peers at the end of the ramp and held the settled
    // total for `rebalance_settle` (1 s): any close would have come by now.
    std::thread::sleep(Duration::from_millis(1000 + 3 * 200));
    let closed: Vec<u64> = fleet
        .replicas
        .iter()
        .flatten()
        .map(rebalance_closed)
        .collect();
    eprintln!(
        "[replicas] a ramp of {n} proxies over 3 replicas: counts {counts:?}, closed {closed:?}"
    );
    assert_eq!(
        closed,
        [0, 0, 0],
        "a replica closed connections during a ramp that ended within the slack ({counts:?})"
    );
    assert_eq!(fleet.counts().iter().sum::<u64>(), n as u64);
}

#[test]
fn the_younger_of_two_replicas_of_one_name_refuses_to_serve() {
    let config = mesh();
    let limits = fleet_limits();
    let limits_path = limits.path().join("limits.toml");
    let monitoring = [free_port(), free_port()];
    let peers = format!("127.0.0.1:{},127.0.0.1:{}", monitoring[0], monitoring[1]);
    let start = |i: usize, name: Option<&str>| {
        let mut args = vec!["--peers", &peers, "--limits", limits_path.to_str().unwrap()];
        if let Some(name) = name {
            args.extend(["--replica-name", name]);
        }
        Axon::start_at(config.path(), free_port(), monitoring[i], &args)
    };
    let older = start(0, Some("axon-a"));
    let mut younger = start(1, Some("axon-a"));
    let status = younger.wait_exit(Duration::from_secs(30));
    assert!(
        !status.success(),
        "the younger exits with an error: {status}"
    );
    let logs = younger.logs();
    assert!(
        logs.contains("has this replica's name \"axon-a\" and started first")
            && logs.contains("give each its own --replica-name"),
        "the younger says why:\n{logs}"
    );
    assert_eq!(
        older.monitoring_get("/ready").status,
        200,
        "the older serves on"
    );
    drop(older);

    // Without names, on one host: the host name and each one's monitoring port.
    let a = start(0, None);
    let b = start(1, None);
    let name = |axon: &Axon| {
        let r = axon.monitoring_get("/fleet/replica");
        serde_json::from_str::<serde_json::Value>(&r.body).unwrap()["replica"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let (name_a, name_b) = (name(&a), name(&b));
    assert_ne!(name_a, name_b);
    assert!(name_a.ends_with(&format!("-{}", monitoring[0])), "{name_a}");
    // Each counts the other as a peer: the fleet view names the other.
    assert!(
        wait_until(Duration::from_secs(10), || {
            a.debug_json("/debug/syncz?fleet=true")["unreachable"]
                .as_array()
                .is_some_and(Vec::is_empty)
                && a.metrics().contains("axon_fleet_peers 1")
        }),
        "{}",
        a.metrics()
    );
}
