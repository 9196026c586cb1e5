//! `TrafficPolicy` of a DestinationRule (of the rule, of a subset, of a port), typed for the
//! generators: load balancing, connection pool, outlier detection and client TLS, as
//! istio/api's `destination_rule.proto` has them. Durations stay the strings the API takes
//! (`"10s"`), read with the validator's `parse_duration` by who uses them.
//!
//! A policy is kept twice ([`PolicyDoc`]): as written, for the validator, and typed. A policy
//! that does not type (a wrong type somewhere) is typed as empty: the validator rejects its
//! document, so the empty one never reaches a generator.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A traffic policy as written (`json`, which the validator reads) and as typed (`policy`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyDoc {
    pub json: serde_json::Value,
    pub policy: Box<TrafficPolicy>,
}

impl<'de> Deserialize<'de> for PolicyDoc {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = serde_json::Value::deserialize(d)?;
        let policy = serde_json::from_value(json.clone()).unwrap_or_default();
        Ok(PolicyDoc { json, policy })
    }
}

impl PolicyDoc {
    /// istiod's `mergeBackendPolicyTrafficPolicy`: `user`'s policy over `backend`'s (a
    /// BackendTLSPolicy's): each top-level field `user` sets wins, the rest is `backend`'s;
    /// ports: a port both set takes `user`'s fields and `backend`'s where `user` has none,
    /// a port only `backend` sets is added.
    pub fn under(user: Option<&PolicyDoc>, backend: Option<&PolicyDoc>) -> Option<PolicyDoc> {
        let (user, backend) = match (user, backend) {
            (None, b) => return b.cloned(),
            (u, None) => return u.cloned(),
            (Some(u), Some(b)) => (&u.json, &b.json),
        };
        let mut merged = serde_json::Map::new();
        for key in [
            "connectionPool",
            "loadBalancer",
            "outlierDetection",
            "tls",
            "tunnel",
            "proxyProtocol",
            "retryBudget",
        ] {
            if let Some(v) = user.get(key).or_else(|| backend.get(key)) {
                merged.insert(key.to_string(), v.clone());
            }
        }
        let number = |p: &serde_json::Value| p["port"]["number"].as_u64();
        let mut ports: Vec<serde_json::Value> = user["portLevelSettings"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for bp in backend["portLevelSettings"]
            .as_array()
            .into_iter()
            .flatten()
        {
            match ports.iter_mut().find(|p| number(p) == number(bp)) {
                Some(up) => {
                    for key in ["loadBalancer", "connectionPool", "outlierDetection", "tls"] {
                        if up.get(key).is_none_or(|v| v.is_null())
                            && let Some(v) = bp.get(key)
                        {
                            up[key] = v.clone();
                        }
                    }
                }
                None => ports.push(bp.clone()),
            }
        }
        if !ports.is_empty() {
            merged.insert("portLevelSettings".into(), serde_json::Value::Array(ports));
        }
        let json = serde_json::Value::Object(merged);
        let policy = serde_json::from_value(json.clone()).unwrap_or_default();
        Some(PolicyDoc { json, policy })
    }
}

impl Serialize for PolicyDoc {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TrafficPolicy {
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<ClientTls>,
    pub port_level_settings: Option<Vec<PortTrafficPolicy>>,
    pub retry_budget: Option<RetryBudget>,
    pub proxy_protocol: Option<ProxyProtocol>,
    // `tunnel` is not translated: the field tables report it.
}

/// `TrafficPolicy.ProxyProtocol`: a PROXY protocol header ahead of each upstream connection.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ProxyProtocol {
    #[serde(default)]
    pub version: ProxyProtocolVersion,
}

/// `TrafficPolicy.ProxyProtocol.VERSION`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum ProxyProtocolVersion {
    #[default]
    V1,
    V2,
}

/// `TrafficPolicy.RetryBudget`: retries as a share of the active requests.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryBudget {
    pub percent: Option<f64>,
    pub min_retry_concurrency: Option<u32>,
    pub budget_interval: Option<String>,
}

/// A `portLevelSettings` entry: the policy of one destination port.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortTrafficPolicy {
    pub port: Option<PortNumber>,
    pub load_balancer: Option<LoadBalancerSettings>,
    pub connection_pool: Option<ConnectionPoolSettings>,
    pub outlier_detection: Option<OutlierDetection>,
    pub tls: Option<ClientTls>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PortNumber {
    #[serde(default)]
    pub number: u32,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerSettings {
    pub simple: Option<SimpleLb>,
    pub consistent_hash: Option<ConsistentHash>,
    pub locality_lb_setting: Option<LocalityLbSetting>,
    pub zone_aware_lb_setting: Option<ZoneAwareLbSetting>,
    /// A duration (`"60s"`): the slow-start window.
    pub warmup_duration_secs: Option<String>,
    pub warmup: Option<Warmup>,
}

/// `LocalityLoadBalancerSetting`: weights by locality (`distribute`), or failover order
/// (`failover` between regions, `failoverPriority` by labels).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalityLbSetting {
    #[serde(default, deserialize_with = "null_default")]
    pub distribute: Vec<LocalityDistribute>,
    #[serde(default, deserialize_with = "null_default")]
    pub failover: Vec<LocalityFailover>,
    #[serde(default, deserialize_with = "null_default")]
    pub failover_priority: Vec<String>,
    pub enabled: Option<bool>,
}

/// `LocalityLoadBalancerSetting.Distribute`: for proxies in `from`, the share (out of 100)
/// of each destination locality (`*` matches any at its level).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LocalityDistribute {
    #[serde(default)]
    pub from: String,
    #[serde(default, deserialize_with = "null_default")]
    pub to: std::collections::BTreeMap<String, u32>,
}

/// `LocalityLoadBalancerSetting.Failover` (and `ZoneAwareLoadBalancerSetting.Failover`): a
/// region proxies in `from` fail over to before the others.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct LocalityFailover {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
}

/// `ZoneAwareLoadBalancerSetting`: Envoy's zone-aware routing within the proxy's region,
/// regions ordered by `failover`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneAwareLbSetting {
    pub enabled: Option<bool>,
    #[serde(default, deserialize_with = "null_default")]
    pub failover: Vec<LocalityFailover>,
    #[serde(default, deserialize_with = "null_default")]
    pub failover_priority: Vec<String>,
    pub min_cluster_size: Option<u32>,
}

/// A list or map that YAML may write as `null`: empty.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// `LoadBalancerSettings.SimpleLB`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLb {
    #[default]
    Unspecified,
    LeastConn,
    Random,
    Passthrough,
    RoundRobin,
    LeastRequest,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsistentHash {
    pub http_header_name: Option<String>,
    pub http_cookie: Option<HttpCookie>,
    pub use_source_ip: Option<bool>,
    pub http_query_parameter_name: Option<String>,
    pub ring_hash: Option<RingHash>,
    pub maglev: Option<Maglev>,
    /// Deprecated in favour of `ringHash.minimumRingSize`.
    pub minimum_ring_size: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpCookie {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub path: String,
    pub ttl: Option<String>,
    pub attributes: Option<Vec<CookieAttribute>>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct CookieAttribute {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RingHash {
    pub minimum_ring_size: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Maglev {
    pub table_size: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Warmup {
    pub duration: Option<String>,
    pub minimum_percent: Option<f64>,
    pub aggression: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ConnectionPoolSettings {
    pub tcp: Option<TcpSettings>,
    pub http: Option<HttpSettings>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpSettings {
    pub max_connections: Option<i64>,
    pub connect_timeout: Option<String>,
    pub tcp_keepalive: Option<TcpKeepalive>,
    pub max_connection_duration: Option<String>,
    pub idle_timeout: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TcpKeepalive {
    pub probes: Option<u32>,
    pub time: Option<String>,
    pub interval: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpSettings {
    pub http1_max_pending_requests: Option<i64>,
    pub http2_max_requests: Option<i64>,
    pub max_requests_per_connection: Option<i64>,
    pub max_retries: Option<i64>,
    pub idle_timeout: Option<String>,
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    pub use_client_protocol: Option<bool>,
    pub max_concurrent_streams: Option<i64>,
    pub http2_keep_alive: Option<ConnectionKeepalive>,
}

/// `ConnectionPoolSettings.HTTPSettings.ConnectionKeepalive`: HTTP/2 PINGs.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ConnectionKeepalive {
    pub interval: Option<String>,
    pub timeout: Option<String>,
}

/// `ConnectionPoolSettings.HTTPSettings.H2UpgradePolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum H2UpgradePolicy {
    #[default]
    Default,
    DoNotUpgrade,
    Upgrade,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutlierDetection {
    #[serde(rename = "consecutive5xxErrors")]
    pub consecutive_5xx_errors: Option<u32>,
    pub consecutive_gateway_errors: Option<u32>,
    pub consecutive_local_origin_failures: Option<u32>,
    #[serde(default)]
    pub split_external_local_origin_errors: bool,
    pub interval: Option<String>,
    pub base_ejection_time: Option<String>,
    #[serde(default)]
    pub max_ejection_percent: i64,
    #[serde(default)]
    pub min_health_percent: i64,
    pub outlier_detection_http_error_codes: Option<Vec<u32>>,
}

/// `ClientTLSSettings`: how a proxy talks TLS to the upstream.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientTls {
    #[serde(default)]
    pub mode: TlsMode,
    #[serde(default)]
    pub client_certificate: String,
    #[serde(default)]
    pub private_key: String,
    #[serde(default)]
    pub ca_certificates: String,
    #[serde(default)]
    pub credential_name: String,
    pub subject_alt_names: Option<Vec<String>>,
    #[serde(default)]
    pub sni: String,
    pub insecure_skip_verify: Option<bool>,
    #[serde(default)]
    pub ca_crl: String,
}

/// `ClientTLSSettings.TLSmode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TlsMode {
    #[default]
    Disable,
    Simple,
    Mutual,
    IstioMutual,
}
