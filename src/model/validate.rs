//! Semantic validation of Istio configs, as Istio's CRD schema (OpenAPI + CEL) does it.
//!
//! Called by [`super::parse`] on every typed config; returns every reason a config is invalid.
//!
//! The rules are those of Istio's two validation layers: the CRD schema generated from
//! istio/api (types, enums, ranges and the CEL `x-kubernetes-validations` rules) and the
//! validating webhook of istiod (istio/istio `pkg/config/validation`). What Istio only warns
//! about is accepted here. Where a rule of those layers would reject configs that the Istio
//! project itself publishes as valid samples or test data, the published configs win; those
//! places say "Deviation".
//!
//! Every message is `<field path>: <reason>`, for example
//! `spec.ports[1].number: port must be between 1-65535`. Map entries are written with their
//! key in brackets: `spec.ports[http]`.
//!
//! Sub-objects that axon keeps as `serde_json::Value` (DestinationRule traffic policies,
//! Gateway server `tls`, Sidecar `ingress` and `outboundTrafficPolicy`, VirtualService `tcp`
//! and `tls` routes, WorkloadGroup `probe` and `metadata`) are read here into private serde
//! shapes. As everywhere in axon, fields those shapes do not name are ignored, so only what
//! the typed model (and these shapes) can see is checked.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Display;
use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::config::{Config, Spec};
use super::host;
use super::istio::{
    CaptureMode, Destination, DestinationRule, Gateway, HttpMatchRequest, HttpRoute, Labels,
    Resolution, ServiceEntry, Sidecar, StringMatch, VirtualService, WorkloadEntry, WorkloadGroup,
};

/// Checks one config. `Err` holds one message per problem, each naming the field.
pub fn validate(config: &Config) -> Result<(), Vec<String>> {
    let mut errs = Errors::default();
    let namespace = config.namespace();
    match &config.spec {
        Spec::ServiceEntry(se) => service_entry(&mut errs, se, namespace),
        Spec::WorkloadEntry(we) => workload_entry(&mut errs, "spec", we, AddressRule::IpOrFqdn),
        Spec::WorkloadGroup(wg) => workload_group(&mut errs, wg),
        Spec::VirtualService(vs) => virtual_service(&mut errs, vs, namespace),
        Spec::DestinationRule(dr) => destination_rule(&mut errs, dr, namespace),
        Spec::Gateway(gw) => gateway(&mut errs, gw, config.name()),
        Spec::Sidecar(sc) => sidecar(&mut errs, sc),
    }
    errs.finish()
}

/// Collects `path: reason` messages.
#[derive(Default)]
struct Errors(Vec<String>);

impl Errors {
    fn add(&mut self, path: impl Display, reason: impl Display) {
        self.0.push(format!("{path}: {reason}"));
    }

    fn finish(self) -> Result<(), Vec<String>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }
}

const PORT_RANGE: &str = "port must be between 1-65535";
const UNIX_PREFIX: &str = "unix://";

// ---------------------------------------------------------------------------------------------
// ServiceEntry
// ---------------------------------------------------------------------------------------------

fn service_entry(errs: &mut Errors, se: &ServiceEntry, namespace: &str) {
    if se.hosts.is_empty() {
        errs.add(
            "spec.hosts",
            "Required value: a ServiceEntry needs at least one host",
        );
    }
    if se.hosts.len() > 256 {
        errs.add("spec.hosts", "must have at most 256 items");
    }
    for (i, h) in se.hosts.iter().enumerate() {
        if h == "*" {
            errs.add(format!("spec.hosts[{i}]"), "hostname cannot be wildcard");
        } else if let Err(e) = wildcard_domain(h) {
            errs.add(format!("spec.hosts[{i}]"), e);
        }
    }

    let mut has_cidr = false;
    for (i, a) in se.addresses.iter().enumerate() {
        has_cidr |= a.contains('/');
        if !ip_or_cidr(a) {
            errs.add(
                format!("spec.addresses[{i}]"),
                format!("{a:?} is not a valid IP address or CIDR block"),
            );
        }
    }
    if has_cidr && !matches!(se.resolution, Resolution::None | Resolution::Static) {
        errs.add(
            "spec.addresses",
            "CIDR addresses are allowed only for NONE/STATIC resolution types",
        );
    }

    if let Some(ws) = &se.workload_selector {
        selector(errs, "spec.workloadSelector.labels", &ws.labels);
        if !se.endpoints.is_empty() {
            errs.add(
                "spec",
                "only one of WorkloadSelector or Endpoints can be set",
            );
        }
    }

    let mut port_names = HashSet::new();
    let mut port_numbers = HashSet::new();
    for (i, p) in se.ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        if !port_in_range(p.number.into()) {
            errs.add(format!("{path}.number"), PORT_RANGE);
        } else if !port_numbers.insert(p.number) {
            errs.add(
                format!("{path}.number"),
                format!("port number cannot be duplicated: {}", p.number),
            );
        }
        if let Some(t) = p.target_port {
            if !port_in_range(t.into()) {
                errs.add(format!("{path}.targetPort"), PORT_RANGE);
            }
        }
        if p.name.is_empty() {
            errs.add(format!("{path}.name"), "Required value");
        } else {
            if !port_names.insert(p.name.as_str()) {
                errs.add(
                    format!("{path}.name"),
                    format!("Duplicate value: {:?}", p.name),
                );
            }
            if !dns1123_label(&p.name) {
                errs.add(format!("{path}.name"), invalid_port_name(&p.name));
            }
        }
        if !p.protocol.is_empty() && protocol(&p.protocol).is_none() {
            errs.add(
                format!("{path}.protocol"),
                format!("unsupported protocol: {:?}", p.protocol),
            );
        }
    }

    match se.resolution {
        Resolution::None if !se.endpoints.is_empty() => {
            errs.add("spec.endpoints", "NONE mode cannot set endpoints");
        }
        Resolution::DnsRoundRobin if se.endpoints.len() > 1 => {
            errs.add(
                "spec.endpoints",
                "DNS_ROUND_ROBIN mode cannot have multiple endpoints",
            );
        }
        _ => {}
    }
    if matches!(se.resolution, Resolution::Dns | Resolution::DnsRoundRobin)
        && se.endpoints.is_empty()
    {
        // The hosts themselves are resolved, so they must be resolvable names.
        for (i, h) in se.hosts.iter().enumerate() {
            if h == "*" {
                continue; // reported above
            }
            if let Err(e) = fqdn(h) {
                errs.add(
                    format!("spec.hosts[{i}]"),
                    format!(
                        "hosts must be fully qualified domain names without wildcards when resolution is {} and no endpoints are given: {e}",
                        resolution_name(se.resolution)
                    ),
                );
            }
        }
    }

    let rule = match se.resolution {
        Resolution::Static => AddressRule::Ip,
        Resolution::Dns | Resolution::DnsRoundRobin => AddressRule::IpOrFqdn,
        Resolution::None => AddressRule::Any,
    };
    for (i, ep) in se.endpoints.iter().enumerate() {
        let path = format!("spec.endpoints[{i}]");
        workload_entry(errs, &path, ep, rule);
        if se.resolution == Resolution::None {
            continue; // endpoints are already an error
        }
        for name in ep.ports.keys() {
            if !port_names.contains(name.as_str()) {
                errs.add(
                    format!("{path}.ports[{name}]"),
                    "endpoint port is not defined by the service entry (no spec.ports entry has this name)",
                );
            }
        }
        if se.resolution == Resolution::Static
            && ep.address.starts_with(UNIX_PREFIX)
            && se.ports.len() != 1
        {
            errs.add(
                format!("{path}.address"),
                "exactly 1 service port required for unix endpoints",
            );
        }
    }

    // With several hosts, only HTTP (Host header) or TLS (SNI) can tell them apart, unless
    // the hosts are ignored anyway (resolution NONE).
    if se.resolution != Resolution::None && se.hosts.len() > 1 {
        if let Some(i) = se
            .ports
            .iter()
            .position(|p| !matches!(protocol(&p.protocol), Some(Protocol::Http | Protocol::Tls)))
        {
            errs.add(
                format!("spec.ports[{i}].protocol"),
                "multiple hosts provided with non-HTTP, non-TLS ports",
            );
        }
    }

    export_to(errs, "spec.exportTo", namespace, &se.export_to, true, false);
}

fn resolution_name(r: Resolution) -> &'static str {
    match r {
        Resolution::None => "NONE",
        Resolution::Static => "STATIC",
        Resolution::Dns => "DNS",
        Resolution::DnsRoundRobin => "DNS_ROUND_ROBIN",
    }
}

// ---------------------------------------------------------------------------------------------
// WorkloadEntry (also ServiceEntry endpoints and the WorkloadGroup template)
// ---------------------------------------------------------------------------------------------

/// What a non-Unix-socket address of a workload may be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AddressRule {
    /// A WorkloadEntry, or a DNS ServiceEntry's endpoint: an IP or a hostname.
    IpOrFqdn,
    /// A STATIC ServiceEntry's endpoint: an IP.
    Ip,
    /// Not checked beyond the CRD rules (endpoints of a NONE ServiceEntry, already invalid).
    Any,
    /// A WorkloadGroup template: the address may be empty and is filled in later.
    Template,
}

fn workload_entry(errs: &mut Errors, path: &str, we: &WorkloadEntry, rule: AddressRule) {
    let address = we.address.as_str();
    let address_path = format!("{path}.address");
    if address.is_empty() {
        if we.network.is_empty() && rule != AddressRule::Template {
            errs.add(
                &address_path,
                "Address is required: set address, or network for a workload reached through a gateway",
            );
        }
    } else if address.len() > 256 {
        errs.add(&address_path, "may not be longer than 256 characters");
    }

    if let Some(socket) = address.strip_prefix(UNIX_PREFIX) {
        if !socket.starts_with('/') && !socket.starts_with('@') {
            errs.add(
                &address_path,
                "UDS must be an absolute path or abstract socket",
            );
        }
        if address.ends_with('/') {
            errs.add(&address_path, "UDS may not be a dir");
        }
        if !we.ports.is_empty() {
            errs.add(format!("{path}.ports"), "UDS may not include ports");
        }
    } else if !address.is_empty() && !is_ip(address) {
        match rule {
            AddressRule::IpOrFqdn => {
                if let Err(e) = fqdn(address) {
                    errs.add(
                        &address_path,
                        format!("{address:?} is not a valid IP address or FQDN: {e}"),
                    );
                }
            }
            AddressRule::Ip => errs.add(
                &address_path,
                format!("{address:?} is not a valid IP address (resolution STATIC needs IPs or unix:// sockets)"),
            ),
            AddressRule::Any | AddressRule::Template => {}
        }
    }

    if we.ports.len() > 128 {
        errs.add(format!("{path}.ports"), "may have at most 128 entries");
    }
    for (name, &number) in &we.ports {
        let port_path = format!("{path}.ports[{name}]");
        if !port_in_range(number.into()) {
            errs.add(&port_path, PORT_RANGE);
        }
        if !dns1123_label(name) {
            errs.add(&port_path, invalid_port_name(name));
        }
    }
    if rule != AddressRule::Template {
        labels(errs, &format!("{path}.labels"), &we.labels);
    }
}

// ---------------------------------------------------------------------------------------------
// WorkloadGroup
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GroupMetadata {
    #[serde(default, deserialize_with = "nullable")]
    labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    initial_delay_seconds: Option<i64>,
    timeout_seconds: Option<i64>,
    period_seconds: Option<i64>,
    success_threshold: Option<i64>,
    failure_threshold: Option<i64>,
    http_get: Option<HttpGetProbe>,
    tcp_socket: Option<TcpSocketProbe>,
    exec: Option<ExecProbe>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HttpGetProbe {
    port: Option<i64>,
    scheme: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    http_headers: Vec<ProbeHeader>,
}

#[derive(Deserialize)]
struct ProbeHeader {
    name: Option<String>,
}

#[derive(Deserialize)]
struct TcpSocketProbe {
    port: Option<i64>,
}

#[derive(Deserialize)]
struct ExecProbe {
    #[serde(default, deserialize_with = "nullable")]
    command: Vec<String>,
}

static PROBE_HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"^[-_A-Za-z0-9]+$"));

fn workload_group(errs: &mut Errors, wg: &WorkloadGroup) {
    match &wg.template {
        None => errs.add("spec.template", "Required value"),
        Some(t) => workload_entry(errs, "spec.template", t, AddressRule::Template),
    }
    if let Some(meta) = wg
        .metadata
        .as_ref()
        .and_then(|m| typed::<GroupMetadata>(errs, "spec.metadata", m))
    {
        labels(errs, "spec.metadata.labels", &meta.labels);
        if meta.labels.len() > 256 {
            errs.add("spec.metadata.labels", "may have at most 256 entries");
        }
        if meta.annotations.len() > 256 {
            errs.add("spec.metadata.annotations", "may have at most 256 entries");
        }
    }
    if let Some(probe) = wg
        .probe
        .as_ref()
        .and_then(|p| typed::<Probe>(errs, "spec.probe", p))
    {
        readiness_probe(errs, "spec.probe", &probe);
    }
}

fn readiness_probe(errs: &mut Errors, path: &str, probe: &Probe) {
    let counters = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (field, value) in counters {
        if value.is_some_and(|v| v < 0) {
            errs.add(format!("{path}.{field}"), "must be non-negative");
        }
    }
    let methods = [
        probe.http_get.is_some(),
        probe.tcp_socket.is_some(),
        probe.exec.is_some(),
    ];
    match methods.iter().filter(|m| **m).count() {
        0 => errs.add(path, "one of httpGet, tcpSocket or exec is required"),
        1 => {}
        _ => errs.add(path, "only one of httpGet, tcpSocket or exec can be set"),
    }
    if let Some(http) = &probe.http_get {
        required_port(errs, &format!("{path}.httpGet.port"), http.port);
        if let Some(scheme) = &http.scheme {
            if !matches!(scheme.as_str(), "" | "HTTP" | "HTTPS") {
                errs.add(
                    format!("{path}.httpGet.scheme"),
                    "scheme must be one of [HTTP, HTTPS]",
                );
            }
        }
        for (i, header) in http.http_headers.iter().enumerate() {
            let name = header.name.as_deref().unwrap_or_default();
            if !PROBE_HEADER_NAME.is_match(name) {
                errs.add(
                    format!("{path}.httpGet.httpHeaders[{i}].name"),
                    format!("{name:?} should match '^[-_A-Za-z0-9]+$'"),
                );
            }
        }
    }
    if let Some(tcp) = &probe.tcp_socket {
        required_port(errs, &format!("{path}.tcpSocket.port"), tcp.port);
    }
    if let Some(exec) = &probe.exec {
        if exec.command.is_empty() {
            errs.add(format!("{path}.exec.command"), "Required value");
        }
        for (i, c) in exec.command.iter().enumerate() {
            if c.is_empty() {
                errs.add(format!("{path}.exec.command[{i}]"), "may not be empty");
            }
        }
    }
}

fn required_port(errs: &mut Errors, path: &str, port: Option<i64>) {
    match port {
        None => errs.add(path, "Required value"),
        Some(p) if !port_in_range(p) => errs.add(path, PORT_RANGE),
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// DestinationRule
// ---------------------------------------------------------------------------------------------

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
struct ConnectionPool {
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
struct ClientTls {
    mode: Option<String>,
    client_certificate: Option<String>,
    private_key: Option<String>,
    ca_certificates: Option<String>,
    credential_name: Option<String>,
    ca_crl: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    subject_alt_names: Vec<String>,
    insecure_skip_verify: Option<bool>,
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

fn destination_rule(errs: &mut Errors, dr: &DestinationRule, namespace: &str) {
    if dr.host.is_empty() {
        errs.add("spec.host", "Required value");
    } else if let Err(e) = wildcard_domain(&dr.host) {
        errs.add("spec.host", e);
    }
    if let Some(policy) = &dr.traffic_policy {
        traffic_policy(errs, "spec.trafficPolicy", policy);
    }
    let mut names = HashSet::new();
    for (i, subset) in dr.subsets.iter().enumerate() {
        let path = format!("spec.subsets[{i}]");
        if subset.name.is_empty() {
            errs.add(format!("{path}.name"), "Required value");
        } else {
            if !names.insert(subset.name.as_str()) {
                errs.add(
                    format!("{path}.name"),
                    format!("Duplicate value: {:?}", subset.name),
                );
            }
            if !dns1123_label(&subset.name) {
                errs.add(format!("{path}.name"), invalid_subset_name(&subset.name));
            }
        }
        labels(errs, &format!("{path}.labels"), &subset.labels);
        if let Some(policy) = &subset.traffic_policy {
            traffic_policy(errs, &format!("{path}.trafficPolicy"), policy);
        }
    }
    if let Some(ws) = &dr.workload_selector {
        selector(errs, "spec.workloadSelector.matchLabels", &ws.labels);
    }
    export_to(
        errs,
        "spec.exportTo",
        namespace,
        &dr.export_to,
        false,
        dr.workload_selector.is_some(),
    );
}

fn traffic_policy(errs: &mut Errors, path: &str, value: &Value) {
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
        if let Some(proto) = &tunnel.protocol {
            if !matches!(proto.as_str(), "" | "CONNECT" | "POST") {
                errs.add(
                    format!("{p}.protocol"),
                    "tunnel protocol must be \"CONNECT\" or \"POST\"",
                );
            }
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
    if let Some(pp) = &policy.proxy_protocol {
        if let Some(v) = &pp.version {
            if !matches!(v.as_str(), "V1" | "V2") {
                errs.add(
                    format!("{path}.proxyProtocol.version"),
                    format!("Unsupported value: {v:?}: supported values: \"V1\", \"V2\""),
                );
            }
        }
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
        if let Some(pct) = warmup.minimum_percent {
            if !(0.0..=100.0).contains(&pct) {
                errs.add(
                    format!("{p}.minimumPercent"),
                    format!("Invalid value: {pct}: must be between 0 and 100"),
                );
            }
        }
        // The CRD of the Istio API the corpus pins says `Minimum=1`; istio/api later (#3602)
        // relaxed it to `Minimum=0`, matching Envoy. axon keeps the stricter bound for now.
        if let Some(aggression) = warmup.aggression {
            if aggression.is_nan() || aggression < 1.0 {
                errs.add(
                    format!("{p}.aggression"),
                    format!("Invalid value: {aggression}: must be greater than or equal to 1"),
                );
            }
        }
    }
}

fn connection_pool(errs: &mut Errors, path: &str, pool: &ConnectionPool) {
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
        if let Some(v) = value {
            if !(0..=100).contains(&v) {
                errs.add(
                    format!("{path}.{field}"),
                    format!("percentage {v} is not in range 0..100"),
                );
            }
        }
    }
}

fn client_tls(errs: &mut Errors, path: &str, tls: &ClientTls) {
    let mode = tls.mode.as_deref().unwrap_or("DISABLE");
    unsupported_value(
        errs,
        &format!("{path}.mode"),
        mode,
        &["DISABLE", "SIMPLE", "MUTUAL", "ISTIO_MUTUAL"],
    );
    let ca = non_empty(&tls.ca_certificates);
    let credential = non_empty(&tls.credential_name);
    if tls.insecure_skip_verify == Some(true) {
        let sans = !tls.subject_alt_names.is_empty();
        if mode == "SIMPLE" && (ca || credential || sans) {
            errs.add(
                path,
                "cannot specify caCertificates or credentialName or subjectAltNames when insecureSkipVerify is set true",
            );
        }
        if mode == "MUTUAL" && (ca || sans) {
            errs.add(
                path,
                "cannot specify caCertificates or subjectAltNames when insecureSkipVerify is set true",
            );
        }
    }
    if matches!(mode, "SIMPLE" | "MUTUAL") && credential {
        if non_empty(&tls.client_certificate)
            || ca
            || non_empty(&tls.private_key)
            || non_empty(&tls.ca_crl)
        {
            errs.add(
                path,
                "cannot specify client certificates or CA certificate or CA CRL if credentialName is set",
            );
        }
        return;
    }
    if mode == "MUTUAL" {
        if !non_empty(&tls.client_certificate) {
            errs.add(
                format!("{path}.clientCertificate"),
                "Required value: client certificate required for mutual tls",
            );
        }
        if !non_empty(&tls.private_key) {
            errs.add(
                format!("{path}.privateKey"),
                "Required value: private key required for mutual tls",
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
        if x % f == 0 {
            return false;
        }
        f += 1;
    }
    true
}

// ---------------------------------------------------------------------------------------------
// VirtualService
// ---------------------------------------------------------------------------------------------

/// A TCP or TLS route (`spec.tcp[]`, `spec.tls[]`).
#[derive(Deserialize)]
struct L4Route {
    #[serde(default, rename = "match", deserialize_with = "nullable")]
    matches: Vec<L4Match>,
    #[serde(default, deserialize_with = "nullable")]
    route: Vec<RouteDestination>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct L4Match {
    port: Option<i64>,
    #[serde(default, deserialize_with = "nullable")]
    destination_subnets: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    source_labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    gateways: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    sni_hosts: Vec<String>,
}

#[derive(Deserialize)]
struct RouteDestination {
    destination: Option<Destination>,
    #[serde(default)]
    weight: i64,
}

const MESH_GATEWAY: &str = "mesh";

fn virtual_service(errs: &mut Errors, vs: &VirtualService, namespace: &str) {
    // A VirtualService without hosts is a delegate: it is only reachable from another
    // VirtualService's `http.delegate`, so it cannot bind gateways or carry L4 routes.
    if vs.hosts.is_empty() {
        let delegate = "Required value: hosts are required unless this is a delegate VirtualService, and a delegate";
        if !vs.gateways.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not set gateways"));
        }
        if !vs.tcp.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not have tcp routes"));
        }
        if !vs.tls.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not have tls routes"));
        }
    }
    for (i, g) in vs.gateways.iter().enumerate() {
        gateway_name(errs, &format!("spec.gateways[{i}]"), g);
    }
    let bound_to_gateway =
        !vs.gateways.is_empty() && !vs.gateways.iter().any(|g| g == MESH_GATEWAY);

    let tcp: Vec<Option<L4Route>> = vs
        .tcp
        .iter()
        .enumerate()
        .map(|(i, r)| typed(errs, &format!("spec.tcp[{i}]"), r))
        .collect();
    let tls: Vec<Option<L4Route>> = vs
        .tls
        .iter()
        .enumerate()
        .map(|(i, r)| typed(errs, &format!("spec.tls[{i}]"), r))
        .collect();
    let has_sni = tls
        .iter()
        .flatten()
        .any(|r| r.matches.iter().any(|m| !m.sni_hosts.is_empty()));

    let mut all_hosts_valid = true;
    for (i, h) in vs.hosts.iter().enumerate() {
        let path = format!("spec.hosts[{i}]");
        let checked = if bound_to_gateway && has_sni {
            gateway_sni_domain(h)
        } else {
            wildcard_domain(h)
        };
        match checked {
            Err(e) if !is_ip(h) => {
                errs.add(&path, e);
                all_hosts_valid = false;
            }
            Ok(()) if !bound_to_gateway && h == "*" => {
                errs.add(
                    &path,
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                );
                all_hosts_valid = false;
            }
            _ => {}
        }
    }
    if all_hosts_valid {
        for (i, a) in vs.hosts.iter().enumerate() {
            for b in &vs.hosts[i + 1..] {
                if host::intersects(a, b) {
                    errs.add(
                        "spec.hosts",
                        format!("duplicate hosts in virtual service: {a} & {b}"),
                    );
                }
            }
        }
    }

    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        errs.add(
            "spec",
            "http, tcp or tls must be provided in virtual service",
        );
    }
    for (i, route) in vs.http.iter().enumerate() {
        http_route(errs, &format!("spec.http[{i}]"), route, bound_to_gateway);
    }
    for (i, route) in tls.iter().enumerate() {
        if let Some(route) = route {
            tls_route(errs, &format!("spec.tls[{i}]"), route, vs, bound_to_gateway);
        }
    }
    for (i, route) in tcp.iter().enumerate() {
        if let Some(route) = route {
            tcp_route(errs, &format!("spec.tcp[{i}]"), route);
        }
    }
    export_to(
        errs,
        "spec.exportTo",
        namespace,
        &vs.export_to,
        false,
        false,
    );
}

fn http_route(errs: &mut Errors, path: &str, route: &HttpRoute, bound_to_gateway: bool) {
    for (j, m) in route.matches.iter().enumerate() {
        http_match(errs, &format!("{path}.match[{j}]"), m, bound_to_gateway);
    }
    let destinations: Vec<(Option<&Destination>, i64)> = route
        .route
        .iter()
        .map(|d| (d.destination.as_ref(), i64::from(d.weight)))
        .collect();
    route_destinations(errs, &format!("{path}.route"), &destinations);
}

fn http_match(errs: &mut Errors, path: &str, m: &HttpMatchRequest, bound_to_gateway: bool) {
    if let Some(uri) = &m.uri {
        string_match(errs, &format!("{path}.uri"), uri, true);
    }
    for (name, sm) in &m.headers {
        let p = format!("{path}.headers[{name}]");
        if name.is_empty() {
            errs.add(&p, "header name cannot be empty");
        } else if let Some(claim) = name.strip_prefix(JWT_CLAIM_PREFIX) {
            if claim.is_empty() {
                errs.add(&p, "JWT claim name cannot be empty");
            }
            if !bound_to_gateway {
                errs.add(
                    &p,
                    "JWT claim based routing is only supported for virtual services bound to gateways (not mesh)",
                );
            }
        } else if !PSEUDO_HEADERS.contains(&name.as_str()) && !HEADER_NAME.is_match(name) {
            errs.add(
                &p,
                format!("header name {name:?} is not a valid header name"),
            );
        }
        string_match(errs, &p, sm, false);
    }
    if let Some(port) = m.port {
        if port != 0 && !port_in_range(port.into()) {
            errs.add(format!("{path}.port"), PORT_RANGE);
        }
    }
    labels(errs, &format!("{path}.sourceLabels"), &m.source_labels);
    for (k, g) in m.gateways.iter().enumerate() {
        gateway_name(errs, &format!("{path}.gateways[{k}]"), g);
    }
}

const JWT_CLAIM_PREFIX: &str = "@request.auth.claims.";
const PSEUDO_HEADERS: [&str; 5] = [":method", ":scheme", ":authority", ":path", ":status"];
static HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"^[!#$%&'*+\-.^_`|~A-Za-z0-9]+$"));

/// `exact`, `prefix`, `regex` and `suffix` are a oneof: at most one may be set. An empty
/// StringMatch is valid (Istio turns a header `{}` into a presence match).
fn string_match(errs: &mut Errors, path: &str, sm: &StringMatch, is_uri: bool) {
    let set = [&sm.exact, &sm.prefix, &sm.regex, &sm.suffix]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if set > 1 {
        errs.add(
            path,
            "only one of exact, prefix, regex or suffix can be set",
        );
    }
    if !is_uri && sm.prefix.as_deref() == Some("") {
        errs.add(
            format!("{path}.prefix"),
            "prefix string match should not be empty",
        );
    }
    if let Some(regex) = &sm.regex {
        let p = format!("{path}.regex");
        if regex.is_empty() {
            errs.add(&p, "regex string match should not be empty");
        } else if regex.len() > 1024 {
            errs.add(&p, "regex is too large, max length allowed is 1024");
        } else if let Err(e) = Regex::new(regex) {
            errs.add(
                &p,
                format!(
                    "invalid regex {regex:?}: {}; Istio uses RE2 style regex-based match",
                    first_line(&e.to_string())
                ),
            );
        }
    }
}

fn tcp_route(errs: &mut Errors, path: &str, route: &L4Route) {
    for (j, m) in route.matches.iter().enumerate() {
        l4_match(errs, &format!("{path}.match[{j}]"), m);
    }
    if route.route.is_empty() {
        errs.add(
            format!("{path}.route"),
            "Required value: TCP route is required",
        );
    }
    l4_destinations(errs, &format!("{path}.route"), &route.route);
}

fn tls_route(
    errs: &mut Errors,
    path: &str,
    route: &L4Route,
    vs: &VirtualService,
    bound_to_gateway: bool,
) {
    if route.matches.is_empty() {
        errs.add(
            format!("{path}.match"),
            "Required value: TLS route must have at least one match condition",
        );
    }
    for (j, m) in route.matches.iter().enumerate() {
        let p = format!("{path}.match[{j}]");
        if m.sni_hosts.is_empty() {
            errs.add(
                format!("{p}.sniHosts"),
                "Required value: TLS match must have at least one SNI host",
            );
        }
        for (k, sni) in m.sni_hosts.iter().enumerate() {
            let sp = format!("{p}.sniHosts[{k}]");
            let checked = if bound_to_gateway {
                gateway_sni_domain(sni)
            } else {
                wildcard_domain(sni)
            };
            match checked {
                // An IP is against the SNI spec, but Istio only warns.
                Err(_) if is_ip(sni) => {}
                Err(e) => errs.add(&sp, e),
                Ok(()) => {
                    if !vs.hosts.iter().any(|h| host::matches(h, sni)) {
                        errs.add(
                            &sp,
                            format!(
                                "SNI host {sni:?} is not a compatible subset of any of the virtual service hosts: [{}]",
                                vs.hosts.join(", ")
                            ),
                        );
                    }
                }
            }
        }
        l4_match(errs, &p, m);
    }
    if route.route.is_empty() {
        errs.add(
            format!("{path}.route"),
            "Required value: TLS route is required",
        );
    }
    l4_destinations(errs, &format!("{path}.route"), &route.route);
}

fn l4_match(errs: &mut Errors, path: &str, m: &L4Match) {
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        if !ip_or_cidr(subnet) {
            errs.add(
                format!("{path}.destinationSubnets[{k}]"),
                format!("{subnet:?} is not a valid IP address or CIDR block"),
            );
        }
    }
    if let Some(port) = m.port {
        if port != 0 && !port_in_range(port) {
            errs.add(format!("{path}.port"), PORT_RANGE);
        }
    }
    labels(errs, &format!("{path}.sourceLabels"), &m.source_labels);
    for (k, g) in m.gateways.iter().enumerate() {
        gateway_name(errs, &format!("{path}.gateways[{k}]"), g);
    }
}

fn l4_destinations(errs: &mut Errors, path: &str, route: &[RouteDestination]) {
    let destinations: Vec<(Option<&Destination>, i64)> = route
        .iter()
        .map(|d| (d.destination.as_ref(), d.weight))
        .collect();
    route_destinations(errs, path, &destinations);
}

/// Weights are not required to add up to 100 (Envoy normalises them), but none may be
/// negative and, with several destinations, not all may be zero.
fn route_destinations(errs: &mut Errors, path: &str, destinations: &[(Option<&Destination>, i64)]) {
    let mut total = 0i64;
    for (k, (dest, weight)) in destinations.iter().enumerate() {
        let p = format!("{path}[{k}]");
        match dest {
            None => errs.add(format!("{p}.destination"), "Required value"),
            Some(d) => destination(errs, &format!("{p}.destination"), d),
        }
        if *weight < 0 {
            errs.add(
                format!("{p}.weight"),
                format!("weight {weight} must not be negative"),
            );
        }
        total = total.saturating_add(*weight);
    }
    if destinations.len() > 1 && total == 0 {
        errs.add(
            path,
            "total destination weight = 0: give at least one destination a positive weight",
        );
    }
}

fn destination(errs: &mut Errors, path: &str, d: &Destination) {
    if d.host.is_empty() {
        errs.add(format!("{path}.host"), "Required value");
    } else if d.host == "*" {
        errs.add(format!("{path}.host"), "invalid destination host *");
    } else if let Err(e) = wildcard_domain(&d.host) {
        errs.add(format!("{path}.host"), e);
    }
    if !d.subset.is_empty() && !dns1123_label(&d.subset) {
        errs.add(format!("{path}.subset"), invalid_subset_name(&d.subset));
    }
    if let Some(port) = &d.port {
        if !port_in_range(port.number.into()) {
            errs.add(format!("{path}.port.number"), PORT_RANGE);
        }
    }
}

/// `name` or `namespace/name` of a Gateway, or `mesh`.
fn gateway_name(errs: &mut Errors, path: &str, name: &str) {
    match name.split_once('/') {
        None => {
            if let Err(e) = fqdn(name) {
                errs.add(path, format!("invalid gateway name: {e}"));
            }
        }
        Some((ns, gw)) => {
            if !dns1123_label(ns) {
                errs.add(path, format!("invalid value for namespace: {ns:?}"));
            }
            if !dns1123_label(gw) {
                errs.add(path, format!("invalid value for gateway name: {gw:?}"));
            }
        }
    }
}

/// A host of a VirtualService bound to a gateway with TLS SNI routes: may also be the SNI
/// name that AUTO_PASSTHROUGH gateways generate, `outbound_.<port>_._.<hostname>`.
fn gateway_sni_domain(domain: &str) -> Result<(), String> {
    if domain.starts_with("outbound_") && !domain.is_empty() && domain.len() <= 255 {
        let parts: Vec<&str> = domain.split('_').collect();
        let malformed = || {
            format!(
                "domain name {domain:?} invalid, should follow 'outbound_.<port>_._.<hostname>' format"
            )
        };
        if parts.len() < 4 {
            return Err(malformed());
        }
        let port = parts[1].trim_matches('.');
        let hostname = parts[3].trim_matches('.');
        if parts[0] != "outbound"
            || !port.chars().any(|c| c.is_ascii_digit())
            || !hostname.chars().any(|c| c.is_ascii_alphabetic())
        {
            return Err(malformed());
        }
        return Ok(());
    }
    wildcard_domain(domain)
}

// ---------------------------------------------------------------------------------------------
// Gateway
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ServerTls {
    https_redirect: Option<bool>,
    mode: Option<String>,
    server_certificate: Option<String>,
    private_key: Option<String>,
    ca_certificates: Option<String>,
    ca_crl: Option<String>,
    credential_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    credential_names: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    tls_certificates: Vec<TlsCertificate>,
    #[serde(default, deserialize_with = "nullable")]
    subject_alt_names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TlsCertificate {
    server_certificate: Option<String>,
    private_key: Option<String>,
}

fn gateway(errs: &mut Errors, gw: &Gateway, name: &str) {
    if !dns1123_label(name) {
        errs.add(
            "metadata.name",
            format!("invalid gateway name {name:?}: must be a DNS-1123 label (no dots)"),
        );
    }
    // Istio itself does not check the selector of a Gateway; a `*` could never match a
    // Kubernetes label value, so it is rejected as in the other selectors.
    selector(errs, "spec.selector", &gw.selector);
    if gw.servers.is_empty() {
        errs.add(
            "spec.servers",
            "Required value: gateway must have at least one server",
        );
    }
    let mut port_names = HashSet::new();
    for (i, server) in gw.servers.iter().enumerate() {
        let path = format!("spec.servers[{i}]");
        if server.hosts.is_empty() {
            errs.add(
                format!("{path}.hosts"),
                "Required value: server config must contain at least one host",
            );
        }
        for (k, h) in server.hosts.iter().enumerate() {
            namespaced_host(errs, &format!("{path}.hosts[{k}]"), h, true);
        }
        let tls = match &server.tls {
            Some(v) => typed::<ServerTls>(errs, &format!("{path}.tls"), v),
            None => None,
        };
        if let Some(t) = &tls {
            server_tls(errs, &format!("{path}.tls"), t);
        }
        let bind_unix = server.bind.strip_prefix(UNIX_PREFIX);
        if let Some(socket) = bind_unix {
            if let Err(e) = unix_address(socket) {
                errs.add(format!("{path}.bind"), e);
            }
        } else if !server.bind.is_empty() && !is_ip(&server.bind) {
            errs.add(
                format!("{path}.bind"),
                format!("{:?} is not a valid IP", server.bind),
            );
        }
        let Some(port) = &server.port else {
            errs.add(format!("{path}.port"), "Required value");
            continue;
        };
        let pp = format!("{path}.port");
        let mut port_ok = true;
        let proto = protocol(&port.protocol);
        if proto.is_none() {
            port_ok = false;
            errs.add(
                format!("{pp}.protocol"),
                format!(
                    "invalid protocol {:?}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                    port.protocol
                ),
            );
        }
        if bind_unix.is_some() {
            if port.number != 0 {
                errs.add(
                    format!("{pp}.number"),
                    "port number must be 0 for unix domain socket binds",
                );
            }
        } else if !port_in_range(port.number.into()) {
            port_ok = false;
            errs.add(format!("{pp}.number"), PORT_RANGE);
        }
        if port.target_port.is_some_and(|t| t > 0) {
            port_ok = false;
            errs.add(
                format!("{pp}.targetPort"),
                "targetPort has no impact on Gateways",
            );
        }
        if port.name.is_empty() {
            port_ok = false;
            errs.add(
                format!("{pp}.name"),
                "Required value: port name must be set",
            );
        } else if !port_names.insert(port.name.as_str()) {
            errs.add(
                format!("{pp}.name"),
                format!(
                    "port names in servers must be unique: duplicate name {:?}",
                    port.name
                ),
            );
        }
        if !port_ok {
            continue;
        }
        match (proto, &tls) {
            (Some(Protocol::Tls), None) if server.tls.is_none() => errs.add(
                format!("{path}.tls"),
                "Required value: server must have TLS settings for HTTPS/TLS protocols",
            ),
            (Some(Protocol::Http), Some(t)) => {
                // Only `httpsRedirect` makes sense on a plain-text HTTP server.
                let passthrough = matches!(
                    t.mode.as_deref().unwrap_or("PASSTHROUGH"),
                    "PASSTHROUGH" | "AUTO_PASSTHROUGH"
                );
                if !passthrough
                    || non_empty(&t.ca_certificates)
                    || non_empty(&t.private_key)
                    || non_empty(&t.server_certificate)
                {
                    errs.add(
                        format!("{path}.tls"),
                        "server cannot have TLS settings for plain text HTTP ports",
                    );
                }
            }
            (Some(Protocol::Other), Some(_)) => errs.add(
                format!("{path}.tls"),
                "server cannot have TLS settings for non HTTPS/TLS ports",
            ),
            _ => {}
        }
    }
}

fn server_tls(errs: &mut Errors, path: &str, tls: &ServerTls) {
    let mode = tls.mode.as_deref().unwrap_or("PASSTHROUGH");
    unsupported_value(
        errs,
        &format!("{path}.mode"),
        mode,
        &[
            "PASSTHROUGH",
            "SIMPLE",
            "MUTUAL",
            "AUTO_PASSTHROUGH",
            "ISTIO_MUTUAL",
            "OPTIONAL_MUTUAL",
        ],
    );
    let server_cert = non_empty(&tls.server_certificate);
    let key = non_empty(&tls.private_key);
    let ca = non_empty(&tls.ca_certificates);
    let credential = non_empty(&tls.credential_name);
    if mode == "ISTIO_MUTUAL" {
        if server_cert
            || key
            || ca
            || credential
            || !tls.tls_certificates.is_empty()
            || !tls.credential_names.is_empty()
        {
            errs.add(
                path,
                "ISTIO_MUTUAL TLS cannot have an associated server certificate, private key, CA bundle, tlsCertificates or credentialName(s)",
            );
        }
        return;
    }
    let sources = [
        server_cert && key,
        credential,
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        errs.add(
            path,
            "only one of credentialName, credentialNames, serverCertificate/privateKey, tlsCertificates should be specified",
        );
    }
    if non_empty(&tls.ca_crl) {
        if credential {
            errs.add(
                format!("{path}.caCrl"),
                "CRL is not supported with credentialName. CRL has to be specified in the credential",
            );
        }
        if mode == "SIMPLE" {
            errs.add(
                format!("{path}.caCrl"),
                "CRL is not supported with SIMPLE TLS",
            );
        }
    }
    if !matches!(mode, "SIMPLE" | "MUTUAL" | "OPTIONAL_MUTUAL") {
        return;
    }
    if credential || !tls.credential_names.is_empty() {
        return; // certificates come from the credential
    }
    let label = if mode == "SIMPLE" {
        "SIMPLE TLS"
    } else {
        "MUTUAL TLS"
    };
    if mode != "SIMPLE" && !ca {
        errs.add(
            format!("{path}.caCertificates"),
            format!("Required value: {label} requires a client CA bundle"),
        );
    }
    if tls.tls_certificates.is_empty() {
        if !server_cert {
            errs.add(
                format!("{path}.serverCertificate"),
                format!("Required value: {label} requires a server certificate"),
            );
        }
        if !key {
            errs.add(
                format!("{path}.privateKey"),
                format!("Required value: {label} requires a private key"),
            );
        }
    }
    for (i, cert) in tls.tls_certificates.iter().enumerate() {
        if !non_empty(&cert.server_certificate) {
            errs.add(
                format!("{path}.tlsCertificates[{i}].serverCertificate"),
                format!("Required value: {label} requires a server certificate"),
            );
        }
        if !non_empty(&cert.private_key) {
            errs.add(
                format!("{path}.tlsCertificates[{i}].privateKey"),
                format!("Required value: {label} requires a private key"),
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sidecar
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressListener {
    port: Option<IngressPort>,
    bind: Option<String>,
    capture_mode: Option<String>,
    default_endpoint: Option<String>,
    tls: Option<ServerTls>,
    connection_pool: Option<ConnectionPool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressPort {
    number: Option<i64>,
    protocol: Option<String>,
    name: Option<String>,
    target_port: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OutboundTrafficPolicy {
    mode: Option<String>,
    egress_proxy: Option<Destination>,
}

fn sidecar(errs: &mut Errors, sc: &Sidecar) {
    if let Some(ws) = &sc.workload_selector {
        selector(errs, "spec.workloadSelector.labels", &ws.labels);
    }

    let mut ingress_ports = HashSet::new();
    for (i, value) in sc.ingress.iter().enumerate() {
        let path = format!("spec.ingress[{i}]");
        let Some(listener) = typed::<IngressListener>(errs, &path, value) else {
            continue;
        };
        ingress_listener(errs, &path, &listener, &mut ingress_ports);
    }

    let mut egress_ports = HashSet::new();
    let mut egress_sockets = HashSet::new();
    let mut catch_all_seen = false;
    for (i, egress) in sc.egress.iter().enumerate() {
        let path = format!("spec.egress[{i}]");
        match &egress.port {
            None => {
                // At most one listener without a port, and it comes last.
                if catch_all_seen {
                    errs.add(&path, "egress can have only one listener with empty port");
                } else if i + 1 != sc.egress.len() {
                    errs.add(
                        &path,
                        "the egress listener with empty port should be the last listener in the list",
                    );
                }
                catch_all_seen = true;
            }
            Some(port) => {
                let pp = format!("{path}.port");
                if !port.name.is_empty() && !dns1123_label(&port.name) {
                    errs.add(format!("{pp}.name"), invalid_port_name(&port.name));
                }
                if !port.protocol.is_empty() && protocol(&port.protocol).is_none() {
                    errs.add(
                        format!("{pp}.protocol"),
                        format!("unsupported protocol: {:?}", port.protocol),
                    );
                }
                if port.number == 0 {
                    // A Unix domain socket listener.
                    match egress.bind.strip_prefix(UNIX_PREFIX) {
                        None => errs.add(
                            format!("{path}.bind"),
                            "ports with 0 value must have a unix domain socket bind address",
                        ),
                        Some(socket) => {
                            if let Err(e) = unix_address(socket) {
                                errs.add(format!("{path}.bind"), e);
                            }
                        }
                    }
                    if !matches!(
                        egress.capture_mode,
                        CaptureMode::Default | CaptureMode::None
                    ) {
                        errs.add(
                            format!("{path}.captureMode"),
                            "captureMode must be DEFAULT/NONE for unix domain socket listeners",
                        );
                    }
                    if !egress_sockets.insert(egress.bind.as_str()) {
                        errs.add(
                            format!("{path}.bind"),
                            "unix domain socket values for listeners must be unique",
                        );
                    }
                } else {
                    if !port_in_range(port.number.into()) {
                        errs.add(format!("{pp}.number"), PORT_RANGE);
                    }
                    if !egress.bind.is_empty() && !is_ip(&egress.bind) {
                        errs.add(
                            format!("{path}.bind"),
                            format!("{:?} is not a valid IP", egress.bind),
                        );
                    }
                    if !egress_ports.insert(port.number) {
                        errs.add(
                            format!("{pp}.number"),
                            "ports on IP bound listeners must be unique",
                        );
                    }
                }
            }
        }
        if egress.hosts.is_empty() {
            errs.add(
                format!("{path}.hosts"),
                "Required value: egress listener must contain at least one host",
            );
        }
        for (k, h) in egress.hosts.iter().enumerate() {
            namespaced_host(errs, &format!("{path}.hosts[{k}]"), h, false);
        }
    }

    if let Some(value) = &sc.outbound_traffic_policy {
        let path = "spec.outboundTrafficPolicy";
        if let Some(policy) = typed::<OutboundTrafficPolicy>(errs, path, value) {
            let mode = policy.mode.as_deref().unwrap_or("REGISTRY_ONLY");
            if mode == "ALLOW_ANY_DYNAMIC_DNS" {
                errs.add(
                    format!("{path}.mode"),
                    "ALLOW_ANY_DYNAMIC_DNS mode is only supported in MeshConfig, not in Sidecar resource",
                );
            } else {
                unsupported_value(
                    errs,
                    &format!("{path}.mode"),
                    mode,
                    &["REGISTRY_ONLY", "ALLOW_ANY"],
                );
            }
            if let Some(proxy) = &policy.egress_proxy {
                let pp = format!("{path}.egressProxy");
                if mode != "ALLOW_ANY" {
                    errs.add(
                        &pp,
                        "egressProxy must be set only with ALLOW_ANY outboundTrafficPolicy mode",
                    );
                }
                if proxy.port.is_none() {
                    errs.add(format!("{pp}.port"), "Required value");
                }
                destination(errs, &pp, proxy);
            }
        }
    }
}

fn ingress_listener(
    errs: &mut Errors,
    path: &str,
    listener: &IngressListener,
    ports: &mut HashSet<i64>,
) {
    if let Some(mode) = &listener.capture_mode {
        unsupported_value(
            errs,
            &format!("{path}.captureMode"),
            mode,
            &["DEFAULT", "IPTABLES", "NONE"],
        );
    }
    let Some(port) = &listener.port else {
        errs.add(
            format!("{path}.port"),
            "Required value: port is required for ingress listeners",
        );
        return;
    };
    let pp = format!("{path}.port");
    if port.target_port.is_some_and(|t| t > 0) {
        errs.add(
            format!("{pp}.targetPort"),
            "targetPort has no impact on Sidecars",
        );
    }
    let name = port.name.as_deref().unwrap_or_default();
    if !name.is_empty() && !dns1123_label(name) {
        errs.add(format!("{pp}.name"), invalid_port_name(name));
    }
    let proto = port.protocol.as_deref().unwrap_or_default();
    if !proto.is_empty() && protocol(proto).is_none() {
        errs.add(
            format!("{pp}.protocol"),
            format!("unsupported protocol: {proto:?}"),
        );
    }
    let number = port.number.unwrap_or(0);
    if !port_in_range(number) {
        errs.add(format!("{pp}.number"), PORT_RANGE);
    }
    if !ports.insert(number) {
        errs.add(
            format!("{pp}.number"),
            "ports on IP bound listeners must be unique",
        );
    }
    if let Some(bind) = listener.bind.as_deref().filter(|b| !b.is_empty()) {
        if !is_ip(bind) {
            errs.add(
                format!("{path}.bind"),
                format!("{bind:?} is not a valid IP"),
            );
        }
    }
    if let Some(endpoint) = listener
        .default_endpoint
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        default_endpoint(errs, &format!("{path}.defaultEndpoint"), endpoint);
    }
    if let Some(tls) = &listener.tls {
        let tp = format!("{path}.tls");
        if !tls.subject_alt_names.is_empty() {
            errs.add(&tp, "subjectAltNames is not supported in ingress tls");
        }
        if tls.https_redirect == Some(true) {
            errs.add(&tp, "httpsRedirect is not supported");
        }
        if non_empty(&tls.credential_name) || !tls.credential_names.is_empty() {
            errs.add(&tp, "credentialName(s) is not currently supported");
        }
        if !tls.tls_certificates.is_empty() {
            errs.add(&tp, "tlsCertificates is not currently supported");
        }
        if let Some(mode @ ("ISTIO_MUTUAL" | "AUTO_PASSTHROUGH")) = tls.mode.as_deref() {
            errs.add(
                format!("{tp}.mode"),
                format!("cannot set mode to {mode} in sidecar ingress tls"),
            );
        }
        if protocol(proto) != Some(Protocol::Tls) {
            errs.add(
                &tp,
                "server cannot have TLS settings for non HTTPS/TLS ports",
            );
        }
        server_tls(errs, &tp, tls);
    }
    if let Some(pool) = &listener.connection_pool {
        connection_pool(errs, &format!("{path}.connectionPool"), pool);
    }
}

/// `127.0.0.1:<port>`, `0.0.0.0:<port>`, `[::1]:<port>`, `[::]:<port>`, `:<port>` or
/// `unix://<socket>`.
fn default_endpoint(errs: &mut Errors, path: &str, endpoint: &str) {
    if let Some(socket) = endpoint.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = unix_address(socket) {
            errs.add(path, e);
        }
        return;
    }
    let Some((host, port)) = split_host_port(endpoint) else {
        errs.add(path, format!("{endpoint:?} is not of the form host:port"));
        return;
    };
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        errs.add(
            path,
            "defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port>, unix://<socket> or unset",
        );
    }
    match port.parse::<i64>() {
        Ok(p) if port_in_range(p) => {}
        Ok(_) => errs.add(path, PORT_RANGE),
        Err(_) => errs.add(path, format!("port {port:?} is not a number")),
    }
}

fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return Some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    if host.contains(':') {
        return None;
    }
    Some((host, port))
}

// ---------------------------------------------------------------------------------------------
// Shared pieces
// ---------------------------------------------------------------------------------------------

/// A host reference of a Gateway server or Sidecar egress listener: `namespace/dnsName`
/// (Gateways also take a bare `dnsName`).
fn namespaced_host(errs: &mut Errors, path: &str, reference: &str, is_gateway: bool) {
    let name = match reference.split_once('/') {
        None if is_gateway => reference,
        None => {
            errs.add(path, "host must be of form namespace/dnsName");
            return;
        }
        Some((ns, name)) => {
            if ns.is_empty() || name.is_empty() {
                errs.add(
                    path,
                    "config namespace and dnsName in host entry cannot be empty",
                );
            }
            if is_gateway {
                if !matches!(ns, "*" | ".") && !dns1123_label(ns) {
                    errs.add(path, format!("invalid namespace value {ns:?} in gateway"));
                }
            } else {
                let bare = ns.strip_prefix('~').unwrap_or(ns);
                if !matches!(bare, "" | "*" | ".") && !dns1123_label(bare) {
                    errs.add(path, format!("invalid namespace value {ns:?} in sidecar"));
                }
            }
            name
        }
    };
    if name.is_empty() {
        return;
    }
    // Deviation: istiod rejects short names (no dot) for Gateway servers as well, but Istio's
    // own test data (tests/integration/pilot/testdata, Gateway host `b`) uses one; only
    // Sidecars are held to it.
    if !is_gateway && name != "*" && !name.contains('.') {
        errs.add(path, "short names (non FQDN) are not allowed");
    }
    if let Err(e) = wildcard_domain(name) {
        if !(is_gateway && is_ip(name)) {
            errs.add(path, e);
        }
    }
    if name.contains('*') && name != "*" && !name.starts_with("*.") {
        errs.add(path, format!("partial wildcard {name:?} not allowed"));
    }
}

/// Label selectors (`workloadSelector`, Gateway `selector`).
fn selector(errs: &mut Errors, path: &str, labels: &Labels) {
    for (k, v) in labels {
        let p = format!("{path}[{k}]");
        if k.is_empty() {
            errs.add(&p, "empty key is not supported in selector");
        }
        if k.contains('*') || v.contains('*') {
            errs.add(
                &p,
                format!("wildcard is not supported in selector: \"{k}={v}\""),
            );
        }
        if v.len() > 63 {
            errs.add(
                &p,
                "label values in selectors may not be longer than 63 characters",
            );
        }
    }
}

static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:([a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*)/)?(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$",
    )
});
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"));

/// Kubernetes-style labels, as Istio checks them (`labels.Instance.Validate`).
fn labels(errs: &mut Errors, path: &str, labels: &Labels) {
    for (k, v) in labels {
        let p = format!("{path}[{k}]");
        let key_ok = LABEL_KEY
            .captures(k)
            .is_some_and(|c| c.get(1).is_none_or(|prefix| prefix.as_str().len() <= 253));
        if !key_ok {
            errs.add(&p, format!("invalid label key: {k:?}"));
        }
        if !LABEL_VALUE.is_match(v) {
            errs.add(&p, format!("invalid label value: {v:?}"));
        }
    }
}

/// `exportTo`: `.`, `*`, a namespace, or (ServiceEntry only) `~`; no duplicates, and `*`
/// or `~` alone.
fn export_to(
    errs: &mut Errors,
    path: &str,
    namespace: &str,
    list: &[String],
    service_entry: bool,
    dr_with_selector: bool,
) {
    if list.is_empty() {
        return;
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, entry) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let key = if entry == "." {
            namespace
        } else {
            entry.as_str()
        };
        if seen.contains(key) {
            if key != entry {
                errs.add(
                    &p,
                    format!("duplicate entries in exportTo: . and current namespace {namespace}"),
                );
            } else {
                errs.add(
                    &p,
                    format!("duplicate entries in exportTo for entry {entry}"),
                );
            }
            continue;
        }
        let valid = match key {
            "*" => true,
            "~" if service_entry => true,
            "~" => {
                errs.add(
                    &p,
                    "exportTo ~ (none) is not allowed for Istio configuration objects",
                );
                false
            }
            _ if entry == "." || dns1123_label(key) => true,
            _ => {
                errs.add(
                    &p,
                    format!("only ., *, or a valid DNS 1123 label is allowed as exportTo entry, not {entry:?}"),
                );
                false
            }
        };
        if valid {
            seen.insert(key);
        }
    }
    if dr_with_selector && !seen.is_empty() {
        if !seen.contains(namespace) {
            errs.add(
                path,
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        } else if seen.len() > 1 {
            errs.add(
                path,
                "destination rule with workload selector cannot have multiple entries in exportTo",
            );
        }
    }
    if seen.contains("*") && list.len() > 1 {
        errs.add(
            path,
            "cannot have both public (*) and non-public exportTo values for a resource",
        );
    }
    if seen.contains("~") && list.len() > 1 {
        errs.add(
            path,
            "cannot export service entry to no one (~) and someone",
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocol {
    /// HTTP, HTTP2, HTTP_PROXY, GRPC, GRPC-Web.
    Http,
    /// HTTPS, TLS.
    Tls,
    /// TCP, UDP, Mongo, Redis, MySQL.
    Other,
}

/// Istio's protocol names, matched case-insensitively (`tcp` is `TCP`). `None` if unknown.
fn protocol(name: &str) -> Option<Protocol> {
    match name.to_ascii_lowercase().as_str() {
        "http" | "http2" | "http_proxy" | "grpc" | "grpc-web" => Some(Protocol::Http),
        "https" | "tls" => Some(Protocol::Tls),
        "tcp" | "udp" | "mongo" | "redis" | "mysql" => Some(Protocol::Other),
        _ => None,
    }
}

fn unsupported_value(errs: &mut Errors, path: &str, value: &str, allowed: &[&str]) {
    if !allowed.contains(&value) {
        let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
        errs.add(
            path,
            format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        );
    }
}

fn port_in_range(n: i64) -> bool {
    (1..=65535).contains(&n)
}

fn invalid_port_name(name: &str) -> String {
    format!(
        "Invalid value: {name:?}: port name must be valid (a DNS-1123 label of at most 63 characters)"
    )
}

fn invalid_subset_name(name: &str) -> String {
    format!("subset name is invalid (must be a DNS-1123 label): {name:?}")
}

fn non_empty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.is_empty())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex")
}

static DNS1123_LABEL: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$"));
static WILDCARD_LABEL: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:\*|(?:\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$"));

/// A DNS label as Istio checks it (`labels.IsDNS1123Label`): at most 63 letters, digits and
/// inner dashes. Istio allows upper case here.
fn dns1123_label(s: &str) -> bool {
    s.len() <= 63 && DNS1123_LABEL.is_match(s)
}

/// A domain whose first label may be a wildcard: `*`, `*.example.com`, `*x`, `reviews`.
fn wildcard_domain(domain: &str) -> Result<(), String> {
    domain_preconditions(domain)?;
    let (first, rest) = match domain.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (domain, None),
    };
    if first.len() > 63 || !WILDCARD_LABEL.is_match(first) {
        return Err(format!(
            "domain name {domain:?} invalid (label {first:?} invalid)"
        ));
    }
    match rest {
        Some(rest) => dns1123_labels(domain, rest),
        None => Ok(()),
    }
}

/// A fully qualified domain name without wildcards (a trailing dot is allowed).
fn fqdn(domain: &str) -> Result<(), String> {
    domain_preconditions(domain)?;
    dns1123_labels(domain, domain)
}

fn domain_preconditions(domain: &str) -> Result<(), String> {
    if domain.is_empty() {
        return Err("empty domain name not allowed".to_string());
    }
    if domain.len() > 255 {
        return Err(format!("domain name {domain:?} too long (max 255)"));
    }
    Ok(())
}

fn dns1123_labels(domain: &str, labels: &str) -> Result<(), String> {
    let parts: Vec<&str> = labels.split('.').collect();
    let last = parts.len() - 1;
    if parts[last].parse::<i64>().is_ok() {
        return Err(format!(
            "domain name {domain:?} invalid (top level domain {:?} cannot be all-numeric)",
            parts[last]
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == last && label.is_empty() {
            break; // `istio.io.`
        }
        if !dns1123_label(label) {
            return Err(format!(
                "domain name {domain:?} invalid (label {label:?} invalid)"
            ));
        }
    }
    Ok(())
}

fn is_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok()
}

/// An IP address, or a CIDR block `a.b.c.d/n` / `x::/n`.
fn ip_or_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return is_ip(s);
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let decimal = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let max = if ip.is_ipv4() { 32 } else { 128 };
    decimal && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// The part after `unix://`: an absolute path to a file, or an abstract socket `@name`.
fn unix_address(socket: &str) -> Result<(), String> {
    if socket.is_empty() {
        return Err("unix address must not be empty".to_string());
    }
    if socket.starts_with('@') {
        return Ok(());
    }
    if !socket.starts_with('/') || socket.ends_with('/') {
        return Err(format!("{socket:?} is not an absolute path to a file"));
    }
    Ok(())
}

/// Parses a Go-style duration (`300s`, `1m`, `1.5h`, `8ms`, `1h2m`) into nanoseconds, as the
/// Kubernetes CEL `duration()` does. Protobuf JSON durations (`1.5s`) are a subset.
fn parse_duration(s: &str) -> Option<i128> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let int_value: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut value = int_value.checked_mul(scale)?;
        let mut frac_scale = scale;
        for digit in frac.bytes().take(30) {
            frac_scale /= 10;
            value += i128::from(digit - b'0') * frac_scale;
        }
        total = total.checked_add(value)?;
        rest = next;
    }
    Some(if negative { -total } else { total })
}

/// Checks a duration's syntax and, if `at_least_1ms`, Istio's rule that it is at least 1ms
/// and a whole number of milliseconds.
fn duration(errs: &mut Errors, path: &str, s: &str, at_least_1ms: bool) {
    match parse_duration(s) {
        None => errs.add(path, format!("invalid duration {s:?}")),
        Some(_) if !at_least_1ms => {}
        Some(ns) if ns < 1_000_000 => errs.add(path, "duration must be at least 1ms"),
        Some(ns) if ns % 1_000_000 != 0 => {
            errs.add(path, "only durations to ms precision are supported")
        }
        Some(_) => {}
    }
}

/// Reads a JSON sub-object into a private shape; a type error is reported at its path.
fn typed<T: DeserializeOwned>(errs: &mut Errors, path: &str, value: &Value) -> Option<T> {
    match serde_path_to_error::deserialize::<_, T>(value) {
        Ok(v) => Some(v),
        Err(e) => {
            let inner = e.path().to_string();
            let at = if inner == "." {
                path.to_string()
            } else {
                format!("{path}.{inner}")
            };
            errs.add(at, e.inner());
            None
        }
    }
}

/// `null` (a YAML key with no value) reads as the default.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
