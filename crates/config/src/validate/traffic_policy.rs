//! DestinationRule traffic policies (`trafficPolicy` of the rule, of a subset, or of a port):
//! load balancing, connection pools (also read for Sidecar ingress listeners), outlier
//! detection, tunnels and the PROXY protocol. The client `tls` block is checked by `tls`.

use serde::Deserialize;
use serde_json::Value;

use super::fields::{
    Errors, PORT_RANGE, duration, nullable, parse_duration, port_in_range, required_port, typed,
    unsupported_value,
};
use super::names::{fqdn, is_ip};
use super::tls::{ClientTls, client_tls};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TrafficPolicy {
    load_balancer: Option<LoadBalancer>,
    connection_pool: Option<ConnectionPool>,
    outlier_detection: Option<OutlierDetection>,
    tls: Option<ClientTls>,
    #[serde(default, deserialize_with = "nullable")]
    port_level_settings: Vec<PortTrafficPolicy>,
    tunnel: Option<Tunnel>,
    proxy_protocol: Option<ProxyProtocol>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortTrafficPolicy {
    port: Option<NumberSelector>,
    load_balancer: Option<LoadBalancer>,
    connection_pool: Option<ConnectionPool>,
    outlier_detection: Option<OutlierDetection>,
    tls: Option<ClientTls>,
}

#[derive(Deserialize)]
struct NumberSelector {
    number: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoadBalancer {
    simple: Option<String>,
    consistent_hash: Option<ConsistentHash>,
    locality_lb_setting: Option<Value>,
    zone_aware_lb_setting: Option<Value>,
    warmup_duration_secs: Option<String>,
    warmup: Option<Warmup>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ConsistentHash {
    http_header_name: Option<String>,
    http_cookie: Option<HttpCookie>,
    use_source_ip: Option<bool>,
    http_query_parameter_name: Option<String>,
    minimum_ring_size: Option<u64>,
    ring_hash: Option<Value>,
    maglev: Option<Maglev>,
}

#[derive(Deserialize)]
struct HttpCookie {
    name: Option<String>,
    ttl: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Maglev {
    table_size: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Warmup {
    duration: Option<String>,
    minimum_percent: Option<f64>,
    aggression: Option<f64>,
}

#[derive(Deserialize)]
pub(super) struct ConnectionPool {
    tcp: Option<TcpSettings>,
    http: Option<HttpSettings>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TcpSettings {
    max_connections: Option<i64>,
    connect_timeout: Option<String>,
    tcp_keepalive: Option<TcpKeepalive>,
    max_connection_duration: Option<String>,
    idle_timeout: Option<String>,
}

#[derive(Deserialize)]
struct TcpKeepalive {
    time: Option<String>,
    interval: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HttpSettings {
    http1_max_pending_requests: Option<i64>,
    http2_max_requests: Option<i64>,
    max_requests_per_connection: Option<i64>,
    max_retries: Option<i64>,
    max_concurrent_streams: Option<i64>,
    idle_timeout: Option<String>,
    h2_upgrade_policy: Option<String>,
    use_client_protocol: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OutlierDetection {
    consecutive_local_origin_failures: Option<i64>,
    split_external_local_origin_errors: Option<bool>,
    interval: Option<String>,
    base_ejection_time: Option<String>,
    max_ejection_percent: Option<i64>,
    min_health_percent: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Tunnel {
    protocol: Option<String>,
    target_host: Option<String>,
    target_port: Option<i64>,
}

#[derive(Deserialize)]
struct ProxyProtocol {
    version: Option<String>,
}

/// The mesh config's `defaultTrafficPolicy`: its connection pool and outlier detection,
/// checked as a DestinationRule's.
pub(super) fn default_traffic_policy(errs: &mut Errors, path: &str, value: &Value) {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct DefaultTrafficPolicy {
        connection_pool: Option<ConnectionPool>,
        outlier_detection: Option<OutlierDetection>,
    }
    let Some(policy) = typed::<DefaultTrafficPolicy>(errs, path, value) else {
        return;
    };
    if let Some(pool) = &policy.connection_pool {
        connection_pool(errs, &format!("{path}.connectionPool"), pool);
    }
    if let Some(outlier) = &policy.outlier_detection {
        outlier_detection(errs, &format!("{path}.outlierDetection"), outlier);
    }
}

pub(super) fn traffic_policy(errs: &mut Errors, path: &str, value: &Value) {
    if value.as_object().is_some_and(|o| o.is_empty()) {
        errs.add(path, "traffic policy must have at least one field");
        return;
    }
    let Some(policy) = typed::<TrafficPolicy>(errs, path, value) else {
        return;
    };
    if let Some(lb) = &policy.load_balancer {
        load_balancer(errs, &format!("{path}.loadBalancer"), lb);
    }
    if let Some(pool) = &policy.connection_pool {
        connection_pool(errs, &format!("{path}.connectionPool"), pool);
    }
    if let Some(outlier) = &policy.outlier_detection {
        outlier_detection(errs, &format!("{path}.outlierDetection"), outlier);
    }
    if let Some(tls) = &policy.tls {
        client_tls(errs, &format!("{path}.tls"), tls);
    }
    for (i, port_policy) in policy.port_level_settings.iter().enumerate() {
        let p = format!("{path}.portLevelSettings[{i}]");
        match &port_policy.port {
            None => errs.add(format!("{p}.port"), "Required value"),
            Some(sel) => {
                if !sel.number.is_some_and(port_in_range) {
                    errs.add(format!("{p}.port.number"), PORT_RANGE);
                }
            }
        }
        if port_policy.load_balancer.is_none()
            && port_policy.connection_pool.is_none()
            && port_policy.outlier_detection.is_none()
            && port_policy.tls.is_none()
        {
            errs.add(&p, "port traffic policy must have at least one field");
        }
        if let Some(lb) = &port_policy.load_balancer {
            load_balancer(errs, &format!("{p}.loadBalancer"), lb);
        }
        if let Some(pool) = &port_policy.connection_pool {
            connection_pool(errs, &format!("{p}.connectionPool"), pool);
        }
        if let Some(outlier) = &port_policy.outlier_detection {
            outlier_detection(errs, &format!("{p}.outlierDetection"), outlier);
        }
        if let Some(tls) = &port_policy.tls {
            client_tls(errs, &format!("{p}.tls"), tls);
        }
    }
    if policy.tunnel.is_some() && policy.proxy_protocol.is_some() {
        errs.add(path, "tunnel and proxyProtocol must not be set together");
    }
    if let Some(tunnel) = &policy.tunnel {
        let p = format!("{path}.tunnel");
        if let Some(proto) = &tunnel.protocol
            && !matches!(proto.as_str(), "" | "CONNECT" | "POST")
        {
            errs.add(
                format!("{p}.protocol"),
                "tunnel protocol must be \"CONNECT\" or \"POST\"",
            );
        }
        match tunnel.target_host.as_deref() {
            None | Some("") => errs.add(format!("{p}.targetHost"), "Required value"),
            Some(h) if !is_ip(h) && fqdn(h).is_err() => errs.add(
                format!("{p}.targetHost"),
                format!("tunnel target host must be a valid FQDN or IP address: {h:?}"),
            ),
            Some(_) => {}
        }
        required_port(errs, &format!("{p}.targetPort"), tunnel.target_port);
    }
    if let Some(pp) = &policy.proxy_protocol
        && let Some(v) = &pp.version
        && !matches!(v.as_str(), "V1" | "V2")
    {
        errs.add(
            format!("{path}.proxyProtocol.version"),
            format!("Unsupported value: {v:?}: supported values: \"V1\", \"V2\""),
        );
    }
}

fn load_balancer(errs: &mut Errors, path: &str, lb: &LoadBalancer) {
    if lb.simple.is_some() && lb.consistent_hash.is_some() {
        errs.add(path, "only one of simple or consistentHash can be set");
    }
    if let Some(simple) = &lb.simple {
        const SIMPLE: [&str; 6] = [
            "UNSPECIFIED",
            "LEAST_CONN",
            "RANDOM",
            "PASSTHROUGH",
            "ROUND_ROBIN",
            "LEAST_REQUEST",
        ];
        unsupported_value(errs, &format!("{path}.simple"), simple, &SIMPLE);
    }
    if let Some(hash) = &lb.consistent_hash {
        let p = format!("{path}.consistentHash");
        let keys = [
            hash.http_header_name.is_some(),
            hash.http_cookie.is_some(),
            hash.use_source_ip.is_some(),
            hash.http_query_parameter_name.is_some(),
        ];
        if keys.iter().filter(|k| **k).count() > 1 {
            errs.add(
                &p,
                "only one of httpHeaderName, httpCookie, useSourceIp or httpQueryParameterName can be set",
            );
        }
        if let Some(cookie) = &hash.http_cookie {
            if cookie.name.as_deref().unwrap_or_default().is_empty() {
                errs.add(
                    format!("{p}.httpCookie.name"),
                    "Required value: name required for HttpCookie",
                );
            }
            if let Some(ttl) = &cookie.ttl {
                duration(errs, &format!("{p}.httpCookie.ttl"), ttl, false);
            }
        }
        if hash.ring_hash.is_some() && hash.maglev.is_some() {
            errs.add(&p, "only one of ringHash or maglev can be set");
        }
        if hash.minimum_ring_size.unwrap_or(0) != 0
            && (hash.ring_hash.is_some() || hash.maglev.is_some())
        {
            errs.add(
                &p,
                "only one of minimumRingSize or maglev/ringHash can be specified",
            );
        }
        if let Some(maglev) = &hash.maglev {
            let size = maglev.table_size.unwrap_or(0);
            let tp = format!("{p}.maglev.tableSize");
            if size == 0 {
                errs.add(&tp, "tableSize must be set for maglev");
            } else if size >= 5_000_011 {
                errs.add(&tp, "tableSize must be less than 5000011 for maglev");
            } else if !is_prime(size) {
                errs.add(&tp, "tableSize must be a prime number for maglev");
            }
        }
    }
    if lb.locality_lb_setting.is_some() && lb.zone_aware_lb_setting.is_some() {
        errs.add(
            path,
            "only one of localityLbSetting and zoneAwareLbSetting can be set",
        );
    }
    if let Some(l) = lb.locality_lb_setting.as_ref().filter(|v| !v.is_null()) {
        super::locality::locality_lb(errs, &format!("{path}.localityLbSetting"), l);
    }
    if let Some(z) = lb.zone_aware_lb_setting.as_ref().filter(|v| !v.is_null()) {
        super::locality::zone_aware_lb(errs, &format!("{path}.zoneAwareLbSetting"), z);
    }
    if lb.warmup_duration_secs.is_some() && lb.warmup.is_some() {
        errs.add(path, "only one of warmupDurationSecs or warmup can be set");
    }
    if let Some(d) = &lb.warmup_duration_secs {
        duration(errs, &format!("{path}.warmupDurationSecs"), d, false);
    }
    if let Some(warmup) = &lb.warmup {
        let p = format!("{path}.warmup");
        match &warmup.duration {
            None => errs.add(format!("{p}.duration"), "Required value"),
            Some(d) => duration(errs, &format!("{p}.duration"), d, true),
        }
        if let Some(pct) = warmup.minimum_percent
            && !(0.0..=100.0).contains(&pct)
        {
            errs.add(
                format!("{p}.minimumPercent"),
                format!("Invalid value: {pct}: must be between 0 and 100"),
            );
        }
        // The CRD of the Istio API the corpus pins says `Minimum=1`; istio/api later (#3602)
        // relaxed it to `Minimum=0`, matching Envoy. axon keeps the stricter bound for now.
        if let Some(aggression) = warmup.aggression
            && (aggression.is_nan() || aggression < 1.0)
        {
            errs.add(
                format!("{p}.aggression"),
                format!("Invalid value: {aggression}: must be greater than or equal to 1"),
            );
        }
    }
}

pub(super) fn connection_pool(errs: &mut Errors, path: &str, pool: &ConnectionPool) {
    if pool.tcp.is_none() && pool.http.is_none() {
        errs.add(path, "connection pool must have at least one field");
    }
    if let Some(http) = &pool.http {
        let p = format!("{path}.http");
        let counters = [
            ("http1MaxPendingRequests", http.http1_max_pending_requests),
            ("http2MaxRequests", http.http2_max_requests),
            ("maxRequestsPerConnection", http.max_requests_per_connection),
            ("maxRetries", http.max_retries),
            ("maxConcurrentStreams", http.max_concurrent_streams),
        ];
        for (field, value) in counters {
            if value.is_some_and(|v| v < 0) {
                errs.add(format!("{p}.{field}"), "must be non-negative");
            }
        }
        if let Some(d) = &http.idle_timeout {
            duration(errs, &format!("{p}.idleTimeout"), d, true);
        }
        if let Some(policy) = &http.h2_upgrade_policy {
            unsupported_value(
                errs,
                &format!("{p}.h2UpgradePolicy"),
                policy,
                &["DEFAULT", "DO_NOT_UPGRADE", "UPGRADE"],
            );
            if policy == "UPGRADE" && http.use_client_protocol == Some(true) {
                errs.add(
                    &p,
                    "useClientProtocol must not be true when h2UpgradePolicy is UPGRADE",
                );
            }
        }
    }
    if let Some(tcp) = &pool.tcp {
        let p = format!("{path}.tcp");
        if tcp.max_connections.is_some_and(|v| v < 0) {
            errs.add(format!("{p}.maxConnections"), "must be non-negative");
        }
        if let Some(d) = &tcp.connect_timeout {
            duration(errs, &format!("{p}.connectTimeout"), d, true);
        }
        if let Some(d) = &tcp.max_connection_duration {
            duration(errs, &format!("{p}.maxConnectionDuration"), d, true);
        }
        if let Some(d) = &tcp.idle_timeout {
            // 0s disables the timeout.
            let disabled = parse_duration(d) == Some(0);
            duration(errs, &format!("{p}.idleTimeout"), d, !disabled);
        }
        if let Some(ka) = &tcp.tcp_keepalive {
            if let Some(d) = &ka.time {
                duration(errs, &format!("{p}.tcpKeepalive.time"), d, true);
            }
            if let Some(d) = &ka.interval {
                duration(errs, &format!("{p}.tcpKeepalive.interval"), d, true);
            }
        }
    }
}

fn outlier_detection(errs: &mut Errors, path: &str, outlier: &OutlierDetection) {
    if let Some(d) = &outlier.base_ejection_time {
        duration(errs, &format!("{path}.baseEjectionTime"), d, true);
    }
    if let Some(d) = &outlier.interval {
        duration(errs, &format!("{path}.interval"), d, true);
    }
    if outlier.consecutive_local_origin_failures.unwrap_or(0) > 0
        && outlier.split_external_local_origin_errors != Some(true)
    {
        errs.add(
            format!("{path}.consecutiveLocalOriginFailures"),
            "consecutive local origin failures is specified, but splitExternalLocalOriginErrors is not true",
        );
    }
    for (field, value) in [
        ("maxEjectionPercent", outlier.max_ejection_percent),
        ("minHealthPercent", outlier.min_health_percent),
    ] {
        if let Some(v) = value
            && !(0..=100).contains(&v)
        {
            errs.add(
                format!("{path}.{field}"),
                format!("percentage {v} is not in range 0..100"),
            );
        }
    }
}

fn is_prime(x: u64) -> bool {
    if x < 2 {
        return false;
    }
    let mut f = 2;
    while f * f <= x {
        if x.is_multiple_of(f) {
            return false;
        }
        f += 1;
    }
    true
}
