//! Generator tests for sidecars: listeners by Sidecar resource, routes and clusters, and
//! endpoint-only contexts.

use super::*;

const SIDECAR_MESH: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: shop}
spec:
  egress:
  - port: {number: 15123, protocol: HTTP, name: egress}
    captureMode: NONE
    hosts: ["./*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-mesh, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews, subset: v2}}]
"#;

fn sidecar_proxy(ip: &str, namespace: &str, interception_none: bool) -> Proxy {
    let mut p = axon_model::fixtures::proxy("sidecar", ip, namespace, &[]);
    p.interception_none = interception_none;
    p
}

#[test]
fn sidecar_listeners_follow_the_sidecar_resource() {
    let ctx = context(&format!("{MESH}---{SIDECAR_MESH}"));
    let listener_names = |p: &Proxy| -> Vec<String> {
        decode::<Listener>(&generate_for(ResourceType::Listener, &ctx, p, &names(&[])))
            .into_iter()
            .map(|l| l.name)
            .collect()
    };
    // In shop, the Sidecar declares one egress listener, on a port no service has: as
    // istiod (`serviceMatchingListenerPort`), it takes no service, so there is no listener.
    assert_eq!(
        listener_names(&sidecar_proxy("10.9.0.1", "shop", true)),
        Vec::<String>::new()
    );
    // Declared on the services' port: bound, on localhost.
    let on_9080 = context(&format!(
        "{MESH}---{}",
        SIDECAR_MESH.replace("15123", "9080")
    ));
    let names_9080: Vec<String> = decode::<Listener>(&generate_for(
        ResourceType::Listener,
        &on_9080,
        &sidecar_proxy("10.9.0.1", "shop", true),
        &names(&[]),
    ))
    .into_iter()
    .map(|l| l.name)
    .collect();
    assert_eq!(names_9080, ["127.0.0.1_9080"]);
    // Elsewhere, no Sidecar: a listener per HTTP service port, and the capture listeners.
    assert_eq!(
        listener_names(&sidecar_proxy("10.9.0.1", "web", false)),
        ["0.0.0.0_9080", "virtualOutbound", "virtualInbound"]
    );
    let bound = decode::<Listener>(&generate_for(
        ResourceType::Listener,
        &ctx,
        &sidecar_proxy("10.9.0.1", "web", false),
        &names(&[]),
    ));
    assert_eq!(
        bound[0].bind_to_port.map(|b| b.value),
        Some(false),
        "outbound listeners are not bound"
    );
}

#[test]
fn sidecar_routes_and_clusters() {
    let proxy = sidecar_proxy("10.0.0.1", "shop", true);
    // As istiod (`serviceMatchingListenerPort`): a declared egress listener serves only the
    // services with its port; none has 15123.
    let ctx = context(&format!("{MESH}---{SIDECAR_MESH}"));
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["15123"]),
    ));
    let vh_names: Vec<&str> = routes[0]
        .virtual_hosts
        .iter()
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(vh_names, ["allow_any"]);
    // Declared on 9080, it serves both.
    let ctx = context(&format!(
        "{MESH}---{}",
        SIDECAR_MESH.replace("15123", "9080")
    ));
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&["9080"]),
    ));
    let vh = &routes[0].virtual_hosts;
    let vh_names: Vec<&str> = vh.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        vh_names,
        [
            "ratings.shop.svc.cluster.local:9080",
            "reviews.shop.svc.cluster.local:9080",
            "allow_any"
        ]
    );
    // As istiod for an Envoy sidecar: domains without a port, the port ignored.
    assert_eq!(
        vh[1].domains,
        [
            "reviews.shop.svc.cluster.local",
            "reviews.shop.svc",
            "reviews.shop",
            "reviews"
        ]
    );
    assert!(routes[0].ignore_port_in_host_matching);
    let Some(Action::Route(action)) = &vh[1].routes[0].action else {
        panic!("a route")
    };
    assert_eq!(
        action.cluster_specifier,
        Some(ClusterSpecifier::Cluster(
            "outbound|9080|v2|reviews.shop.svc.cluster.local".into()
        )),
        "routed by the mesh VirtualService"
    );
    let clusters: Vec<String> = decode::<Cluster>(&generate_for(
        ResourceType::Cluster,
        &ctx,
        &proxy,
        &names(&[]),
    ))
    .into_iter()
    .map(|c| c.name)
    .collect();
    assert!(clusters.contains(&"PassthroughCluster".to_string()));
    assert!(
        clusters.contains(&"inbound|9081||".to_string()),
        "10.0.0.1 is a reviews endpoint: {clusters:?}"
    );
}

#[test]
fn endpoint_changes_are_seen_per_watched_cluster() {
    let before = context(MESH);
    let after = context(&MESH.replace("10.0.1.1", "10.0.1.2"));
    let ratings = names(&["outbound|9080||ratings.shop.svc.cluster.local"]);
    let reviews = names(&["outbound|9080|v1|reviews.shop.svc.cluster.local"]);
    use axon_model::push_context::changed_clusters;
    assert_eq!(changed_clusters(&before, &after, &ratings), ratings);
    assert!(changed_clusters(&before, &after, &reviews).is_empty());
}

#[test]
fn an_endpoint_change_of_one_subset_leaves_the_other_subsets_alone() {
    use axon_config::config::{ConfigKey, ConfigKind};
    use axon_model::push_context::changed_clusters;
    let v1 = "outbound|9080|v1|reviews.shop.svc.cluster.local";
    let v2 = "outbound|9080|v2|reviews.shop.svc.cluster.local";
    let all = "outbound|9080||reviews.shop.svc.cluster.local";
    let watched = names(&[v1, v2, all]);
    let moved = MESH.replace("10.0.0.2", "10.0.0.3");
    // Compared cluster by cluster (contexts built independently) ...
    let before = context(MESH);
    assert_eq!(
        changed_clusters(&before, &context(&moved), &watched),
        names(&[v2, all])
    );
    // ... and from the differences an endpoint-only context records.
    let keys = BTreeSet::from([ConfigKey::new(ConfigKind::ServiceEntry, "shop", "reviews")]);
    let request = PushRequest::endpoint_change(keys, Instant::now());
    let after = PushContext::build(Some(&before), &configs(&moved), &request, &before.mesh);
    assert_eq!(
        changed_clusters(&before, &after, &watched),
        names(&[v2, all])
    );
    assert!(changed_clusters(&before, &after, &names(&[v1])).is_empty());
}

#[test]
fn an_endpoint_change_recomputes_only_the_changed_services() {
    let mesh = Arc::default();
    let before = configs(MESH);
    let first = PushContext::build(
        None,
        &before,
        &PushRequest::full_push(TriggerReason::Config, Instant::now()),
        &mesh,
    );
    let after = configs(&MESH.replace("10.0.0.2", "10.0.0.3"));
    let key = axon_config::config::ConfigKey::new(
        axon_config::config::ConfigKind::ServiceEntry,
        "shop",
        "reviews",
    );
    let req = PushRequest::endpoint_change(BTreeSet::from([key]), Instant::now());
    let next = PushContext::build(Some(&first), &after, &req, &mesh);
    let scratch = context(&MESH.replace("10.0.0.2", "10.0.0.3"));
    assert_eq!(
        next.endpoints.by_service_port, scratch.endpoints.by_service_port,
        "the same endpoints as a rebuild from scratch"
    );
    assert_eq!(next.endpoints.by_address, scratch.endpoints.by_address);
    let ratings = ("ratings.shop.svc.cluster.local".to_string(), 9080);
    assert!(
        Arc::ptr_eq(
            &first.endpoints.by_service_port[&ratings],
            &next.endpoints.by_service_port[&ratings]
        ),
        "an unchanged service's endpoints are shared"
    );
    assert!(Arc::ptr_eq(&first.services, &next.services));
    assert_eq!(
        next.endpoint_changes.as_deref(),
        Some(&BTreeSet::from([(
            "reviews.shop.svc.cluster.local".to_string(),
            9080
        )]))
    );
}

#[test]
fn static_type_urls_are_the_protos_own() {
    use prost::Name;
    assert_eq!(ResourceType::Cluster.as_str(), Cluster::type_url());
    assert_eq!(
        ResourceType::Endpoint.as_str(),
        ClusterLoadAssignment::type_url()
    );
    assert_eq!(ResourceType::Listener.as_str(), Listener::type_url());
    assert_eq!(ResourceType::Route.as_str(), RouteConfiguration::type_url());
    assert_eq!(
        ResourceType::Secret.as_str(),
        envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret::type_url()
    );
    for t in ResourceType::PUSH_ORDER {
        assert_eq!(ResourceType::parse(t.as_str()), Some(t));
    }
}

#[test]
fn a_proxy_that_skipped_a_context_sees_every_endpoint_change() {
    use axon_config::config::{ConfigKey, ConfigKind};
    use axon_model::push_context::changed_clusters;
    let mesh = Arc::default();
    let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let v1 = PushContext::build(None, &configs(MESH), &full, &mesh);
    let reviews_moved = MESH.replace("10.0.0.2", "10.0.0.3");
    let eds = |kind, name: &str| {
        PushRequest::endpoint_change(
            BTreeSet::from([ConfigKey::new(kind, "shop", name)]),
            Instant::now(),
        )
    };
    let v2 = PushContext::build(
        Some(&v1),
        &configs(&reviews_moved),
        &eds(ConfigKind::ServiceEntry, "reviews"),
        &mesh,
    );
    let both_moved = reviews_moved.replace("10.0.1.1", "10.0.1.2");
    let v3 = PushContext::build(
        Some(&v2),
        &configs(&both_moved),
        &eds(ConfigKind::WorkloadEntry, "ratings-1"),
        &mesh,
    );
    let watched = names(&[
        "outbound|9080||ratings.shop.svc.cluster.local",
        "outbound|9080|v2|reviews.shop.svc.cluster.local",
    ]);
    assert_eq!(
        changed_clusters(&v2, &v3, &watched),
        names(&["outbound|9080||ratings.shop.svc.cluster.local"])
    );
    assert_eq!(
        changed_clusters(&v1, &v3, &watched),
        watched,
        "from v1, the change made in v2 counts too"
    );
}

#[test]
fn an_endpoint_only_context_keeps_a_proxys_scope_unless_its_own_ports_moved() {
    use axon_config::config::{ConfigKey, ConfigKind};
    let mesh = Arc::default();
    let full = PushRequest::full_push(TriggerReason::Config, Instant::now());
    let v1 = PushContext::build(None, &configs(MESH), &full, &mesh);
    let eds = PushRequest::endpoint_change(
        BTreeSet::from([ConfigKey::new(ConfigKind::ServiceEntry, "shop", "reviews")]),
        Instant::now(),
    );
    // 10.0.0.2 moves; the proxy at 10.0.0.1 (a reviews endpoint) keeps its ports.
    let moved = MESH.replace("10.0.0.2", "10.0.0.3");
    let v2 = PushContext::build(Some(&v1), &configs(&moved), &eds, &mesh);
    let proxy = sidecar_proxy("10.0.0.1", "shop", false);
    let scope = SidecarScope::of(&v1, &proxy);
    assert!(Arc::ptr_eq(
        &SidecarScope::next(Some((&v1, &scope)), &v2, &proxy),
        &scope
    ));
    // Its own endpoint's port changes: recomputed.
    let ported = moved.replace("ports: {http: 9081}", "ports: {http: 9082}");
    let v3 = PushContext::build(Some(&v2), &configs(&ported), &eds, &mesh);
    let next = SidecarScope::next(Some((&v2, &scope)), &v3, &proxy);
    assert!(!Arc::ptr_eq(&next, &scope));
    assert_eq!(next.inbound, SidecarScope::compute(&v3, &proxy).inbound);
    // A context skipped in between: recomputed.
    assert!(!Arc::ptr_eq(
        &SidecarScope::next(Some((&v1, &scope)), &v3, &proxy),
        &scope
    ));
}

#[test]
fn registry_only_replaces_allow_any_with_block_all() {
    let policy = |mode: &str| {
        format!(
            "{MESH}---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: web}}\nspec:\n  outboundTrafficPolicy: {{mode: {mode}}}\n"
        )
    };
    let last_vhost = |yaml: &str| {
        let ctx = context(yaml);
        let proxy = sidecar_proxy("10.9.0.1", "web", false);
        let routes: Vec<RouteConfiguration> = decode(&generate_for(
            ResourceType::Route,
            &ctx,
            &proxy,
            &names(&["9080"]),
        ));
        let vh = routes[0].virtual_hosts.clone();
        assert!(vh.len() > 1, "the services are still routed: {vh:?}");
        vh.last().cloned().unwrap()
    };
    let blocked = last_vhost(&policy("REGISTRY_ONLY"));
    assert_eq!(blocked.name, "block_all");
    assert_eq!(blocked.domains, ["*"]);
    match &blocked.routes[0].action {
        Some(Action::DirectResponse(d)) => assert_eq!(d.status, 502),
        other => panic!("{other:?}"),
    }
    let open = last_vhost(&policy("ALLOW_ANY"));
    assert_eq!(open.name, "allow_any");
    match &open.routes[0].action {
        Some(Action::Route(r)) => assert_eq!(
            r.cluster_specifier,
            Some(ClusterSpecifier::Cluster("PassthroughCluster".into()))
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn sidecar_ingress_listeners_build_the_inbound_side() {
    let sidecar = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: web}
spec:
  ingress:
  - port: {number: 9180, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
    captureMode: NONE
    bind: 127.0.0.1
  - port: {number: 9190, protocol: TCP, name: tcp}
"#;
    let ctx = context(&format!("{MESH}---{sidecar}"));
    let proxy = sidecar_proxy("10.9.0.1", "web", false);
    let listeners: Vec<Listener> = decode(&generate_for(
        ResourceType::Listener,
        &ctx,
        &proxy,
        &names(&[]),
    ));
    let bound = listeners
        .iter()
        .find(|l| l.name == "127.0.0.1_9180")
        .expect("the bound ingress listener");
    assert_eq!(bound.bind_to_port, None);
    assert_eq!(
        bound.filter_chains[0].filters[0].name,
        "envoy.filters.network.http_connection_manager"
    );
    let inbound = listeners
        .iter()
        .find(|l| l.name == "virtualInbound")
        .unwrap();
    let chains: Vec<&str> = inbound
        .filter_chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        chains,
        [
            "virtualInbound-blackhole",
            "virtualInbound-catchall-http",
            "virtualInbound",
            "0.0.0.0_9190"
        ]
    );

    let clusters: Vec<Cluster> = decode(&generate_for(
        ResourceType::Cluster,
        &ctx,
        &proxy,
        &names(&[]),
    ));
    let cluster = |name: &str| clusters.iter().find(|c| c.name == name).cloned().unwrap();
    let local = cluster("inbound|9180||");
    let endpoint = format!("{:?}", local.load_assignment);
    assert!(
        endpoint.contains("127.0.0.1") && endpoint.contains("8080"),
        "{endpoint}"
    );
    use envoy_types::pb::envoy::config::cluster::v3::cluster::{
        ClusterDiscoveryType, DiscoveryType,
    };
    assert_eq!(
        cluster("inbound|9190||").cluster_discovery_type,
        Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32
        ))
    );
}
