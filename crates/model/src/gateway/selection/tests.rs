use super::*;
use crate::fixtures::{context_marked, proxy};
use crate::sidecar_scope::SidecarScope;
use axon_config::config::Spec;

/// A Gateway `gw` in `default` with an HTTP server on 80 and one on 8443, whose selector
/// picks `istio: ingressgateway`.
const GATEWAY: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: default}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - {port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}\n  - {port: {number: 8443, name: http-alt, protocol: HTTP}, hosts: ['*']}\n";

const HOST: &str = "gw-istio.default.svc.cluster.local";

/// A Service `HOST` in `ns` with port 80 (`http`) at `10.0.0.9`, its endpoint on `target`.
fn service(name: &str, ns: &str, host: &str, target: u32) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  hosts: [{host}]\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  endpoints: [{{address: 10.0.0.9, ports: {{http: {target}}}}}]\n---\n"
    )
}

/// The context of `yaml` with `gw` marked as made from Gateway API Gateway `gw`.
fn marked(yaml: &str, services: &[&str], managed: bool) -> PushContext {
    context_marked(yaml, |c| {
        if let Spec::Gateway(g) = &mut c.spec {
            g.gateway_api = Some(GatewayApiSelection {
                gateway_name: "gw".into(),
                services: services.iter().map(|s| s.to_string()).collect(),
                managed,
                service_account: Some("gw-istio".into()),
            });
        }
    })
}

/// `(gateway key, the listen ports of server ports 80 and 8443)` per selected Gateway.
fn selected(ctx: &PushContext, p: &Proxy) -> Vec<(String, Vec<u32>, Vec<u32>)> {
    gateways_for(ctx, p)
        .iter()
        .map(|s| {
            (
                s.config.name().to_string(),
                s.listen_ports(80),
                s.listen_ports(8443),
            )
        })
        .collect()
}

fn router(ns: &str, labels: &[(&str, &str)]) -> Proxy {
    proxy("router", "10.0.0.9", ns, labels)
}

#[test]
fn a_users_gateway_is_selected_by_its_selector() {
    let ctx = crate::fixtures::context(&format!(
        "{}{GATEWAY}",
        service("svc", "default", HOST, 8080)
    ));
    let p = router("default", &[("istio", "ingressgateway")]);
    assert_eq!(selected(&ctx, &p), [("gw".into(), vec![8080], vec![8443])]);
    assert!(selected(&ctx, &router("default", &[])).is_empty());
}

#[test]
fn a_gateway_api_gateway_ignores_its_selector() {
    let ctx = marked(GATEWAY, &[HOST], true);
    let p = router("default", &[("istio", "ingressgateway")]);
    assert!(selected(&ctx, &p).is_empty());
}

#[test]
fn an_endpoint_of_its_service_serves_it_on_the_services_ports_only() {
    let ctx = marked(
        &format!("{}{GATEWAY}", service("svc", "default", HOST, 8080)),
        &[HOST],
        false,
    );
    // No selector label: found by its Service. 8443 is not a port of the Service: no
    // listener (a label-selected Gateway would listen on it as is).
    let p = router("istio-system", &[]);
    assert_eq!(selected(&ctx, &p), [("gw".into(), vec![8080], vec![])]);
    let merged = super::super::merge(&ctx, &p);
    let ports: Vec<u32> = merged.ports.iter().map(|m| m.port.number).collect();
    assert_eq!(ports, [8080]);
    assert_eq!(
        merged.by_route_name.keys().collect::<Vec<_>>(),
        ["http.8080"]
    );
}

#[test]
fn a_service_port_maps_to_every_target_port_of_its_services() {
    let other = "gw-alt.default.svc.cluster.local";
    let yaml = format!(
        "{}{}{GATEWAY}",
        service("svc", "default", HOST, 8080),
        service("alt", "default", other, 9080)
    );
    let ctx = marked(&yaml, &[HOST, other], false);
    assert_eq!(
        selected(&ctx, &router("default", &[])),
        [("gw".into(), vec![8080, 9080], vec![])]
    );
    // Only the Services it names: `alt` unnamed, 80 maps to 8080 alone.
    let ctx = marked(&yaml, &[HOST], false);
    assert_eq!(
        selected(&ctx, &router("default", &[])),
        [("gw".into(), vec![8080], vec![])]
    );
}

#[test]
fn a_service_of_another_namespace_does_not_select() {
    // The host is the Gateway's Service's, declared in another namespace.
    let ctx = marked(
        &format!("{}{GATEWAY}", service("svc", "other", HOST, 8080)),
        &[HOST],
        false,
    );
    assert!(selected(&ctx, &router("default", &[])).is_empty());
}

#[test]
fn a_managed_gateway_takes_its_labelled_proxies_in_its_namespace_with_ports_as_is() {
    let ctx = marked(GATEWAY, &[HOST], true);
    let labelled = [(GATEWAY_NAME_LABEL, "gw")];
    assert_eq!(
        selected(&ctx, &router("default", &labelled)),
        [("gw".into(), vec![80], vec![8443])]
    );
    assert!(selected(&ctx, &router("other", &labelled)).is_empty());
    assert!(selected(&ctx, &router("default", &[(GATEWAY_NAME_LABEL, "x")])).is_empty());
    // A manual deployment is found by its Services only.
    let manual = marked(GATEWAY, &[HOST], false);
    assert!(selected(&manual, &router("default", &labelled)).is_empty());
}

#[test]
fn the_scope_of_a_proxy_depends_on_the_gateways_it_serves() {
    let ctx = marked(GATEWAY, &[HOST], true);
    let key = axon_config::config::ConfigKey::new(
        axon_config::config::ConfigKind::Gateway,
        "default",
        "gw",
    );
    let serving = router("default", &[(GATEWAY_NAME_LABEL, "gw")]);
    let scope = SidecarScope::compute(&ctx, &serving);
    assert!(scope.deps.contains(&key), "{:?}", scope.deps);
    let other = router("default", &[("istio", "ingressgateway")]);
    let scope_other = SidecarScope::compute(&ctx, &other);
    assert!(!scope_other.deps.contains(&key));
    assert_ne!(scope.key, scope_other.key);
}
