//! A sidecar's outbound and virtual listeners against istiod's for the same inputs: listener
//! names (`VIP_PORT`, `0.0.0.0_PORT`, per endpoint), filter chain matches (ALPN, CIDR, SNI,
//! destination port), route names (`PORT`, `HOST:PORT`), and conflicts.

use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, Listener, filter::ConfigType,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use prost::Message;

use axon_model::fixtures::{context, proxy};
use axon_model::sidecar_scope::SidecarScope;

fn listeners(yaml: &str, ip: &str) -> Vec<Listener> {
    let ctx = context(yaml);
    let p = proxy("sidecar", ip, "a", &[]);
    let scope = SidecarScope::of(&ctx, &p);
    super::super::generate(&ctx, &p, &scope)
        .iter()
        .map(|r| Listener::decode(r.value.as_ref()).unwrap())
        .collect()
}

fn names(ls: &[Listener]) -> Vec<&str> {
    ls.iter().map(|l| l.name.as_str()).collect()
}

fn named<'a>(ls: &'a [Listener], name: &str) -> &'a Listener {
    ls.iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no {name} in {:?}", names(ls)))
}

fn typed(f: &Filter) -> &[u8] {
    let Some(ConfigType::TypedConfig(any)) = &f.config_type else {
        panic!("typed config")
    };
    any.value.as_slice()
}

/// What a chain does: `tcp:CLUSTER` or `rds:NAME`.
fn target(chain: &FilterChain) -> String {
    let f = chain.filters.last().expect("a filter");
    match f.name.as_str() {
        "envoy.filters.network.tcp_proxy" => {
            match TcpProxy::decode(typed(f)).unwrap().cluster_specifier {
                Some(ClusterSpecifier::Cluster(c)) => format!("tcp:{c}"),
                other => format!("tcp:{other:?}"),
            }
        }
        "envoy.filters.network.http_connection_manager" => {
            match HttpConnectionManager::decode(typed(f))
                .unwrap()
                .route_specifier
            {
                Some(RouteSpecifier::Rds(rds)) => format!("rds:{}", rds.route_config_name),
                Some(RouteSpecifier::RouteConfig(rc)) => format!("route:{}", rc.name),
                other => format!("hcm:{other:?}"),
            }
        }
        other => other.to_string(),
    }
}

/// Each chain as `MATCH => TARGET`; the default chain as `default => TARGET`.
fn chains(l: &Listener) -> Vec<String> {
    let mut out: Vec<String> = l
        .filter_chains
        .iter()
        .map(|c| {
            let m = c.filter_chain_match.clone().unwrap_or_default();
            let mut parts = Vec::new();
            if let Some(p) = m.destination_port {
                parts.push(format!("port={}", p.value));
            }
            for r in &m.prefix_ranges {
                parts.push(format!(
                    "cidr={}/{}",
                    r.address_prefix,
                    r.prefix_len.map_or(0, |l| l.value)
                ));
            }
            if !m.server_names.is_empty() {
                parts.push(format!("sni={}", m.server_names.join(",")));
            }
            if !m.application_protocols.is_empty() {
                parts.push(format!("alpn={}", m.application_protocols.join(",")));
            }
            if !m.transport_protocol.is_empty() {
                parts.push(format!("transport={}", m.transport_protocol));
            }
            format!("{} => {}", parts.join(" "), target(c))
        })
        .collect();
    if let Some(d) = &l.default_filter_chain {
        out.push(format!("default({}) => {}", d.name, target(d)));
    }
    out
}

fn listener_filters(l: &Listener) -> Vec<&str> {
    l.listener_filters.iter().map(|f| f.name.as_str()).collect()
}

fn se(name: &str, host: &str, extra: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a}}\nspec:\n  hosts: [{host}]\n{extra}\n---\n"
    )
}

#[test]
fn two_tcp_services_on_one_port_each_get_their_vip_listener() {
    let yaml = se(
        "pg1",
        "pg1.a.svc.cluster.local",
        "  addresses: [10.96.0.1]\n  resolution: STATIC\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "pg2",
        "pg2.a.svc.cluster.local",
        "  addresses: [10.96.0.2]\n  resolution: STATIC\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    assert_eq!(
        chains(named(&ls, "10.96.0.1_5432")),
        [" => tcp:outbound|5432||pg1.a.svc.cluster.local"]
    );
    assert_eq!(
        chains(named(&ls, "10.96.0.2_5432")),
        [" => tcp:outbound|5432||pg2.a.svc.cluster.local"]
    );
    assert!(!names(&ls).contains(&"0.0.0.0_5432"));
    assert!(context(&yaml).services.listener_conflicts.is_empty());
}

#[test]
fn tcp_services_without_addresses_share_the_wildcard_and_are_reported() {
    let yaml = se(
        "r1",
        "r1.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 6379, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "r2",
        "r2.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 6379, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    assert_eq!(
        chains(named(&ls, "0.0.0.0_6379")),
        [" => tcp:outbound|6379||r1.a.svc.cluster.local"]
    );
    let conflicts = &context(&yaml).services.listener_conflicts;
    assert_eq!(conflicts.len(), 1, "{conflicts:?}");
    assert!(conflicts[0].contains("0.0.0.0_6379"), "{conflicts:?}");
}

#[test]
fn an_http_port_gets_a_sniffing_wildcard_listener_that_falls_through() {
    let yaml = se(
        "web",
        "web.a.svc.cluster.local",
        "  addresses: [10.96.0.9]\n  resolution: STATIC\n  ports: [{number: 9080, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]",
    );
    let l = named(&listeners(&yaml, "10.1.0.1"), "0.0.0.0_9080").clone();
    assert_eq!(
        listener_filters(&l),
        ["envoy.filters.listener.http_inspector"]
    );
    assert_eq!(
        chains(&l),
        [
            "alpn=http/1.1,h2c transport=raw_buffer => rds:9080",
            "default(PassthroughFilterChain) => tcp:PassthroughCluster"
        ]
    );
    assert_eq!(
        l.bind_to_port,
        Some(envoy_types::pb::google::protobuf::BoolValue { value: false })
    );
}

#[test]
fn a_port_without_protocol_is_sniffed_on_its_vip_with_its_own_routes() {
    let yaml = se(
        "app",
        "app.a.svc.cluster.local",
        "  addresses: [10.96.0.3]\n  resolution: STATIC\n  ports: [{number: 8080, name: web}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "other",
        "other.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 8081, name: web}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    let vip = named(&ls, "10.96.0.3_8080");
    assert_eq!(
        listener_filters(vip),
        ["envoy.filters.listener.http_inspector"]
    );
    assert_eq!(
        chains(vip),
        [
            "alpn=http/1.1,h2c transport=raw_buffer => rds:app.a.svc.cluster.local:8080",
            "default() => tcp:outbound|8080||app.a.svc.cluster.local"
        ]
    );
    // Without an address: the wildcard listener, the port's routes.
    assert_eq!(
        chains(named(&ls, "0.0.0.0_8081")),
        [
            "alpn=http/1.1,h2c transport=raw_buffer => rds:8081",
            "default() => tcp:outbound|8081||other.a.svc.cluster.local"
        ]
    );
}

#[test]
fn http_and_tcp_on_one_wildcard_port_are_merged_and_sniffed() {
    let yaml = se(
        "a-web",
        "a-web.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 7000, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "b-raw",
        "b-raw.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 7000, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    assert_eq!(
        chains(named(&listeners(&yaml, "10.1.0.1"), "0.0.0.0_7000")),
        [
            "alpn=http/1.1,h2c transport=raw_buffer => rds:7000",
            "default() => tcp:outbound|7000||b-raw.a.svc.cluster.local"
        ]
    );
}

#[test]
fn service_entry_addresses_ips_and_cidrs() {
    let yaml = se(
        "ext",
        "db.example.com",
        "  addresses: [192.0.2.10, 198.51.100.0/24]\n  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 27017, name: tcp, protocol: TCP}]",
    ) + &se(
        "tls",
        "api.example.com",
        "  addresses: [203.0.113.0/28]\n  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 443, name: tls, protocol: TLS}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    assert_eq!(
        chains(named(&ls, "192.0.2.10_27017")),
        [" => tcp:outbound|27017||db.example.com"]
    );
    assert_eq!(
        chains(named(&ls, "0.0.0.0_27017")),
        [
            "cidr=198.51.100.0/24 => tcp:outbound|27017||db.example.com",
            "default(PassthroughFilterChain) => tcp:PassthroughCluster"
        ]
    );
    // A CIDR leaves the listener on the wildcard: TLS chains are told apart by SNI too.
    let tls = named(&ls, "0.0.0.0_443");
    assert_eq!(
        chains(tls),
        [
            "cidr=203.0.113.0/28 sni=api.example.com => tcp:outbound|443||api.example.com",
            "default(PassthroughFilterChain) => tcp:PassthroughCluster"
        ]
    );
    assert_eq!(
        listener_filters(tls),
        ["envoy.filters.listener.tls_inspector"]
    );
}

#[test]
fn a_headless_service_gets_a_listener_per_endpoint_but_its_own() {
    let mut yaml = se(
        "kafka",
        "kafka.a.svc.cluster.local",
        "  resolution: NONE\n  ports: [{number: 9092, name: tcp, protocol: TCP}]\n  workloadSelector: {labels: {app: kafka}}",
    );
    for (i, ip) in ["10.0.0.1", "10.0.0.2", "10.1.0.1"].iter().enumerate() {
        yaml += &format!(
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: kafka-{i}, namespace: a}}\nspec: {{address: {ip}, labels: {{app: kafka}}}}\n---\n"
        );
    }
    let ls = listeners(&yaml, "10.1.0.1");
    let per_endpoint: Vec<&str> = names(&ls)
        .into_iter()
        .filter(|n| n.ends_with("_9092"))
        .collect();
    assert_eq!(per_endpoint, ["10.0.0.1_9092", "10.0.0.2_9092"]);
    assert_eq!(
        chains(named(&ls, "10.0.0.2_9092")),
        [" => tcp:outbound|9092||kafka.a.svc.cluster.local"]
    );
    // A ServiceEntry of that kind without endpoints keeps the wildcard listener.
    let none = se(
        "any",
        "any.example.com",
        "  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 9093, name: tcp, protocol: TCP}]",
    );
    assert!(names(&listeners(&none, "10.1.0.1")).contains(&"0.0.0.0_9093"));
}

#[test]
fn mongo_never_shares_a_port_with_another_protocol() {
    let yaml = se(
        "a-mongo",
        "a-mongo.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 27017, name: mongo, protocol: MONGO}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "b-web",
        "b-web.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 27017, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    let l = named(&listeners(&yaml, "10.1.0.1"), "0.0.0.0_27017").clone();
    assert_eq!(
        chains(&l),
        [" => tcp:outbound|27017||a-mongo.a.svc.cluster.local"]
    );
}

#[test]
fn virtual_listeners_as_istiod() {
    let yaml = se(
        "me",
        "me.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}, {number: 5432, name: tcp, protocol: TCP}, {number: 9000, name: web}]\n  endpoints: [{address: 10.1.0.1}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    let outbound = named(&ls, "virtualOutbound");
    assert_eq!(
        outbound.use_original_dst,
        Some(envoy_types::pb::google::protobuf::BoolValue { value: true })
    );
    assert_eq!(
        chains(outbound),
        [
            "port=15001 => tcp:BlackHoleCluster",
            " => tcp:PassthroughCluster"
        ]
    );
    let inbound = named(&ls, "virtualInbound");
    assert_eq!(
        listener_filters(inbound),
        [
            "envoy.filters.listener.original_dst",
            "envoy.filters.listener.http_inspector"
        ]
    );
    assert_eq!(
        chains(inbound),
        [
            "port=15006 => tcp:BlackHoleCluster",
            "alpn=http/1.1,h2c transport=raw_buffer => route:InboundPassthroughCluster",
            "transport=raw_buffer => tcp:InboundPassthroughCluster",
            "port=5432 transport=raw_buffer => tcp:inbound|5432||",
            "port=8080 transport=raw_buffer => route:inbound|8080||",
            "port=9000 alpn=http/1.1,h2c transport=raw_buffer => route:inbound|9000||",
            "port=9000 transport=raw_buffer => tcp:inbound|9000||",
        ]
    );
    let names: Vec<&str> = inbound
        .filter_chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "virtualInbound-blackhole",
            "virtualInbound-catchall-http",
            "virtualInbound",
            "0.0.0.0_5432",
            "0.0.0.0_8080",
            "0.0.0.0_9000",
            "0.0.0.0_9000"
        ]
    );
    // The HTTP inspector is off where no chain needs it: 15006, 5432 and 8080.
    let disabled = format!("{:?}", inbound.listener_filters[1].filter_disabled);
    for port in ["15006", "5432", "8080"] {
        assert!(disabled.contains(&format!("start: {port}")), "{disabled}");
    }
    assert!(!disabled.contains("start: 9000"), "{disabled}");
}

fn routes(yaml: &str, name: &str) -> Vec<(String, Vec<String>)> {
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    let ctx = context(yaml);
    let p = proxy("sidecar", "10.1.0.1", "a", &[]);
    let scope = SidecarScope::of(&ctx, &p);
    let names = [name.to_string()].into_iter().collect();
    let out = crate::generate::rds::generate(&ctx, &p, &scope, &names);
    let rc = RouteConfiguration::decode(out[0].value.as_ref()).unwrap();
    rc.virtual_hosts
        .into_iter()
        .map(|v| (v.name, v.domains))
        .collect()
}

#[test]
fn a_sniffed_service_on_its_vip_has_a_route_configuration_of_its_own() {
    let yaml = se(
        "app",
        "app.a.svc.cluster.local",
        "  addresses: [10.96.0.3]\n  resolution: STATIC\n  ports: [{number: 8080, name: web}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "api",
        "api.a.svc.cluster.local",
        "  addresses: [10.96.0.4]\n  resolution: STATIC\n  ports: [{number: 8080, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    assert_eq!(
        routes(&yaml, "app.a.svc.cluster.local:8080"),
        [(
            "app.a.svc.cluster.local:8080".to_string(),
            vec!["*".to_string()]
        )]
    );
    // The port's configuration: both services, by name and by address, then `allow_any`.
    let port = routes(&yaml, "8080");
    let names: Vec<&str> = port.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "api.a.svc.cluster.local:8080",
            "app.a.svc.cluster.local:8080",
            "allow_any"
        ]
    );
    assert!(port[1].1.contains(&"10.96.0.3".to_string()), "{port:?}");
    assert!(port[1].1.contains(&"app".to_string()), "{port:?}");
}

#[test]
fn wildcard_hosts_reserved_ports_selectors_and_address_families() {
    let yaml = se(
        "rds",
        "\"*.rds.example.com\"",
        "  location: MESH_EXTERNAL\n  resolution: NONE\n  ports: [{number: 5432, name: tcp, protocol: TCP}]",
    ) + &se(
        "metrics",
        "metrics.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 15090, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "later",
        "later.a.svc.cluster.local",
        "  resolution: NONE\n  ports: [{number: 7000, name: tcp, protocol: TCP}]\n  workloadSelector: {labels: {app: none-yet}}",
    ) + &se(
        "dual",
        "dual.a.svc.cluster.local",
        "  addresses: [10.96.0.7, \"fd00::7\"]\n  resolution: STATIC\n  ports: [{number: 8000, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.2}]",
    );
    let ls = listeners(&yaml, "10.1.0.1");
    // A wildcard passthrough host: its chain, to its original-destination cluster.
    assert_eq!(
        chains(named(&ls, "0.0.0.0_5432")),
        [" => tcp:outbound|5432||*.rds.example.com"]
    );
    let ctx = context(&yaml);
    let p = proxy("sidecar", "10.1.0.1", "a", &[]);
    let scope = SidecarScope::of(&ctx, &p);
    let clusters: Vec<String> = crate::generate::cds::generate(&ctx, &p, &scope)
        .iter()
        .map(|r| r.name.to_string())
        .collect();
    assert!(
        clusters.contains(&"outbound|5432||*.rds.example.com".to_string()),
        "{clusters:?}"
    );
    // The proxy's own ports are no wildcard listener's.
    assert!(!names(&ls).contains(&"0.0.0.0_15090"));
    // A headless entry whose selector picks no workload yet: no listener at all.
    assert!(
        !names(&ls).iter().any(|n| n.ends_with("_7000")),
        "{:?}",
        names(&ls)
    );
    // A dual-stack service: the proxy's family only.
    assert!(names(&ls).contains(&"10.96.0.7_8000"));
    assert!(
        !names(&ls).iter().any(|n| n.starts_with("fd00")),
        "{:?}",
        names(&ls)
    );
}

#[test]
fn the_fall_through_keeps_the_nodes_idle_timeout() {
    use axon_model::proxy::{NodeInfo, Proxy};
    let ctx = context(&se(
        "web",
        "web.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]",
    ));
    let p = Proxy::from_node(NodeInfo {
        id: "sidecar~10.1.0.1~pod-1.a~a.svc.cluster.local".to_string(),
        idle_timeout: Some("7s".to_string()),
        ..Default::default()
    })
    .unwrap();
    let scope = SidecarScope::of(&ctx, &p);
    let ls: Vec<Listener> = super::super::generate(&ctx, &p, &scope)
        .iter()
        .map(|r| Listener::decode(r.value.as_ref()).unwrap())
        .collect();
    let idle = |chain: &FilterChain| {
        TcpProxy::decode(typed(chain.filters.last().unwrap()))
            .unwrap()
            .idle_timeout
            .map(|d| d.seconds)
    };
    let l = named(&ls, "0.0.0.0_80");
    assert_eq!(idle(l.default_filter_chain.as_ref().unwrap()), Some(7));
    let outbound = named(&ls, "virtualOutbound");
    assert_eq!(idle(&outbound.filter_chains[1]), Some(7));
}

#[test]
fn a_tcp_routes_destination_subnets_are_a_chain_of_their_own() {
    let yaml = se(
        "db",
        "db.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.1}]",
    ) + &se(
        "replica",
        "replica.a.svc.cluster.local",
        "  resolution: STATIC\n  ports: [{number: 5432, name: tcp, protocol: TCP}]\n  endpoints: [{address: 10.0.0.2}]",
    ) + "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: a}
spec:
  hosts: [db.a.svc.cluster.local]
  tcp:
  - match: [{destinationSubnets: [10.1.0.0/16]}]
    route: [{destination: {host: replica.a.svc.cluster.local}}]
  - route: [{destination: {host: db.a.svc.cluster.local}}]
";
    // As istiod: the subnets' chain, then the route without a match as the default; the
    // first route no longer takes every destination.
    assert_eq!(
        chains(named(&listeners(&yaml, "10.1.0.1"), "0.0.0.0_5432")),
        [
            "cidr=10.1.0.0/16 => tcp:outbound|5432||replica.a.svc.cluster.local",
            "default() => tcp:outbound|5432||db.a.svc.cluster.local"
        ]
    );
}

#[test]
fn the_oldest_service_wins_a_shared_listener() {
    let entry = |name: &str, created: &str, ip: &str| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: a, creationTimestamp: \"{created}\"}}\nspec:\n  hosts: [{name}.a.svc.cluster.local]\n  resolution: STATIC\n  ports: [{{number: 6379, name: tcp, protocol: TCP}}]\n  endpoints: [{{address: {ip}}}]\n---\n"
        )
    };
    // `a-new` sorts first by host, but `z-old` is older: istiod's creation order.
    let yaml = entry("a-new", "2026-02-01T00:00:00Z", "10.0.0.1")
        + &entry("z-old", "2025-01-01T00:00:00Z", "10.0.0.2");
    assert_eq!(
        chains(named(&listeners(&yaml, "10.1.0.1"), "0.0.0.0_6379")),
        [" => tcp:outbound|6379||z-old.a.svc.cluster.local"]
    );
    let conflicts = &context(&yaml).services.listener_conflicts;
    assert!(
        conflicts[0].contains(": z-old.a.svc.cluster.local gets"),
        "{conflicts:?}"
    );
}
