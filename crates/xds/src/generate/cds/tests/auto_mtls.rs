//! Auto mTLS as istiod decides it: a MESH_INTERNAL destination without a `tls` rule is
//! called with ISTIO_MUTUAL where its endpoint says `tlsMode: istio`, plaintext elsewhere; a
//! rule's `tls` wins; a namespace DISABLE, a MESH_EXTERNAL service, `enableAutoMtls: false`
//! or a passthrough service with an endpoint without the agent turn it off.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;

use super::*;
use axon_config::mesh::MeshConfig;
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

/// `svc.shop` (MESH_INTERNAL, `resolution`), endpoint 10.0.0.1 labelled `tlsMode: istio`,
/// endpoint 10.0.0.2 without, then `more` documents.
fn ctx_with(resolution: &str, more: &str, mesh: MeshConfig) -> PushContext {
    ctx_at("MESH_INTERNAL", resolution, more, mesh)
}

fn ctx_at(location: &str, resolution: &str, more: &str, mesh: MeshConfig) -> PushContext {
    build(&service(location, resolution, more), mesh)
}

fn build(yaml: &str, mesh: MeshConfig) -> PushContext {
    let req = PushRequest::full_push(TriggerReason::Config, std::time::Instant::now());
    PushContext::build(
        None,
        &axon_model::fixtures::configs(yaml),
        &req,
        &std::sync::Arc::new(mesh),
    )
}

fn service(location: &str, resolution: &str, more: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: svc, namespace: shop}}\nspec:\n  hosts: [svc.shop.svc.cluster.local]\n  location: {location}\n  resolution: {resolution}\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  endpoints:\n  - {{address: 10.0.0.1, labels: {{security.istio.io/tlsMode: istio}}, serviceAccount: svc}}\n  - {{address: 10.0.0.2}}\n{more}"
    )
}

fn sidecar() -> Proxy {
    let mut p = proxy("sidecar", "10.9.0.9", "client", &[]);
    p.istio_agent = true;
    p
}

fn cluster(ctx: &PushContext, proxy: &Proxy) -> Cluster {
    let scope = SidecarScope::compute(ctx, proxy);
    generate(ctx, proxy, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .find(|c| c.name == "outbound|80||svc.shop.svc.cluster.local")
        .expect("the service's cluster")
}

fn matches(c: &Cluster) -> Vec<String> {
    c.transport_socket_matches
        .iter()
        .map(|m| {
            format!(
                "{} {:?} {}",
                m.name,
                m.r#match
                    .as_ref()
                    .map(|s| s.fields.keys().collect::<Vec<_>>()),
                m.transport_socket.as_ref().unwrap().name
            )
        })
        .collect()
}

const PA_DISABLE: &str = "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: shop}\nspec: {mtls: {mode: DISABLE}}\n";

#[test]
fn by_default_istio_endpoints_get_mtls_and_the_rest_plaintext() {
    let c = cluster(&ctx_with("STATIC", "", MeshConfig::default()), &sidecar());
    assert!(c.transport_socket.is_none());
    assert_eq!(
        matches(&c),
        [
            "tlsMode-istio Some([\"tlsMode\"]) envoy.transport_sockets.tls",
            "tlsMode-disabled Some([]) envoy.transport_sockets.raw_buffer",
        ]
    );
    let Some(ConfigType::TypedConfig(any)) = c.transport_socket_matches[0]
        .transport_socket
        .clone()
        .unwrap()
        .config_type
    else {
        panic!()
    };
    let tls = UpstreamTlsContext::decode(any.value.as_ref()).unwrap();
    assert_eq!(tls.sni, "outbound_.80_._.svc.shop.svc.cluster.local");
    let text = format!("{tls:?}");
    assert!(
        text.contains("spiffe://cluster.local/ns/shop/sa/svc"),
        "{text}"
    );
    assert!(text.contains("istio-peer-exchange"), "{text}");
}

#[test]
fn the_endpoints_say_which_run_the_agent() {
    let ctx = ctx_with("STATIC", "", MeshConfig::default());
    let out = eds::generate(
        &ctx,
        None,
        &BTreeSet::from(["outbound|80||svc.shop.svc.cluster.local".to_string()]),
    );
    let assignment = envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment::decode(
        out[0].value.as_ref(),
    )
    .unwrap();
    let metadata: Vec<bool> = assignment.endpoints[0]
        .lb_endpoints
        .iter()
        .map(|e| {
            e.metadata.as_ref().is_some_and(|m| {
                format!("{m:?}").contains("envoy.transport_socket_match")
                    && format!("{m:?}").contains("istio")
            })
        })
        .collect();
    assert_eq!(metadata, [true, false]);
}

#[test]
fn a_rule_namespace_disable_external_or_mesh_switch_turns_it_off() {
    let plain = |c: &Cluster| c.transport_socket.is_none() && c.transport_socket_matches.is_empty();
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: dr, namespace: shop}\nspec: {host: svc.shop.svc.cluster.local, trafficPolicy: {tls: {mode: DISABLE}}}\n";
    assert!(plain(&cluster(
        &ctx_with("STATIC", dr, MeshConfig::default()),
        &sidecar()
    )));
    assert!(plain(&cluster(
        &ctx_with("STATIC", PA_DISABLE, MeshConfig::default()),
        &sidecar()
    )));
    let off = MeshConfig {
        enable_auto_mtls: false,
        ..MeshConfig::default()
    };
    assert!(plain(&cluster(&ctx_with("STATIC", "", off), &sidecar())));
    assert!(plain(&cluster(
        &ctx_at("MESH_EXTERNAL", "STATIC", "", MeshConfig::default()),
        &sidecar()
    )));
    // A rule's ISTIO_MUTUAL is the rule's: one TLS socket for every endpoint.
    let mutual = dr.replace("DISABLE", "ISTIO_MUTUAL");
    let c = cluster(
        &ctx_with("STATIC", &mutual, MeshConfig::default()),
        &sidecar(),
    );
    assert!(c.transport_socket.is_some() && c.transport_socket_matches.is_empty());
    // Without the agent: nothing to present, plaintext.
    let mut bare = sidecar();
    bare.istio_agent = false;
    assert!(plain(&cluster(
        &ctx_with("STATIC", "", MeshConfig::default()),
        &bare
    )));
}

#[test]
fn a_passthrough_service_needs_every_endpoint_to_run_the_agent() {
    // A PASSTHROUGH load balancer makes the cluster the original destination.
    let dr = "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: dr, namespace: shop}\nspec: {host: svc.shop.svc.cluster.local, trafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}}\n";
    // 10.0.0.2 has no agent: plaintext for all.
    let c = cluster(&ctx_with("STATIC", dr, MeshConfig::default()), &sidecar());
    assert!(c.transport_socket.is_none() && c.transport_socket_matches.is_empty());
    // Every endpoint with it: mTLS for every connection (no endpoints to match).
    let yaml = service("MESH_INTERNAL", "STATIC", dr).replace(
        "{address: 10.0.0.2}",
        "{address: 10.0.0.2, labels: {security.istio.io/tlsMode: istio}}",
    );
    let c = cluster(&build(&yaml, MeshConfig::default()), &sidecar());
    assert!(c.transport_socket.is_some() && c.transport_socket_matches.is_empty());
}
