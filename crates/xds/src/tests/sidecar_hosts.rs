//! Sidecar RDS for VirtualService hosts that are no service on the listener's port, as
//! istiod's `BuildSidecarOutboundVirtualHosts` / `separateVSHostsAndServices` treat them.

use envoy_types::pb::envoy::config::route::v3::VirtualHost;

use super::*;

/// Namespace `a`: `web` on port 80, `backend` on 8080, both HTTP.
const SERVICES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: web, namespace: a}
spec:
  hosts: [web.a.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.1}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: a}
spec:
  hosts: [backend.a.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.2}]
"#;

fn vs(name: &str, hosts: &str, extra: &str) -> String {
    format!(
        "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: a}}\nspec:\n  hosts: {hosts}\n  http:\n  - {extra}route: [{{destination: {{host: backend, port: {{number: 8080}}}}}}]\n"
    )
}

/// The virtual hosts of route configuration `port` for a sidecar in `a`.
fn vhosts(yaml: &str, port: &str) -> Vec<VirtualHost> {
    let ctx = context(&format!("{SERVICES}{yaml}"));
    let proxy = axon_model::fixtures::proxy("sidecar", "10.1.0.1", "a", &[]);
    let routes: Vec<RouteConfiguration> = decode(&generate_for(
        ResourceType::Route,
        &ctx,
        &proxy,
        &names(&[port]),
    ));
    routes.into_iter().next().unwrap().virtual_hosts
}

fn vhost_names(v: &[VirtualHost]) -> Vec<&str> {
    v.iter().map(|v| v.name.as_str()).collect()
}

fn cluster_of(v: &VirtualHost) -> String {
    match &v.routes[0].action {
        Some(Action::Route(a)) => match &a.cluster_specifier {
            Some(ClusterSpecifier::Cluster(c)) => c.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_host_that_is_no_service_gets_a_virtual_host_on_port_80_only() {
    let yaml = vs("api", "[api.example.com]", "");
    let on_80 = vhosts(&yaml, "80");
    assert_eq!(
        vhost_names(&on_80),
        [
            "api.example.com:80",
            "web.a.svc.cluster.local:80",
            "allow_any"
        ]
    );
    assert_eq!(on_80[0].domains, ["api.example.com"], "the host alone");
    assert_eq!(
        cluster_of(&on_80[0]),
        "outbound|8080||backend.a.svc.cluster.local"
    );
    // On 8080 the VirtualService names no service there: istiod leaves it out.
    assert_eq!(
        vhost_names(&vhosts(&yaml, "8080")),
        ["backend.a.svc.cluster.local:8080", "allow_any"]
    );
}

#[test]
fn such_a_host_follows_its_virtual_service_to_the_ports_of_its_services() {
    // With a service on 8080, its other host is served there too; on 80, backend (no
    // service on 80) is itself such a host, by its full name, as in istiod.
    let yaml = vs("api", "[api.example.com, backend]", "");
    let on_8080 = vhosts(&yaml, "8080");
    assert_eq!(
        vhost_names(&on_8080),
        [
            "api.example.com:8080",
            "backend.a.svc.cluster.local:8080",
            "allow_any"
        ]
    );
    assert_eq!(on_8080[0].domains, ["api.example.com"]);
    assert_eq!(
        vhost_names(&vhosts(&yaml, "80")),
        [
            "api.example.com:80",
            "backend.a.svc.cluster.local:80",
            "web.a.svc.cluster.local:80",
            "allow_any"
        ]
    );
}

#[test]
fn a_wildcard_matching_no_service_is_such_a_host_and_one_matching_a_service_is_not() {
    let yaml = vs("wild", "[\"*.example.com\"]", "");
    let on_80 = vhosts(&yaml, "80");
    assert_eq!(on_80[0].name, "*.example.com:80");
    assert_eq!(on_80[0].domains, ["*.example.com"]);
    assert!(!vhost_names(&vhosts(&yaml, "8080")).contains(&"*.example.com:8080"));

    // `*.a.svc.cluster.local` matches web on 80: it routes web, and makes no host of its own.
    let yaml = vs("wild", "[\"*.a.svc.cluster.local\"]", "");
    let on_80 = vhosts(&yaml, "80");
    assert_eq!(
        vhost_names(&on_80),
        ["web.a.svc.cluster.local:80", "allow_any"]
    );
    assert_eq!(
        cluster_of(&on_80[0]),
        "outbound|8080||backend.a.svc.cluster.local"
    );
}

#[test]
fn a_virtual_service_with_no_route_for_the_proxy_makes_no_such_host() {
    let yaml = vs(
        "api",
        "[api.example.com]",
        "match: [{sourceLabels: {app: other}}]\n    ",
    );
    assert_eq!(
        vhost_names(&vhosts(&yaml, "80")),
        ["web.a.svc.cluster.local:80", "allow_any"]
    );
}

#[test]
fn domains_stay_unique_the_first_virtual_host_keeping_one() {
    // `web.a` is no registry host (a dotted name is not completed): its virtual host comes
    // first, and web's own loses the domain (Envoy refuses a domain twice).
    let yaml = vs("short", "[web.a]", "");
    let on_80 = vhosts(&yaml, "80");
    assert_eq!(
        vhost_names(&on_80),
        ["web.a.svc.cluster.local:80", "web.a:80", "allow_any"]
    );
    assert_eq!(on_80[1].domains, ["web.a"]);
    assert_eq!(
        on_80[0].domains,
        ["web.a.svc.cluster.local", "web.a.svc", "web"]
    );
    // Two VirtualServices with the same such host: the first keeps it.
    let yaml = format!(
        "{}{}",
        vs("first", "[api.example.com]", ""),
        vs("second", "[api.example.com]", "")
    );
    let on_80 = vhosts(&yaml, "80");
    assert_eq!(
        vhost_names(&on_80),
        [
            "api.example.com:80",
            "web.a.svc.cluster.local:80",
            "allow_any"
        ]
    );
}

#[test]
fn such_a_host_makes_no_listener_of_its_own() {
    // As istiod: outbound listeners come from service ports; with no service on 80, a
    // VirtualService for api.example.com adds no 0.0.0.0_80 (its traffic takes the
    // original-destination passthrough of virtualOutbound).
    let services = SERVICES.split("---").nth(1).unwrap();
    let ctx = context(&format!("{services}{}", vs("api", "[api.example.com]", "")));
    let proxy = axon_model::fixtures::proxy("sidecar", "10.1.0.1", "a", &[]);
    let listeners: Vec<String> = decode::<Listener>(&generate_for(
        ResourceType::Listener,
        &ctx,
        &proxy,
        &names(&[]),
    ))
    .into_iter()
    .map(|l| l.name)
    .collect();
    assert_eq!(
        listeners,
        ["0.0.0.0_8080", "virtualOutbound", "virtualInbound"]
    );
}

#[test]
fn a_destination_without_port_is_the_listener_port_of_a_multi_port_service() {
    // istiod's `GetDestinationCluster`: a one-port service is reached on its port, a
    // multi-port one on the port it was called on (axon took the first port).
    let yaml = r#"
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: multi, namespace: a}
spec:
  hosts: [multi.a.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9080, name: http, protocol: HTTP}, {number: 9090, name: http-admin, protocol: HTTP}]
  endpoints: [{address: 10.0.0.3}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: multi, namespace: a}
spec:
  hosts: [multi]
  http:
  - route: [{destination: {host: multi}, weight: 50}, {destination: {host: backend}, weight: 50}]
"#;
    for port in ["9080", "9090"] {
        let on_port = vhosts(yaml, port);
        let multi = on_port
            .iter()
            .find(|v| v.name == format!("multi.a.svc.cluster.local:{port}"))
            .unwrap();
        let Some(Action::Route(action)) = &multi.routes[0].action else {
            panic!("a route")
        };
        let Some(ClusterSpecifier::WeightedClusters(w)) = &action.cluster_specifier else {
            panic!("{action:?}")
        };
        let clusters: Vec<&str> = w.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            clusters,
            [
                format!("outbound|{port}||multi.a.svc.cluster.local").as_str(),
                "outbound|8080||backend.a.svc.cluster.local"
            ]
        );
    }
}
