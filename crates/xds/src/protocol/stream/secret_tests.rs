//! A Secret's change on a stream: SDS only, only to a stream that watches it, SotW and Delta.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::resource::{DeltaRequest, XdsRequest};
use axon_model::fixtures::configs;
use axon_model::proxy::NodeInfo;
use axon_model::push_request::TriggerReason;

const SDS: ResourceType = ResourceType::Secret;
const CDS: ResourceType = ResourceType::Cluster;

/// A service in `shop` and the Secret `shop/cert` (certificate made with subject `cn`).
fn world(cn: &str) -> String {
    let (cert, key) = axon_config::fixtures::self_signed(cn, 2);
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
    let mut watching = StreamState::new(Protocol::Sotw, Arc::default());
    let mut other = StreamState::new(Protocol::Sotw, Arc::default());
    let mut elsewhere = StreamState::new(Protocol::Sotw, Arc::default());
    let mut by_delta = StreamState::new(Protocol::Delta, Arc::default());
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
        BTreeSet::from([axon_model::secrets::config_key("shop", "cert")]),
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

/// A gateway of `shop` terminating HTTPS with `credentialName: cert`, and the Secret when
/// `secret` names the certificate's subject.
fn https_world(secret: Option<&str>) -> String {
    let gateway = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: shop}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, credentialName: cert}\n";
    match secret {
        Some(cn) => format!("{gateway}---\n{}", world(cn)),
        None => gateway.to_string(),
    }
}

fn labelled(namespace: &str, type_url: ResourceType, nonce: &str, names: &[&str]) -> Request {
    let mut r = sotw(namespace, type_url, nonce, names);
    if let Request::Sotw(r) = &mut r {
        let node = r.node.as_mut().unwrap();
        node.labels = [("istio".to_string(), "ingressgateway".to_string())].into();
    }
    r
}

#[test]
fn a_gateway_is_pushed_in_full_when_its_credential_appears_and_sds_only_on_a_rotation() {
    let first = Arc::new(PushContext::build(
        None,
        &configs(&https_world(None)),
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &Arc::default(),
    ));
    let lds = ResourceType::Listener;
    let mut s = StreamState::new(Protocol::Sotw, Arc::default());
    s.connect(&labelled("shop", lds, "", &[])).unwrap();
    s.on_context(first.clone());
    let out = s.on_request(labelled("shop", lds, "", &[]));
    assert_eq!(types_sent(&out), [lds]);
    let Response::Sotw(r) = &out.responses[0] else {
        panic!()
    };
    let listener_bytes = |r: &crate::resource::XdsResponse| {
        r.resources.iter().map(|x| x.encoded_len()).sum::<usize>()
    };
    let without = listener_bytes(r);
    let key = axon_model::secrets::config_key("shop", "cert");
    let request = PushRequest::config_change(BTreeSet::from([key.clone()]), Instant::now());
    let ctx = Arc::new(PushContext::build(
        Some(&first),
        &configs(&https_world(Some("v1"))),
        &request,
        &first.mesh,
    ));
    // The Secret appears: the server now has its filter chain, so LDS is pushed.
    let out = s.on_push(ctx.clone(), &request);
    assert_eq!(types_sent(&out), [lds]);
    let Response::Sotw(r) = &out.responses[0] else {
        panic!()
    };
    assert!(listener_bytes(r) > without, "the HTTPS chain is served");
    // Envoy then watches the Secret; a rotation pushes SDS only.
    let sds = s.on_request(labelled("shop", SDS, "", &["kubernetes://cert"]));
    assert_eq!(types_sent(&sds), [SDS]);
    let rotated = Arc::new(PushContext::build(
        Some(&ctx),
        &configs(&https_world(Some("v2"))),
        &request,
        &ctx.mesh,
    ));
    assert_eq!(types_sent(&s.on_push(rotated, &request)), [SDS]);
}
