//! Two axon replicas on one config directory: their versions are content hashes, equal in
//! both (SotW `version_info`s, Delta resource versions), and a client that moves from one
//! to the other is sent nothing it already has: a SotW stream that reconnects naming the
//! versions it has gets no response at all and is synced; a Delta stream that reconnects
//! with `initial_resource_versions` gets empty answers.

use crate::support;
use crate::support::ads_client;
use crate::support::delta_client;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use ads_client::{
    CDS, Client, EDS, GATEWAY_ID, LDS, RDS, ROUTE, V1, V2, discovery_request, gateway_node, mesh,
    runtime,
};
use delta_client::{Delta, check_response};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryResponse};
use support::{Axon, ConfigDir};

/// The same gateway's pod under another name (same address, labels, namespace: the same
/// view), for a second client of one replica.
const OTHER_POD: &str = "router~10.0.0.1~gw-2.istio-system~istio-system.svc.cluster.local";

/// The demo mesh, its route with a fault and a CORS policy too (two per-filter configs: a
/// map, which must encode alike in both processes).
fn replicated_mesh(weight_v1: u32) -> String {
    mesh(weight_v1).replacen(
        "  http:\n  - route:\n",
        "  http:\n  - fault: {abort: {httpStatus: 503, percentage: {value: 0.1}}}\n    \
         corsPolicy: {allowOrigins: [{exact: \"https://a.example\"}]}\n    route:\n",
        1,
    )
}

/// Two replicas on one config directory, each with its first context built.
fn two_replicas() -> (ConfigDir, Axon, Axon) {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &replicated_mesh(100));
    let (a, b) = (Axon::start(dir.path()), Axon::start(dir.path()));
    for axon in [&a, &b] {
        assert!(
            axon.wait_built_after(None, Duration::from_secs(10))
                .is_some(),
            "no context built"
        );
        assert_eq!(axon.config_errors(), Vec::<String>::new());
    }
    (dir, a, b)
}

/// The names a gateway subscribes, per type.
fn names(type_url: &str) -> &'static [&'static str] {
    match type_url {
        EDS => &[V1, V2],
        RDS => &[ROUTE],
        _ => &[],
    }
}

const TYPES: [&str; 4] = [CDS, EDS, LDS, RDS];

/// Subscribes every type as `node` (one at a time, as Envoy does), ACKing each answer;
/// returns each type's `version_info`.
async fn sotw_subscribe(c: &mut Client, node: &str) -> BTreeMap<String, String> {
    let mut versions = BTreeMap::new();
    for (i, type_url) in TYPES.into_iter().enumerate() {
        let first = (i == 0).then(|| gateway_node(node));
        c.request(type_url, names(type_url), "", first).await;
        let r: DiscoveryResponse = c.next().await;
        assert_eq!(r.type_url, type_url);
        assert!(!r.resources.is_empty(), "{type_url}: {r:?}");
        c.ack(&r, names(type_url)).await;
        versions.insert(type_url.to_string(), r.version_info);
    }
    versions
}

/// `/debug/syncz`'s entries of `proxy` on `axon`.
fn syncz_entries(axon: &Axon, proxy: &str) -> Vec<serde_json::Value> {
    axon.debug_json("/debug/syncz")
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["proxy"] == proxy)
        .cloned()
        .collect()
}

#[test]
fn sotw_versions_are_equal_across_replicas_and_a_moved_stream_is_sent_nothing() {
    let (dir, a, b) = two_replicas();
    runtime().block_on(async {
        // One client per replica: the same view gets the same versions from both.
        let mut on_a = Client::connect(&a).await;
        let from_a = sotw_subscribe(&mut on_a, GATEWAY_ID).await;
        let mut on_b = Client::connect(&b).await;
        let from_b = sotw_subscribe(&mut on_b, OTHER_POD).await;
        assert_eq!(from_a, from_b, "content versions, not push numbers");
        let dump = a.debug_json(&format!(
            "/debug/config_dump?proxyID={GATEWAY_ID}&types=rds"
        ));
        let route = dump["configs"].to_string();
        assert!(
            route.contains("envoy.filters.http.fault") && route.contains("envoy.filters.http.cors"),
            "the route has both per-filter configs: {route}"
        );
        assert_eq!(
            from_a.values().collect::<BTreeSet<_>>().len(),
            4,
            "a version per type: {from_a:?}"
        );

        // The client on a moves to b: its first requests name what it has.
        drop(on_a);
        let mut moved = Client::connect(&b).await;
        for (i, type_url) in TYPES.into_iter().enumerate() {
            let first = (i == 0).then(|| gateway_node(GATEWAY_ID));
            let mut req = discovery_request(type_url, names(type_url), "", first);
            req.version_info = from_a[type_url].clone();
            moved.send(req).await;
        }
        assert!(
            moved.next_within(Duration::from_secs(1)).await.is_none(),
            "the moved client has every type at b's versions: nothing is sent"
        );
        let entries = syncz_entries(&b, GATEWAY_ID);
        assert_eq!(entries.len(), 1, "{entries:?}");
        let entry = &entries[0];
        assert_eq!(entry["synced"], true, "synced without a response: {entry}");
        for t in entry["types"].as_array().unwrap() {
            let type_url = t["type_url"].as_str().unwrap();
            assert_eq!(t["nonce_sent"], serde_json::Value::Null, "{t}");
            assert_eq!(t["version_acked"], from_a[type_url].as_str(), "{t}");
        }

        // A change reaches the moved client at the version a fresh client of a gets.
        dir.write("mesh.yaml", &replicated_mesh(50));
        let pushed = moved.next().await;
        assert_eq!(pushed.type_url, RDS, "a weight: the routes only");
        assert_ne!(pushed.version_info, from_a[RDS]);
        moved.ack(&pushed, names(RDS)).await;
        assert!(
            a.wait_built_after(Some(1), Duration::from_secs(10))
                .is_some(),
            "a built the change"
        );
        let mut fresh = Client::connect(&a).await;
        let now_a = sotw_subscribe(&mut fresh, OTHER_POD).await;
        assert_eq!(now_a[RDS], pushed.version_info);
        assert_eq!(now_a[CDS], from_a[CDS], "the clusters did not change");
        assert!(
            b.wait_synced(&[GATEWAY_ID], Duration::from_secs(10)),
            "{:?}",
            b.connections()
        );
    });
}

#[test]
fn delta_versions_are_equal_across_replicas_and_a_moved_stream_is_sent_nothing() {
    let (_dir, a, b) = two_replicas();
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        let mut on_a = Delta::connect(&a).await;
        let have = on_a.subscribe_all(&mut nonces).await;
        let mut on_b = Delta::connect(&b).await;
        let mut other_nonces = BTreeSet::new();
        assert_eq!(
            on_b.subscribe_all(&mut other_nonces).await,
            have,
            "every resource at the same version in both replicas"
        );
        assert_eq!(have.len(), 4, "{have:?}");
        drop((on_a, on_b));

        // The client of a reconnects to b, naming every version it has: every first
        // request is answered (the protocol requires it), with nothing in it.
        let mut moved = Delta::connect(&b).await;
        for (i, type_url) in TYPES.into_iter().enumerate() {
            let initial: HashMap<String, String> = have[type_url].clone().into_iter().collect();
            moved
                .send(DeltaDiscoveryRequest {
                    node: (i == 0).then(|| gateway_node(GATEWAY_ID)),
                    type_url: type_url.into(),
                    resource_names_subscribe: names(type_url)
                        .iter()
                        .map(|n| n.to_string())
                        .collect(),
                    initial_resource_versions: initial,
                    ..Default::default()
                })
                .await;
            let r = moved.next().await;
            check_response(&r, &mut BTreeSet::new());
            assert_eq!(r.type_url, type_url);
            assert!(
                r.resources.is_empty() && r.removed_resources.is_empty(),
                "{type_url}: the client has it all: {r:?}"
            );
            moved.ack(&r).await;
        }
        assert!(
            b.wait_synced(&[GATEWAY_ID], Duration::from_secs(10)),
            "{:?}",
            b.connections()
        );
    });
}
