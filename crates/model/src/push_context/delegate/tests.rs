use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::*;
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::istio::{HttpMatchRequest, HttpRoute, VirtualService};

fn route(v: serde_json::Value) -> HttpRoute {
    serde_json::from_value(v).expect("an HTTPRoute")
}

fn matches(v: serde_json::Value) -> Vec<HttpMatchRequest> {
    serde_json::from_value(v).expect("match blocks")
}

fn vs_config(ns: &str, name: &str, v: serde_json::Value) -> Arc<Config> {
    let vs: VirtualService = serde_json::from_value(v).expect("a VirtualService");
    Arc::new(Config {
        key: ConfigKey::new(ConfigKind::VirtualService, ns, name),
        labels: Default::default(),
        created: None,
        spec: Spec::VirtualService(vs),
        not_applied: Vec::new(),
    })
}

fn uris(m: &[HttpMatchRequest]) -> Vec<String> {
    m.iter()
        .map(|m| {
            let u = m.uri.clone().unwrap_or_default();
            format!(
                "{}{}{}",
                u.exact.map(|e| format!("={e}")).unwrap_or_default(),
                u.prefix.map(|p| format!("^{p}")).unwrap_or_default(),
                u.regex.map(|r| format!("~{r}")).unwrap_or_default()
            )
        })
        .collect()
}

#[test]
fn a_child_match_inside_the_root_match_takes_the_root_conditions_too() {
    let root = matches(
        json!([{"name": "r", "uri": {"prefix": "/shop"}, "headers": {"x-a": {"exact": "1"}}, "port": 80}]),
    );
    let child = matches(
        json!([{"name": "c", "uri": {"prefix": "/shop/cart"}, "headers": {"x-b": {"exact": "2"}}}]),
    );
    let merged = merge_matches(&root, &child).expect("no conflict");
    assert_eq!(uris(&merged), ["^/shop/cart"]);
    assert_eq!(merged[0].name, "r-c");
    assert_eq!(merged[0].port, Some(80));
    let headers: Vec<&String> = merged[0].headers.keys().collect();
    assert_eq!(headers, ["x-a", "x-b"]);
}

#[test]
fn string_match_conflicts_as_istiod() {
    let conflict = |r: serde_json::Value, c: serde_json::Value| {
        merge_matches(&matches(json!([{"uri": r}])), &matches(json!([{"uri": c}]))).is_none()
    };
    // Prefix root: a prefix or exact under it is inside; anything else is not.
    assert!(!conflict(
        json!({"prefix": "/a"}),
        json!({"prefix": "/a/b"})
    ));
    assert!(!conflict(json!({"prefix": "/a"}), json!({"exact": "/a/b"})));
    assert!(conflict(json!({"prefix": "/a/b"}), json!({"prefix": "/a"})));
    assert!(conflict(json!({"prefix": "/a"}), json!({"exact": "/b"})));
    // Exact root: only the same exact.
    assert!(!conflict(json!({"exact": "/a"}), json!({"exact": "/a"})));
    assert!(conflict(json!({"exact": "/a"}), json!({"exact": "/b"})));
    assert!(conflict(json!({"exact": "/a"}), json!({"prefix": "/a"})));
    // A regex on either side conflicts with any match on the other.
    assert!(conflict(json!({"regex": "/a.*"}), json!({"prefix": "/a"})));
    assert!(conflict(json!({"prefix": "/a"}), json!({"regex": "/a.*"})));
    assert!(conflict(json!({"regex": "/a.*"}), json!({"regex": "/a.*"})));
    // Unset on either side: no conflict, the set one is kept.
    let merged = merge_matches(
        &matches(json!([{"uri": {"prefix": "/a"}}])),
        &matches(json!([{"method": {"exact": "GET"}}])),
    )
    .expect("no conflict");
    assert_eq!(uris(&merged), ["^/a"]);
    assert_eq!(
        merged[0].method.as_ref().and_then(|m| m.exact.as_deref()),
        Some("GET")
    );
}

#[test]
fn other_conflicts_as_istiod() {
    let conflict = |r: serde_json::Value, c: serde_json::Value| {
        merge_matches(&matches(json!([r])), &matches(json!([c]))).is_none()
    };
    assert!(conflict(
        json!({"headers": {"x": {"exact": "1"}}}),
        json!({"headers": {"x": {"exact": "2"}}})
    ));
    assert!(!conflict(
        json!({"headers": {"x": {"prefix": "a"}}}),
        json!({"headers": {"x": {"exact": "ab"}}})
    ));
    assert!(conflict(
        json!({"queryParams": {"q": {"exact": "1"}}}),
        json!({"queryParams": {"q": {"exact": "2"}}})
    ));
    assert!(conflict(json!({"ignoreUriCase": true}), json!({})));
    assert!(conflict(json!({"port": 80}), json!({"port": 81})));
    assert!(!conflict(json!({"port": 80}), json!({})));
    assert!(conflict(json!({"sourceNamespace": "a"}), json!({})));
    assert!(!conflict(
        json!({"sourceNamespace": "a"}),
        json!({"sourceNamespace": "a"})
    ));
    assert!(conflict(
        json!({"sourceLabels": {"app": "a"}}),
        json!({"sourceLabels": {"app": "b"}})
    ));
    assert!(!conflict(
        json!({"sourceLabels": {"app": "a"}}),
        json!({"sourceLabels": {"v": "1"}})
    ));
    assert!(conflict(
        json!({"gateways": ["ns/a"]}),
        json!({"gateways": ["ns/b"]})
    ));
    assert!(conflict(
        json!({"gateways": ["ns/a"]}),
        json!({"gateways": ["ns/a", "ns/b"]})
    ));
    assert!(!conflict(
        json!({"gateways": ["ns/a", "ns/b"]}),
        json!({"gateways": ["ns/a"]})
    ));
}

#[test]
fn each_child_block_merges_with_every_root_block_it_fits_and_one_that_fits_none_drops_the_route() {
    let root = matches(
        json!([{"uri": {"prefix": "/a"}}, {"uri": {"prefix": "/b"}}, {"headers": {"x": {"exact": "1"}}}]),
    );
    let child = matches(json!([{"uri": {"prefix": "/a/1"}}]));
    let merged = merge_matches(&root, &child).expect("no conflict");
    // Inside `/a`, and inside the third block (no uri there); not inside `/b`.
    assert_eq!(uris(&merged), ["^/a/1", "^/a/1"]);
    assert!(merged[1].headers.contains_key("x"));
    let child = matches(
        json!([{"uri": {"prefix": "/a/1"}}, {"uri": {"exact": "/c"}, "headers": {"x": {"exact": "2"}}}]),
    );
    assert!(merge_matches(&root, &child).is_none());
    // No blocks on one side: the other's.
    assert_eq!(
        uris(&merge_matches(&[], &child).unwrap_or_default()),
        ["^/a/1", "=/c"]
    );
    assert_eq!(merge_matches(&root, &[]).unwrap_or_default(), root);
}

#[test]
fn the_child_keeps_its_fields_and_takes_the_unset_ones_from_the_root() {
    let root = route(json!({
        "name": "root",
        "match": [{"uri": {"prefix": "/api"}}],
        "delegate": {"name": "child"},
        "timeout": "5s",
        "retries": {"attempts": 1},
        "rewrite": {"uri": "/from-root"},
        "headers": {"request": {"set": {"x-root": "1"}}},
        "corsPolicy": {"allowMethods": ["GET"]},
    }));
    let child = route(json!({
        "name": "c",
        "match": [{"uri": {"prefix": "/api/v1"}}],
        "route": [{"destination": {"host": "svc"}}],
        "rewrite": {"uri": "/from-child"},
    }));
    let merged = merge_route(&root, child).expect("no conflict");
    assert_eq!(merged.name, "root-c");
    assert_eq!(merged.timeout.as_deref(), Some("5s"));
    assert_eq!(merged.retries.as_ref().map(|r| r.attempts), Some(1));
    assert_eq!(
        merged.rewrite.as_ref().map(|r| r.uri.as_str()),
        Some("/from-child")
    );
    assert!(merged.headers.is_some() && merged.cors_policy.is_some());
    assert!(merged.delegate.is_none());
    assert_eq!(merged.route.len(), 1);
    // Names: whichever is set.
    let unnamed = route(json!({"route": [{"destination": {"host": "svc"}}]}));
    assert_eq!(
        merge_route(&root, unnamed.clone()).map(|r| r.name),
        Some("root".into())
    );
    let anonymous_root = route(json!({"delegate": {"name": "child"}}));
    let named = route(json!({"name": "c", "route": [{"destination": {"host": "svc"}}]}));
    assert_eq!(
        merge_route(&anonymous_root, named).map(|r| r.name),
        Some("c".into())
    );
}

#[test]
fn a_root_takes_its_children_routes_in_place_of_the_delegating_ones() {
    let root = vs_config(
        "front",
        "root",
        json!({
            "hosts": ["shop.example.com"],
            "gateways": ["gw"],
            "http": [
                {"name": "first", "match": [{"uri": {"exact": "/healthz"}}], "directResponse": {"status": 200}},
                {"name": "api", "match": [{"uri": {"prefix": "/api"}}], "delegate": {"name": "api", "namespace": "team"}},
                {"name": "missing", "delegate": {"name": "nowhere"}},
                {"name": "hidden", "delegate": {"name": "private", "namespace": "team"}},
                {"name": "rest", "route": [{"destination": {"host": "web"}}]},
            ],
        }),
    );
    let api = vs_config(
        "team",
        "api",
        json!({"http": [
            {"name": "v1", "match": [{"uri": {"prefix": "/api/v1"}, "gateways": ["gw"]}], "route": [{"destination": {"host": "api-v1"}}], "mirror": {"host": "shadow"}},
            {"name": "off", "match": [{"uri": {"prefix": "/other"}}], "route": [{"destination": {"host": "x"}}]},
            {"name": "all", "route": [{"destination": {"host": "api.team.svc.cluster.local"}}]},
        ]}),
    );
    let private = vs_config(
        "team",
        "private",
        json!({"exportTo": ["."], "http": [{"route": [{"destination": {"host": "p"}}]}]}),
    );
    let all: BTreeMap<ConfigKey, Arc<Config>> = [api, private, root.clone()]
        .into_iter()
        .map(|c| (c.key.clone(), c))
        .collect();
    let Spec::VirtualService(spec) = &root.spec else {
        unreachable!()
    };
    let merged = merge_root(
        &root,
        spec,
        |ns, name| all.get(&ConfigKey::new(ConfigKind::VirtualService, ns, name)),
        &["*".to_string()],
    );
    let names: Vec<&str> = merged.spec.http.iter().map(|h| h.name.as_str()).collect();
    assert_eq!(names, ["first", "api-v1", "api-all", "rest"]);
    let v1 = &merged.spec.http[1];
    // The child's short names are its own namespace's, its gateways too.
    assert_eq!(
        v1.route[0].destination.as_ref().map(|d| d.host.as_str()),
        Some("api-v1.team.svc.cluster.local")
    );
    assert_eq!(
        v1.mirror.as_ref().map(|d| d.host.as_str()),
        Some("shadow.team.svc.cluster.local")
    );
    assert_eq!(v1.matches[0].gateways, ["team/gw"]);
    // The root's own routes keep their short names (resolved in its namespace later).
    assert_eq!(
        merged.spec.http[3].route[0]
            .destination
            .as_ref()
            .map(|d| d.host.as_str()),
        Some("web")
    );
    let all_route = &merged.spec.http[2];
    assert_eq!(uris(&all_route.matches), ["^/api"]);
    let children: Vec<String> = merged.children.iter().map(ToString::to_string).collect();
    assert_eq!(
        children,
        [
            "VirtualService/front/nowhere",
            "VirtualService/team/api",
            "VirtualService/team/private"
        ]
    );
    assert_eq!(merged.problems.len(), 3, "{:?}", merged.problems);
    assert!(merged.problems[0].contains("\"off\"") && merged.problems[0].contains("dropped"));
    assert!(merged.problems[1].contains("VirtualService/front/nowhere not found"));
    assert!(merged.problems[2].contains("is not exported to front"));
}
