//! Capture itself, with no service naming the server (`ALLOW_ANY`, the default), proved by
//! the pods' nat counters as well as Envoy's stats:
//!
//! - A sidecar client's request to a plain pod's IP is captured to 15001 (`virtualOutbound`)
//!   and sent on by the PassthroughCluster from the client's pod IP (Envoy's own connection,
//!   uid 1337, is not captured again); so is a TCP connection, whose server speaks first.
//! - A sidecar server's inbound connection is captured to 15006 (`virtualInbound`) and, no
//!   port of its being declared, passed to the app from 127.0.0.6 (istiod's
//!   `InboundPassthroughCluster`), which the capture rules let through; a passthrough from
//!   the pod IP is captured to 15006 again, a loop, seen as [`PROXY_TO_SELF_CAPTURED`]
//!   matching and stopped at a bound.

use std::net::{IpAddr, SocketAddr};

use super::{APP_PORT, CONVERGE, answered_by, stat, wait_answer};
use crate::support::mesh::{
    INBOUND_CAPTURED, Mesh, OUTBOUND_CAPTURED, PROXY_TO_SELF_CAPTURED, PodSpec,
    istio_iptables_rules,
};
use crate::support::{Axon, ConfigDir, wait_until};

/// The plain server's TCP application port.
const TCP_PORT: u16 = 9000;

/// More proxy connections back to 15006 than this is a loop, not a retry.
const LOOP: u64 = 50;

#[test]
fn outbound_capture_passes_through_to_a_plain_pod() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let server = mesh.pod(PodSpec::plain("server", "b", &[("app", "server")]));
    let app = server.serve_http(APP_PORT, "server");
    let _tcp = server.serve_tcp(TCP_PORT, "server-tcp");
    client.wait_listener("virtualOutbound");

    let target = server.ip().to_string();
    let peer = wait_answer(&client, &target, APP_PORT, &[], "server", &server);
    // Envoy's passthrough connection comes from the client's pod IP.
    let peer: SocketAddr = peer.parse().unwrap();
    assert_eq!(
        peer.ip(),
        IpAddr::from(client.ip()),
        "{}",
        client.describe()
    );
    assert!(!app.requests().is_empty());
    // Through 15001 and the PassthroughCluster, not straight to the server.
    assert!(
        client.nat_packets(OUTBOUND_CAPTURED) >= 1
            && client.nat_packets(PROXY_TO_SELF_CAPTURED) == 0
            && stat(&client, "listener.0.0.0.0_15001.downstream_cx_total") >= 1
            && stat(&client, "cluster.PassthroughCluster.upstream_cx_total") >= 1,
        "{}",
        client.describe()
    );
    // A TCP app through the same passthrough: its banner names the client pod.
    let captured = client.nat_packets(OUTBOUND_CAPTURED);
    let banner = client.tcp_banner(&target, TCP_PORT);
    assert!(
        banner.starts_with(&format!("server-tcp {}:", client.ip())),
        "banner {banner:?}\n{}",
        client.describe()
    );
    assert_eq!(client.nat_packets(OUTBOUND_CAPTURED), captured + 1);
}

#[test]
fn inbound_capture_passes_through_to_the_app() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let server = mesh.pod(PodSpec::sidecar("server", "b", &[("app", "server")]));
    let app = server.serve_http(APP_PORT, "server");
    client.wait_listener("virtualOutbound");
    server.wait_listener("virtualInbound");

    let target = server.ip().to_string();
    let mut last = (0, String::new());
    let mut looped = 0;
    wait_until(CONVERGE, || {
        last = client.http_get(&target, APP_PORT, "/", &[]);
        looped = server.nat_packets(PROXY_TO_SELF_CAPTURED);
        last.0 == 200 || looped > LOOP
    });
    assert!(
        looped <= LOOP,
        "the server's inbound passthrough is captured again: {looped} connections of its \
         Envoy looped back to 15006 (last answer {last:?})\n{}",
        server.nat_table()
    );
    assert_eq!(
        last.0,
        200,
        "{last:?}\n{}\n{}",
        client.describe(),
        server.describe()
    );
    assert!(
        server.nat_packets(INBOUND_CAPTURED) >= 1,
        "{}",
        server.describe()
    );
    // istiod's inbound passthrough connects from 127.0.0.6.
    let (_, peer) = answered_by(&last.1).unwrap();
    assert!(peer.starts_with("127.0.0.6:"), "the app saw {peer}");
    assert!(!app.requests().is_empty());
}

#[test]
fn the_capture_rules_are_istio_iptables_redirect_mode() {
    let rules = istio_iptables_rules();
    for rule in [
        "-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
        "-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
        "-A PREROUTING -p tcp -j ISTIO_INBOUND",
        "-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
        INBOUND_CAPTURED,
        "-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN",
        "-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN",
        "-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN",
        "-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN",
        "-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN",
    ] {
        assert!(rules.lines().any(|l| l == rule), "{rule} missing:\n{rules}");
    }
    assert_eq!(rules.lines().last(), Some("COMMIT"));
    let output: Vec<&str> = rules
        .lines()
        .filter(|l| l.starts_with("-A ISTIO_OUTPUT"))
        .collect();
    assert_eq!(output.last(), Some(&OUTBOUND_CAPTURED));
}
