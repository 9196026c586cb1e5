//! End-to-end: SIGTERM drains. `/ready` turns 503, the listener stops accepting, the open
//! xDS connections are closed (GOAWAY, streams ended with UNAVAILABLE) spread over
//! `drain_duration`, and axon exits 0. A real gateway Envoy whose `xds-grpc` cluster also
//! lists a second axon moves to it and serves every request sent through it meanwhile.

use crate::support;
use crate::support::scenario;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const LIMITS: &str = "drain_duration = \"2s\"\nclose_grace = \"1s\"\n";

fn routes_yaml(subset: &str) -> String {
    backend_routes_yaml("v1", false, false, &[(subset, 100)])
}

#[test]
fn sigterm_drains_the_proxies_to_another_axon_without_losing_a_request() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml("v1"));
    let limits_dir = ConfigDir::new();
    limits_dir.write("limits.toml", LIMITS);
    let limits = limits_dir.file("limits.toml").display().to_string();
    let mut a = Axon::start_with_args(config.path(), &["--limits", &limits]);
    let b_port = free_port();
    let mut options = gateway_options();
    options.xds_retry_back_off = Some(("0.1s".to_string(), "0.5s".to_string()));
    options.more_xds = vec![SocketAddr::from(([127, 0, 0, 1], b_port))];
    let (envoy, gw_port) =
        start_gateway_listening_with(&a, &config, gw_port, a.xds_addr(), &options, CONVERGE);
    let gw = wait_gateway_serves_v1(&envoy, gw_port, "initial route", CONVERGE);
    assert!(
        a.wait_synced(&[GATEWAY_NODE_ID], CONVERGE),
        "the gateway never synced with the first axon: {:?}",
        a.connections()
    );
    // The second replica, on the address Envoy also knows.
    let b = Axon::start_on(config.path(), b_port, &["--limits", &limits]);
    // One more connection on the first axon, so that the drain spreads two.
    let _idle = TcpStream::connect(a.xds_addr()).expect("a second connection");

    // Traffic through Envoy for the whole drain.
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut answers = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                answers.push(http_get(gw, "/", &[]));
            }
            answers
        })
    };

    let signalled = Instant::now();
    a.signal_term();
    assert!(
        wait_until(Duration::from_secs(5), || {
            let r = a.monitoring_get("/ready");
            r.status == 503 && r.body.contains("draining")
        }),
        "/ready did not turn 503 on SIGTERM"
    );
    let status = a.wait_exit(Duration::from_secs(15));
    let drained_in = signalled.elapsed();
    assert!(status.success(), "axon exited with {status} after SIGTERM");
    assert!(
        drained_in >= Duration::from_secs(1),
        "exited after {drained_in:?}: the two connections were not spread over drain_duration"
    );
    for line in ["SIGTERM: draining xDS connections", "drained; exiting"] {
        assert!(
            a.logs().contains(line),
            "no `{line}` in the log:\n{}",
            a.logs()
        );
    }

    // Envoy moved to the second axon and is synced there.
    assert!(
        b.wait_synced(&[GATEWAY_NODE_ID], CONVERGE),
        "Envoy never synced with the second axon: {:?}\n{}",
        b.connections(),
        describe_envoy(&envoy)
    );
    let moved_in = signalled.elapsed();
    // A change made now reaches Envoy through the second axon.
    config.write("routes.yaml", &routes_yaml("v2"));
    wait_for_answer(
        "route change via the second axon",
        CONVERGE,
        "backend-v2",
        &envoy,
        || http_get(gw, "/", &[]),
    );
    stop.store(true, Ordering::Relaxed);
    let answers = traffic.join().unwrap();
    let failed: Vec<_> = answers
        .iter()
        .filter(|(status, body)| *status != 200 || !body.starts_with("backend-"))
        .collect();
    eprintln!(
        "[drain] exited 0 after {drained_in:?}; Envoy synced with the second axon after \
         {moved_in:?}; {} requests, {} failed",
        answers.len(),
        failed.len()
    );
    assert!(answers.len() > 50, "only {} requests sent", answers.len());
    assert!(
        failed.is_empty(),
        "requests lost during the drain: {:?}",
        &failed[..failed.len().min(10)]
    );
}
