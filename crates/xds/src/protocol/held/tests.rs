//! Held versions: a shared base and an overlay, the interner that shares the bases, folding.

use super::*;
use crate::resource::ResourceSet;

fn res(name: &str, body: &[u8]) -> Resource {
    Resource::from_encoded(name, "t".into(), bytes::Bytes::copy_from_slice(body))
}

fn held(h: &HeldVersions) -> Vec<(String, Version)> {
    h.iter().map(|(n, v)| (n.to_string(), v)).collect()
}

fn whole(shared: &VersionSets, h: &mut HeldVersions, set: &ResourceSet) -> Vec<String> {
    let in_scope: Vec<&Resource> = set.iter().collect();
    let (sent, removed) = h.diff(&in_scope, None, Some(set.digest()), shared);
    assert!(removed.is_empty());
    sent.into_iter().map(|(r, _)| r.name).collect()
}

#[test]
fn a_held_set_is_digested_as_the_set_it_was_sent() {
    let set = ResourceSet::from(vec![res("b", b"1"), res("a", b"2")]);
    let entries = [
        ("a", Some(res("a", b"2").hash)),
        ("b", Some(res("b", b"1").hash)),
    ];
    assert_eq!(digest_of(&entries), set.digest());
    assert_ne!(mix("a", None), mix("a", Some(0)));
}

#[test]
fn the_overlay_holds_only_what_differs_from_the_base() {
    let shared = VersionSets::default();
    let mut h = HeldVersions::default();
    whole(
        &shared,
        &mut h,
        &ResourceSet::from(vec![res("a", b"1"), res("c", b"1")]),
    );
    assert_eq!(h.overlay_len(), 0);
    let a = res("a", b"1").hash;
    h.insert("b", Some(7));
    h.insert("c", None);
    h.remove("a");
    assert_eq!(h.overlay_len(), 3);
    assert_eq!(held(&h), [("b".into(), Some(7)), ("c".into(), None)]);
    assert_eq!(
        (h.get("a"), h.get("b"), h.get("z")),
        (None, Some(Some(7)), None)
    );
    // Back to what the base holds: the overlay forgets it.
    h.insert("a", Some(a));
    h.remove("b");
    assert_eq!(h.overlay_len(), 1);
    assert!(h.contains_key("a") && !h.contains_key("b"));
    // Dropping a name the base does not hold changes nothing.
    h.remove("zz");
    assert_eq!(h.overlay_len(), 1);
}

#[test]
fn equal_sets_are_one_and_different_ones_are_not() {
    let shared = VersionSets::default();
    let entries = [("a", Some(1)), ("b", None)];
    let one = shared.share(digest_of(&entries), &entries);
    let two = shared.share(digest_of(&entries), &entries);
    assert!(Arc::ptr_eq(&one, &two));
    // A colliding digest of different entries is not mistaken for it.
    let other = [("a", Some(2))];
    let three = shared.share(digest_of(&entries), &other);
    assert!(!Arc::ptr_eq(&one, &three));
    assert_eq!(three.get("a"), Some(Some(2)));
    assert!(Arc::ptr_eq(
        &shared.share(0, &[]),
        &HeldVersions::default().base
    ));
}

#[test]
fn the_interner_frees_sets_no_stream_holds() {
    let shared = VersionSets::default();
    let entries = [("a", Some(1))];
    let set = shared.share(1, &entries);
    let weak = Arc::downgrade(&set);
    let mut h = HeldVersions::default();
    whole(&shared, &mut h, &ResourceSet::from(vec![res("a", b"1")]));
    let kept = Arc::downgrade(h.base());
    drop(set);
    assert!(weak.upgrade().is_none(), "nobody holds it: freed");
    for i in 0..5000u64 {
        let name = i.to_string();
        drop(shared.share(i + 2, &[(&name, Some(i))]));
    }
    assert!(shared.entries() <= 1026, "swept: {}", shared.entries());
    assert!(kept.upgrade().is_some(), "a held set stays");
    let entries: Vec<(&str, Version)> = h.iter().collect();
    assert!(Arc::ptr_eq(
        &shared.share(digest_of(&entries), &entries),
        h.base()
    ));
}

#[test]
fn an_overgrown_overlay_is_folded_into_a_shared_base() {
    let shared = VersionSets::default();
    let (mut one, mut two) = (HeldVersions::default(), HeldVersions::default());
    for h in [&mut one, &mut two] {
        for i in 0..FOLD_MIN {
            h.insert(&format!("n{i}"), Some(i as u64));
            h.settle(&shared);
        }
        assert_eq!(h.overlay_len(), FOLD_MIN, "not past the bound yet");
        h.insert("x", None);
        h.settle(&shared);
        assert_eq!(h.overlay_len(), 0);
        assert_eq!(h.base().len(), FOLD_MIN + 1);
        assert_eq!(h.get("x"), Some(None));
    }
    assert!(Arc::ptr_eq(one.base(), two.base()));
    assert_eq!(one, two);
}

#[test]
fn of_one_name_twice_the_last_is_held() {
    let shared = VersionSets::default();
    let mut h = HeldVersions::default();
    let set = ResourceSet::from(vec![res("a", b"1"), res("a", b"2")]);
    assert_eq!(whole(&shared, &mut h, &set), ["a", "a"]);
    assert_eq!(held(&h), [("a".into(), Some(res("a", b"2").hash))]);
    assert_eq!(h.base().digest, mix("a", Some(res("a", b"2").hash)));
}

#[test]
fn a_partial_diff_changes_the_overlay_only() {
    let shared = VersionSets::default();
    let mut h = HeldVersions::default();
    let set = ResourceSet::from(vec![res("a", b"1"), res("b", b"1"), res("c", b"1")]);
    whole(&shared, &mut h, &set);
    let base = h.base().clone();
    let within = BTreeSet::from(["b".to_string(), "c".to_string(), "d".to_string()]);
    let b2 = res("b", b"2");
    let d = res("d", b"1");
    let (sent, removed) = h.diff(&[&d, &b2], Some(&within), None, &shared);
    let sent: Vec<&str> = sent.iter().map(|(r, _)| r.name.as_str()).collect();
    assert_eq!(sent, ["d", "b"], "in the set's order");
    assert_eq!(removed, ["c"]);
    assert!(Arc::ptr_eq(h.base(), &base));
    assert_eq!(h.overlay_len(), 3);
    assert_eq!(
        held(&h),
        [
            ("a".into(), Some(res("a", b"1").hash)),
            ("b".into(), Some(b2.hash)),
            ("d".into(), Some(d.hash)),
        ]
    );
}

#[test]
fn a_fold_digests_drops_changes_and_foreign_versions() {
    let shared = VersionSets::default();
    let mut h = HeldVersions::default();
    let list: Vec<Resource> = (0..20).map(|i| res(&format!("r{i:02}"), b"1")).collect();
    whole(&shared, &mut h, &ResourceSet::from(list));
    let base = h.base().clone();
    h.remove("r00");
    h.remove("r01");
    h.insert("r02", Some(9));
    h.insert("r03", None);
    assert_eq!(h.overlay_len(), 4);
    h.settle(&shared);
    assert!(Arc::ptr_eq(h.base(), &base), "within the bound");
    h.insert("zz", Some(1));
    h.settle(&shared);
    assert_eq!(h.overlay_len(), 0);
    let entries: Vec<(&str, Version)> = h.iter().collect();
    assert_eq!(entries.len(), 19);
    assert_eq!(h.base().digest, digest_of(&entries));
    assert_eq!(
        (h.get("r00"), h.get("r02"), h.get("r03")),
        (None, Some(Some(9)), Some(None))
    );
}
