//! The ADS protocol, driven by a scripted client against a real `axon serve`: every response
//! has a fresh nonce; an ACK is not answered; a stale nonce is ignored; a NACK is counted and
//! not answered; a full push goes CDS, EDS, LDS, RDS; bad first requests close the stream.

use crate::support;
use crate::support::ads_client;

use std::time::Duration;

use ads_client::{
    CDS, Client, EDS, GATEWAY_ID, LDS, RDS, ROUTE, V1, documents, gateway_node, istio_node, mesh,
    own_namespace_sidecar, runtime, serve_mesh, svc_destination_rule, svc_service_entry,
    svc_virtual_service,
};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;

/// The names the scripted client keeps subscribed, per type.
fn subscribed(type_url: &str) -> &'static [&'static str] {
    match type_url {
        EDS => &[V1],
        RDS => &[ROUTE],
        _ => &[],
    }
}

#[test]
fn nonces_acks_nacks_and_push_order() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let mut nonces = std::collections::BTreeSet::new();

        let cds = c.first_cds(gateway_node(GATEWAY_ID)).await;
        assert_eq!(cds.type_url, CDS);
        assert!(!cds.nonce.is_empty() && !cds.version_info.is_empty());
        assert_eq!(cds.resources.len(), 4, "black hole + 3 clusters");
        nonces.insert(cds.nonce.clone());

        // The ACK is not answered: the next response on the stream answers LDS.
        c.ack(&cds, &[]).await;
        c.request(LDS, &[], "", None).await;
        let lds = c.next().await;
        assert_eq!(lds.type_url, LDS, "an ACK must not be answered");
        assert!(nonces.insert(lds.nonce.clone()), "nonces are unique");
        c.ack(&lds, &[]).await;

        // A stale nonce is ignored; a new EDS subscription is answered.
        c.request(CDS, &[], "not-a-nonce-we-sent", None).await;
        let names = subscribed(EDS);
        c.request(EDS, names, "", None).await;
        let eds = c.next().await;
        assert_eq!(eds.type_url, EDS, "a stale nonce must be ignored");
        assert_eq!(eds.resources.len(), 1);
        assert!(nonces.insert(eds.nonce.clone()));

        // A NACK is recorded and not answered.
        c.nack(&eds, names, "scripted rejection").await;
        c.request(RDS, &[ROUTE], "", None).await;
        let rds = c.next().await;
        assert_eq!(rds.type_url, RDS, "a NACK must not be answered");
        assert!(nonces.insert(rds.nonce.clone()));
        // Requests are handled in order: the RDS answer means the NACK was, and syncz holds
        // its error until the next ACK.
        let syncz = axon.syncz_of(GATEWAY_ID).expect("the client in syncz");
        let eds_status = syncz["types"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["type"] == "eds"))
            .cloned()
            .unwrap_or_default();
        assert!(
            eds_status["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("scripted rejection")),
            "the NACK is recorded in /debug/syncz: {syncz}"
        );
        c.ack(&rds, &[ROUTE]).await;
        let eds_ack = DiscoveryResponse {
            nonce: eds.nonce.clone(),
            ..eds.clone()
        };
        c.ack(&eds_ack, names).await;
        assert!(
            support::wait_until(Duration::from_secs(5), || axon
                .metrics()
                .contains("pilot_total_xds_rejects{type=\"eds\"} 1")),
            "{}",
            axon.metrics()
        );
        // And the documented `ADS: NACK` line carries Envoy's error.
        assert!(
            axon.logs().contains("scripted rejection"),
            "the NACK is logged"
        );

        // A config change: a full push of the types it changes (a weight: the routes only),
        // with a new version; the others are what the client has.
        dir.write("mesh.yaml", &mesh(50));
        let r = c.next().await;
        assert_ne!(r.version_info, cds.version_info, "a new version");
        assert!(nonces.insert(r.nonce.clone()), "nonces are unique");
        assert_eq!(r.type_url, RDS, "only the changed type");
        c.ack(&r, subscribed(&r.type_url)).await;
        assert!(
            c.next_within(Duration::from_secs(1)).await.is_none(),
            "nothing else changed"
        );
        assert!(axon.metrics().contains("pilot_xds 1"), "{}", axon.metrics());
        let version = axon.built_version().expect("a context");

        // The same spec saved again (a comment added) builds nothing and pushes nothing: the
        // next real change is built exactly one context later.
        let unchanged = || {
            axon.metric("axon_config_unchanged_updates{source=\"files\"}")
                .unwrap_or(0.0)
        };
        let before = unchanged();
        dir.write("mesh.yaml", &format!("# saved again\n{}", mesh(50)));
        assert!(
            support::wait_until(Duration::from_secs(10), || unchanged() > before),
            "the re-save is seen"
        );
        dir.write(
            "extra.yaml",
            &mesh(50).replace(
                "name: svc, namespace: demo}\nspec:\n  hosts: [\"*\"]",
                "name: svc2, namespace: demo}\nspec:\n  hosts: [\"*\"]",
            ),
        );
        let r = c.next().await;
        assert_eq!(
            axon.built_version(),
            Some(version + 1),
            "no context for the re-save"
        );
        c.ack(&r, subscribed(&r.type_url)).await;
        while let Some(r) = c.next_within(Duration::from_secs(1)).await {
            c.ack(&r, subscribed(&r.type_url)).await;
        }

        // Deleting the files removes their config: the next CDS has only the black hole.
        dir.remove("extra.yaml");
        dir.remove("mesh.yaml");
        // (The two deletions may land in one push or two: read until CDS has shrunk.)
        loop {
            let r = c.next().await;
            if r.type_url == CDS && r.resources.len() == 1 {
                break; // only BlackHoleCluster is left
            }
            c.ack(&r, subscribed(&r.type_url)).await;
        }
    });
}

#[test]
fn bad_first_requests_close_only_their_stream() {
    let (_dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut good = Client::connect(&axon).await;
        let first = good.first_cds(gateway_node(GATEWAY_ID)).await;

        for (node, why) in [
            (None, "node"),
            (
                Some(gateway_node("envoy-without-istio-id")),
                "envoy-without-istio-id",
            ),
        ] {
            let mut bad = Client::connect(&axon).await;
            bad.request(CDS, &[], "", node).await;
            let status = tokio::time::timeout(Duration::from_secs(15), bad.rx.message())
                .await
                .expect("an answer")
                .expect_err("the stream is closed with an error");
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().contains(why), "{}", status.message());
        }

        // The good stream is undisturbed.
        good.ack(&first, &[]).await;
        good.request(LDS, &[], "", None).await;
        assert_eq!(good.next().await.type_url, LDS);
    });
}

/// Services `svc` in namespaces a and b; a's Sidecar imports only a; b has a VirtualService
/// sending `b_weight` to v2.
fn scoped_mesh(b_weight: u32) -> String {
    documents(&[
        svc_service_entry("a"),
        svc_destination_rule("a"),
        svc_service_entry("b"),
        svc_destination_rule("b"),
        own_namespace_sidecar("a"),
        svc_virtual_service("b", false, 100 - b_weight),
    ])
}

#[test]
fn a_change_outside_a_proxys_scope_sends_it_nothing() {
    let (dir, axon) = serve_mesh(&scoped_mesh(0));
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let sidecar = istio_node(
            "sidecar~10.3.0.1~app-1.a~a.svc.cluster.local",
            "a",
            &[("istio", "ingressgateway")],
        );
        let cds = c.first_cds(sidecar).await;
        assert_eq!(
            cds.resources.len(),
            6,
            "black hole, passthrough, inbound passthrough, svc.a x3 (not svc.b)"
        );
        c.ack(&cds, &[]).await;

        // VirtualService svc in b: outside the Sidecar's `./*`. A context is built, and
        // this proxy is not sent anything for it.
        let before = axon.built_version();
        dir.write("mesh.yaml", &scoped_mesh(50));
        let built = axon
            .wait_built_after(before, Duration::from_secs(10))
            .expect("the change to b is built");
        assert_eq!(
            built["request"]["configs_updated"].as_array().map(Vec::len),
            Some(1),
            "one config changed: {built}"
        );

        // An in-scope change (a DestinationRule in a) is the next thing it receives.
        let in_scope = scoped_mesh(50).replacen(
            "name: v2, labels: {version: v2}",
            "name: v3, labels: {version: v2}",
            1,
        );
        dir.write("mesh.yaml", &in_scope);
        let r = c.next().await;
        assert_eq!(r.type_url, CDS);
        assert!(
            r.resources
                .iter()
                .any(|a| a.value.windows(9).any(|w| w == b"outbound|")
                    && a.value.windows(4).any(|w| w == b"|v3|")),
            "the first response after the change in b is the change in a (subset v3)"
        );
    });
}

#[test]
fn an_endpoint_change_is_pushed_as_eds_only() {
    let (dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let cds = c.first_cds(gateway_node(GATEWAY_ID)).await;
        c.ack(&cds, &[]).await;
        c.request(EDS, subscribed(EDS), "", None).await;
        let eds = c.next().await;
        c.ack(&eds, subscribed(EDS)).await;

        // Only the inline endpoints of the ServiceEntry change.
        dir.write("mesh.yaml", &mesh(100).replace("10.0.0.9", "10.0.0.19"));
        let r = c.next().await;
        assert_eq!(r.type_url, EDS, "no CDS before it: an EDS-only push");
        assert_ne!(r.version_info, eds.version_info);
        let status = axon.push_status();
        assert_eq!(
            &status["request"]["full"],
            &serde_json::json!(false),
            "an incremental context: {status}"
        );
        assert_eq!(
            axon.metric("axon_endpoint_index_swaps "),
            Some(1.0),
            "{}",
            axon.metrics()
        );
        c.ack(&r, subscribed(EDS)).await;

        // An endpoint of a cluster this client does not watch (v2) changes: nothing is sent;
        // the next response is the following config change, CDS first.
        dir.write(
            "mesh.yaml",
            &mesh(100)
                .replace("10.0.0.9", "10.0.0.19")
                .replace("10.0.0.10", "10.0.0.20"),
        );
        // Built (the second endpoint-only context), and handled by this client's connection,
        // before the next change is written: it cannot merge into it.
        assert!(
            support::wait_until(Duration::from_secs(10), || axon
                .metric("axon_endpoint_index_swaps ")
                .is_some_and(|n| n >= 2.0)),
            "the second endpoint change is built (axon_endpoint_index_swaps):\n{}",
            axon.metrics()
        );
        let version = axon.built_version().expect("a context");
        assert!(
            axon.wait_push_reached(GATEWAY_ID, version, Duration::from_secs(10)),
            "the push of version {version} never reached the client: {:?}",
            axon.syncz_of(GATEWAY_ID)
        );
        // The next change moves the watched endpoint again: the next response is its EDS.
        dir.write(
            "mesh.yaml",
            &mesh(100)
                .replace("10.0.0.9", "10.0.0.29")
                .replace("10.0.0.10", "10.0.0.20"),
        );
        let r = c.next().await;
        let moved = r
            .resources
            .iter()
            .any(|a| a.value.windows(9).any(|w| w == b"10.0.0.29"));
        assert!(
            r.type_url == EDS && moved,
            "the unwatched endpoint change sent nothing; got {} version {} with {} resources \
             (context {version} was the v2-only endpoint change)",
            r.type_url,
            r.version_info,
            r.resources.len()
        );
    });
}

/// istiod's AlwaysRespond (envoy#13009): after a CDS response, the next EDS request is
/// answered even when it looks like an ACK, so that re-warmed clusters get their endpoints.
#[test]
fn eds_is_answered_after_cds_even_when_it_looks_like_an_ack() {
    let (_dir, axon) = serve_mesh(&mesh(100));
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let cds = c.first_cds(gateway_node(GATEWAY_ID)).await;
        c.ack(&cds, &[]).await;
        c.request(EDS, subscribed(EDS), "", None).await;
        let eds = c.next().await;
        c.ack(&eds, subscribed(EDS)).await;

        // CDS is asked again (as after a cluster update); the EDS request that follows carries
        // the last EDS nonce and the same names: an ACK by the rules, answered all the same.
        c.request(CDS, &[], "", None).await;
        let again = c.next().await;
        assert_eq!(again.type_url, CDS);
        c.ack(&again, &[]).await;
        c.ack(&eds, subscribed(EDS)).await;
        let answered = c.next().await;
        assert_eq!(answered.type_url, EDS, "AlwaysRespond after CDS");
        assert_eq!(answered.resources.len(), 1);

        // Only once: the ACK of that answer is not answered again.
        c.ack(&answered, subscribed(EDS)).await;
        c.request(LDS, &[], "", None).await;
        assert_eq!(
            c.next().await.type_url,
            LDS,
            "an ACK after the answer is not answered"
        );
    });
}
