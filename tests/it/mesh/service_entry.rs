//! A ServiceEntry (`ratings.b.svc.cluster.local`, HTTP port 80 to target 8080) whose
//! endpoints are WorkloadEntries at two sidecar pods' IPs (v1 and v2): a sidecar client's
//! request by host, by name or by the ClusterIP is captured, routed by the Host header and
//! reaches a server's app through that server's sidecar (`virtualInbound`'s chain for 8080).
//! A VirtualService sending `end-user: jason` to subset v2 catches that request and leaves
//! the others to v1. Programs run in a pod resolve the service's name through the pod's
//! `/etc/hosts`.

use std::net::Ipv4Addr;

use super::{APP_PORT, service_yaml, stat, wait_answer};
use crate::support::mesh::{INBOUND_CAPTURED, Mesh, OUTBOUND_CAPTURED, PodSpec};
use crate::support::scenario::{destination_rule_yaml, documents, header_to_v2_yaml};
use crate::support::{Axon, ConfigDir};

const RATINGS: &str = "ratings.b.svc.cluster.local";
const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);

#[test]
fn a_service_entry_routes_to_pods_and_a_virtual_service_matches_a_header() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    assert_eq!(mesh.service("ratings", "b", VIP), RATINGS);
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let v1 = mesh.pod(PodSpec::sidecar(
        "ratings-v1",
        "b",
        &[("app", "ratings"), ("version", "v1")],
    ));
    let v2 = mesh.pod(PodSpec::sidecar(
        "ratings-v2",
        "b",
        &[("app", "ratings"), ("version", "v2")],
    ));
    let (app1, app2) = (
        v1.serve_http(APP_PORT, "ratings-v1"),
        v2.serve_http(APP_PORT, "ratings-v2"),
    );
    config.write(
        "ratings.yaml",
        &documents(&[
            service_yaml("ratings", "b", VIP, &[(v1.ip(), "v1"), (v2.ip(), "v2")]),
            destination_rule_yaml("ratings", "b", RATINGS),
            header_to_v2_yaml("ratings", "b", RATINGS, 80, ("end-user", "jason"), "v1"),
        ]),
    );
    client.wait_listener("0.0.0.0_80");
    v1.wait_listener("virtualInbound");

    // By host (the Host header routes), captured at 15001 and handed to 0.0.0.0_80.
    let peer = wait_answer(&client, RATINGS, 80, &[], "ratings-v1", &v1);
    // Inbound through the server's sidecar, which connects to the app from 127.0.0.6.
    let peer: std::net::SocketAddr = peer.parse().unwrap();
    assert_eq!(peer.ip().to_string(), "127.0.0.6", "the app saw {peer}");
    assert!(stat(&v1, "listener.0.0.0.0_15006.downstream_cx_total") >= 1);
    assert!(v1.nat_packets(INBOUND_CAPTURED) >= 1);
    // Captured at 15001 and handed to 0.0.0.0_80, which binds no port of its own.
    assert!(client.nat_packets(OUTBOUND_CAPTURED) >= 1);
    assert!(stat(&client, "listener.0.0.0.0_80.downstream_cx_total") >= 1);

    // The VirtualService's match: only `end-user: jason` goes to v2.
    let jason = [("end-user", "jason")];
    wait_answer(&client, RATINGS, 80, &jason, "ratings-v2", &v2);
    for _ in 0..5 {
        wait_answer(
            &client,
            RATINGS,
            80,
            &[("end-user", "bob")],
            "ratings-v1",
            &v1,
        );
        wait_answer(&client, "ratings.b", 80, &[], "ratings-v1", &v1);
    }
    // Programs in the pod resolve the names too (`/etc/netns/NS/hosts`).
    let out = client
        .command("getent")
        .args(["hosts", RATINGS])
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        line.starts_with(&format!("{VIP} ")),
        "getent hosts {RATINGS}: {line:?}"
    );

    // By ClusterIP with the service's host.
    wait_answer(
        &client,
        &VIP.to_string(),
        80,
        &[("Host", RATINGS)],
        "ratings-v1",
        &v1,
    );
    assert!(
        app2.requests()
            .iter()
            .all(|r| r.headers.get("end-user").map(String::as_str) == Some("jason")),
        "v2 got a request the match should have left to v1: {:?}",
        app2.requests()
    );
    assert!(
        app1.requests()
            .iter()
            .all(|r| r.headers.get("end-user").map(String::as_str) != Some("jason"))
    );
}
