use super::*;
use crate::fixtures::context_marked;
use axon_config::istio::RouteSemantics;

/// Marks the VirtualServices whose name starts with `gw-` as made from Gateway API routes.
fn mark(c: &mut Config) {
    if let Spec::VirtualService(vs) = &mut c.spec
        && c.key.name.starts_with("gw-")
    {
        vs.semantics = RouteSemantics::Gateway;
        vs.parents = vec![format!("HTTPRoute/{}.{}", c.key.name, c.key.namespace)];
    }
}

fn vs(name: &str, ns: &str, body: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{body}---\n"
    )
}

#[test]
fn a_gateway_api_route_keeps_its_hosts_and_merges_no_delegate() {
    let route = "  hosts: [web]\n  http:\n  - name: root\n    delegate: {name: child}\n";
    let child = "  http:\n  - name: child\n    route: [{destination: {host: web}}]\n";
    let yaml = format!(
        "{}{}{}",
        vs("gw-web", "shop", route),
        vs("web", "shop", route),
        vs("child", "shop", child)
    );
    let ctx = context_marked(&yaml, mark);
    let index = &ctx.virtual_services;
    let names = |host: &str| -> Vec<&str> {
        index
            .by_host
            .get(host)
            .into_iter()
            .flatten()
            .map(|c| c.name())
            .collect()
    };
    // The short host is resolved for a user's VirtualService only.
    assert_eq!(names("web"), ["gw-web"]);
    assert_eq!(names("web.shop.svc.cluster.local"), ["web"]);
    let http_names = |name: &str| -> Vec<String> {
        let c = index.by_gateway["mesh"]
            .iter()
            .find(|c| c.name() == name)
            .unwrap();
        let Spec::VirtualService(vs) = &c.spec else {
            unreachable!()
        };
        vs.http.iter().map(|h| h.name.clone()).collect()
    };
    assert_eq!(
        http_names("web"),
        ["root-child"],
        "merged with its delegate"
    );
    assert_eq!(http_names("gw-web"), ["root"], "not merged");
    let root = ConfigKey::new(ConfigKind::VirtualService, "shop", "gw-web");
    assert!(!index.delegates.contains_key(&root));
}

/// Two public VirtualServices on gateway `istio-system/gw` (`a-user` in `other`, `gw-route`
/// in `apps`), and two private ones in `apps` (`b-user`, `gw-private`).
fn ordered_mesh() -> String {
    let http = "  http: [{route: [{destination: {host: example.com}}]}]\n";
    let public = format!("  hosts: [example.com]\n  gateways: [istio-system/gw, mesh]\n{http}");
    let private = format!("{public}  exportTo: [.]\n");
    format!(
        "{}{}{}{}",
        vs("a-user", "other", &public),
        vs("gw-route", "apps", &public),
        vs("b-user", "apps", &private),
        vs("gw-private", "apps", &private)
    )
}

#[test]
fn a_gateway_sees_the_gateway_api_routes_of_its_namespace_first_among_public_ones() {
    let yaml = ordered_mesh();
    let order = |ctx: &PushContext, ns: &str| -> Vec<String> {
        ctx.virtual_services_for_gateway_proxy("istio-system/gw", ns)
            .iter()
            .map(|(c, _)| c.name().to_string())
            .collect()
    };
    let ctx = context_marked(&yaml, mark);
    // The private group keeps its order; in the public one the proxy's namespace's route
    // comes first.
    assert_eq!(
        order(&ctx, "apps"),
        ["b-user", "gw-private", "gw-route", "a-user"]
    );
    assert_eq!(order(&ctx, "other"), ["a-user", "gw-route"]);
    let plain = crate::fixtures::context(&yaml);
    assert_eq!(
        order(&plain, "apps"),
        ["b-user", "gw-private", "a-user", "gw-route"]
    );
}

#[test]
fn a_sidecar_sees_the_gateway_api_routes_of_its_namespace_first_in_each_group() {
    let yaml = ordered_mesh();
    let order = |ctx: &PushContext| -> Vec<String> {
        ctx.in_proxy_order(&ctx.virtual_services.by_gateway["mesh"], "apps")
            .iter()
            .map(|c| c.name().to_string())
            .collect()
    };
    assert_eq!(
        order(&context_marked(&yaml, mark)),
        ["gw-private", "b-user", "gw-route", "a-user"]
    );
    assert_eq!(
        order(&crate::fixtures::context(&yaml)),
        ["b-user", "gw-private", "a-user", "gw-route"]
    );
}
