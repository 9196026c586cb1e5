//! The load tool's reconnecting proxies (`axon-load run --reconnect`) resume as Envoy does:
//! one axon is killed (`kill -9`) and started again on the same port, on the same config
//! directory (its versions are content hashes, the same after the restart); the proxies
//! reconnect naming what they have and are sent no resource. SotW: no response at all (a
//! request at the current version counts as ACKed); Delta (`initial_resource_versions`):
//! the empty answers the protocol requires, with no resource in them. The bytes against a
//! full re-push are printed (`[resume] …`).

use crate::support;
use crate::support::scenario;

use std::time::{Duration, Instant};

use scenario::*;
use support::*;

const PROXIES: usize = 20;
const WAIT: Duration = Duration::from_secs(30);

fn config() -> ConfigDir {
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(free_port()));
    config.write("backend.yaml", &backend_yaml(free_port(), free_port()));
    config.write(
        "routes.yaml",
        &backend_routes_yaml("v1", false, false, &[("v1", 100)]),
    );
    config
}

/// Waits until `axon` has `n` synced streams.
fn wait_synced(axon: &Axon, n: usize, what: &str) {
    let mut synced = 0;
    let ok = wait_until(WAIT, || {
        let connections = axon.connections();
        synced = connections.iter().filter(|c| c["synced"] == true).count();
        connections.len() == n && synced == n
    });
    assert!(ok, "{what}: {synced} of {n} streams synced");
}

/// Syncs the proxies, kills axon and starts it again on the same port; returns what the
/// resumed streams cost.
fn resume(extra: &[&str]) -> LoadLine {
    let config = config();
    let port = free_port();
    let mut axon = Axon::start_on(config.path(), port, &[]);
    let load = Load::start(axon.xds_addr(), PROXIES, 2, extra);
    let first = load.wait_line(WAIT, |_| true);
    let synced = format!("{PROXIES}/{PROXIES} synced");
    assert!(
        load.other_lines().iter().any(|l| l.starts_with(&synced)),
        "{:?}",
        load.other_lines()
    );
    assert_eq!((first.resumed, first.resume_bytes), (0, 0), "{first:?}");
    wait_synced(&axon, PROXIES, "at start");
    let before = load.line();

    axon.stop();
    let restarted = Axon::start_on(config.path(), port, &[]);
    wait_synced(&restarted, PROXIES, "after the restart");
    let after = load.line_after(Instant::now());
    let moved = after.since(&before);
    assert!(
        moved.resumed >= PROXIES as u64,
        "every proxy resumed: {moved:?}"
    );
    assert_eq!(moved.resume_resources, 0, "no resource sent: {moved:?}");
    eprintln!(
        "[resume] {extra:?}: {PROXIES} proxies resumed after kill -9 and a restart: {} bytes \
         on reconnect (a full re-push would be {})",
        moved.resume_bytes, moved.full_resync_bytes
    );
    moved
}

#[test]
fn sotw_proxies_resume_and_are_sent_nothing() {
    let moved = resume(&[]);
    assert_eq!(moved.resume_bytes, 0, "no response at all: {moved:?}");
    assert!(moved.full_resync_bytes > 0, "{moved:?}");
}

#[test]
fn delta_proxies_resume_with_their_versions_and_get_empty_answers() {
    let moved = resume(&["--delta"]);
    assert!(
        moved.resume_bytes > 0,
        "every first request is answered: {moved:?}"
    );
    assert!(
        moved.resume_bytes * 5 < moved.full_resync_bytes,
        "empty answers only: {moved:?}"
    );
}
