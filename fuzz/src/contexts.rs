//! The push contexts the stream target pushes: one chain built once per process, each step a
//! context built from the previous one and the [`PushRequest`] that built it, as the
//! SnapshotBuilder makes them (versions only go forward).
//!
//! The mesh is the stream tests' (`src/xds/stream/tests.rs`: services a and b in `shop`, a
//! VirtualService splitting a's traffic) plus a Gateway for routers; the steps are the kinds of
//! push those tests drive: endpoints moved, a route's weight changed, an endpoint change that
//! changes nothing, a change out of every proxy's scope, a new service, a Sidecar, a forced
//! full push.

use std::collections::BTreeSet;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use axon_config::config::{ConfigKey, ConfigKind};
use axon_model::fixtures::configs;
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

/// One push: the context and the request that built it.
pub struct Step {
    pub ctx: Arc<PushContext>,
    pub request: PushRequest,
}

/// The mesh: SE a at `a_ip`, SE b, a VirtualService routing `weight` to a; with `c`, a third
/// service; with `sidecar`, a Sidecar in `shop` that sees only `./a` and istio-system.
fn mesh(a_ip: &str, weight: u32, c: bool, sidecar: bool) -> String {
    let entry = |name: &str, ip: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n  hosts: [{name}.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 9080, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {ip}}}]\n---\n"
        )
    };
    let mut yaml = entry("a", a_ip) + &entry("b", "10.0.0.2");
    if c {
        yaml += &entry("c", "10.0.0.3");
    }
    if sidecar {
        yaml += "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {name: default, namespace: shop}\nspec:\n  egress: [{hosts: [./a.shop.svc.cluster.local, istio-system/*]}]\n---\n";
    }
    yaml += "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: istio-system}\nspec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 8080, name: http, protocol: HTTP}, hosts: ['*']}]\n---\n";
    yaml += &format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: a, namespace: shop}}\nspec:\n  hosts: [a.shop.svc.cluster.local]\n  gateways: [mesh, istio-system/gw]\n  http:\n  - route:\n    - {{destination: {{host: a.shop.svc.cluster.local}}, weight: {weight}}}\n    - {{destination: {{host: b.shop.svc.cluster.local}}, weight: {}}}\n",
        100 - weight
    );
    yaml
}

fn key(kind: ConfigKind, ns: &str, name: &str) -> ConfigKey {
    ConfigKey::new(kind, ns, name)
}

fn build() -> Vec<Step> {
    let now = Instant::now();
    let keys = |ks: &[ConfigKey]| ks.iter().cloned().collect::<BTreeSet<_>>();
    let se = |n: &str| key(ConfigKind::ServiceEntry, "shop", n);
    let plan: Vec<(String, PushRequest)> = vec![
        (
            mesh("10.0.0.1", 100, false, false),
            PushRequest::full_push(TriggerReason::Config, now),
        ),
        (
            mesh("10.0.0.9", 100, false, false),
            PushRequest::endpoint_change(keys(&[se("a")]), now),
        ),
        (
            mesh("10.0.0.9", 60, false, false),
            PushRequest::config_change(keys(&[key(ConfigKind::VirtualService, "shop", "a")]), now),
        ),
        (
            mesh("10.0.0.9", 60, false, false),
            PushRequest::endpoint_change(keys(&[se("b")]), now),
        ),
        (
            mesh("10.0.0.9", 60, false, false),
            PushRequest::config_change(
                keys(&[key(ConfigKind::VirtualService, "elsewhere", "x")]),
                now,
            ),
        ),
        (
            mesh("10.0.0.9", 60, true, false),
            PushRequest::config_change(keys(&[se("c")]), now),
        ),
        (
            mesh("10.0.0.9", 60, true, true),
            PushRequest::config_change(keys(&[key(ConfigKind::Sidecar, "shop", "default")]), now),
        ),
        (
            mesh("10.0.0.1", 30, true, true),
            PushRequest::full_push(TriggerReason::Forced, now),
        ),
    ];
    let mut steps: Vec<Step> = Vec::new();
    for (yaml, request) in plan {
        let prev = steps.last().map(|s| s.ctx.clone());
        let mesh_config = prev.as_ref().map(|p| p.mesh.clone()).unwrap_or_default();
        let ctx = PushContext::build(prev.as_deref(), &configs(&yaml), &request, &mesh_config);
        steps.push(Step {
            ctx: Arc::new(ctx),
            request,
        });
    }
    steps
}

/// The chain, built on first use.
pub fn chain() -> &'static [Step] {
    static CHAIN: LazyLock<Vec<Step>> = LazyLock::new(build);
    &CHAIN
}
