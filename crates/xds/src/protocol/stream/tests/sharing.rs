//! Delta streams of one [`NameSets`] share what their proxies hold: streams sent the same
//! sets hold one copy of them, and an endpoint-only push of one does not touch another's.

use super::*;

/// The held set of a type of a Delta stream.
fn held(s: &StreamState, type_url: ResourceType) -> Arc<crate::protocol::held::VersionSet> {
    let Subscriptions::Delta(d) = &s.subscriptions else {
        panic!("a Delta stream");
    };
    d.get(type_url)
        .expect("requested")
        .versions()
        .base()
        .clone()
}

/// A connected Delta stream on `names` that has the first context and has CDS and EDS (a, b).
fn synced(names: &Arc<NameSets>) -> StreamState {
    let mut s = StreamState::new(Protocol::Delta, names.clone());
    s.connect(&sotw_req(CDS, "", &[])).expect("a valid node");
    assert!(s.on_context(first_context()).responses.is_empty());
    for (type_url, subscribe) in [(CDS, &[][..]), (EDS, &[A, B][..])] {
        let out = delta_sent(&s.on_request(delta_req(type_url, "", subscribe, &[])));
        assert!(!out[0].2.is_empty());
        s.on_request(delta_req(type_url, &out[0].1, &[], &[]));
    }
    s
}

#[test]
fn delta_streams_sent_the_same_share_what_they_hold() {
    let names = Arc::new(NameSets::default());
    let (mut one, mut two) = (synced(&names), synced(&names));
    for type_url in [CDS, EDS] {
        assert!(Arc::ptr_eq(&held(&one, type_url), &held(&two, type_url)));
    }
    // An endpoint-only push to one stream leaves the other's set as it was.
    let before = held(&two, EDS);
    let (ctx, request) = endpoint_move(&first_context());
    let sent = delta_sent(&one.on_push(ctx.clone(), &request));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].2, [A]);
    assert!(Arc::ptr_eq(&held(&two, EDS), &before));
    // The same push to the other: each sends a's new version once, and nothing after.
    assert_eq!(delta_sent(&two.on_push(ctx.clone(), &request))[0].2, [A]);
    let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let (ctx, full) = next(&ctx, &mesh("10.0.0.9", 100), full);
    assert!(delta_sent(&one.on_push(ctx.clone(), &full)).is_empty());
    assert!(delta_sent(&two.on_push(ctx, &full)).is_empty());
    assert!(Arc::ptr_eq(&held(&one, EDS), &held(&two, EDS)));
    assert!(!Arc::ptr_eq(&held(&one, EDS), &before));
}
