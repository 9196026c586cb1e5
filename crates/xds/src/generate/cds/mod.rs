//! CDS: one `outbound|PORT||HOST` cluster per service port, one per DestinationRule subset.
//!
//! STATIC entries (and NONE entries with a selector) are EDS clusters served over ADS; DNS
//! entries are STRICT_DNS clusters with their endpoints inline; NONE entries without endpoints
//! pass through to the original destination, as istiod does. Each outbound cluster gets the
//! DestinationRule policy merged for its port and subset (`model::traffic_policy`), applied as
//! istiod's `applyTrafficPolicy` does: the connection pool (`pool`), outlier detection
//! (`outlier`), the load balancer (`lb`), upstream TLS (`tls`; where the rule sets none, auto
//! mTLS, `auto_mtls`) and the PROXY protocol
//! (`proxy_protocol`). A MESH_EXTERNAL service (`Service::mesh_external`, the ServiceEntry's
//! `location`) is what istiod makes of it: its TLS never takes the proxy's metadata client
//! certificates, and its own cluster carries the `istio` metadata `external: true`.

mod auto_mtls;
mod grpc;
mod lb;
mod locality;
mod outlier;
mod pool;
mod proxy_protocol;
#[cfg(test)]
mod tests;
pub(crate) mod tls;

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster,
    cluster::{
        ClusterDiscoveryType, CommonLbConfig, DiscoveryType, DnsLookupFamily, EdsClusterConfig,
        LbConfig, LbPolicy, OriginalDstLbConfig,
    },
};
use envoy_types::pb::envoy::config::core::v3::{
    AggregatedConfigSource, ApiVersion, ConfigSource, config_source::ConfigSourceSpecifier,
};
use envoy_types::pb::envoy::config::core::v3::{
    BindConfig, Http2ProtocolOptions, Metadata, SocketAddress, socket_address,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    ExplicitHttpConfig, UpstreamProtocolOptions, explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value, Value, value::Kind};

use super::eds;
use crate::resource::Resource;
use axon_config::istio::traffic_policy::{ClientTls, ConnectionPoolSettings, TlsMode};
use axon_config::istio::{DestinationRule, Resolution};
use axon_model::locality::LbSetting;
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;
use axon_model::service::{Service, outbound_cluster_name};
use axon_model::sidecar_scope::SidecarScope;
use axon_model::traffic_policy::cluster_policy_in;
use axon_model::traffic_policy::inbound::{InboundPolicy, inbound_policy};

/// istiod's default connect timeout.
/// The mesh's `connectTimeout` (istiod's default 10 s), of clusters whose DestinationRule
/// sets none.
fn mesh_connect_timeout(ctx: &PushContext) -> Duration {
    let nanos = ctx.mesh.connect_timeout_nanos;
    Duration {
        seconds: (nanos / 1_000_000_000) as i64,
        nanos: (nanos % 1_000_000_000) as i32,
    }
}

pub fn generate(ctx: &PushContext, proxy: &Proxy, scope: &SidecarScope) -> Vec<Resource> {
    let mut out = vec![black_hole(mesh_connect_timeout(ctx))];
    if proxy.proxy_type == ProxyType::Sidecar {
        out.push(passthrough(
            mesh_connect_timeout(ctx),
            ctx.mesh.default_connection_pool.as_ref(),
        ));
        if !proxy.interception_none {
            out.push(inbound_passthrough(
                mesh_connect_timeout(ctx),
                ctx.mesh.default_connection_pool.as_ref(),
            ));
        }
        for inbound in &scope.inbound {
            let name = inbound_cluster_name(inbound.port);
            let policy = inbound_policy(ctx, proxy, scope, inbound);
            out.push(inbound_cluster(
                &name,
                inbound.endpoint.as_ref(),
                &inbound.protocol,
                mesh_connect_timeout(ctx),
                &policy,
            ));
        }
    }
    for service in &scope.services {
        // A wildcard host has a cluster only as a passthrough service (istiod's
        // ORIGINAL_DST for `*.example.com` with resolution NONE).
        if service.hostname.starts_with('*') && service.resolution != Resolution::None {
            continue;
        }
        let chosen = ctx.destination_rule_for_workload(
            &service.hostname,
            &proxy.namespace,
            Some(&proxy.labels),
        );
        let dr = chosen.as_ref().map(|c| c.rule.as_ref());
        let subsets: Vec<&str> = dr
            .map(|dr| dr.subsets.iter().map(|s| s.name.as_str()).collect())
            .unwrap_or_default();
        for port in &service.ports {
            for subset in std::iter::once("").chain(subsets.iter().copied()) {
                let name = outbound_cluster_name(port.number, subset, &service.hostname);
                let Some(mut cluster) =
                    to_cluster(ctx, service, port.number, subset, &name, proxy, dr)
                else {
                    continue;
                };
                // A proxyless gRPC client (`xds::grpc::is_grpc`, which imports this module).
                if proxy.generator.as_deref() == Some("grpc") {
                    let policy = cluster_policy_in(&ctx.mesh, dr, subset, port.number);
                    grpc::for_grpc(&mut cluster, &policy, is_http2(&port.protocol));
                }
                out.push(Resource::new(name, &cluster));
            }
        }
    }
    out
}

/// The ADS config source that every dynamic resource points at.
pub fn ads_config_source() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSourceSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// istiod's `buildCluster` and `applyDestinationRule` for one cluster: the discovery type of
/// the service's resolution, HTTP/2 for HTTP/2 ports, then the traffic policy `dr` gives the
/// cluster ([`cluster_policy_in`]: over the mesh's `defaultTrafficPolicy`; none: istiod's defaults, LEAST_REQUEST and the largest
/// circuit breakers), and the EDS config if the cluster is still an EDS one. `None` for a
/// DNS cluster without endpoints (a subset that selects none), which istiod leaves out: Envoy
/// rejects a LOGICAL_DNS cluster without exactly one endpoint, and with it the whole update.
fn to_cluster(
    ctx: &PushContext,
    service: &Service,
    port: u32,
    subset: &str,
    name: &str,
    proxy: &Proxy,
    dr: Option<&DestinationRule>,
) -> Option<Cluster> {
    let policy = cluster_policy_in(&ctx.mesh, dr, subset, port);
    let mut cluster = Cluster {
        name: name.to_string(),
        connect_timeout: Some(mesh_connect_timeout(ctx)),
        common_lb_config: Some(CommonLbConfig::default()),
        ..Default::default()
    };
    let discovery = match service.resolution {
        Resolution::Dns | Resolution::DnsRoundRobin => {
            cluster.dns_lookup_family = DnsLookupFamily::V4Only as i32;
            let mut assignment =
                eds::load_assignment_for(ctx, name, port, subset, &service.hostname, Some(proxy));
            if assignment
                .endpoints
                .iter()
                .all(|l| l.lb_endpoints.is_empty())
            {
                return None;
            }
            let discovery = if service.resolution == Resolution::Dns {
                DiscoveryType::StrictDns
            } else {
                // One locality with one endpoint, all Envoy accepts of LOGICAL_DNS (the
                // validator allows one endpoint; a selector may pick more).
                assignment.endpoints.truncate(1);
                assignment.endpoints[0].lb_endpoints.truncate(1);
                DiscoveryType::LogicalDns
            };
            cluster.load_assignment = Some(assignment);
            discovery
        }
        // istiod's `convertResolution`: a passthrough service is the original destination
        // on a sidecar (a headless Kubernetes Service's numeric target port overriding the
        // port dialed, `PassthroughTargetPorts`); a gateway cannot use one, so EDS.
        Resolution::None if proxy.proxy_type == ProxyType::Sidecar => {
            cluster.lb_policy = LbPolicy::ClusterProvided as i32;
            let target = service
                .port(port)
                .and_then(|p| p.target_port)
                .filter(|t| service.from_kubernetes && *t != port);
            if let Some(target) = target {
                cluster.lb_config = Some(LbConfig::OriginalDstLbConfig(OriginalDstLbConfig {
                    upstream_port_override: Some(UInt32Value { value: target }),
                    ..Default::default()
                }));
            }
            DiscoveryType::OriginalDst
        }
        Resolution::None | Resolution::Static => DiscoveryType::Eds,
    };
    cluster.cluster_discovery_type = Some(ClusterDiscoveryType::Type(discovery as i32));
    let protocol = service
        .ports
        .iter()
        .find(|p| p.number == port)
        .map(|p| p.protocol.as_str());
    let mut http = protocol.is_some_and(is_http2).then(http2_options);
    pool::apply_h2_upgrade(
        &mut http,
        policy.connection_pool,
        ctx.mesh.h2_upgrade && protocol.is_some_and(crate::is_http),
    );
    pool::apply(
        &mut cluster,
        &mut http,
        policy.connection_pool,
        policy.retry_budget,
    );
    // A sniffed port on a sidecar (istiod's `setUpstreamProtocol`): the upstream speaks
    // the protocol the client spoke.
    if proxy.proxy_type == ProxyType::Sidecar
        && protocol.is_some_and(axon_model::service::is_sniffed_protocol)
    {
        pool::use_downstream_protocol(&mut http);
    }
    outlier::apply(&mut cluster, policy.outlier_detection);
    outlier::apply_error_codes(&mut http, policy.outlier_detection);
    locality::apply(
        &mut cluster,
        LbSetting::effective(policy.load_balancer, &ctx.mesh),
        policy.outlier_detection.is_some(),
    );
    lb::apply(&mut cluster, policy.load_balancer);
    let http2 = matches!(
        http.as_ref()
            .and_then(|h| h.upstream_protocol_options.as_ref()),
        Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(_)),
            }
        ))
    );
    // Auto mTLS where the rule sets no `tls` (istiod's `buildUpstreamTLSSettings`).
    let passthrough = discovery_type(&cluster) == Some(DiscoveryType::OriginalDst);
    let auto = policy.tls.is_none() && auto_mtls::applies(ctx, service, port, passthrough);
    let auto_tls = ClientTls {
        mode: TlsMode::IstioMutual,
        ..ClientTls::default()
    };
    let tls = if auto { Some(&auto_tls) } else { policy.tls };
    let istio_mutual = tls.is_some_and(|t| t.mode == TlsMode::IstioMutual);
    // What ISTIO_MUTUAL reads: istiod's SNI and the destination's service accounts.
    let (sni, service_accounts) = if istio_mutual {
        (
            format!("outbound_.{port}_.{subset}_.{}", service.hostname),
            ctx.service_accounts(&service.hostname, port),
        )
    } else {
        (String::new(), Vec::new())
    };
    tls::apply(
        &mut cluster,
        &mut http,
        tls,
        http2,
        &service.subject_alt_names,
        proxy.proxy_type == ProxyType::Sidecar
            && dr.is_none_or(|dr| dr.workload_selector.is_none()),
        tls::Mesh {
            client_certs: proxy.client_certs.as_ref(),
            istio_agent: proxy.istio_agent,
            sni: &sni,
            service_accounts: &service_accounts,
            mesh_external: service.mesh_external,
        },
    );
    if auto {
        auto_mtls::match_endpoints(&mut cluster, passthrough);
    }
    proxy_protocol::apply(&mut cluster, policy.proxy_protocol);
    // istiod's `applyDestinationRule`: the service's own cluster (not a subset's) of a
    // MESH_EXTERNAL service is marked for the metadata exchange to skip.
    if service.mesh_external && subset.is_empty() {
        mark_external(&mut cluster);
    }
    if discovery_type(&cluster) == Some(DiscoveryType::OriginalDst) {
        cluster.lb_policy = LbPolicy::ClusterProvided as i32;
    }
    // istiod's `maybeApplyEdsConfig`, after the policy (PASSTHROUGH changes the type).
    if discovery_type(&cluster) == Some(DiscoveryType::Eds) {
        cluster.eds_cluster_config = Some(EdsClusterConfig {
            eds_config: Some(ads_config_source()),
            service_name: name.to_string(),
        });
    }
    insert_http_options(&mut cluster, http);
    Some(cluster)
}

/// istiod's `getOrCreateIstioMetadata(...).Fields["external"] = true`: the `istio` filter
/// metadata of a MESH_EXTERNAL service's cluster.
fn mark_external(cluster: &mut Cluster) {
    let istio = cluster
        .metadata
        .get_or_insert_with(Metadata::default)
        .filter_metadata
        .entry("istio".to_string())
        .or_default();
    istio.fields.insert(
        "external".to_string(),
        Value {
            kind: Some(Kind::BoolValue(true)),
        },
    );
}

fn discovery_type(cluster: &Cluster) -> Option<DiscoveryType> {
    match cluster.cluster_discovery_type {
        Some(ClusterDiscoveryType::Type(t)) => DiscoveryType::try_from(t).ok(),
        _ => None,
    }
}

/// A duration of the API (`"10s"`) as a protobuf one; `None` for text that is not one.
fn duration(text: &str) -> Option<Duration> {
    let nanos = axon_config::validate::parse_duration(text)?.max(0);
    Some(Duration {
        seconds: i64::try_from(nanos / 1_000_000_000).ok()?,
        nanos: i32::try_from(nanos % 1_000_000_000).ok()?,
    })
}

/// The key of a cluster's upstream HTTP options.
const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// Protocols that get HTTP/2 to the upstream, as istiod's `Protocol.IsHTTP2`.
fn is_http2(protocol: &str) -> bool {
    matches!(
        protocol.to_ascii_uppercase().as_str(),
        "HTTP2" | "GRPC" | "GRPC-WEB"
    )
}

/// istiod's `setH2Options`: HTTP/2 to the upstream, Envoy's default HTTP/2 settings.
fn http2_options() -> HttpProtocolOptions {
    HttpProtocolOptions {
        upstream_protocol_options: Some(pool::explicit(ProtocolConfig::Http2ProtocolOptions(
            Http2ProtocolOptions::default(),
        ))),
        ..Default::default()
    }
}

/// istiod's cluster for traffic to no known service.
pub const BLACK_HOLE: &str = "BlackHoleCluster";
/// istiod's cluster for traffic to the original destination.
pub const PASSTHROUGH: &str = "PassthroughCluster";

/// istiod's cluster for inbound traffic to a port no service names: the original
/// destination, connected from [`INBOUND_PASSTHROUGH_SOURCE`].
pub const INBOUND_PASSTHROUGH: &str = "InboundPassthroughCluster";
/// The source address of a sidecar's connections to its own application (istiod's
/// `InboundPassthroughBindIpv4`): istio-iptables lets traffic from it through uncaptured.
pub const INBOUND_PASSTHROUGH_SOURCE: &str = "127.0.0.6";

/// istiod's name for the cluster of a proxy's own workload port: `inbound|PORT||`.
pub fn inbound_cluster_name(port: u32) -> String {
    format!("inbound|{port}||")
}

/// `BlackHoleCluster`: static, no endpoints.
fn black_hole(connect_timeout: Duration) -> Resource {
    let cluster = Cluster {
        name: BLACK_HOLE.to_string(),
        connect_timeout: Some(connect_timeout),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        ..Default::default()
    };
    Resource::new(BLACK_HOLE, &cluster)
}

/// An inbound cluster: static to `endpoint`, or, for a Sidecar ingress listener without
/// `defaultEndpoint`, to the original destination (istiod's `buildInboundCluster` with no
/// endpoint address); with the connection pool `policy` gives it (istiod's
/// `applyTrafficPolicy` inbound: the pool and retry budget only, no HTTP/2 upgrade).
fn inbound_cluster(
    name: &str,
    endpoint: Option<&(String, u32)>,
    protocol: &str,
    connect_timeout: Duration,
    policy: &InboundPolicy,
) -> Resource {
    let mut cluster = match endpoint {
        Some((address, port)) => Cluster {
            name: name.to_string(),
            connect_timeout: Some(connect_timeout),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
            load_assignment: Some(eds::load_assignment_at(name, address, *port)),
            ..Default::default()
        },
        None => Cluster {
            name: name.to_string(),
            connect_timeout: Some(connect_timeout),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(
                DiscoveryType::OriginalDst as i32,
            )),
            lb_policy: LbPolicy::ClusterProvided as i32,
            ..Default::default()
        },
    };
    // As istiod: a connection to the application anywhere but loopback leaves from
    // 127.0.0.6, or iptables would capture it back into the sidecar; an original-destination
    // cluster keeps its hosts for good.
    if !endpoint.is_some_and(|(address, _)| address == "127.0.0.1" || address == "::1") {
        cluster.upstream_bind_config = Some(inbound_bind_config());
    }
    if endpoint.is_none() {
        cluster.cleanup_interval = Some(Duration {
            seconds: MAX_DURATION_SECONDS,
            nanos: 0,
        });
    }
    let mut http = None;
    pool::apply(
        &mut cluster,
        &mut http,
        policy.connection_pool.as_ref(),
        policy.retry_budget.as_ref(),
    );
    // istiod's `setUpstreamProtocol` for the port: HTTP/2 to an HTTP/2 or gRPC application,
    // the client's protocol to a sniffed one.
    if is_http2(protocol) {
        let options = http.get_or_insert_with(Default::default);
        if options.upstream_protocol_options.is_none() {
            options.upstream_protocol_options = http2_options().upstream_protocol_options;
        }
    } else if axon_model::service::is_sniffed_protocol(protocol) {
        pool::use_downstream_protocol(&mut http);
    }
    insert_http_options(&mut cluster, http);
    Resource::new(name, &cluster)
}

/// istiod's `passthroughHttpProtocolOptions`, set on both passthrough clusters when they are
/// made (the pool's HTTP options never reach them): the client's protocol upstream, HTTP/1.1
/// or HTTP/2, and a 5-minute idle timeout.
fn set_passthrough_http_options(cluster: &mut Cluster) {
    let mut http = Some(HttpProtocolOptions {
        common_http_protocol_options: Some(
            envoy_types::pb::envoy::config::core::v3::HttpProtocolOptions {
                idle_timeout: Some(Duration {
                    seconds: 300,
                    nanos: 0,
                }),
                ..Default::default()
            },
        ),
        ..Default::default()
    });
    pool::use_downstream_protocol(&mut http);
    insert_http_options(cluster, http);
}

/// The longest duration Envoy takes, in seconds (istiod's `maxSecondsValue`: `i64::MAX`
/// nanoseconds, about 292 years).
const MAX_DURATION_SECONDS: i64 = (i64::MAX - 999_999_999) / 1_000_000_000;

/// Connections from [`INBOUND_PASSTHROUGH_SOURCE`].
fn inbound_bind_config() -> BindConfig {
    BindConfig {
        source_address: Some(SocketAddress {
            address: INBOUND_PASSTHROUGH_SOURCE.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(0)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// istiod's `buildInboundPassthroughCluster`: the default passthrough cluster, renamed,
/// connecting from [`INBOUND_PASSTHROUGH_SOURCE`].
fn inbound_passthrough(
    connect_timeout: Duration,
    pool: Option<&ConnectionPoolSettings>,
) -> Resource {
    let mut cluster = Cluster {
        name: INBOUND_PASSTHROUGH.to_string(),
        connect_timeout: Some(connect_timeout),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        upstream_bind_config: Some(inbound_bind_config()),
        ..Default::default()
    };
    pool::apply(&mut cluster, &mut None, pool, None);
    set_passthrough_http_options(&mut cluster);
    Resource::new(INBOUND_PASSTHROUGH, &cluster)
}

/// Puts `http` (if any) on the cluster; Envoy requires an upstream protocol: HTTP/1.1 unless
/// one is set.
fn insert_http_options(cluster: &mut Cluster, http: Option<HttpProtocolOptions>) {
    let Some(mut http) = http else { return };
    if http.upstream_protocol_options.is_none() {
        http.upstream_protocol_options = Some(pool::explicit(ProtocolConfig::HttpProtocolOptions(
            Default::default(),
        )));
    }
    cluster.typed_extension_protocol_options.insert(
        HTTP_PROTOCOL_OPTIONS.to_string(),
        crate::resource::any(&http),
    );
}

/// istiod's `buildDefaultPassthroughCluster`: the mesh's `defaultTrafficPolicy`
/// connection pool (else the empty one: the largest circuit breakers). The pool's upstream
/// HTTP options are not kept (istiod applies the pool to a wrapper it never builds); the
/// cluster's own are istiod's `passthroughHttpProtocolOptions`.
fn passthrough(connect_timeout: Duration, pool: Option<&ConnectionPoolSettings>) -> Resource {
    let mut cluster = Cluster {
        name: PASSTHROUGH.to_string(),
        connect_timeout: Some(connect_timeout),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(
            DiscoveryType::OriginalDst as i32,
        )),
        lb_policy: LbPolicy::ClusterProvided as i32,
        ..Default::default()
    };
    pool::apply(&mut cluster, &mut None, pool, None);
    set_passthrough_http_options(&mut cluster);
    Resource::new(PASSTHROUGH, &cluster)
}
