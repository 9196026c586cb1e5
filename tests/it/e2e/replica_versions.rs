//! End-to-end: a real gateway Envoy whose `xds-grpc` cluster lists two axon replicas on one
//! config directory. The replica it holds is killed (`kill -9`); Envoy reconnects to the
//! other, naming the versions it has, which are that replica's too (content hashes). With
//! SotW it is sent nothing and applies nothing; with Delta it is sent the empty answers the
//! protocol requires, no resource. Either way it rejects nothing, stays synced and serves
//! every request, and the next change reaches it through the survivor.

use crate::support;
use crate::support::scenario;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

fn routes_yaml(subset: &str) -> String {
    backend_routes_yaml("v1", false, false, &[(subset, 100)])
}

/// The sum of Envoy's `*.update_success` stats (CDS, LDS, each EDS cluster, each RDS route
/// configuration): it grows with every response Envoy applies.
fn applied_updates(envoy: &Envoy) -> u64 {
    envoy
        .stats()
        .iter()
        .filter(|(k, _)| k.ends_with(".update_success"))
        .map(|(_, v)| *v)
        .sum()
}

/// The sum over the types of the `axon` metric `name` (a counter, or a histogram's `_sum`).
fn over_types(axon: &Axon, name: &str) -> f64 {
    axon.metrics()
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The bytes of the resources `axon` sent (`pilot_xds_config_size_bytes`, as istiod's: the
/// resources of each response, not its header).
fn bytes_sent(axon: &Axon) -> f64 {
    over_types(axon, "pilot_xds_config_size_bytes_sum")
}

/// Whether `axon` holds the gateway's stream, synced.
fn holds(axon: &Axon) -> bool {
    axon.connections()
        .iter()
        .any(|c| c["proxy"] == GATEWAY_NODE_ID && c["synced"] == true)
}

#[test]
fn a_sotw_envoy_moved_to_another_replica_is_sent_nothing_and_stays_synced() {
    move_envoy(false);
}

#[test]
fn a_delta_envoy_moved_to_another_replica_is_sent_no_resource_and_stays_synced() {
    move_envoy(true);
}

fn move_envoy(delta: bool) {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml("v1"));
    let a = Axon::start(config.path());
    let b = Axon::start(config.path());
    let mut options = if delta {
        gateway_options().delta()
    } else {
        gateway_options()
    };
    options.xds_retry_back_off = Some(("0.1s".to_string(), "0.5s".to_string()));
    options.more_xds = vec![b.xds_addr()];
    let (envoy, gw_port) = start_envoy_listening(
        &a,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway_yaml(port)),
        || Envoy::start(a.xds_addr(), options.clone()),
        CONVERGE,
    );
    let gw = wait_gateway_serves_v1(&envoy, gw_port, "initial route", CONVERGE);
    assert!(
        wait_until(CONVERGE, || holds(&a) || holds(&b)),
        "the gateway never synced: {:?} {:?}",
        a.connections(),
        b.connections()
    );
    let (mut holder, survivor) = if holds(&a) { (a, b) } else { (b, a) };
    assert!(
        survivor.wait_built_after(None, CONVERGE).is_some(),
        "the survivor built the same configs"
    );
    let applied = applied_updates(&envoy);
    let first_sync = bytes_sent(&holder);
    assert_eq!(bytes_sent(&survivor), 0.0, "the survivor served nobody yet");

    // Traffic through Envoy while its control plane dies.
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
    holder.stop();

    assert!(
        survivor.wait_synced(&[GATEWAY_NODE_ID], CONVERGE),
        "Envoy never synced with the survivor: {:?}\n{}",
        survivor.connections(),
        describe_envoy(&envoy)
    );
    let entry = survivor
        .syncz_of(GATEWAY_NODE_ID)
        .expect("the gateway on the survivor");
    let types = entry["types"].as_array().cloned().unwrap_or_default();
    assert_eq!(types.len(), 4, "CDS, EDS, LDS, RDS: {entry}");
    let moved_bytes = bytes_sent(&survivor);
    eprintln!(
        "[replicas] delta={delta}: the first sync sent {first_sync} bytes; the move {moved_bytes}"
    );
    assert!(first_sync > 1000.0, "the first sync sent the resources");
    assert_eq!(moved_bytes, 0.0, "no resource sent on moving");
    if delta {
        // The protocol answers the first request of each type: four empty responses.
        assert!(
            over_types(&survivor, "pilot_xds_pushes") >= 4.0,
            "{}",
            survivor.metrics()
        );
    } else {
        for t in &types {
            assert_eq!(
                t["nonce_sent"],
                serde_json::Value::Null,
                "Envoy had this type at the survivor's version: nothing sent: {t}"
            );
        }
        assert_eq!(
            applied_updates(&envoy),
            applied,
            "Envoy applied no update on moving\n{}",
            describe_envoy(&envoy)
        );
    }
    assert_no_rejected_updates(&envoy);

    // The next change reaches Envoy through the survivor.
    config.write("routes.yaml", &routes_yaml("v2"));
    wait_for_answer(
        "route change via the survivor",
        CONVERGE,
        "backend-v2",
        &envoy,
        || http_get(gw, "/", &[]),
    );
    assert_no_rejected_updates(&envoy);
    stop.store(true, Ordering::Relaxed);
    let answers = traffic.join().unwrap();
    let failed: Vec<_> = answers
        .iter()
        .filter(|(status, body)| *status != 200 || !body.starts_with("backend-"))
        .collect();
    eprintln!(
        "[replicas] {} requests while moving, {} failed",
        answers.len(),
        failed.len()
    );
    assert!(answers.len() > 20, "only {} requests sent", answers.len());
    assert!(
        failed.is_empty(),
        "requests lost: {:?}",
        &failed[..failed.len().min(10)]
    );
}
