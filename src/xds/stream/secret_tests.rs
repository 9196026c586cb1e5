//! A Secret's change on a stream: SDS only, only to a stream that watches it, SotW and Delta.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::model::fixtures::configs;
use crate::model::proxy::NodeInfo;
use crate::model::push_request::TriggerReason;
use crate::xds::resource::{DeltaRequest, XdsRequest};

const SDS: ResourceType = ResourceType::Secret;
const CDS: ResourceType = ResourceType::Cluster;

/// A service in `shop` and the Secret `shop/cert` (certificate made with subject `cn`).
fn world(cn: &str) -> String {
    let (cert, key) = crate::model::secrets::tests::self_signed(cn, 2);
    let data = serde_json::json!({"tls.crt": cert, "tls.key": key, "ca.crt": cert});
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: a, namespace: shop}}\nspec:\n  hosts: [a.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 9080, name: http, protocol: HTTP}}]\n  endpoints: [{{address: 10.0.0.1}}]\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: shop}}\nstringData: {data}\n"
    )
}

fn node(namespace: &str) -> NodeInfo {
    NodeInfo {
        id: format!("router~10.1.1.1~gw.{namespace}~{namespace}.svc.cluster.local"),
        ..Default::default()
    }
}

fn sotw(namespace: &str, type_url: ResourceType, nonce: &str, names: &[&str]) -> Request {
    Request::Sotw(XdsRequest {
        type_url: type_url.url(),
        response_nonce: nonce.into(),
        resource_names: names.iter().copied().collect(),
        node: Some(node(namespace)),
        ..Default::default()
    })
}

fn delta(namespace: &str, type_url: ResourceType, subscribe: &[&str]) -> Request {
    Request::Delta(DeltaRequest {
        type_url: type_url.url(),
        subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
        node: Some(node(namespace)),
        ..Default::default()
    })
}

fn types_sent(out: &Output) -> Vec<ResourceType> {
    out.responses
        .iter()
        .map(|r| {
            let url = match r {
                Response::Sotw(r) => &r.type_url,
                Response::Delta(r) => &r.type_url,
            };
            ResourceType::parse(url).unwrap()
        })
        .collect()
}

#[test]
fn a_secret_change_pushes_sds_only_to_the_streams_that_watch_it() {
    let first = Arc::new(PushContext::build(
        None,
        &configs(&world("v1")),
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &Arc::default(),
    ));
    let names = ["kubernetes://cert", "kubernetes://cert-cacert"];
    // A SotW gateway in shop watching the Secret, one that does not, one in another
    // namespace asking for it, and a Delta one.
    let mut watching = StreamState::new(false, Arc::default());
    let mut other = StreamState::new(false, Arc::default());
    let mut elsewhere = StreamState::new(false, Arc::default());
    let mut by_delta = StreamState::new(true, Arc::default());
    for (s, ns) in [
        (&mut watching, "shop"),
        (&mut other, "shop"),
        (&mut elsewhere, "other"),
    ] {
        s.connect(&sotw(ns, CDS, "", &[])).unwrap();
        s.on_context(first.clone());
        let sent = s.on_request(sotw(ns, CDS, "", &[]));
        assert_eq!(types_sent(&sent), [CDS]);
    }
    by_delta.connect(&delta("shop", SDS, &[])).unwrap();
    by_delta.on_context(first.clone());
    let out = watching.on_request(sotw("shop", SDS, "", &names));
    let Response::Sotw(r) = &out.responses[0] else {
        panic!()
    };
    assert_eq!(r.resources.len(), 2);
    assert!(
        out.events
            .iter()
            .all(|e| !matches!(e, Event::SecretProblems(_)))
    );
    let out = elsewhere.on_request(sotw("other", SDS, "", &names));
    assert!(
        out.events
            .iter()
            .any(|e| matches!(e, Event::SecretProblems(p) if p.len() == 2)),
        "nothing for another namespace's proxy, and said so: {:?}",
        out.events
    );
    let out = by_delta.on_request(delta("shop", SDS, &names[..1]));
    assert_eq!(types_sent(&out), [SDS]);

    let request = PushRequest::config_change(
        BTreeSet::from([crate::model::secrets::config_key("shop", "cert")]),
        Instant::now(),
    );
    let ctx = Arc::new(PushContext::build(
        Some(&first),
        &configs(&world("v2")),
        &request,
        &first.mesh,
    ));
    assert!(
        Arc::ptr_eq(&ctx.services, &first.services),
        "only the Secrets are re-indexed"
    );
    assert_eq!(types_sent(&watching.on_push(ctx.clone(), &request)), [SDS]);
    assert_eq!(types_sent(&by_delta.on_push(ctx.clone(), &request)), [SDS]);
    assert!(other.on_push(ctx.clone(), &request).responses.is_empty());
    assert!(
        elsewhere
            .on_push(ctx.clone(), &request)
            .responses
            .is_empty(),
        "watches only names that resolve to its own namespace"
    );
}
