//! The port of a listener that Envoy binds from xDS (a gateway port, a Sidecar egress port).
//! The test picks it with [`free_port`] and writes it into the config long before Envoy
//! binds it; meanwhile any `bind(port 0)` on the machine may get it (axon's own monitoring
//! and debug servers, which answer 404, are bound right after). Envoy then rejects the
//! listener ("Address already in use") and requests reach the other server.
//! [`start_envoy_listening`] detects exactly that and moves to another port.

use std::time::Duration;

use super::axon::Axon;
use super::config_dump::dynamic_listener;
use super::envoy::Envoy;
use super::wait::{free_port, wait_until};

/// How many ports are tried before giving up.
const ATTEMPTS: usize = 3;

/// Starts an Envoy with `start` and waits (up to `timeout`) until it has bound the dynamic
/// listener `listener(port)` — or rejected it. When it was rejected because the port was
/// taken by someone else, drops that Envoy, picks another port, has `rewrite(port)` write
/// the config that names it, waits until `axon` has built it, and starts again (up to 3
/// ports). Returns the Envoy and its port. Any other outcome (another rejection, no
/// listener in time) is left to the caller's checks, which report it.
pub fn start_envoy_listening(
    axon: &Axon,
    mut port: u16,
    listener: impl Fn(u16) -> String,
    mut rewrite: impl FnMut(u16),
    start: impl Fn() -> Envoy,
    timeout: Duration,
) -> (Envoy, u16) {
    for attempt in 1..=ATTEMPTS {
        let envoy = start();
        let name = listener(port);
        let mut rejected = false;
        wait_until(timeout, || {
            rejected = envoy
                .stats()
                .get("listener_manager.lds.update_rejected")
                .is_some_and(|n| *n > 0);
            rejected
                || dynamic_listener(&envoy.config_dump(), &name)
                    .is_some_and(|l| l.get("active_state").is_some())
        });
        let taken = rejected
            && wait_until(Duration::from_secs(5), || {
                envoy.logs().lines().any(|l| {
                    l.contains(&format!("listener '{name}'"))
                        && l.contains("Address already in use")
                })
            });
        if !taken || attempt == ATTEMPTS {
            return (envoy, port);
        }
        eprintln!("[harness] port {port} was taken before Envoy could bind {name}; trying another");
        drop(envoy);
        let before = axon.built_version();
        port = free_port();
        rewrite(port);
        assert!(
            axon.wait_built_after(before, timeout).is_some(),
            "axon built no config for the new port {port}: {}",
            axon.push_status()
        );
    }
    unreachable!("the last attempt returns")
}
