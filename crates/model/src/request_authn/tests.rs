//! istiod's selection of RequestAuthentications (`authentication_test.go`'s
//! `TestGetJwtPoliciesForWorkload`, `policyattachment_test.go`), case by case.

use super::*;
use crate::fixtures::configs;

fn ra(namespace: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n---\n"
    )
}

fn index(docs: &[String]) -> RequestAuthnIndex {
    RequestAuthnIndex::build(&configs(&docs.concat()), "istio-system")
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn names(idx: &RequestAuthnIndex, ns: &str, l: &Labels) -> Vec<String> {
    idx.for_workload(ns, l)
        .iter()
        .map(|c| format!("{}/{}", c.namespace(), c.name()))
        .collect()
}

#[test]
fn namespace_root_and_selector() {
    let idx = index(&[
        ra("istio-system", "mesh", "{jwtRules: [{issuer: m}]}"),
        ra(
            "istio-system",
            "mesh-app",
            "{selector: {matchLabels: {app: a}}}",
        ),
        ra("foo", "ns", "{}"),
        ra("foo", "app-a", "{selector: {matchLabels: {app: a}}}"),
        ra("foo", "app-b", "{selector: {matchLabels: {app: b}}}"),
        ra("bar", "other", "{}"),
    ]);
    assert_eq!(
        names(&idx, "foo", &labels(&[("app", "a")])),
        [
            "foo/app-a",
            "foo/ns",
            "istio-system/mesh",
            "istio-system/mesh-app"
        ]
    );
    assert_eq!(
        names(&idx, "baz", &labels(&[("app", "a")])),
        ["istio-system/mesh", "istio-system/mesh-app"]
    );
    assert_eq!(
        names(&idx, "istio-system", &labels(&[])),
        ["istio-system/mesh"]
    );
}

#[test]
fn target_refs_attach_to_gateway_api_gateways_only() {
    let gw = "{targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: gw}}";
    let idx = index(&[
        ra("foo", "to-gw", gw),
        ra(
            "foo",
            "to-gws",
            "{targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: other}, {group: gateway.networking.k8s.io, kind: Gateway, name: gw}]}",
        ),
        ra("foo", "to-svc", "{targetRef: {kind: Service, name: gw}}"),
        ra("foo", "selector", "{selector: {matchLabels: {app: gw}}}"),
        ra("bar", "elsewhere", gw),
    ]);
    let gateway = labels(&[(GATEWAY_NAME_LABEL, "gw"), ("app", "gw")]);
    assert_eq!(
        names(&idx, "foo", &gateway),
        ["foo/selector", "foo/to-gw", "foo/to-gws"]
    );
    // A sidecar (no gateway-name label) never takes a policy with target references.
    assert_eq!(
        names(&idx, "foo", &labels(&[("app", "gw")])),
        ["foo/selector"]
    );
    assert!(names(&idx, "bar", &labels(&[(GATEWAY_NAME_LABEL, "other")])).is_empty());
}

#[test]
fn rules_by_issuer_sources_and_counts() {
    let idx = index(&[
        ra(
            "foo",
            "a",
            "{jwtRules: [{issuer: z, jwksUri: 'https://z/keys', timeout: 2s}, {issuer: y, jwks: '{\"keys\":[]}'}]}",
        ),
        ra(
            "istio-system",
            "b",
            "{jwtRules: [{issuer: 'https://x'}, {issuer: w, jwksUri: 'https://z/keys', timeout: 7s}]}",
        ),
    ]);
    let none = labels(&[]);
    let issuers: Vec<&str> = idx
        .rules_for("foo", &none)
        .iter()
        .map(|r| r.issuer.as_str())
        .collect();
    assert_eq!(issuers, ["https://x", "w", "y", "z"]);
    let sources: Vec<(String, i128)> = idx
        .jwks_sources()
        .into_iter()
        .map(|(s, t)| (s.url(), t))
        .collect();
    assert_eq!(
        sources,
        [
            ("https://z/keys".to_string(), 7_000_000_000),
            (
                "https://x/.well-known/openid-configuration".to_string(),
                DEFAULT_JWKS_TIMEOUT_NANOS
            ),
        ]
    );
    let counts = idx.selected_counts([("foo", &none), ("bar", &none), ("foo", &none)]);
    let by_name: Vec<(&str, usize)> = counts.iter().map(|(k, n)| (k.name.as_str(), *n)).collect();
    assert_eq!(by_name, [("a", 2), ("b", 3)]);
}
