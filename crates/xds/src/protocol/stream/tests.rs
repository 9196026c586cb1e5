//! The stream state machine without sockets: every rule of [`StreamState`] for SotW and
//! Delta, driven by requests and pushes of real contexts built from YAML.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::resource::{DeltaRequest, XdsRequest};
use axon_config::config::{ConfigKey, ConfigKind};
use axon_model::fixtures::configs;
use axon_model::proxy::NodeInfo;
use axon_model::push_request::TriggerReason;

const CDS: ResourceType = ResourceType::Cluster;
const EDS: ResourceType = ResourceType::Endpoint;
const LDS: ResourceType = ResourceType::Listener;
const RDS: ResourceType = ResourceType::Route;

const A: &str = "outbound|9080||a.shop.svc.cluster.local";
const B: &str = "outbound|9080||b.shop.svc.cluster.local";

/// Two services in `shop`; `a_ip` is the address of a's endpoint, `vs_weight` the weight of
/// a VirtualService route to a (its other share to b).
fn mesh(a_ip: &str, vs_weight: u32) -> String {
    let entry = |name: &str, ip: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  hosts: [{name}.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 9080, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {ip}}}]\n---\n"
        )
    };
    format!(
        "{}{}apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: a, namespace: shop}}\nspec:\n  hosts: [a.shop.svc.cluster.local]\n  http:\n  - route:\n    - {{destination: {{host: a.shop.svc.cluster.local}}, weight: {vs_weight}}}\n    - {{destination: {{host: b.shop.svc.cluster.local}}, weight: {}}}\n",
        entry("a", a_ip),
        entry("b", "10.0.0.2"),
        100 - vs_weight
    )
}

fn first_context() -> Arc<PushContext> {
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    Arc::new(PushContext::build(
        None,
        &configs(&mesh("10.0.0.1", 100)),
        &req,
        &Arc::default(),
    ))
}

fn key(kind: ConfigKind, name: &str) -> ConfigKey {
    ConfigKey::new(kind, "shop", name)
}

/// The next context after `prev` for the mesh `yaml`, and the request that built it.
fn next(prev: &PushContext, yaml: &str, request: PushRequest) -> (Arc<PushContext>, PushRequest) {
    let ctx = PushContext::build(Some(prev), &configs(yaml), &request, &prev.mesh);
    (Arc::new(ctx), request)
}

fn endpoint_move(prev: &PushContext) -> (Arc<PushContext>, PushRequest) {
    let keys = BTreeSet::from([key(ConfigKind::ServiceEntry, "a")]);
    let request = PushRequest::endpoint_change(keys, Instant::now());
    next(prev, &mesh("10.0.0.9", 100), request)
}

/// The VirtualService's weight changes; a's endpoint is at `a_ip`.
fn weight_change(prev: &PushContext, a_ip: &str) -> (Arc<PushContext>, PushRequest) {
    let keys = BTreeSet::from([key(ConfigKind::VirtualService, "a")]);
    let request = PushRequest::config_change(keys, Instant::now());
    next(prev, &mesh(a_ip, 60), request)
}

fn node() -> NodeInfo {
    NodeInfo {
        id: "sidecar~10.1.1.1~pod-1.shop~shop.svc.cluster.local".into(),
        ..Default::default()
    }
}

fn sotw_req(type_url: ResourceType, nonce: &str, names: &[&str]) -> Request {
    Request::Sotw(XdsRequest {
        type_url: type_url.url(),
        response_nonce: nonce.into(),
        resource_names: names.iter().copied().collect(),
        node: Some(node()),
        ..Default::default()
    })
}

fn sotw_nack(type_url: ResourceType, nonce: &str) -> Request {
    Request::Sotw(XdsRequest {
        type_url: type_url.url(),
        response_nonce: nonce.into(),
        error_detail: Some("rejected".into()),
        ..Default::default()
    })
}

fn delta_req(
    type_url: ResourceType,
    nonce: &str,
    subscribe: &[&str],
    unsubscribe: &[&str],
) -> Request {
    Request::Delta(DeltaRequest {
        type_url: type_url.url(),
        response_nonce: nonce.into(),
        subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
        unsubscribe: unsubscribe.iter().map(|s| s.to_string()).collect(),
        node: Some(node()),
        ..Default::default()
    })
}

/// A connected stream that has the first context.
fn stream(delta: bool) -> StreamState {
    let mut s = StreamState::new(Protocol::from_delta(delta), Arc::default());
    s.connect(&sotw_req(CDS, "", &[])).expect("a valid node");
    assert!(s.on_context(first_context()).responses.is_empty());
    s
}

/// (type, nonce, resource names) of each SotW response.
fn sotw_sent(out: &Output) -> Vec<(ResourceType, String, Vec<String>)> {
    out.responses
        .iter()
        .map(|r| match r {
            Response::Sotw(r) => (
                ResourceType::parse(&r.type_url).expect("a known type"),
                r.nonce.clone(),
                r.resources.iter().map(|x| x.name.clone()).collect(),
            ),
            Response::Delta(_) => panic!("a Delta response on a SotW stream"),
        })
        .collect()
}

/// (type, nonce, names sent, names removed) of each Delta response.
fn delta_sent(out: &Output) -> Vec<(ResourceType, String, Vec<String>, Vec<String>)> {
    out.responses
        .iter()
        .map(|r| match r {
            Response::Delta(r) => (
                ResourceType::parse(&r.type_url).expect("a known type"),
                r.nonce.clone(),
                r.resources.iter().map(|(x, _)| x.name.clone()).collect(),
                r.removed.clone(),
            ),
            Response::Sotw(_) => panic!("a SotW response on a Delta stream"),
        })
        .collect()
}

/// Subscribes CDS, EDS (a, b), LDS and ACKs every answer, as Envoy does; returns the last
/// nonce of each type.
fn sotw_synced(s: &mut StreamState) -> BTreeMap<ResourceType, String> {
    let mut nonces = BTreeMap::new();
    for (type_url, names) in [(CDS, vec![]), (EDS, vec![A, B]), (LDS, vec![])] {
        let sent = sotw_sent(&s.on_request(sotw_req(type_url, "", &names)));
        let nonce = sent[0].1.clone();
        let out = s.on_request(sotw_req(type_url, &nonce, &names));
        assert!(out.responses.is_empty(), "an ACK is not answered");
        nonces.insert(type_url, nonce);
    }
    nonces
}

fn has_event(out: &Output, want: impl Fn(&Event) -> bool) -> bool {
    out.events.iter().any(want)
}

#[test]
fn the_first_request_must_name_a_valid_node() {
    let mut s = StreamState::new(Protocol::Sotw, Arc::default());
    let no_node = Request::Sotw(XdsRequest {
        type_url: CDS.url(),
        ..Default::default()
    });
    assert!(matches!(
        s.connect(&no_node),
        Err(CloseReason::InvalidArgument(_))
    ));
    let mut bad = sotw_req(CDS, "", &[]);
    if let Request::Sotw(r) = &mut bad {
        r.node.as_mut().unwrap().id = "not-an-istio-id".into();
    }
    assert!(matches!(
        s.connect(&bad),
        Err(CloseReason::InvalidArgument(_))
    ));
    assert!(s.proxy().is_none());
    assert!(s.connect(&sotw_req(CDS, "", &[])).is_ok());
}

#[test]
fn sotw_requests_before_the_first_context_are_answered_when_it_arrives() {
    let mut s = StreamState::new(Protocol::Sotw, Arc::default());
    s.connect(&sotw_req(CDS, "", &[])).unwrap();
    assert!(s.on_request(sotw_req(CDS, "", &[])).responses.is_empty());
    let out = s.on_context(first_context());
    let sent = sotw_sent(&out);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].0, CDS);
    assert!(sent[0].2.contains(&A.to_string()) && sent[0].2.contains(&B.to_string()));
}

#[test]
fn sotw_ack_nack_stale_and_changed_names() {
    let mut s = stream(false);
    let first = sotw_sent(&s.on_request(sotw_req(EDS, "", &[A])));
    assert_eq!(first.len(), 1, "a first request is answered");
    assert_eq!(first[0].2, [A]);
    let nonce = first[0].1.clone();

    let ack = s.on_request(sotw_req(EDS, &nonce, &[A]));
    assert!(ack.responses.is_empty(), "an ACK is not answered");

    let stale = s.on_request(sotw_req(EDS, "1-999", &[A, B]));
    assert!(stale.responses.is_empty(), "a stale nonce is ignored");
    assert!(has_event(&stale, |e| *e == Event::Stale(EDS)));
    assert_eq!(s.subscribed(EDS).unwrap().len(), 1, "and changes nothing");

    let nack = s.on_request(sotw_nack(EDS, &nonce));
    assert!(nack.responses.is_empty(), "a NACK is not answered");
    assert!(has_event(
        &nack,
        |e| matches!(e, Event::Nack { type_url, error } if *type_url == EDS && error == "rejected")
    ));
    assert_eq!(
        s.status(1, 0.0).types[0].last_error.as_deref(),
        Some("rejected")
    );

    let more = sotw_sent(&s.on_request(sotw_req(EDS, &nonce, &[A, B])));
    assert_eq!(more.len(), 1, "new names are answered");
    assert_eq!(more[0].2, [A, B]);
    assert_ne!(more[0].1, nonce, "every response has a fresh nonce");
}

#[test]
fn sotw_always_responds_to_eds_once_after_cds() {
    // EDS subscribed before CDS was answered: its next request looks like an ACK.
    let mut s2 = stream(false);
    let eds = sotw_sent(&s2.on_request(sotw_req(EDS, "", &[A])));
    let cds = sotw_sent(&s2.on_request(sotw_req(CDS, "", &[])));
    assert_eq!(cds[0].0, CDS);
    let out = sotw_sent(&s2.on_request(sotw_req(EDS, &eds[0].1, &[A])));
    assert_eq!(
        out.len(),
        1,
        "answered although it is an ACK: cluster warming needs EDS"
    );
    let out = s2.on_request(sotw_req(EDS, &out[0].1, &[A]));
    assert!(out.responses.is_empty(), "once only");
}

#[test]
fn sotw_a_reconnect_is_answered_in_full() {
    // A new stream of a proxy that had a config: its requests carry the old nonce and
    // version. The first request of each type is answered all the same.
    let mut s = stream(false);
    let mut req = sotw_req(CDS, "7-42", &[]);
    if let Request::Sotw(r) = &mut req {
        r.version_info = "7".into();
    }
    let sent = sotw_sent(&s.on_request(req));
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].2.len(),
        5,
        "a, b, BlackHole, Passthrough and InboundPassthrough clusters"
    );
}

#[test]
fn sotw_synced_and_unknown_types() {
    let mut s = stream(false);
    let out = s.on_request(sotw_req(CDS, "", &[]));
    assert!(!has_event(&out, |e| *e == Event::Synced));
    let nonce = sotw_sent(&out)[0].1.clone();
    let out = s.on_request(sotw_req(CDS, &nonce, &[]));
    assert!(has_event(&out, |e| *e == Event::Synced), "every type ACKed");
    assert!(s.is_synced());

    let unknown = |s: &mut StreamState| {
        s.on_request(Request::Sotw(XdsRequest {
            type_url: "type.googleapis.com/some.Unknown".into(),
            ..Default::default()
        }))
    };
    let out = unknown(&mut s);
    assert_eq!(out.responses.len(), 1, "answered, empty");
    assert!(has_event(&out, |e| matches!(e, Event::UnknownType(_))));
    let out = unknown(&mut s);
    assert!(
        !has_event(&out, |e| matches!(e, Event::UnknownType(_))),
        "reported once"
    );
}

#[test]
fn sotw_a_full_push_in_scope_sends_the_changed_types_then_reports_the_ack() {
    let mut s = stream(false);
    sotw_synced(&mut s);
    let rds = sotw_sent(&s.on_request(sotw_req(RDS, "", &["9080"])));
    s.on_request(sotw_req(RDS, &rds[0].1, &["9080"]));

    // A weight edit changes the routes only: RDS alone is sent.
    let (ctx, request) = weight_change(&first_context(), "10.0.0.1");
    let out = s.on_push(ctx.clone(), &request);
    let sent = sotw_sent(&out);
    assert_eq!(
        sent.iter().map(|(t, ..)| *t).collect::<Vec<_>>(),
        [RDS],
        "only the changed type"
    );
    assert!(has_event(
        &out,
        |e| matches!(e, Event::Affected { keys, version, .. } if keys.len() == 1 && *version == ctx.version)
    ));
    assert!(!has_event(&out, |e| matches!(e, Event::Acked { .. })));
    let out = s.on_request(sotw_req(RDS, &sent[0].1, &["9080"]));
    assert!(
        has_event(&out, |e| *e
            == Event::Acked {
                version: ctx.version
            }),
        "Acked once the one type sent is ACKed"
    );

    // EDS was not even generated: a VirtualService edit cannot change a load assignment.
    let before = ctx.memo.len();
    let (proxy, scope) = (s.proxy.clone().unwrap(), s.scope.clone().unwrap());
    let names = BTreeSet::from([A.to_string(), B.to_string()]);
    crate::generate_shared(EDS, &ctx, &proxy, &scope, &names);
    assert!(ctx.memo.len() > before, "EDS was generated by the push");

    let again = s.on_push(ctx.clone(), &request);
    assert!(
        again.responses.is_empty(),
        "a context already sent is not sent again"
    );

    // The same edit again changes nothing: nothing is sent, and the proxy is at the new
    // version at once.
    let (same, request) = weight_change(&ctx, "10.0.0.1");
    let out = s.on_push(same.clone(), &request);
    assert!(out.responses.is_empty(), "{:?}", sotw_sent(&out));
    assert!(has_event(&out, |e| *e
        == Event::Acked {
            version: same.version
        }));

    // A forced push sends every type, in order.
    let forced = PushRequest::full_push(TriggerReason::Forced, Instant::now());
    let (ctx, forced) = next(&same, &mesh("10.0.0.1", 60), forced);
    let sent = sotw_sent(&s.on_push(ctx, &forced));
    assert_eq!(
        sent.iter().map(|(t, ..)| *t).collect::<Vec<_>>(),
        [CDS, EDS, LDS, RDS],
        "push order"
    );
}

#[test]
fn sotw_a_push_out_of_scope_sends_nothing() {
    let mut s = stream(false);
    sotw_synced(&mut s);
    let keys = BTreeSet::from([ConfigKey::new(ConfigKind::VirtualService, "elsewhere", "x")]);
    let request = PushRequest::config_change(keys, Instant::now());
    let (ctx, request) = next(&first_context(), &mesh("10.0.0.1", 100), request);
    let out = s.on_push(ctx, &request);
    assert!(out.responses.is_empty() && out.events.is_empty());
}

#[test]
fn sotw_an_endpoint_only_push_carries_only_the_changed_clusters() {
    let mut s = stream(false);
    sotw_synced(&mut s);
    let (ctx, request) = endpoint_move(&first_context());
    let sent = sotw_sent(&s.on_push(ctx.clone(), &request));
    assert_eq!(sent.len(), 1, "EDS only");
    assert_eq!((sent[0].0, sent[0].2.clone()), (EDS, vec![A.to_string()]));

    // A push whose endpoints changed only outside the watched clusters sends nothing.
    let keys = BTreeSet::from([key(ConfigKind::ServiceEntry, "b")]);
    let request = PushRequest::endpoint_change(keys, Instant::now());
    let (unchanged, request) = next(&ctx, &mesh("10.0.0.9", 100), request);
    assert!(s.on_push(unchanged, &request).responses.is_empty());
}

#[test]
fn delta_first_requests_acks_stale_nonces_and_nacks() {
    let mut s = stream(true);
    let out = delta_sent(&s.on_request(delta_req(CDS, "", &[], &[])));
    assert_eq!(out.len(), 1, "a wildcard first request is answered");
    assert_eq!(out[0].2.len(), 5);
    let nonce = out[0].1.clone();
    assert!(
        s.on_request(delta_req(CDS, &nonce, &[], &[]))
            .responses
            .is_empty()
    );
    let stale = s.on_request(delta_req(CDS, "1-999", &[], &[]));
    assert!(stale.responses.is_empty() && has_event(&stale, |e| *e == Event::Stale(CDS)));
    let nack = s.on_request(Request::Delta(DeltaRequest {
        type_url: CDS.url(),
        response_nonce: nonce,
        error_detail: Some("rejected".into()),
        ..Default::default()
    }));
    assert!(nack.responses.is_empty());
    assert!(has_event(&nack, |e| matches!(e, Event::Nack { .. })));
}

#[test]
fn delta_subscribe_and_unsubscribe() {
    let mut s = stream(true);
    let out = delta_sent(&s.on_request(delta_req(EDS, "", &[A], &[])));
    assert_eq!(out[0].2, [A]);
    let out = delta_sent(&s.on_request(delta_req(EDS, &out[0].1, &[B], &[])));
    assert_eq!(out.len(), 1, "a new name is answered");
    assert_eq!(out[0].2, [B], "with that resource only");
    let out = s.on_request(delta_req(EDS, &out[0].1, &[], &[A]));
    assert!(
        out.responses.is_empty(),
        "an unsubscription is not answered"
    );
    assert_eq!(s.subscribed(EDS).unwrap().iter().collect::<Vec<_>>(), [B]);
}

#[test]
fn delta_a_reconnect_with_versions_gets_only_what_differs() {
    let mut s = stream(true);
    let first = s.on_request(delta_req(EDS, "", &[A, B], &[]));
    let versions: BTreeMap<String, String> = match &first.responses[0] {
        Response::Delta(r) => r
            .resources
            .iter()
            .map(|(x, v)| (x.name.clone(), v.clone()))
            .collect(),
        Response::Sotw(_) => unreachable!(),
    };
    // The proxy reconnects (a new stream) holding a's current version and an old one of b.
    let mut again = stream(true);
    let mut initial = versions.clone();
    initial.insert(B.to_string(), "0000000000000000".into());
    let out = again.on_request(Request::Delta(DeltaRequest {
        type_url: EDS.url(),
        subscribe: vec![A.into(), B.into()],
        initial_versions: initial,
        node: Some(node()),
        ..Default::default()
    }));
    let sent = delta_sent(&out);
    assert_eq!(sent[0].2, [B], "a is at the current version: not resent");

    // With nothing to send, a first request is answered all the same (empty).
    let mut third = stream(true);
    let out = third.on_request(Request::Delta(DeltaRequest {
        type_url: EDS.url(),
        subscribe: vec![A.into(), B.into()],
        initial_versions: versions,
        node: Some(node()),
        ..Default::default()
    }));
    let sent = delta_sent(&out);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].2.is_empty() && sent[0].3.is_empty());
}

#[test]
fn delta_a_push_out_of_scope_sends_nothing() {
    let mut s = stream(true);
    let out = delta_sent(&s.on_request(delta_req(CDS, "", &[], &[])));
    s.on_request(delta_req(CDS, &out[0].1, &[], &[]));
    let keys = BTreeSet::from([ConfigKey::new(ConfigKind::VirtualService, "elsewhere", "x")]);
    let request = PushRequest::config_change(keys, Instant::now());
    let (ctx, request) = next(&first_context(), &mesh("10.0.0.1", 100), request);
    let out = s.on_push(ctx, &request);
    assert!(out.responses.is_empty() && out.events.is_empty());
}

#[test]
fn delta_pushes_send_only_changed_resources() {
    let mut s = stream(true);
    let mut nonces = BTreeMap::new();
    for (type_url, names) in [
        (CDS, vec![]),
        (EDS, vec![A, B]),
        (LDS, vec![]),
        (RDS, vec!["9080"]),
    ] {
        let out = delta_sent(&s.on_request(delta_req(type_url, "", &names, &[])));
        s.on_request(delta_req(type_url, &out[0].1, &[], &[]));
        nonces.insert(type_url, out[0].1.clone());
    }
    assert!(s.is_synced());

    let (ctx, request) = endpoint_move(&first_context());
    let sent = delta_sent(&s.on_push(ctx.clone(), &request));
    assert_eq!(sent.len(), 1, "EDS only");
    assert_eq!((sent[0].0, sent[0].2.clone()), (EDS, vec![A.to_string()]));
    s.on_request(delta_req(EDS, &sent[0].1, &[], &[]));

    let (ctx, request) = weight_change(&ctx, "10.0.0.9");
    let sent = delta_sent(&s.on_push(ctx, &request));
    assert_eq!(
        sent.iter()
            .map(|(t, _, names, _)| (*t, names.clone()))
            .collect::<Vec<_>>(),
        [(RDS, vec!["9080".to_string()])],
        "a weight change sends the one route configuration that changed"
    );
}

mod sharing;
mod versions;
