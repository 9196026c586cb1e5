//! istiod's composition of PeerAuthentication, case by case (`policy_applier_test.go`'s
//! `TestComposePeerAuthentication` and `authentication_test.go`'s namespace modes).

use super::*;
use crate::fixtures::configs;

fn pa(namespace: &str, name: &str, created: &str, spec: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {namespace}, creationTimestamp: \"{created}\"}}\nspec: {spec}\n---\n"
    )
}

fn index(docs: &[String]) -> PeerAuthnIndex {
    PeerAuthnIndex::build(&configs(&docs.concat()), "istio-system")
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

const T1: &str = "2024-01-01T00:00:00Z";
const T2: &str = "2024-01-02T00:00:00Z";

#[test]
fn no_policy_is_permissive_and_no_namespace_mode() {
    let idx = index(&[]);
    assert_eq!(
        idx.for_workload("foo", &labels(&[])),
        MergedPeerAuthn::default()
    );
    assert_eq!(idx.namespace_mode("foo"), None);
}

#[test]
fn mesh_then_namespace_then_workload_with_inheritance() {
    let idx = index(&[
        pa("istio-system", "mesh", T1, "{mtls: {mode: STRICT}}"),
        pa("foo", "ns", T1, "{mtls: {mode: UNSET}}"),
        pa("bar", "ns", T1, "{mtls: {mode: DISABLE}}"),
        pa(
            "foo",
            "w",
            T1,
            "{selector: {matchLabels: {app: a}}, portLevelMtls: {8080: {mode: DISABLE}, 9090: {}}}",
        ),
    ]);
    // foo inherits STRICT from the mesh; its workload `a` keeps it but for port 8080.
    let a = idx.for_workload("foo", &labels(&[("app", "a")]));
    assert_eq!(a.mode, MtlsMode::Strict);
    assert_eq!(a.for_port(8080), MtlsMode::Disable);
    assert_eq!(a.for_port(9090), MtlsMode::Strict);
    assert_eq!(a.to_string(), "STRICT,8080=DISABLE,9090=STRICT");
    assert_eq!(
        idx.for_workload("foo", &labels(&[("app", "b")])).mode,
        MtlsMode::Strict
    );
    assert_eq!(
        idx.for_workload("bar", &labels(&[])).mode,
        MtlsMode::Disable
    );
    assert_eq!(idx.for_workload("baz", &labels(&[])).mode, MtlsMode::Strict);
    assert_eq!(idx.namespace_mode("foo"), Some(MtlsMode::Strict));
    assert_eq!(idx.namespace_mode("bar"), Some(MtlsMode::Disable));
    assert_eq!(idx.namespace_mode("baz"), Some(MtlsMode::Strict));
}

#[test]
fn the_oldest_of_a_level_wins() {
    let idx = index(&[
        pa("foo", "new", T2, "{mtls: {mode: DISABLE}}"),
        pa("foo", "old", T1, "{mtls: {mode: STRICT}}"),
        pa(
            "foo",
            "w-new",
            T2,
            "{selector: {matchLabels: {app: a}}, mtls: {mode: PERMISSIVE}}",
        ),
        pa(
            "foo",
            "w-old",
            T1,
            "{selector: {matchLabels: {app: a}}, mtls: {mode: DISABLE}}",
        ),
    ]);
    assert_eq!(idx.namespace_mode("foo"), Some(MtlsMode::Strict));
    assert_eq!(idx.ignored, ["foo/new"]);
    assert_eq!(
        idx.for_workload("foo", &labels(&[("app", "a")])).mode,
        MtlsMode::Disable
    );
    assert_eq!(idx.for_workload("foo", &labels(&[])).mode, MtlsMode::Strict);
}

#[test]
fn a_selector_in_the_root_namespace_applies_to_nothing() {
    let idx = index(&[pa(
        "istio-system",
        "w",
        T1,
        "{selector: {matchLabels: {app: a}}, mtls: {mode: STRICT}}",
    )]);
    assert_eq!(
        idx.for_workload("foo", &labels(&[("app", "a")])).mode,
        MtlsMode::Permissive
    );
    assert_eq!(idx.namespace_mode("foo"), None);
}

#[test]
fn unset_mesh_policy_is_permissive_and_inherited() {
    let idx = index(&[
        pa("istio-system", "mesh", T1, "{}"),
        pa("foo", "ns", T1, "{}"),
    ]);
    assert_eq!(idx.namespace_mode("foo"), Some(MtlsMode::Permissive));
    assert_eq!(idx.namespace_mode("other"), Some(MtlsMode::Permissive));
}
