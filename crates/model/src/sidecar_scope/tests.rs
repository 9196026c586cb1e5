//! SidecarScope and ProxyNeedsPush: egress imports, host forms, pruning, inbound ports.

use std::collections::BTreeSet;
use std::time::Instant;

use super::*;
use crate::fixtures::{context, proxy};
use axon_config::config::ConfigKind;

fn service(ns: &str, name: &str, export: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
  exportTo: [\"{export}\"]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 10.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}]
  http: [{{route: [{{destination: {{host: {name}}}}}]}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: {name}, namespace: {ns}}}
spec:
  host: {name}
  subsets: [{{name: v1, labels: {{version: v1}}}}]
---
"
    )
}

const SIDECAR_A: &str = "apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - port: {number: 15123, protocol: HTTP, name: egress}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: [\"./*\"]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"]}]
";

fn mesh() -> String {
    format!(
        "{}{}{}{SIDECAR_A}",
        service("a", "reviews", "*"),
        service("b", "ratings", "*"),
        service("b", "secret", ".")
    )
}

fn hosts(scope: &SidecarScope) -> Vec<&str> {
    scope.services.iter().map(|s| s.hostname.as_str()).collect()
}

fn key(kind: ConfigKind, ns: &str, name: &str) -> ConfigKey {
    ConfigKey::new(kind, ns, name)
}

fn change(keys: &[ConfigKey]) -> PushRequest {
    PushRequest::config_change(
        keys.iter().cloned().collect::<BTreeSet<_>>(),
        Instant::now(),
    )
}

#[test]
fn sidecar_egress_hosts_restrict_what_a_proxy_sees() {
    let ctx = context(&mesh());
    let in_a = SidecarScope::compute(&ctx, &proxy("sidecar", "10.1.0.1", "a", &[]));
    assert_eq!(hosts(&in_a), ["reviews.a.svc.cluster.local"]);
    assert_eq!(in_a.sidecar, Some(key(ConfigKind::Sidecar, "a", "default")));
    let egress = in_a.egress_for_port(15123).expect("the declared listener");
    assert!(egress.capture_none);
    assert_eq!(egress.virtual_services.len(), 1);
    // Without a Sidecar, `*/*`; exportTo "." hides b's secret from c.
    let in_c = SidecarScope::compute(&ctx, &proxy("sidecar", "10.1.0.2", "c", &[]));
    assert_eq!(
        hosts(&in_c),
        ["ratings.b.svc.cluster.local", "reviews.a.svc.cluster.local"]
    );
    let in_b = SidecarScope::compute(&ctx, &proxy("sidecar", "10.1.0.3", "b", &[]));
    assert!(hosts(&in_b).contains(&"secret.b.svc.cluster.local"));
}

#[test]
fn host_import_forms() {
    let i = |r: &str| HostImport::parse(r, "a");
    assert!(i("./*").imports("a", "x.a.svc.cluster.local"));
    assert!(!i("./*").imports("b", "x.b.svc.cluster.local"));
    assert!(i("*/x.b.svc.cluster.local").imports("b", "x.b.svc.cluster.local"));
    assert!(i("b/*.example.com").imports("b", "api.example.com"));
    assert!(!i("~/*").imports("a", "x.a.svc.cluster.local"));
}

#[test]
fn proxy_needs_push_only_for_configs_it_depends_on() {
    let ctx = context(&mesh());
    let sidecar = proxy("sidecar", "10.1.0.1", "a", &[]);
    let gateway = proxy(
        "router",
        "10.2.0.1",
        "istio-system",
        &[("istio", "ingressgateway")],
    );
    let s = SidecarScope::compute(&ctx, &sidecar);
    let g = SidecarScope::compute(&ctx, &gateway);
    let vs_a = key(ConfigKind::VirtualService, "a", "reviews");
    let vs_b = key(ConfigKind::VirtualService, "b", "ratings");
    let dr_a = key(ConfigKind::DestinationRule, "a", "reviews");
    let gw = key(ConfigKind::Gateway, "istio-system", "gw");
    let sc = key(ConfigKind::Sidecar, "a", "default");
    assert!(needs_push(
        Some(&s),
        &s,
        &change(std::slice::from_ref(&vs_a))
    ));
    assert!(needs_push(Some(&s), &s, &change(&[dr_a])));
    assert!(
        !needs_push(Some(&s), &s, &change(std::slice::from_ref(&vs_b))),
        "b is not imported"
    );
    assert!(
        !needs_push(Some(&s), &s, &change(std::slice::from_ref(&gw))),
        "sidecars ignore Gateways"
    );
    assert!(needs_push(Some(&s), &s, &change(std::slice::from_ref(&sc))));
    assert!(needs_push(Some(&g), &g, &change(&[gw])));
    assert!(
        !needs_push(Some(&g), &g, &change(&[sc])),
        "gateways ignore Sidecars"
    );
    assert!(
        !needs_push(Some(&g), &g, &change(std::slice::from_ref(&vs_b))),
        "mesh VirtualServices"
    );
    let mut forced = change(&[vs_b]);
    forced.forced = true;
    assert!(needs_push(Some(&s), &s, &forced));
}

#[test]
fn inbound_ports_come_from_endpoints_at_the_proxy_ip() {
    let ctx = context(&mesh());
    let scope = SidecarScope::compute(&ctx, &proxy("sidecar", "10.0.0.1", "a", &[]));
    assert_eq!(
        scope.inbound,
        [InboundPort {
            port: 80,
            protocol: "HTTP".into(),
            // The original destination (the mesh's default inbound policy).
            endpoint: None,
            bind: None,
            // Three services on the port, none with a creation time: the first host.
            service: Some(("ratings.b.svc.cluster.local".into(), 80)),
            tls: None,
        }]
    );
}

#[test]
fn a_virtual_service_edit_keeps_the_scope_key_unless_its_source_labels_change() {
    let yaml = |weight_route: &str, source: &str| {
        format!(
            "{}apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: r, namespace: a}}
spec:
  hosts: [x]
  http:
  - match: [{{sourceLabels: {{app: {source}}}}}]
    route: [{{destination: {{host: {weight_route}}}}}]
",
            service("a", "x", "*")
        )
    };
    let mesh = Arc::default();
    let first = yaml("x", "web");
    let ctx1 = PushContext::build(
        None,
        &crate::fixtures::configs(&first),
        &PushRequest::full_push(crate::push_request::TriggerReason::Config, Instant::now()),
        &mesh,
    );
    let web = proxy("sidecar", "10.0.0.9", "a", &[("app", "web")]);
    let old = SidecarScope::of(&ctx1, &web);
    let edit = change(&[key(ConfigKind::VirtualService, "a", "r")]);
    let next =
        |yaml: &str| PushContext::build(Some(&ctx1), &crate::fixtures::configs(yaml), &edit, &mesh);
    // Another destination, the same sourceLabels: the old key, the new context's scope.
    let ctx2 = next(&yaml("x.a.svc.cluster.local", "web"));
    assert!(same_key_inputs(&ctx1, &ctx2));
    let moved = SidecarScope::next(Some((&ctx1, &old)), &ctx2, &web);
    assert_eq!(moved.key, scope_key(&ctx2, &web));
    assert!(
        Arc::ptr_eq(&moved, &SidecarScope::of(&ctx2, &web)),
        "shared"
    );
    assert!(!Arc::ptr_eq(&moved, &old), "computed in the new context");
    // Other sourceLabels: the key is computed again.
    let ctx3 = next(&yaml("x", "api"));
    assert!(!same_key_inputs(&ctx1, &ctx3));
    let moved = SidecarScope::next(Some((&ctx1, &old)), &ctx3, &web);
    assert_eq!(moved.key, scope_key(&ctx3, &web));
    assert_ne!(moved.key, old.key);
}

#[test]
fn tproxy_and_a_headless_endpoints_own_address_are_in_the_scope_key() {
    let ctx = context(&mesh());
    let node = |ip: &str, mode: &str| {
        Proxy::from_node(crate::proxy::NodeInfo {
            id: format!("sidecar~{ip}~pod-1.a~a.svc.cluster.local"),
            interception_mode: Some(mode.to_string()),
            ..Default::default()
        })
        .unwrap()
    };
    let (redirect, tproxy) = (node("10.9.0.1", "REDIRECT"), node("10.9.0.1", "TPROXY"));
    assert_ne!(scope_key(&ctx, &redirect), scope_key(&ctx, &tproxy));
    // Two proxies at addresses no headless service has share their scope.
    assert_eq!(
        scope_key(&ctx, &node("10.9.0.1", "REDIRECT")),
        scope_key(&ctx, &node("10.9.0.2", "REDIRECT"))
    );
    let headless = context(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: kafka, namespace: a}
spec:
  hosts: [kafka.a.svc.cluster.local]
  resolution: NONE
  ports: [{number: 9092, name: tcp, protocol: TCP}]
  workloadSelector: {labels: {app: kafka}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: k0, namespace: a}
spec: {address: 10.9.0.1, labels: {app: kafka}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: k1, namespace: a}
spec: {address: 10.9.0.2, labels: {app: kafka}}
",
    );
    assert_ne!(
        scope_key(&headless, &node("10.9.0.1", "REDIRECT")),
        scope_key(&headless, &node("10.9.0.2", "REDIRECT")),
        "each endpoint leaves its own address out of the headless listeners"
    );
}

#[test]
fn a_gateway_api_route_is_imported_only_within_an_egress_host() {
    // The Sidecar imports `a.example.com`; the route names `*.example.com`: a user's
    // VirtualService overlaps it and is imported, a Gateway API route is not within it
    // (istiod's `VSMatches` under gateway semantics: `SubsetOf`).
    let yaml = "apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: apps}
spec:
  egress: [{hosts: [\"*/a.example.com\", \"*/b.example.com\"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: wide, namespace: routes}
spec:
  hosts: [\"*.example.com\"]
  http: [{route: [{destination: {host: a.example.com}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: narrow, namespace: routes}
spec:
  hosts: [b.example.com]
  http: [{route: [{destination: {host: b.example.com}}]}]
";
    let imported = |ctx: &PushContext| -> Vec<String> {
        let scope = SidecarScope::compute(ctx, &proxy("sidecar", "10.0.0.5", "apps", &[]));
        scope.egress[0]
            .virtual_services
            .iter()
            .map(|c| c.name().to_string())
            .collect()
    };
    assert_eq!(imported(&context(yaml)), ["narrow", "wide"]);
    let marked = crate::fixtures::context_marked(yaml, |c| {
        if let axon_config::config::Spec::VirtualService(vs) = &mut c.spec {
            vs.semantics = axon_config::istio::RouteSemantics::Gateway;
        }
    });
    assert_eq!(imported(&marked), ["narrow"]);
}
