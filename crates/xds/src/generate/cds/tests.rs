//! The clusters of DestinationRule policies, against the Envoy protos istiod would send.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{LbConfig, LbPolicy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    UpstreamTlsContext, common_tls_context::ValidationContextType,
};
use prost::Message;

use super::*;
use axon_model::fixtures::{context, proxy};
use axon_model::sidecar_scope::SidecarScope;

const SERVICES: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: shop, namespace: shop}
spec:
  hosts: [shop.example.com]
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: grpc, protocol: GRPC}]
  endpoints: [{address: 10.0.0.1, labels: {version: v1}}]
";

/// The clusters a gateway in `shop` gets for `SERVICES` and `rule`, by name.
fn clusters(rule: &str) -> std::collections::BTreeMap<String, Cluster> {
    let yaml = format!(
        "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n{rule}"
    );
    let ctx = context(&yaml);
    let gw = proxy("router", "10.1.0.1", "shop", &[("istio", "ingressgateway")]);
    let scope = SidecarScope::compute(&ctx, &gw);
    generate(&ctx, &gw, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect()
}

fn http_options(c: &Cluster) -> HttpProtocolOptions {
    HttpProtocolOptions::decode(
        c.typed_extension_protocol_options[HTTP_PROTOCOL_OPTIONS]
            .value
            .as_slice(),
    )
    .unwrap()
}

fn tls_context(c: &Cluster) -> UpstreamTlsContext {
    let socket = c.transport_socket.as_ref().expect("a transport socket");
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        any,
    )) = &socket.config_type
    else {
        panic!("{socket:?}")
    };
    UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
}

const PLAIN: &str = "outbound|80||shop.example.com";

#[test]
fn without_a_rule_clusters_get_istiods_defaults() {
    let c = &clusters("  host: other.example.com\n")[PLAIN];
    assert_eq!(c.lb_policy, LbPolicy::LeastRequest as i32);
    let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
    for v in [
        &t.max_connections,
        &t.max_pending_requests,
        &t.max_requests,
        &t.max_retries,
    ] {
        assert_eq!(v.unwrap().value, u32::MAX);
    }
    assert!(t.track_remaining);
    assert!(c.outlier_detection.is_none());
    assert!(c.transport_socket.is_none());
    assert!(c.eds_cluster_config.is_some());
    assert_eq!(c.connect_timeout.unwrap().seconds, 10);
}

#[test]
fn simple_and_consistent_hash_load_balancers() {
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmupDurationSecs: 30s}
    portLevelSettings:
    - port: {number: 81}
      loadBalancer: {consistentHash: {httpHeaderName: x-user, maglev: {tableSize: 65537}}}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {name: c, ttl: 10s}}}}
  - name: r
    labels: {version: v1}
    trafficPolicy: {loadBalancer: {simple: RANDOM}}
  - name: p
    labels: {version: v1}
    trafficPolicy: {loadBalancer: {simple: PASSTHROUGH}}
",
    );
    let rr = &cs[PLAIN];
    assert_eq!(rr.lb_policy, LbPolicy::RoundRobin as i32);
    let Some(LbConfig::RoundRobinLbConfig(config)) = &rr.lb_config else {
        panic!("{:?}", rr.lb_config)
    };
    let window = config.slow_start_config.as_ref().unwrap().slow_start_window;
    assert_eq!(window.unwrap().seconds, 30);

    let maglev = &cs["outbound|81||shop.example.com"];
    assert_eq!(maglev.lb_policy, LbPolicy::Maglev as i32);
    let Some(LbConfig::MaglevLbConfig(m)) = &maglev.lb_config else {
        panic!("{:?}", maglev.lb_config)
    };
    assert_eq!(m.table_size.unwrap().value, 65537);

    let ring = &cs["outbound|80|v1|shop.example.com"];
    assert_eq!(ring.lb_policy, LbPolicy::RingHash as i32);
    let Some(LbConfig::RingHashLbConfig(r)) = &ring.lb_config else {
        panic!("{:?}", ring.lb_config)
    };
    assert_eq!(r.minimum_ring_size.unwrap().value, 1024);

    assert_eq!(
        cs["outbound|80|r|shop.example.com"].lb_policy,
        LbPolicy::Random as i32
    );
    let pass = &cs["outbound|80|p|shop.example.com"];
    assert_eq!(pass.lb_policy, LbPolicy::ClusterProvided as i32);
    assert_eq!(discovery_type(pass), Some(DiscoveryType::OriginalDst));
    assert!(pass.eds_cluster_config.is_none() && pass.load_assignment.is_none());
}

#[test]
fn connection_pool_limits_and_http_options() {
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 7, connectTimeout: 250ms, tcpKeepalive: {time: 60s, interval: 5s, probes: 3}, maxConnectionDuration: 1h}
      http: {http1MaxPendingRequests: 1, http2MaxRequests: 9, maxRetries: 2, maxRequestsPerConnection: 4, idleTimeout: 30s, maxConcurrentStreams: 5, http2KeepAlive: {interval: 10s, timeout: 3s}}
    retryBudget: {percent: 25, budgetInterval: 1s}
",
    );
    for name in [PLAIN, "outbound|81||shop.example.com"] {
        let c = &cs[name];
        let t = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
        assert_eq!(t.max_connections.unwrap().value, 7);
        assert_eq!(t.max_pending_requests.unwrap().value, 1);
        assert_eq!(t.max_requests.unwrap().value, 9);
        assert_eq!(t.max_retries.unwrap().value, 2);
        assert_eq!(c.connect_timeout.unwrap().nanos, 250_000_000);
        let ka = c
            .upstream_connection_options
            .as_ref()
            .unwrap()
            .tcp_keepalive
            .unwrap();
        assert_eq!(ka.keepalive_time.unwrap().value, 60);
        assert_eq!(ka.keepalive_interval.unwrap().value, 5);
        assert_eq!(ka.keepalive_probes.unwrap().value, 3);
        let http = http_options(c);
        let common = http.common_http_protocol_options.unwrap();
        assert_eq!(common.idle_timeout.unwrap().seconds, 30);
        assert_eq!(common.max_requests_per_connection.unwrap().value, 4);
        assert_eq!(common.max_connection_duration.unwrap().seconds, 3600);
        assert!(http.upstream_protocol_options.is_some());
    }
    // HTTP/2 streams only on the HTTP/2 (gRPC) port.
    let h2 = http_options(&cs["outbound|81||shop.example.com"]);
    let Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
        protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(o)),
    })) = h2.upstream_protocol_options
    else {
        panic!("{h2:?}")
    };
    assert_eq!(o.max_concurrent_streams.unwrap().value, 5);
    let keepalive = o.connection_keepalive.unwrap();
    assert_eq!(keepalive.interval.unwrap().seconds, 10);
    assert_eq!(keepalive.timeout.unwrap().seconds, 3);
    let budget = cs[PLAIN].circuit_breakers.as_ref().unwrap().thresholds[0]
        .retry_budget
        .unwrap();
    assert_eq!(budget.budget_percent.unwrap().value, 25.0);
    assert_eq!(
        budget.min_retry_concurrency.unwrap().value,
        3,
        "istiod's default"
    );
    assert_eq!(budget.budget_interval.unwrap().seconds, 1);
}

#[test]
fn h2_upgrade_and_client_protocol() {
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    connectionPool: {http: {h2UpgradePolicy: UPGRADE}}
  subsets:
  - name: client
    labels: {version: v1}
    trafficPolicy: {connectionPool: {http: {useClientProtocol: true}}}
",
    );
    assert!(matches!(
        http_options(&cs[PLAIN]).upstream_protocol_options,
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(_))
            }
        ))
    ));
    assert!(matches!(
        http_options(&cs["outbound|80|client|shop.example.com"]).upstream_protocol_options,
        Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(_))
    ));
}

#[test]
fn outlier_detection_as_istiod_sets_it() {
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    outlierDetection: {consecutive5xxErrors: 3, consecutiveGatewayErrors: 0, interval: 1s, baseEjectionTime: 2m, maxEjectionPercent: 50, splitExternalLocalOriginErrors: true, consecutiveLocalOriginFailures: 4, outlierDetectionHttpErrorCodes: [500, 429]}
",
    );
    let c = &cs[PLAIN];
    let o = c.outlier_detection.as_ref().unwrap();
    assert_eq!(o.consecutive_5xx.unwrap().value, 3);
    assert_eq!(o.enforcing_consecutive_5xx.unwrap().value, 100);
    assert_eq!(o.consecutive_gateway_failure.unwrap().value, 0);
    assert_eq!(o.enforcing_consecutive_gateway_failure.unwrap().value, 0);
    assert_eq!(o.enforcing_success_rate.unwrap().value, 0);
    assert_eq!(o.interval.unwrap().seconds, 1);
    assert_eq!(o.base_ejection_time.unwrap().seconds, 120);
    assert_eq!(o.max_ejection_percent.unwrap().value, 50);
    assert!(o.split_external_local_origin_errors);
    assert_eq!(o.consecutive_local_origin_failure.unwrap().value, 4);
    assert_eq!(o.enforcing_local_origin_success_rate.unwrap().value, 0);
    let panic = c.common_lb_config.as_ref().unwrap().healthy_panic_threshold;
    assert_eq!(panic.unwrap().value, 0.0, "the panic threshold is off");
    let matcher = http_options(c)
        .outlier_detection
        .unwrap()
        .error_matcher
        .unwrap();
    let text = format!("{matcher:?}");
    assert!(text.contains("OrMatch") && text.contains("\"500\"") && text.contains("\"429\""));
}

#[test]
fn upstream_tls_simple_mutual_and_what_is_not_translated() {
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    tls: {mode: SIMPLE, caCertificates: /certs/ca.pem, subjectAltNames: [shop.example.com], sni: shop.example.com}
    portLevelSettings:
    - port: {number: 81}
      tls: {mode: MUTUAL, clientCertificate: /certs/c.pem, privateKey: /certs/k.pem}
  subsets:
  - name: skip
    labels: {version: v1}
    trafficPolicy: {tls: {mode: SIMPLE, insecureSkipVerify: true}}
  - name: cred
    labels: {version: v1}
    trafficPolicy: {tls: {mode: SIMPLE, credentialName: shop-cert}}
  - name: mesh
    labels: {version: v1}
    trafficPolicy: {tls: {mode: ISTIO_MUTUAL}}
",
    );
    let simple = tls_context(&cs[PLAIN]);
    assert_eq!(simple.sni, "shop.example.com");
    let common = simple.common_tls_context.unwrap();
    assert!(common.tls_certificate_sds_secret_configs.is_empty());
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type
    else {
        panic!()
    };
    // The CA over SDS, by istio-agent's name; the SANs checked beside it.
    let root = v.validation_context_sds_secret_config.unwrap();
    assert_eq!(root.name, "file-root:/certs/ca.pem");
    assert_eq!(root.sds_config, Some(ads_config_source()));
    #[allow(deprecated)]
    let sans = &v
        .default_validation_context
        .unwrap()
        .match_subject_alt_names;
    assert_eq!(sans.len(), 1);
    // An explicit SNI and SANs: no automatic SNI nor SAN validation.
    assert!(
        !cs[PLAIN]
            .typed_extension_protocol_options
            .contains_key(HTTP_PROTOCOL_OPTIONS)
    );

    let mutual = tls_context(&cs["outbound|81||shop.example.com"]);
    let common = mutual.common_tls_context.unwrap();
    let certs: Vec<&str> = common
        .tls_certificate_sds_secret_configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(certs, ["file-cert:/certs/c.pem~/certs/k.pem"]);
    assert_eq!(common.alpn_protocols, ["h2"], "an HTTP/2 cluster");
    let Some(ValidationContextType::ValidationContext(v)) = common.validation_context_type else {
        panic!()
    };
    assert!(
        v.system_root_certs.is_some(),
        "the system's roots by default"
    );
    let upstream = http_options(&cs["outbound|81||shop.example.com"])
        .upstream_http_protocol_options
        .unwrap();
    assert!(upstream.auto_sni && upstream.auto_san_validation);

    let skip = tls_context(&cs["outbound|80|skip|shop.example.com"]);
    let Some(ValidationContextType::ValidationContext(v)) =
        skip.common_tls_context.unwrap().validation_context_type
    else {
        panic!()
    };
    assert_eq!(v, Default::default(), "nothing checked");
    let upstream = http_options(&cs["outbound|80|skip|shop.example.com"])
        .upstream_http_protocol_options
        .unwrap();
    assert!(upstream.auto_sni && !upstream.auto_san_validation);

    // A gateway uses a credential: its roots from `NAME-cacert` over SDS.
    let cred = tls_context(&cs["outbound|80|cred|shop.example.com"]);
    let common = cred.common_tls_context.unwrap();
    assert!(
        common.tls_certificate_sds_secret_configs.is_empty(),
        "SIMPLE"
    );
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type
    else {
        panic!()
    };
    assert_eq!(
        v.validation_context_sds_secret_config.unwrap().name,
        "kubernetes://shop-cert-cacert"
    );
    assert!(
        cs["outbound|80|mesh|shop.example.com"]
            .transport_socket
            .is_none()
    );
}

#[test]
fn dns_clusters_resolve_their_host_and_a_subset_without_endpoints_is_left_out() {
    let yaml = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: rr, namespace: shop}
spec:
  hosts: [rr.example.com]
  resolution: DNS_ROUND_ROBIN
  ports: [{number: 443, name: https, protocol: TLS}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: rr, namespace: shop}
spec:
  host: rr.example.com
  subsets: [{name: none, labels: {version: nothing-has-this}}]
";
    let ctx = context(yaml);
    let gw = proxy("router", "10.1.0.1", "shop", &[("istio", "ingressgateway")]);
    let scope = SidecarScope::compute(&ctx, &gw);
    let clusters: Vec<Cluster> = generate(&ctx, &gw, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .collect();
    let names: Vec<&str> = clusters.iter().map(|c| c.name.as_str()).collect();
    assert!(
        !names.contains(&"outbound|443|none|rr.example.com"),
        "{names:?}"
    );
    let rr = clusters
        .iter()
        .find(|c| c.name == "outbound|443||rr.example.com")
        .unwrap();
    assert_eq!(discovery_type(rr), Some(DiscoveryType::LogicalDns));
    let cla = rr.load_assignment.as_ref().unwrap();
    assert_eq!(cla.endpoints.len(), 1);
    assert_eq!(cla.endpoints[0].lb_endpoints.len(), 1, "the host itself");
}

#[test]
fn the_proxy_protocol_wraps_the_transport_socket() {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    use envoy_types::pb::envoy::extensions::transport_sockets::proxy_protocol::v3::ProxyProtocolUpstreamTransport;
    let cs = clusters(
        "  host: shop.example.com
  trafficPolicy:
    proxyProtocol: {version: V2}
    portLevelSettings: [{port: {number: 81}, loadBalancer: {simple: RANDOM}}]
  subsets:
  - name: tls
    labels: {version: v1}
    trafficPolicy: {tls: {mode: SIMPLE}}
",
    );
    let wrapped = |c: &Cluster| {
        let socket = c.transport_socket.as_ref()?;
        assert_eq!(
            socket.name,
            "envoy.transport_sockets.upstream_proxy_protocol"
        );
        let Some(ConfigType::TypedConfig(any)) = &socket.config_type else {
            panic!()
        };
        let pp = ProxyProtocolUpstreamTransport::decode(any.value.as_slice()).unwrap();
        Some((
            pp.config.unwrap().version,
            pp.transport_socket.unwrap().name,
        ))
    };
    assert_eq!(
        wrapped(&cs[PLAIN]),
        Some((1, "envoy.transport_sockets.raw_buffer".to_string()))
    );
    assert_eq!(
        wrapped(&cs["outbound|80|tls|shop.example.com"]),
        Some((1, "envoy.transport_sockets.tls".to_string())),
        "the subset's TLS inside, the rule's PROXY protocol kept"
    );
    assert_eq!(
        wrapped(&cs["outbound|81||shop.example.com"]),
        None,
        "a port entry drops it"
    );
}

#[test]
fn a_grpc_client_gets_what_istiods_grpcgen_keeps() {
    let yaml = format!(
        "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n  host: shop.example.com\n  trafficPolicy:\n    connectionPool: {{tcp: {{maxConnections: 3}}, http: {{http2MaxRequests: 7}}}}\n    outlierDetection: {{consecutive5xxErrors: 1}}\n  subsets: [{{name: hash, labels: {{version: v1}}, trafficPolicy: {{loadBalancer: {{consistentHash: {{useSourceIp: true}}}}}}}}]\n"
    );
    let ctx = context(&yaml);
    let mut client = proxy("sidecar", "10.1.0.2", "shop", &[]);
    client.generator = Some("grpc".to_string());
    let scope = SidecarScope::compute(&ctx, &client);
    let cs: std::collections::BTreeMap<String, Cluster> = generate(&ctx, &client, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect();
    let plain = &cs["outbound|81||shop.example.com"];
    assert_eq!(
        plain.lb_policy,
        LbPolicy::RoundRobin as i32,
        "gRPC knows no LEAST_REQUEST default"
    );
    let t = &plain.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(t.max_requests.unwrap().value, 7);
    assert!(t.max_connections.is_none(), "only max_requests (gRFC A32)");
    assert!(plain.outlier_detection.is_none() && plain.common_lb_config.is_none());
    assert!(
        plain
            .typed_extension_protocol_options
            .contains_key(HTTP_PROTOCOL_OPTIONS)
    );
    let hash = &cs["outbound|80|hash|shop.example.com"];
    assert_eq!(hash.lb_policy, LbPolicy::RingHash as i32);
}

#[test]
fn a_service_entrys_subject_alt_names_are_checked_when_the_rule_names_none() {
    let yaml = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec:
  hosts: [ext.example.com]
  resolution: DNS
  subjectAltNames: [spiffe://ext/sa]
  ports: [{number: 443, name: https, protocol: HTTP}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ext, namespace: shop}
spec:
  host: ext.example.com
  trafficPolicy: {tls: {mode: SIMPLE, caCertificates: /ca.pem}}
";
    let ctx = context(yaml);
    let gw = proxy("router", "10.1.0.1", "shop", &[("istio", "ingressgateway")]);
    let scope = SidecarScope::compute(&ctx, &gw);
    let c = generate(&ctx, &gw, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .find(|c| c.name == "outbound|443||ext.example.com")
        .unwrap();
    let Some(ValidationContextType::CombinedValidationContext(v)) = tls_context(&c)
        .common_tls_context
        .unwrap()
        .validation_context_type
    else {
        panic!()
    };
    #[allow(deprecated)]
    let sans = v
        .default_validation_context
        .unwrap()
        .match_subject_alt_names;
    assert_eq!(sans.len(), 1);
    // As istiod, the automatic checks were decided before the names were filled in.
    let upstream = http_options(&c).upstream_http_protocol_options.unwrap();
    assert!(upstream.auto_sni && upstream.auto_san_validation);
}

mod auto_mtls;
mod credential;
mod inbound;
mod istio_mutual;
mod mesh_default;

/// istiod's `applyDestinationRule`: the own cluster of a MESH_EXTERNAL service (the API's
/// default `location`) carries `istio: {external: true}`, its subsets' clusters do not, and a
/// MESH_INTERNAL service's none.
#[test]
fn a_mesh_external_service_cluster_is_marked_external() {
    use envoy_types::pb::google::protobuf::value::Kind;
    let external = |c: &Cluster| {
        c.metadata
            .as_ref()
            .and_then(|m| m.filter_metadata.get("istio"))
            .and_then(|s| s.fields.get("external"))
            .map(|v| v.kind.clone())
    };
    let rule = "  host: shop.example.com\n  subsets: [{name: v1, labels: {version: v1}}]\n";
    let cs = clusters(rule);
    assert_eq!(external(&cs[PLAIN]), Some(Some(Kind::BoolValue(true))));
    assert_eq!(external(&cs["outbound|80|v1|shop.example.com"]), None);

    let yaml = format!(
        "{}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n{rule}",
        SERVICES.replace(
            "  resolution: STATIC\n",
            "  resolution: STATIC\n  location: MESH_INTERNAL\n"
        )
    );
    let ctx = context(&yaml);
    let gw = proxy("router", "10.1.0.1", "shop", &[("istio", "ingressgateway")]);
    let scope = SidecarScope::compute(&ctx, &gw);
    let internal: Vec<Cluster> = generate(&ctx, &gw, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .collect();
    assert!(
        internal.iter().all(|c| c.metadata.is_none()),
        "{internal:?}"
    );
}

#[test]
fn a_sniffed_port_uses_the_downstream_protocol_on_sidecars_only() {
    let yaml = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: shop}
spec:
  hosts: [app.shop.svc.cluster.local]
  resolution: STATIC
  ports: [{number: 8080, name: web}, {number: 8081, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.0.0.1}]
";
    let ctx = context(yaml);
    let of = |kind: &str| -> std::collections::BTreeMap<String, Cluster> {
        let p = proxy(kind, "10.1.0.1", "shop", &[]);
        let scope = SidecarScope::compute(&ctx, &p);
        generate(&ctx, &p, &scope)
            .iter()
            .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
            .map(|c| (c.name.clone(), c))
            .collect()
    };
    let sidecar = of("sidecar");
    assert!(matches!(
        http_options(&sidecar["outbound|8080||app.shop.svc.cluster.local"])
            .upstream_protocol_options,
        Some(UpstreamProtocolOptions::UseDownstreamProtocolConfig(_))
    ));
    let tcp = &sidecar["outbound|8081||app.shop.svc.cluster.local"];
    assert!(
        !tcp.typed_extension_protocol_options
            .contains_key(HTTP_PROTOCOL_OPTIONS)
    );
    let gateway = of("router");
    let sniffed = &gateway["outbound|8080||app.shop.svc.cluster.local"];
    assert!(
        !sniffed
            .typed_extension_protocol_options
            .contains_key(HTTP_PROTOCOL_OPTIONS)
    );
}
