//! A cluster's connection pool, as istiod's `applyH2Upgrade` and `applyConnectionPool` set it
//! (`cluster_traffic_policy.go`): circuit breakers at the largest thresholds (remaining
//! counts tracked) unless the policy lowers them, the connect timeout, TCP keepalive, the
//! upstream HTTP options (idle timeout, requests per connection, connection duration,
//! HTTP/2 streams and PINGs), `h2UpgradePolicy`, `useClientProtocol`, and the policy's
//! `retryBudget`.

use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::Thresholds;
use envoy_types::pb::envoy::config::cluster::v3::circuit_breakers::thresholds::RetryBudget as RetryBudgetThreshold;
use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, UpstreamConnectionOptions,
};
use envoy_types::pb::envoy::config::core::v3::{
    Http1ProtocolOptions, Http2ProtocolOptions, HttpProtocolOptions as CommonHttpOptions,
    KeepaliveSettings, TcpKeepalive,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    ExplicitHttpConfig, UpstreamProtocolOptions, UseDownstreamHttpConfig,
    explicit_http_config::ProtocolConfig,
};
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt32Value;

use super::duration;
use axon_config::istio::traffic_policy::{
    ConnectionPoolSettings, H2UpgradePolicy, RetryBudget, TcpSettings,
};

/// istiod's `getDefaultCircuitBreakerThresholds`: no limit Envoy would otherwise impose
/// (its defaults are 1024 connections, pending and requests, and 3 retries).
pub(super) fn default_thresholds() -> Thresholds {
    let max = Some(UInt32Value { value: u32::MAX });
    Thresholds {
        max_connections: max,
        max_pending_requests: max,
        max_requests: max,
        max_retries: max,
        track_remaining: true,
        ..Default::default()
    }
}

/// istiod's `shouldH2Upgrade` and `setH2Options`: HTTP/2 to the upstream when the policy asks
/// for `UPGRADE` (on any port), or when the mesh's `h2UpgradePolicy` is `UPGRADE`
/// (`mesh_upgrade`, given for HTTP ports only) and the policy neither says `DO_NOT_UPGRADE`
/// nor keeps the client's protocol.
pub(super) fn apply_h2_upgrade(
    http: &mut Option<HttpProtocolOptions>,
    pool: Option<&ConnectionPoolSettings>,
    mesh_upgrade: bool,
) {
    let settings = pool.and_then(|p| p.http.as_ref());
    if settings.is_some_and(|s| s.use_client_protocol == Some(true)) {
        return;
    }
    let upgrade = match settings.and_then(|s| s.h2_upgrade_policy) {
        Some(H2UpgradePolicy::Upgrade) => true,
        Some(H2UpgradePolicy::DoNotUpgrade) => false,
        _ => mesh_upgrade,
    };
    if upgrade {
        let options = http.get_or_insert_with(Default::default);
        if options.upstream_protocol_options.is_none() {
            options.upstream_protocol_options = Some(explicit(
                ProtocolConfig::Http2ProtocolOptions(Http2ProtocolOptions::default()),
            ));
        }
    }
}

/// The circuit breakers, timeouts and upstream HTTP options of `pool` (none: istiod's
/// defaults).
pub(super) fn apply(
    cluster: &mut Cluster,
    http: &mut Option<HttpProtocolOptions>,
    pool: Option<&ConnectionPoolSettings>,
    retry_budget: Option<&RetryBudget>,
) {
    let mut threshold = default_thresholds();
    if let Some(budget) = retry_budget {
        threshold.retry_budget = Some(to_retry_budget(budget));
    }
    let count = |v: Option<i64>| {
        v.filter(|v| *v > 0).map(|v| UInt32Value {
            value: u32::try_from(v).unwrap_or(u32::MAX),
        })
    };
    let mut idle_timeout = None;
    let mut max_requests_per_connection = None;
    let mut max_concurrent_streams = None;
    let mut max_connection_duration = None;
    let mut keepalive = None;
    if let Some(h) = pool.and_then(|p| p.http.as_ref()) {
        keepalive = h.http2_keep_alive.as_ref();
        if let Some(v) = count(h.http2_max_requests) {
            threshold.max_requests = Some(v);
        }
        if let Some(v) = count(h.http1_max_pending_requests) {
            threshold.max_pending_requests = Some(v);
        }
        if let Some(v) = count(h.max_retries) {
            threshold.max_retries = Some(v);
        }
        idle_timeout = h.idle_timeout.as_deref().and_then(duration);
        max_requests_per_connection = count(h.max_requests_per_connection);
        max_concurrent_streams = count(h.max_concurrent_streams);
    }
    let tcp = pool.and_then(|p| p.tcp.as_ref());
    if let Some(tcp) = tcp {
        if let Some(timeout) = tcp.connect_timeout.as_deref().and_then(duration) {
            cluster.connect_timeout = Some(timeout);
        }
        if let Some(v) = count(tcp.max_connections) {
            threshold.max_connections = Some(v);
        }
        max_connection_duration = tcp.max_connection_duration.as_deref().and_then(duration);
        if idle_timeout.is_none() {
            idle_timeout = tcp.idle_timeout.as_deref().and_then(duration);
        }
        apply_keepalive(cluster, tcp);
    }
    cluster.circuit_breakers = Some(CircuitBreakers {
        thresholds: vec![threshold],
        ..Default::default()
    });
    if idle_timeout.is_some()
        || max_requests_per_connection.is_some()
        || max_connection_duration.is_some()
        || max_concurrent_streams.is_some()
        || keepalive.is_some()
    {
        let options = http.get_or_insert_with(Default::default);
        let common = options
            .common_http_protocol_options
            .get_or_insert_with(CommonHttpOptions::default);
        if idle_timeout.is_some() {
            common.idle_timeout = idle_timeout;
        }
        if max_requests_per_connection.is_some() {
            common.max_requests_per_connection = max_requests_per_connection;
        }
        if max_connection_duration.is_some() {
            common.max_connection_duration = max_connection_duration;
        }
        if let Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
            protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(h2)),
        })) = &mut options.upstream_protocol_options
        {
            if max_concurrent_streams.is_some() {
                h2.max_concurrent_streams = max_concurrent_streams;
            }
            if let Some(k) = keepalive {
                h2.connection_keepalive = Some(KeepaliveSettings {
                    interval: k.interval.as_deref().and_then(duration),
                    timeout: k.timeout.as_deref().and_then(duration),
                    ..Default::default()
                });
            }
        }
    }
    if pool
        .and_then(|p| p.http.as_ref())
        .is_some_and(|h| h.use_client_protocol == Some(true))
    {
        use_downstream_protocol(http);
    }
}

/// istiod's `setUseDownstreamProtocol`: the upstream speaks what the client spoke (HTTP/1.1,
/// with the explicit HTTP/1 options kept, or HTTP/2).
pub(super) fn use_downstream_protocol(http: &mut Option<HttpProtocolOptions>) {
    {
        let options = http.get_or_insert_with(Default::default);
        let http1 = match &options.upstream_protocol_options {
            Some(UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::HttpProtocolOptions(h1)),
            })) => h1.clone(),
            _ => Http1ProtocolOptions::default(),
        };
        options.upstream_protocol_options = Some(
            UpstreamProtocolOptions::UseDownstreamProtocolConfig(UseDownstreamHttpConfig {
                http_protocol_options: Some(http1),
                http2_protocol_options: Some(Http2ProtocolOptions::default()),
                ..Default::default()
            }),
        );
    }
}

/// istiod's `applyRetryBudget`: 20% of the active requests and at least 3 unless given.
fn to_retry_budget(budget: &RetryBudget) -> RetryBudgetThreshold {
    RetryBudgetThreshold {
        budget_percent: Some(Percent {
            value: budget.percent.unwrap_or(20.0),
        }),
        min_retry_concurrency: Some(UInt32Value {
            value: budget.min_retry_concurrency.filter(|m| *m > 0).unwrap_or(3),
        }),
        budget_interval: budget.budget_interval.as_deref().and_then(duration),
    }
}

/// istiod's `setKeepAliveSettings`: SO_KEEPALIVE with the OS defaults, and what is given.
fn apply_keepalive(cluster: &mut Cluster, tcp: &TcpSettings) {
    let Some(keepalive) = &tcp.tcp_keepalive else {
        return;
    };
    let options = cluster
        .upstream_connection_options
        .get_or_insert_with(UpstreamConnectionOptions::default);
    let out = options
        .tcp_keepalive
        .get_or_insert_with(TcpKeepalive::default);
    let seconds = |text: &Option<String>| {
        let d = duration(text.as_deref()?)?;
        Some(UInt32Value {
            value: u32::try_from(d.seconds).unwrap_or(u32::MAX),
        })
    };
    if let Some(probes) = keepalive.probes.filter(|p| *p > 0) {
        out.keepalive_probes = Some(UInt32Value { value: probes });
    }
    if let Some(time) = seconds(&keepalive.time) {
        out.keepalive_time = Some(time);
    }
    if let Some(interval) = seconds(&keepalive.interval) {
        out.keepalive_interval = Some(interval);
    }
}

/// An explicit upstream protocol.
pub(super) fn explicit(config: ProtocolConfig) -> UpstreamProtocolOptions {
    UpstreamProtocolOptions::ExplicitHttpConfig(ExplicitHttpConfig {
        protocol_config: Some(config),
    })
}
