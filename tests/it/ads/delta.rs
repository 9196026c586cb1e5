//! Delta ADS (`DeltaAggregatedResources`), driven by a scripted client against a real
//! `axon serve`: the first request needs a node; a first wildcard request is always answered;
//! ACKs, stale nonces and NACKs are not answered (NACKs are counted and shown in
//! `/debug/syncz`); subscriptions get exactly their names; only changed resources are sent,
//! removals are named; `initial_resource_versions` spares a reconnecting client what it has.
//! Also the SotW counterpart of the syncz NACK check.

use crate::support;
use crate::support::ads_client;
use crate::support::delta_client;

use std::collections::BTreeSet;
use std::time::Duration;

use ads_client::{
    CDS, Client, EDS, GATEWAY_ID, LDS, RDS, ROUTE, SVC, V1, V2, gateway_node, mesh, mesh_with,
    nack_request, runtime, serve_mesh,
};
use delta_client::{Delta, check_response, names, sorted, strings, versions};
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use support::{Axon, wait_until};

/// `/debug/syncz` as JSON.
fn syncz(axon: &Axon) -> serde_json::Value {
    let r = axon.debug_get("/debug/syncz");
    assert_eq!(r.status, 200, "/debug/syncz: {}", r.body);
    serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("/debug/syncz is not JSON ({e}): {}", r.body))
}

/// The syncz entry of the (only) connection with `protocol`, and its entry for `short_type`.
fn syncz_type(
    json: &serde_json::Value,
    protocol: &str,
    short_type: &str,
) -> Option<serde_json::Value> {
    json.as_array()?
        .iter()
        .filter(|c| c["protocol"] == protocol)
        .flat_map(|c| c["types"].as_array().cloned().unwrap_or_default())
        .find(|t| t["type"] == short_type)
}

/// Waits until syncz shows `message` as the last error of `short_type` on a `protocol`
/// connection; prints the JSON seen and returns it.
fn wait_syncz_error(axon: &Axon, protocol: &str, short_type: &str, message: &str) {
    let mut json = serde_json::Value::Null;
    let ok = wait_until(Duration::from_secs(5), || {
        json = syncz(axon);
        syncz_type(&json, protocol, short_type)
            .and_then(|t| t["last_error"].as_str().map(|e| e.contains(message)))
            .unwrap_or(false)
    });
    eprintln!(
        "[ads_delta] /debug/syncz after a {protocol} {short_type} NACK:\n{}",
        serde_json::to_string_pretty(&json).unwrap()
    );
    assert!(
        ok,
        "/debug/syncz never showed last_error containing {message:?} for {protocol} \
         {short_type}: {json}"
    );
}

fn wait_metric(axon: &Axon, line: &str) {
    assert!(
        wait_until(Duration::from_secs(5), || axon.metrics().contains(line)),
        "/metrics never showed `{line}`:\n{}",
        axon.metrics()
    );
}

#[test]
fn delta_first_request_without_a_node_is_rejected() {
    let (_dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut bad = Delta::connect(&axon).await;
        bad.request(CDS, &[], &[], "").await;
        let status = tokio::time::timeout(Duration::from_secs(15), bad.rx.message())
            .await
            .expect("an answer within 15 s")
            .expect_err("the stream is closed with an error");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("node"), "{}", status.message());

        // Another stream with a node is served, as a Delta one.
        let mut good = Delta::connect(&axon).await;
        assert_eq!(good.first_cds().await.type_url, CDS);
        let connections = axon.connections();
        assert!(
            connections.len() == 1 && connections[0]["protocol"] == "delta",
            "{connections:?}"
        );
    });
    // The documented `ADS: connected` line says so too.
    assert!(
        axon.wait_for_log("delta=true", Duration::from_secs(5)),
        "the Delta connection is logged with delta=true"
    );
}

#[test]
fn delta_first_wildcard_request_is_answered_even_when_empty() {
    // No Gateway: a router gets no listener at all.
    let (_dir, axon) = serve_mesh(&mesh_with(false, true, 100));
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        let mut c = Delta::connect(&axon).await;
        let cds = c.first_cds().await;
        assert_eq!(cds.type_url, CDS);
        check_response(&cds, &mut nonces);
        assert!(
            names(&cds).contains(&SVC.to_string()),
            "the ServiceEntry's cluster: {:?}",
            names(&cds)
        );
        c.ack(&cds).await;

        c.request(LDS, &[], &[], "").await;
        let lds = c.next().await;
        assert_eq!(lds.type_url, LDS, "the first LDS request is answered");
        check_response(&lds, &mut nonces);
        assert_eq!(lds.resources.len(), 0, "no Gateway, no listener: {lds:?}");
        assert!(lds.removed_resources.is_empty());
        c.ack(&lds).await;

        // Both ACKs were not answered: the next response is this EDS subscription.
        c.request(EDS, &[V1], &[], "").await;
        let eds = c.next().await;
        assert_eq!(eds.type_url, EDS);
        check_response(&eds, &mut nonces);
        assert_eq!(names(&eds), [V1]);
    });
}

#[test]
fn delta_acks_stale_nonces_nacks_and_subscriptions() {
    let (_dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        let mut c = Delta::connect(&axon).await;

        let cds = c.first_cds().await;
        assert_eq!(cds.type_url, CDS);
        check_response(&cds, &mut nonces);
        assert_eq!(
            names(&cds),
            sorted(&["BlackHoleCluster", SVC, V1, V2]),
            "black hole + 3 clusters"
        );
        assert!(cds.removed_resources.is_empty());

        // The ACK is not answered: the next response on the stream answers LDS.
        c.ack(&cds).await;
        c.request(LDS, &[], &[], "").await;
        let lds = c.next().await;
        assert_eq!(lds.type_url, LDS, "an ACK must not be answered");
        check_response(&lds, &mut nonces);
        assert_eq!(names(&lds), ["0.0.0.0_18080"]);
        c.ack(&lds).await;

        // Subscribing EDS names gets exactly those.
        c.request(EDS, &[V1], &[], "").await;
        let eds1 = c.next().await;
        assert_eq!(eds1.type_url, EDS, "an ACK must not be answered");
        check_response(&eds1, &mut nonces);
        assert_eq!(names(&eds1), [V1], "exactly the subscribed name");

        // A stale nonce is ignored, even with a new subscription in it: the next response
        // answers RDS, not EDS for V2.
        c.request(EDS, &[V2], &[], "not-a-nonce-we-sent").await;
        c.request(RDS, &[ROUTE], &[], "").await;
        let rds = c.next().await;
        assert_eq!(
            rds.type_url, RDS,
            "a stale nonce must be ignored: got {rds:?}"
        );
        check_response(&rds, &mut nonces);
        assert_eq!(names(&rds), [ROUTE]);
        c.ack(&rds).await;
        wait_metric(&axon, "pilot_xds_expired_nonce{type=\"eds\"} 1");

        // A NACK is counted, shown in syncz, and not answered.
        c.nack(&eds1, "scripted delta rejection").await;
        wait_metric(&axon, "pilot_total_xds_rejects{type=\"eds\"} 1");
        wait_syncz_error(&axon, "delta", "eds", "scripted delta rejection");
        // And the documented `ADS: NACK` line carries Envoy's error.
        assert!(
            axon.logs().contains("scripted delta rejection"),
            "the NACK is logged"
        );

        // Unsubscribing V1 is not answered; subscribing V2 gets only V2 (in particular,
        // nothing was re-sent for the NACK).
        c.request(EDS, &[], &[V1], &eds1.nonce).await;
        c.request(EDS, &[V2], &[], &eds1.nonce).await;
        let eds2 = c.next().await;
        assert_eq!(eds2.type_url, EDS, "{eds2:?}");
        check_response(&eds2, &mut nonces);
        assert_eq!(names(&eds2), [V2], "only the new name");
        assert!(
            eds2.removed_resources.is_empty(),
            "an unsubscribed name is not reported as removed: {eds2:?}"
        );
        c.ack(&eds2).await;

        // The ACK clears the error and the connection is synced.
        let mut json = serde_json::Value::Null;
        let acked = wait_until(Duration::from_secs(5), || {
            json = syncz(&axon);
            syncz_type(&json, "delta", "eds").is_some_and(|t| {
                t["last_error"].is_null() && t["nonce_acked"] == eds2.nonce.as_str()
            })
        });
        assert!(acked, "the EDS ACK shows in syncz: {json}");
    });
}

#[test]
fn delta_sends_only_changed_resources_and_names_removals() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        let mut c = Delta::connect(&axon).await;
        // What the client has: name -> version, per type.
        let mut have = c.subscribe_all(&mut nonces).await;
        assert_eq!(have[CDS].len(), 4, "{have:?}");
        assert_eq!(have[EDS].len(), 2, "{have:?}");
        assert_eq!(have[LDS].len(), 1, "{have:?}");
        assert_eq!(have[RDS].len(), 1, "{have:?}");

        // A VirtualService weight change: only the route config changes. Whatever arrives
        // before the RDS response must not re-send a resource at a version the client has.
        dir.write("mesh.yaml", &mesh(50));
        let rds = loop {
            let r = c.next().await;
            check_response(&r, &mut nonces);
            c.ack(&r).await;
            if r.type_url == RDS {
                break r;
            }
            let known = &have[&r.type_url];
            for res in &r.resources {
                assert_ne!(
                    known.get(&res.name),
                    Some(&res.version),
                    "{} re-sent unchanged in a {} response",
                    res.name,
                    r.type_url
                );
            }
            assert!(r.removed_resources.is_empty(), "{r:?}");
            have.get_mut(&r.type_url).unwrap().extend(versions(&r));
        };
        assert_eq!(names(&rds), [ROUTE], "only the changed route config");
        assert_ne!(
            rds.resources[0].version, have[RDS][ROUTE],
            "the route config has a new version"
        );
        assert!(rds.removed_resources.is_empty());
        have.get_mut(RDS).unwrap().extend(versions(&rds));

        // Removing the ServiceEntry: the next CDS response names its clusters as removed
        // and re-sends none of the unchanged ones; EDS names the watched ones as removed.
        dir.write("mesh.yaml", &mesh_with(true, false, 50));
        let cds = c.next().await;
        check_response(&cds, &mut nonces);
        assert_eq!(cds.type_url, CDS, "a CDS response first: {cds:?}");
        let removed: BTreeSet<&str> = cds.removed_resources.iter().map(|s| s.as_str()).collect();
        assert_eq!(removed, BTreeSet::from([SVC, V1, V2]), "{cds:?}");
        for res in &cds.resources {
            assert_ne!(
                have[CDS].get(&res.name),
                Some(&res.version),
                "{} re-sent unchanged",
                res.name
            );
        }
        c.ack(&cds).await;
        // (EDS for the two watched names follows; whether they are named as removed or sent
        // empty is not asserted here.)
        let eds = c.next().await;
        check_response(&eds, &mut nonces);
        eprintln!(
            "[ads_delta] EDS after the ServiceEntry removal: resources {:?}, removed {:?}",
            names(&eds),
            eds.removed_resources
        );
    });
}

#[test]
fn delta_endpoint_change_sends_only_the_changed_cluster() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        let mut c = Delta::connect(&axon).await;
        let have = c.subscribe_all(&mut nonces).await;
        // The v1 endpoint moves: an endpoint-only push, which generates only the changed
        // host's clusters and sends only the one whose assignment changed.
        dir.write("mesh.yaml", &mesh(100).replace("10.0.0.9", "10.0.0.19"));
        let eds = c.next().await;
        check_response(&eds, &mut nonces);
        assert_eq!(eds.type_url, EDS, "only EDS is pushed: {eds:?}");
        assert_eq!(names(&eds), [V1], "only the changed assignment");
        assert!(eds.removed_resources.is_empty(), "{eds:?}");
        assert_ne!(eds.resources[0].version, have[EDS][V1]);
        c.ack(&eds).await;
        let more = tokio::time::timeout(Duration::from_millis(800), c.rx.message()).await;
        assert!(more.is_err(), "nothing else is pushed: {more:?}");
    });
}

#[test]
fn delta_initial_resource_versions_on_reconnect() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut nonces = BTreeSet::new();
        // The first stream: everything, then the weight change (a new route config).
        let mut first = Delta::connect(&axon).await;
        let have = first.subscribe_all(&mut nonces).await;
        let old_route_version = have[RDS][ROUTE].clone();
        dir.write("mesh.yaml", &mesh(50));
        let new_route_version = loop {
            let r = first.next().await;
            first.ack(&r).await;
            if r.type_url == RDS {
                break r.resources[0].version.clone();
            }
        };
        assert_ne!(old_route_version, new_route_version);
        drop(first);

        // The second stream says what it has (the state before the weight change).
        let mut c = Delta::connect(&axon).await;
        let initial = |type_url: &str| -> std::collections::HashMap<String, String> {
            have[type_url].clone().into_iter().collect()
        };
        c.send(DeltaDiscoveryRequest {
            node: Some(gateway_node(GATEWAY_ID)),
            type_url: CDS.into(),
            initial_resource_versions: initial(CDS),
            ..Default::default()
        })
        .await;
        let cds = c.next().await;
        assert_eq!(cds.type_url, CDS);
        check_response(&cds, &mut nonces);
        assert!(
            cds.resources.is_empty() && cds.removed_resources.is_empty(),
            "the clusters are unchanged: nothing to send, but still answered: {cds:?}"
        );
        c.ack(&cds).await;

        c.send(DeltaDiscoveryRequest {
            type_url: LDS.into(),
            initial_resource_versions: initial(LDS),
            ..Default::default()
        })
        .await;
        let lds = c.next().await;
        assert_eq!(lds.type_url, LDS);
        check_response(&lds, &mut nonces);
        assert!(lds.resources.is_empty(), "{lds:?}");
        c.ack(&lds).await;

        // EDS: V1 at the version it has, V2 at an outdated one: only V2 is sent.
        let mut eds_initial = initial(EDS);
        eds_initial.insert(V2.into(), "outdated".into());
        c.send(DeltaDiscoveryRequest {
            type_url: EDS.into(),
            resource_names_subscribe: strings(&[V1, V2]),
            initial_resource_versions: eds_initial,
            ..Default::default()
        })
        .await;
        let eds = c.next().await;
        assert_eq!(eds.type_url, EDS);
        check_response(&eds, &mut nonces);
        assert_eq!(names(&eds), [V2], "only the outdated endpoint set");
        assert_eq!(eds.resources[0].version, have[EDS][V2]);
        c.ack(&eds).await;

        // RDS: the route config changed since; it is sent at the new version.
        c.send(DeltaDiscoveryRequest {
            type_url: RDS.into(),
            resource_names_subscribe: strings(&[ROUTE]),
            initial_resource_versions: initial(RDS),
            ..Default::default()
        })
        .await;
        let rds = c.next().await;
        assert_eq!(rds.type_url, RDS);
        check_response(&rds, &mut nonces);
        assert_eq!(names(&rds), [ROUTE]);
        assert_eq!(rds.resources[0].version, new_route_version);
    });
}

// ---------------------------------------------------------------------------
// SotW counterpart: a NACK shows in /debug/syncz and is not answered.
// ---------------------------------------------------------------------------

#[test]
fn sotw_nack_shows_in_syncz_and_is_not_re_sent() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let cds = c.first_cds(gateway_node(GATEWAY_ID)).await;
        assert_eq!(cds.type_url, CDS);
        c.ack(&cds, &[]).await;

        // A change of the clusters (a new subset): the CDS push is NACKed.
        dir.write(
            "mesh.yaml",
            &mesh(100).replace(
                "{name: v2, labels: {version: v2}}]",
                "{name: v2, labels: {version: v2}}, {name: v3, labels: {version: v2}}]",
            ),
        );
        let pushed = c.next().await;
        assert_eq!(pushed.type_url, CDS);
        assert_ne!(pushed.version_info, cds.version_info);
        assert_eq!(pushed.resources.len(), 5, "the v3 subset cluster is new");
        c.send(DiscoveryRequest {
            version_info: cds.version_info.clone(),
            ..nack_request(&pushed, &[], "scripted sotw rejection")
        })
        .await;
        wait_metric(&axon, "pilot_total_xds_rejects{type=\"cds\"} 1");
        wait_syncz_error(&axon, "sotw", "cds", "scripted sotw rejection");
        let json = syncz(&axon);
        let t = syncz_type(&json, "sotw", "cds").unwrap();
        assert_eq!(t["nonce_sent"], pushed.nonce.as_str(), "{t}");
        assert_eq!(t["version_sent"], pushed.version_info.as_str(), "{t}");
        assert_eq!(t["version_acked"], cds.version_info.as_str(), "{t}");

        // No second response for the same change: the next response answers LDS.
        c.request(LDS, &[], "", None).await;
        let lds = c.next().await;
        assert_eq!(
            lds.type_url, LDS,
            "a NACKed change must not be re-sent: {lds:?}"
        );
    });
}
