//! SotW versions are content hashes: two replicas (two contexts of different push numbers,
//! built from the same configs) send the same `version_info`s, a reconnect that names the
//! version of what would be sent is sent nothing, and an endpoint-only push's partial EDS
//! response carries the version of the whole state.

use std::collections::BTreeMap;

use super::*;

/// A context of the same configs as [`first_context`], built as a replica that has pushed
/// more often would: another push number, the same resources.
fn other_replica() -> Arc<PushContext> {
    let mut ctx = first_context();
    for _ in 0..3 {
        let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
        ctx = next(&ctx, &mesh("10.0.0.1", 100), req).0;
    }
    assert_ne!(ctx.version, first_context().version);
    ctx
}

/// A connected SotW stream on `ctx`.
fn stream_on(ctx: Arc<PushContext>) -> StreamState {
    let mut s = StreamState::new(Protocol::Sotw, Arc::default());
    s.connect(&sotw_req(CDS, "", &[])).expect("a valid node");
    assert!(s.on_context(ctx).responses.is_empty());
    s
}

/// The `version_info` of each response.
fn versions(out: &Output) -> Vec<(ResourceType, String)> {
    out.responses
        .iter()
        .map(|r| match r {
            Response::Sotw(r) => (
                ResourceType::parse(&r.type_url).unwrap(),
                r.version_info.clone(),
            ),
            Response::Delta(_) => panic!("a Delta response on a SotW stream"),
        })
        .collect()
}

/// Subscribes CDS, EDS (a, b), LDS, RDS (9080) as Envoy does, ACKing each: the version of each.
fn subscribe_all(s: &mut StreamState) -> BTreeMap<ResourceType, String> {
    let mut out = BTreeMap::new();
    for (type_url, names) in [
        (CDS, vec![]),
        (EDS, vec![A, B]),
        (LDS, vec![]),
        (RDS, vec!["9080"]),
    ] {
        let answer = s.on_request(sotw_req(type_url, "", &names));
        let (nonce, version) = match &answer.responses[..] {
            [Response::Sotw(r)] => (r.nonce.clone(), r.version_info.clone()),
            other => panic!("one answer to {type_url:?}: {other:?}"),
        };
        assert!(
            s.on_request(sotw_req(type_url, &nonce, &names))
                .responses
                .is_empty()
        );
        out.insert(type_url, version);
    }
    out
}

/// A request with an empty nonce claiming `version` (Envoy's first request on a new stream).
fn reconnect_req(type_url: ResourceType, version: &str, names: &[&str]) -> Request {
    let mut req = sotw_req(type_url, "", names);
    if let Request::Sotw(r) = &mut req {
        r.version_info = version.into();
    }
    req
}

#[test]
fn two_replicas_on_the_same_configs_send_the_same_versions() {
    let one = subscribe_all(&mut stream_on(first_context()));
    let two = subscribe_all(&mut stream_on(other_replica()));
    assert_eq!(one, two, "content versions, not push numbers");
    assert_eq!(one.len(), 4);
    let distinct: BTreeSet<&String> = one.values().collect();
    assert_eq!(distinct.len(), 4, "each type has its own: {one:?}");

    // A change makes a new version of the types it changes, and only of those.
    let mut s = stream_on(first_context());
    let before = subscribe_all(&mut s);
    let (ctx, request) = weight_change(&first_context(), "10.0.0.1");
    let pushed = versions(&s.on_push(ctx, &request));
    assert_eq!(pushed.len(), 1, "routes only: {pushed:?}");
    assert_eq!(pushed[0].0, RDS);
    assert_ne!(pushed[0].1, before[&RDS]);
}

#[test]
fn a_reconnect_with_the_current_version_is_sent_nothing_and_is_synced() {
    let had = subscribe_all(&mut stream_on(first_context()));
    // The proxy moves to the other replica, which has the same configs.
    let mut s = stream_on(other_replica());
    let mut events = Vec::new();
    for (type_url, names) in [
        (CDS, vec![]),
        (EDS, vec![A, B]),
        (LDS, vec![]),
        (RDS, vec!["9080"]),
    ] {
        let out = s.on_request(reconnect_req(type_url, &had[&type_url], &names));
        assert!(out.responses.is_empty(), "{type_url:?}: the proxy has it");
        events.extend(out.events);
    }
    assert!(
        events.contains(&Event::Synced),
        "in sync without a response"
    );
    let status = s.status(1, 0.0);
    assert!(status.types.iter().all(|t| t.version_acked.is_some()));
    // The next change is pushed as to any proxy.
    let (ctx, request) = weight_change(&other_replica(), "10.0.0.1");
    assert_eq!(versions(&s.on_push(ctx, &request)).len(), 1);

    // An old version, or other names, is answered in full.
    let mut s = stream_on(first_context());
    let out = s.on_request(reconnect_req(CDS, "0123456789abcdef", &[]));
    assert_eq!(versions(&out), [(CDS, had[&CDS].clone())]);
    let out = s.on_request(reconnect_req(EDS, &had[&EDS], &[A]));
    assert_eq!(
        out.responses.len(),
        1,
        "EDS after a CDS response is always answered"
    );
    let mut s = stream_on(first_context());
    let out = s.on_request(reconnect_req(EDS, &had[&EDS], &[A]));
    assert_eq!(out.responses.len(), 1, "a, not a and b: another set");
}

#[test]
fn a_partial_eds_response_carries_the_version_of_the_whole_state() {
    let mut s = stream_on(first_context());
    subscribe_all(&mut s);
    let (ctx, request) = endpoint_move(&first_context());
    let out = s.on_push(ctx.clone(), &request);
    let [Response::Sotw(partial)] = &out.responses[..] else {
        panic!("one EDS response: {out:?}");
    };
    assert_eq!(partial.resources.len(), 1, "a only");
    // A fresh stream on the new context is sent both clusters, at that same version.
    let mut fresh = stream_on(ctx);
    let full = subscribe_all(&mut fresh);
    assert_eq!(partial.version_info, full[&EDS]);
}

#[test]
fn a_partial_eds_response_after_a_skipped_context_is_versioned_as_the_whole_state() {
    let mut s = stream_on(first_context());
    subscribe_all(&mut s);
    // Two endpoint-only contexts; the stream is pushed only the second (its pushes merged).
    let (skipped, _) = endpoint_move(&first_context());
    let keys = BTreeSet::from([key(ConfigKind::ServiceEntry, "a")]);
    let request = PushRequest::endpoint_change(keys, Instant::now());
    let (ctx, request) = next(&skipped, &mesh("10.0.0.7", 100), request);
    let out = s.on_push(ctx.clone(), &request);
    let [Response::Sotw(partial)] = &out.responses[..] else {
        panic!("one EDS response: {out:?}");
    };
    let full = subscribe_all(&mut stream_on(ctx));
    assert_eq!(partial.version_info, full[&EDS]);
}
