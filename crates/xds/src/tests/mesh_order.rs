//! Several mesh VirtualServices for one host: a sidecar takes one, as istiod does (the first
//! in its order: exportTo group, then creation time, name, namespace; an exact host before
//! a wildcard), and the conflict is reported.

use super::*;

/// A mesh VirtualService `name` in `ns` for `hosts`, created at `created` (if any), sending
/// everything to the reviews subset `subset`.
fn mesh_vs(ns: &str, name: &str, created: Option<&str>, hosts: &str, extra: &str) -> String {
    let created = created.map_or(String::new(), |c| format!(", creationTimestamp: '{c}'"));
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: {ns}{created}}}\nspec:\n  hosts: {hosts}\n{extra}  http:\n  - name: {name}\n    route: [{{destination: {{host: reviews.shop.svc.cluster.local, subset: v1}}}}]\n"
    )
}

/// The name of the route the sidecar in `namespace` has for reviews on 9080.
fn reviews_route(mesh: &str, namespace: &str) -> String {
    let ctx = context(mesh);
    let proxy = axon_model::fixtures::proxy("sidecar", "10.9.0.1", namespace, &[]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["9080"]),
    ));
    routes[0]
        .virtual_hosts
        .iter()
        .find(|v| v.name == "reviews.shop.svc.cluster.local:9080")
        .map(|v| v.routes[0].name.clone())
        .unwrap_or_default()
}

/// MESH without its own VirtualService, and the given documents.
fn with(docs: &[String]) -> String {
    let base = MESH
        .split("kind: VirtualService")
        .next()
        .unwrap_or_default();
    let base = base
        .trim_end()
        .trim_end_matches("apiVersion: networking.istio.io/v1");
    format!("{base}\n---\n{}", docs.join("---\n"))
}

#[test]
fn the_oldest_virtual_service_for_a_host_wins_then_the_name() {
    let older = mesh_vs(
        "shop",
        "zz-older",
        Some("2024-01-01T00:00:00Z"),
        "[reviews]",
        "",
    );
    let newer = mesh_vs(
        "shop",
        "aa-newer",
        Some("2024-06-01T00:00:00Z"),
        "[reviews]",
        "",
    );
    assert_eq!(
        reviews_route(&with(&[older.clone(), newer]), "web"),
        "zz-older"
    );
    // Without timestamps (or equal ones): by name.
    let a = mesh_vs("shop", "aa", None, "[reviews]", "");
    let b = mesh_vs("shop", "bb", None, "[reviews]", "");
    assert_eq!(reviews_route(&with(&[b, a]), "web"), "aa");
    // A VirtualService without a timestamp sorts before one with (Go's zero time).
    let untimed = mesh_vs("shop", "zz-untimed", None, "[reviews]", "");
    assert_eq!(reviews_route(&with(&[older, untimed]), "web"), "zz-untimed");
}

#[test]
fn the_export_group_comes_before_the_creation_time() {
    // A VirtualService exported only to `web`'s own namespace is first for `web`'s sidecars;
    // then one exported to `web` from elsewhere; then the public ones.
    let public = mesh_vs(
        "shop",
        "public",
        Some("2020-01-01T00:00:00Z"),
        "[reviews]",
        "",
    );
    let to_web = mesh_vs(
        "shop",
        "to-web",
        Some("2024-01-01T00:00:00Z"),
        "[reviews]",
        "  exportTo: [web]\n",
    );
    let own = mesh_vs(
        "web",
        "own",
        Some("2025-01-01T00:00:00Z"),
        "[reviews.shop.svc.cluster.local]",
        "  exportTo: ['.']\n",
    );
    let mesh = with(&[public, to_web, own]);
    assert_eq!(reviews_route(&mesh, "web"), "own");
    assert_eq!(reviews_route(&mesh, "other"), "public");
    let mesh = with(&[
        mesh_vs(
            "shop",
            "public",
            Some("2020-01-01T00:00:00Z"),
            "[reviews]",
            "",
        ),
        mesh_vs(
            "shop",
            "to-web",
            Some("2024-01-01T00:00:00Z"),
            "[reviews]",
            "  exportTo: [web]\n",
        ),
    ]);
    assert_eq!(reviews_route(&mesh, "web"), "to-web");
}

#[test]
fn an_exact_host_wins_over_a_wildcard_and_a_longer_wildcard_over_a_shorter() {
    let wide = mesh_vs(
        "shop",
        "wide",
        Some("2020-01-01T00:00:00Z"),
        "['*.cluster.local']",
        "",
    );
    let narrow = mesh_vs(
        "shop",
        "narrow",
        Some("2021-01-01T00:00:00Z"),
        "['*.shop.svc.cluster.local']",
        "",
    );
    let exact = mesh_vs(
        "shop",
        "exact",
        Some("2022-01-01T00:00:00Z"),
        "[reviews]",
        "",
    );
    assert_eq!(
        reviews_route(&with(&[wide.clone(), narrow.clone(), exact]), "web"),
        "exact"
    );
    assert_eq!(reviews_route(&with(&[wide, narrow]), "web"), "narrow");
}

#[test]
fn hosts_that_several_mesh_virtual_services_name_are_reported() {
    let ctx = context(&with(&[
        mesh_vs("shop", "b", Some("2024-01-01T00:00:00Z"), "[reviews]", ""),
        mesh_vs(
            "shop",
            "a",
            Some("2024-06-01T00:00:00Z"),
            "[reviews, ratings]",
            "",
        ),
    ]));
    let problems = &ctx.virtual_services.problems;
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        ctx.virtual_services.duplicate_hosts,
        ["reviews.shop.svc.cluster.local"]
    );
    assert!(
        problems[0].message.starts_with(
            "host reviews.shop.svc.cluster.local is routed by VirtualService/shop/b, VirtualService/shop/a for sidecars"
        ),
        "{problems:?}"
    );
}

#[test]
fn on_a_gateway_the_older_virtual_service_routes_come_first() {
    let vs = |name: &str, created: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: shop, creationTimestamp: '{created}'}}\nspec:\n  hosts: [shop.example.com]\n  gateways: [istio-system/ingress]\n  http:\n  - name: {name}\n    match: [{{uri: {{prefix: /x}}}}]\n    route: [{{destination: {{host: reviews.shop.svc.cluster.local}}}}]\n"
        )
    };
    let ctx = context(&with(&[
        vs("aa-newer", "2024-06-01T00:00:00Z"),
        vs("zz-older", "2024-01-01T00:00:00Z"),
    ]));
    let proxy = gateway_proxy(&[("istio", "ingressgateway")]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["http.8080"]),
    ));
    let order: Vec<&str> = routes[0].virtual_hosts[0]
        .routes
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(order, ["zz-older", "aa-newer"]);
}

#[test]
fn an_older_virtual_service_with_no_route_for_the_sidecar_leaves_the_host_to_the_next() {
    // The older one's only match block applies to other workloads' sidecars.
    let older = mesh_vs(
        "shop",
        "older",
        Some("2024-01-01T00:00:00Z"),
        "[reviews]",
        "",
    )
    .replace(
        "  - name: older\n",
        "  - name: older\n    match: [{sourceLabels: {app: other}}]\n",
    );
    let newer = mesh_vs(
        "shop",
        "newer",
        Some("2024-06-01T00:00:00Z"),
        "[reviews]",
        "",
    );
    assert_eq!(reviews_route(&with(&[older, newer]), "web"), "newer");
}
