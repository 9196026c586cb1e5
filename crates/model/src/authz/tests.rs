//! Which AuthorizationPolicies apply to a workload, as istiod's `ListAuthorizationPolicies`.

use super::*;
use crate::fixtures::configs;

fn ap(ns: &str, name: &str, created: &str, spec: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: {ns}, creationTimestamp: \"{created}\"}}\nspec: {spec}\n---\n"
    )
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn names(list: &[Arc<Config>]) -> Vec<String> {
    list.iter()
        .map(|c| format!("{}/{}", c.namespace(), c.name()))
        .collect()
}

#[test]
fn root_then_namespace_by_selector_and_gateway_targets() {
    let yaml = [
        ap("foo", "b-new", "2024-01-02T00:00:00Z", "{rules: [{}]}"),
        ap("foo", "a-old", "2024-01-01T00:00:00Z", "{selector: {matchLabels: {app: a}}, rules: [{}]}"),
        ap("istio-system", "mesh-deny", "2024-01-01T00:00:00Z", "{action: DENY, rules: [{}]}"),
        ap("foo", "other", "2024-01-01T00:00:00Z", "{selector: {matchLabels: {app: z}}, rules: [{}]}"),
        ap("bar", "elsewhere", "2024-01-01T00:00:00Z", "{rules: [{}]}"),
        ap("foo", "gw", "2024-01-01T00:00:00Z", "{targetRefs: [{kind: Gateway, group: gateway.networking.k8s.io, name: web}], rules: [{}]}"),
    ]
    .concat();
    let idx = AuthzIndex::build(&configs(&yaml), "istio-system");
    let a = idx.for_workload("foo", &labels(&[("app", "a")]));
    assert_eq!(names(&a.allow), ["foo/a-old", "foo/b-new"]);
    assert_eq!(names(&a.deny), ["istio-system/mesh-deny"]);
    // A Gateway API gateway: its targeting policy, and the selector-based ones.
    let gw = idx.for_workload("foo", &labels(&[(GATEWAY_NAME_LABEL, "web")]));
    assert_eq!(names(&gw.allow), ["foo/gw", "foo/b-new"]);
    // A sidecar never gets a targeted policy.
    let plain = idx.for_workload("foo", &labels(&[]));
    assert_eq!(names(&plain.allow), ["foo/b-new"]);
}
