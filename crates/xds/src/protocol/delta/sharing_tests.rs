//! Delta subscriptions share what their clients hold: the streams given the same set hold
//! one copy of it, and a stream that comes to differ keeps only the difference.

use super::tests::{Diffs, NAMES, req, res};
use super::*;

fn names(sent: &[(Resource, String)]) -> Vec<&str> {
    sent.iter().map(|(r, _)| r.name.as_str()).collect()
}

/// A subscription to `subscribe` (wildcard if empty, of CDS) that answered its first request.
fn subscription(subscribe: &[&str]) -> DeltaSubscription {
    let mut w = DeltaSubscription::default();
    let type_url = if subscribe.is_empty() {
        ResourceType::Cluster
    } else {
        ResourceType::Endpoint
    };
    w.on_request(type_url, &req(subscribe, &[], ""), &NAMES);
    w.nonce_sent = Some("n1".into());
    w
}

fn eds(bodies: &[(&str, &[u8])]) -> ResourceSet {
    ResourceSet::from(bodies.iter().map(|(n, b)| res(n, b)).collect::<Vec<_>>())
}

#[test]
fn subscriptions_given_the_same_set_share_one_copy() {
    let set = eds(&[("a", b"1"), ("b", b"1"), ("c", b"1")]);
    let (mut one, mut two) = (subscription(&["a", "b", "c"]), subscription(&[]));
    assert_eq!(one.diff_set(&set).0.len(), 3);
    assert_eq!(two.diff_set(&set).0.len(), 3);
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
    assert_eq!(one.versions.overlay_len() + two.versions.overlay_len(), 0);
    // A subscription that holds less holds another set.
    let mut three = subscription(&["a", "b"]);
    assert_eq!(names(&three.diff_set(&set).0), ["a", "b"]);
    assert!(!Arc::ptr_eq(one.versions.base(), three.versions.base()));
    assert_eq!(three.versions.base().len(), 2);
}

#[test]
fn a_partial_diff_of_one_leaves_the_other_alone() {
    let set = eds(&[("a", b"1"), ("b", b"1"), ("c", b"1")]);
    let (mut one, mut two) = (
        subscription(&["a", "b", "c"]),
        subscription(&["a", "b", "c"]),
    );
    one.diff_set(&set);
    two.diff_set(&set);
    let base = two.versions.base().clone();
    let within = BTreeSet::from(["b".to_string(), "c".to_string()]);
    let (sent, removed) = one.diff_within(&[res("b", b"2")], Some(&within));
    assert_eq!((names(&sent), removed), (vec!["b"], vec!["c".to_string()]));
    assert!(
        Arc::ptr_eq(one.versions.base(), &base),
        "the base is not copied"
    );
    assert_eq!(one.versions.overlay_len(), 2);
    assert!(Arc::ptr_eq(two.versions.base(), &base));
    assert_eq!(two.versions.overlay_len(), 0);
    // Each answers from what it holds.
    let next = eds(&[("a", b"1"), ("b", b"2"), ("c", b"1")]);
    assert_eq!(names(&one.diff_set(&next).0), ["c"]);
    assert_eq!(names(&two.diff_set(&next).0), ["b"]);
    // Both hold the same again, and share it.
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
    assert_eq!(one.versions.overlay_len() + two.versions.overlay_len(), 0);
    assert!(!Arc::ptr_eq(one.versions.base(), &base));
}

#[test]
fn an_unsubscribe_drops_the_name_for_this_stream_only() {
    let set = eds(&[("a", b"1"), ("b", b"1")]);
    let (mut one, mut two) = (subscription(&["a", "b"]), subscription(&["a", "b"]));
    one.diff_set(&set);
    two.diff_set(&set);
    assert_eq!(
        one.on_request(ResourceType::Endpoint, &req(&[], &["b"], "n1"), &NAMES),
        Decision::Ack
    );
    assert!(!one.versions.contains_key("b") && two.versions.contains_key("b"));
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
    // b is no longer subscribed: neither sent nor reported removed, and not held.
    assert_eq!(one.diff_set(&set), (vec![], vec![]));
    assert_eq!(one.versions.base().len(), 1);
    assert_eq!(one.versions.overlay_len(), 0);
    // Subscribed again: sent again.
    one.on_request(ResourceType::Endpoint, &req(&["b"], &[], "n1"), &NAMES);
    assert_eq!(names(&one.diff_set(&set).0), ["b"]);
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
    // Gone from the set: removed from both.
    let fewer = eds(&[("a", b"1")]);
    assert_eq!(one.diff_set(&fewer).1, ["b"]);
    assert_eq!(two.diff_set(&fewer).1, ["b"]);
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
}

#[test]
fn initial_versions_are_held_until_a_whole_set_replaces_them() {
    let set = eds(&[("a", b"1"), ("b", b"1"), ("c", b"1")]);
    let mut up = subscription(&[]);
    up.diff_set(&set);
    // A reconnect that has a and b at our versions, c at a version we did not make, and d.
    let mut first = req(&[], &[], "");
    for (name, version) in [
        ("a", res("a", b"1").content_version()),
        ("b", res("b", b"1").content_version()),
        ("c", "not-ours".to_string()),
        ("d", res("d", b"1").content_version()),
    ] {
        first.initial_versions.insert(name.into(), version);
    }
    let mut back = DeltaSubscription::default();
    back.on_request(ResourceType::Cluster, &first, &NAMES);
    assert_eq!(back.versions.get("c"), Some(None));
    assert_eq!(back.versions.overlay_len(), 4);
    let (sent, removed) = back.diff_set(&set);
    assert_eq!((names(&sent), removed), (vec!["c"], vec!["d".to_string()]));
    assert!(Arc::ptr_eq(back.versions.base(), up.versions.base()));
    assert_eq!(back.versions.overlay_len(), 0);
}

#[test]
fn many_initial_versions_are_shared_after_the_first_answer() {
    let list: Vec<Resource> = (0..40).map(|i| res(&format!("r{i}"), b"1")).collect();
    let request = || {
        let mut first = req(&[], &[], "");
        for r in &list {
            first
                .initial_versions
                .insert(r.name.clone(), r.content_version());
        }
        first
    };
    let (mut one, mut two) = (DeltaSubscription::default(), DeltaSubscription::default());
    one.on_request(ResourceType::Cluster, &request(), &NAMES);
    two.on_request(ResourceType::Cluster, &request(), &NAMES);
    let set = ResourceSet::from(list.clone());
    assert_eq!(one.diff_set(&set), (vec![], vec![]));
    assert_eq!(two.diff_set(&set), (vec![], vec![]));
    assert_eq!(one.versions.overlay_len() + two.versions.overlay_len(), 0);
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
}

#[test]
fn partial_diffs_past_the_bound_are_folded() {
    let list: Vec<Resource> = (0..100).map(|i| res(&format!("c{i}"), b"1")).collect();
    let names_list: Vec<String> = list.iter().map(|r| r.name.clone()).collect();
    let subscribe: Vec<&str> = names_list.iter().map(String::as_str).collect();
    let (mut one, mut two) = (subscription(&subscribe), subscription(&subscribe));
    let set = ResourceSet::from(list.clone());
    one.diff_set(&set);
    two.diff_set(&set);
    let base = one.versions.base().clone();
    for i in 0..20 {
        let changed = [res(&format!("c{i}"), b"2")];
        let within = BTreeSet::from([changed[0].name.clone()]);
        for w in [&mut one, &mut two] {
            assert_eq!(w.diff_within(&changed, Some(&within)).0.len(), 1);
            assert!(w.versions.overlay_len() <= 8, "an overlay is bounded");
        }
    }
    assert!(!Arc::ptr_eq(one.versions.base(), &base), "folded");
    assert_eq!(one.versions, two.versions);
    let now: Vec<Resource> = (0..100)
        .map(|i| res(&format!("c{i}"), if i < 20 { b"2" } else { b"1" }))
        .collect();
    let now = ResourceSet::from(now);
    assert_eq!(one.diff_set(&now), (vec![], vec![]), "every change is held");
    assert_eq!(two.diff_set(&now), (vec![], vec![]));
    assert!(Arc::ptr_eq(one.versions.base(), two.versions.base()));
}

#[test]
fn a_set_no_stream_holds_is_freed() {
    let set = eds(&[("a", b"1"), ("b", b"1")]);
    let (mut one, mut two) = (subscription(&[]), subscription(&[]));
    one.diff_set(&set);
    two.diff_set(&set);
    let weak = Arc::downgrade(one.versions.base());
    drop(one);
    assert!(weak.upgrade().is_some(), "two still holds it");
    two.diff_set(&eds(&[("a", b"2")]));
    assert!(weak.upgrade().is_none(), "nobody holds it");
}

#[test]
fn initial_versions_are_folded_when_the_answer_waits() {
    let list: Vec<Resource> = (0..40).map(|i| res(&format!("r{i}"), b"1")).collect();
    let mut first = req(&[], &[], "");
    for r in &list {
        first
            .initial_versions
            .insert(r.name.clone(), r.content_version());
    }
    let (mut one, mut two) = (DeltaSubscriptions::default(), DeltaSubscriptions::default());
    for s in [&mut one, &mut two] {
        s.should_respond(ResourceType::Cluster, &first, &NAMES);
        let held = |s: &DeltaSubscriptions| {
            s.get(ResourceType::Cluster)
                .map(|w| w.versions.overlay_len())
        };
        assert_eq!(held(s), Some(40), "answered at once: not folded");
        s.settle(ResourceType::Cluster, &NAMES);
        assert_eq!(held(s), Some(0));
    }
    let base = |s: &DeltaSubscriptions| {
        s.get(ResourceType::Cluster)
            .map(|w| w.versions.base().clone())
            .expect("requested")
    };
    assert!(Arc::ptr_eq(&base(&one), &base(&two)));
    let set = ResourceSet::from(list);
    let sent = one.answer(ResourceType::Cluster, &set, None, &NAMES, || "n1".into());
    assert_eq!(
        sent.map(|s| s.resources.len()),
        Some(0),
        "the first answer, empty"
    );
    assert!(Arc::ptr_eq(&base(&one), &base(&two)));
}
