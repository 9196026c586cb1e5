//! End-to-end: a real gateway Envoy whose `xds-grpc` cluster lists two axon replicas on one
//! config directory. The replica it holds is killed (`kill -9`); Envoy reconnects to the
//! other, naming the versions it has, which are that replica's too (content hashes): it is
//! sent nothing, applies nothing, rejects nothing, stays synced and serves every request;
//! the next change reaches it through the survivor.

#[path = "support/scenario.rs"]
mod scenario;
mod support;

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

/// Whether `axon` holds the gateway's stream, synced.
fn holds(axon: &Axon) -> bool {
    axon.connections()
        .iter()
        .any(|c| c["proxy"] == GATEWAY_NODE_ID && c["synced"] == true)
}

#[test]
fn an_envoy_moved_to_another_replica_is_sent_nothing_and_stays_synced() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", &routes_yaml("v1"));
    let a = Axon::start(config.path());
    let b = Axon::start(config.path());
    let mut options = gateway_options();
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
    let gw = Envoy::local(gw_port);
    wait_gateway_route(
        &envoy,
        gw_port,
        "*",
        &[&format!("outbound|80|v1|{BACKEND}")],
        CONVERGE,
    );
    wait_for_answer("initial route", CONVERGE, "backend-v1", &envoy, || {
        http_get(gw, "/", &[])
    });
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
