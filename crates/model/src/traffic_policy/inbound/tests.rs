//! The inbound cluster's connection pool against istiod's `buildInboundCluster`: the
//! DestinationRule of the port's primary service (port-level entry wholesale, no
//! `workloadSelector`, only for a service in scope), the mesh's default, and the Sidecar's
//! ingress listener pool, then its `inboundConnectionPool`, over both.

use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::fixtures::{configs, context, proxy};
use crate::push_request::{PushRequest, TriggerReason};
use axon_config::mesh::MeshConfig;

/// `app.shop` (port 80 → 8080 on the proxy's IP) and, when `more` adds them, other configs.
fn mesh(more: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: app, namespace: shop}}
spec:
  hosts: [app.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP, targetPort: 8080}}]
  endpoints: [{{address: 10.0.0.5}}]
---
{more}"
    )
}

const RULE: &str = "apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: app, namespace: shop}
spec:
  host: app.shop.svc.cluster.local
  trafficPolicy:
    connectionPool: {http: {http1MaxPendingRequests: 1}}
    retryBudget: {percent: 10}
";

/// The policy of the proxy's inbound cluster on `port`.
fn policy_in(ctx: &PushContext, port: u32) -> InboundPolicy {
    let p = proxy("sidecar", "10.0.0.5", "shop", &[("app", "app")]);
    let scope = SidecarScope::compute(ctx, &p);
    let inbound = scope
        .inbound
        .iter()
        .find(|i| i.port == port)
        .unwrap_or_else(|| panic!("no inbound port {port}: {:?}", scope.inbound));
    inbound_policy(ctx, &p, &scope, inbound)
}

fn pending(p: &InboundPolicy) -> Option<i64> {
    p.connection_pool
        .as_ref()?
        .http
        .as_ref()?
        .http1_max_pending_requests
}

fn max_connections(p: &InboundPolicy) -> Option<i64> {
    p.connection_pool.as_ref()?.tcp.as_ref()?.max_connections
}

#[test]
fn the_rule_of_the_proxys_own_service_gives_its_pool() {
    let got = policy_in(&context(&mesh(RULE)), 8080);
    assert_eq!(pending(&got), Some(1));
    assert_eq!(got.retry_budget.and_then(|b| b.percent), Some(10.0));
    // No rule: istiod's empty pool.
    assert_eq!(
        policy_in(&context(&mesh("")), 8080),
        InboundPolicy::default()
    );
}

#[test]
fn a_port_entry_for_the_service_port_replaces_the_rules_policy() {
    let rule = format!(
        "{RULE}    portLevelSettings:\n    - port: {{number: 80}}\n      connectionPool: {{tcp: {{maxConnections: 3}}}}\n"
    );
    let got = policy_in(&context(&mesh(&rule)), 8080);
    assert_eq!(max_connections(&got), Some(3));
    assert_eq!(pending(&got), None);
    // Not inherited: a port entry has no retry budget.
    assert_eq!(got.retry_budget, None);
    // An entry for the workload port (not the service port) does not apply.
    let rule = rule.replace("number: 80}", "number: 8080}");
    assert_eq!(pending(&policy_in(&context(&mesh(&rule)), 8080)), Some(1));
}

#[test]
fn a_rule_with_a_workload_selector_never_applies_inbound() {
    let rule = RULE.replace(
        "  host: app.shop.svc.cluster.local\n",
        "  host: app.shop.svc.cluster.local\n  workloadSelector: {matchLabels: {app: app}}\n",
    );
    assert_eq!(
        policy_in(&context(&mesh(&rule)), 8080),
        InboundPolicy::default()
    );
}

#[test]
fn only_a_service_in_the_proxys_scope_gives_its_rule() {
    let sidecar = "apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress: [{hosts: [\"other/*\"]}]
---
";
    let ctx = context(&mesh(&format!("{sidecar}{RULE}")));
    assert_eq!(policy_in(&ctx, 8080), InboundPolicy::default());
}

#[test]
fn the_oldest_service_on_the_port_is_the_primary_one() {
    let newer = "apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: newer, namespace: shop, creationTimestamp: '2026-12-02T10:00:00Z'}
spec:
  hosts: [aaa.shop.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 90, name: http, protocol: HTTP, targetPort: 8080}]
  endpoints: [{address: 10.0.0.5}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: newer, namespace: shop}
spec:
  host: aaa.shop.svc.cluster.local
  trafficPolicy: {connectionPool: {tcp: {maxConnections: 9}}}
---
";
    // `app` has no timestamp (Go's zero time): it comes first, though `aaa` sorts first.
    let got = policy_in(&context(&mesh(&format!("{newer}{RULE}"))), 8080);
    assert_eq!((pending(&got), max_connections(&got)), (Some(1), None));
    // Both with one: the older.
    let app_older = mesh(&format!("{newer}{RULE}")).replace(
        "metadata: {name: app, namespace: shop}\nspec:\n  hosts",
        "metadata: {name: app, namespace: shop, creationTimestamp: '2026-12-03T10:00:00Z'}\nspec:\n  hosts",
    );
    let got = policy_in(&context(&app_older), 8080);
    assert_eq!((pending(&got), max_connections(&got)), (None, Some(9)));
}

#[test]
fn the_sidecars_pools_win_the_ingress_listeners_first() {
    let sidecar = |spec: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: shop}}\nspec:\n{spec}---\n{RULE}"
        )
    };
    // `inboundConnectionPool` over the rule, for every inbound port.
    let ctx = context(&mesh(&sidecar(
        "  inboundConnectionPool: {tcp: {maxConnections: 5}}\n",
    )));
    let got = policy_in(&ctx, 8080);
    assert_eq!((pending(&got), max_connections(&got)), (None, Some(5)));
    // The rule's retry budget stays (istiod replaces the pool only).
    assert_eq!(got.retry_budget.and_then(|b| b.percent), Some(10.0));
    // An ingress listener's own pool over `inboundConnectionPool`, on its port only.
    let ctx = context(&mesh(&sidecar(
        "  inboundConnectionPool: {tcp: {maxConnections: 5}}\n  ingress:\n  - {port: {number: 9080, protocol: HTTP, name: a}, defaultEndpoint: 127.0.0.1:8080, connectionPool: {tcp: {maxConnections: 7}}}\n  - {port: {number: 9081, protocol: HTTP, name: b}, defaultEndpoint: 127.0.0.1:8081}\n",
    )));
    assert_eq!(max_connections(&policy_in(&ctx, 9080)), Some(7));
    assert_eq!(max_connections(&policy_in(&ctx, 9081)), Some(5));
}

#[test]
fn the_meshs_default_pool_where_the_rule_sets_none() {
    let mesh_config = MeshConfig {
        default_connection_pool: Some(ConnectionPoolSettings {
            tcp: Some(axon_config::istio::traffic_policy::TcpSettings {
                max_connections: Some(4),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let build = |yaml: &str| {
        let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
        PushContext::build(None, &configs(yaml), &req, &Arc::new(mesh_config.clone()))
    };
    let got = policy_in(&build(&mesh("")), 8080);
    assert_eq!(max_connections(&got), Some(4));
    // A rule's pool replaces the default whole.
    let got = policy_in(&build(&mesh(RULE)), 8080);
    assert_eq!((pending(&got), max_connections(&got)), (Some(1), None));
}
