//! Peers from Kubernetes, against the in-process fake API server: two axon replicas with
//! `--kubernetes --peer-service axon-peers` find each other through the headless Service's
//! EndpointSlices in their own namespace (the kubeconfig's, `default`), each leaving itself
//! out by its pod name, learn each other's stream count, answer `?fleet=true` for both, and
//! drop a peer whose slice is deleted.

use crate::support;
use crate::support::fake_kube;

use std::time::Duration;

use fake_kube::*;
use serde_json::Value;
use support::*;

fn peers(axon: &Axon) -> Vec<Value> {
    axon.debug_json("/debug/fleet")["peers"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[test]
fn replicas_find_each_other_through_the_peer_service_endpoint_slices() {
    let api = FakeKube::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(dir.path()).display().to_string();
    let limits = dir.path().join("limits.toml");
    std::fs::write(&limits, "peer_poll_interval = \"200ms\"\n").unwrap();
    let start = |name: &str| {
        Axon::start_with_env(
            None,
            &[
                "--kubernetes",
                "--peer-service",
                "axon-peers",
                "--replica-name",
                name,
                "--limits",
                limits.to_str().unwrap(),
            ],
            &[("KUBECONFIG", kubeconfig.as_str())],
        )
    };
    let a = start("axon-0");
    let b = start("axon-1");
    // One slice per replica (their monitoring ports differ here; in a cluster one slice
    // holds every pod at the same port), and a slice of another Service, not a peer.
    for (axon, pod) in [(&a, "axon-0"), (&b, "axon-1")] {
        api.apply(endpoint_slice(
            "default",
            &format!("axon-peers-{pod}"),
            "axon-peers",
            ("http-monitoring", axon.monitoring_addr().port()),
            &[("127.0.0.1", pod)],
        ));
    }
    api.apply(endpoint_slice(
        "default",
        "other",
        "other",
        ("http-monitoring", 1),
        &[("127.0.0.1", "x")],
    ));
    let answered = |axon: &Axon, want: &str| {
        let peers = peers(axon);
        peers.len() == 1 && peers[0]["report"]["replica"] == want
    };
    assert!(
        wait_until(Duration::from_secs(20), || answered(&a, "axon-1")
            && answered(&b, "axon-0")),
        "the replicas did not find each other: {:?} / {:?}",
        peers(&a),
        peers(&b)
    );
    assert_eq!(
        peers(&a)[0]["address"],
        b.monitoring_addr().to_string(),
        "the slice's http-monitoring port"
    );
    assert_eq!(peers(&a)[0]["report"]["streams"], 0);

    // The fleet view asks the peer.
    let view = a.debug_json("/debug/syncz?fleet=true");
    let names: Vec<&str> = view["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["replica"].as_str())
        .collect();
    assert_eq!(names, ["axon-0", "axon-1"], "{view}");
    assert_eq!(view["unreachable"], serde_json::json!([]));

    // The peer's slice is deleted: it is no longer a peer.
    api.delete(
        "discovery.k8s.io/v1",
        "EndpointSlice",
        "default",
        "axon-peers-axon-1",
    );
    assert!(
        wait_until(Duration::from_secs(20), || peers(&a).is_empty()),
        "a deleted slice's replica is still a peer: {:?}",
        peers(&a)
    );
}
