//! Mesh-wide settings that shape every `PushContext` (istiod's MeshConfig, the parts axon
//! reads), and the mesh config file they come from: istiod's `MeshConfig` YAML, the `mesh`
//! key of the `istio` ConfigMap. Every field of istio/api's `MeshConfig` is known; the ones
//! axon applies are [`APPLIED`], the others are reported as accepted but not applied, and a
//! field that `MeshConfig` does not have is an error naming it.

mod providers;
mod telemetry;

use serde::Deserialize;
use thiserror::Error;

pub use providers::{ExtAuthzKind, ExtAuthzProvider, RequestBody};
pub use telemetry::{
    DefaultProviders, LogFormat, MeshTelemetry, OtelHttp, ProviderHeader, ProviderKind,
    ProviderService, ProxyTracing, TelemetryProvider, proxy_tracing_of,
};

use super::istio::traffic_policy::{
    ConnectionPoolSettings, LocalityLbSetting, OutlierDetection, ZoneAwareLbSetting,
};

/// Mesh-wide defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshConfig {
    /// Where a Sidecar without a selector applies to every namespace (istiod's root namespace).
    pub root_namespace: String,
    /// `exportTo` of a ServiceEntry that sets none.
    pub default_service_export_to: Vec<String>,
    /// `exportTo` of a VirtualService that sets none.
    pub default_virtual_service_export_to: Vec<String>,
    /// `exportTo` of a DestinationRule that sets none.
    pub default_destination_rule_export_to: Vec<String>,
    /// The locality load balancing of clusters whose DestinationRule sets none: istiod's
    /// default mesh config enables it (`enabled: true`, no rules), so a cluster with outlier
    /// detection fails over by locality.
    pub locality_lb_setting: Option<LocalityLbSetting>,
    /// The zone-aware load balancing of clusters whose DestinationRule sets none (it wins over
    /// `locality_lb_setting`, as in istiod).
    pub zone_aware_lb_setting: Option<ZoneAwareLbSetting>,
    /// `h2UpgradePolicy: UPGRADE`: HTTP ports' clusters speak HTTP/2 to the upstream unless
    /// their DestinationRule says otherwise.
    pub h2_upgrade: bool,
    /// The clusters' connect timeout, in nanoseconds, where a DestinationRule sets none
    /// (istiod's default 10 s).
    pub connect_timeout_nanos: i128,
    /// Whether TLS Secrets are served to proxies whose identity is not verified (the
    /// plaintext xDS port); istiod never does (`--plaintext-secrets`).
    pub plaintext_secrets: bool,
    /// `outboundTrafficPolicy.mode: REGISTRY_ONLY`: sidecars whose Sidecar sets no
    /// `outboundTrafficPolicy` block traffic to unknown destinations (istiod's default
    /// `ALLOW_ANY` lets it out).
    pub outbound_registry_only: bool,
    /// `inboundTrafficPolicy.mode: LOCALHOST`: a sidecar sends inbound traffic to its
    /// application on 127.0.0.1; istiod's default PASSTHROUGH sends it to the original
    /// destination (the pod's address), from 127.0.0.6.
    pub inbound_localhost: bool,
    /// The mesh's trust domain: the SPIFFE identities of its workloads
    /// (`spiffe://TRUST_DOMAIN/ns/NS/sa/SA`).
    pub trust_domain: String,
    /// `defaultTrafficPolicy.connectionPool`: the connection pool of the clusters whose
    /// DestinationRule policy sets none (outbound and inbound clusters, and the
    /// PassthroughCluster), istiod's `applyDefaultTrafficPolicy`.
    pub default_connection_pool: Option<ConnectionPoolSettings>,
    /// `defaultTrafficPolicy.outlierDetection`: the outlier detection of the outbound
    /// clusters whose policy sets none.
    pub default_outlier_detection: Option<OutlierDetection>,
    /// `enableAutoMtls` (istiod's default: on): sidecars call the endpoints whose workload
    /// runs istio's agent with mutual TLS where no DestinationRule sets `tls`.
    pub enable_auto_mtls: bool,
    /// `trustDomainAliases`: other trust domains whose identities a sidecar accepts.
    pub trust_domain_aliases: Vec<String>,
    /// `meshMTLS`: the TLS of sidecars' inbound mutual TLS.
    pub mesh_mtls: MeshMtls,
    /// `extensionProviders`' external authorizers (CUSTOM AuthorizationPolicies).
    pub ext_authz: Vec<ExtAuthzProvider>,
    /// Access logs, tracing and metrics (`accessLog*`, `enableTracing`,
    /// `defaultConfig.tracing`, `defaultProviders`, the telemetry `extensionProviders`).
    pub telemetry: MeshTelemetry,
}

/// `meshMTLS` (`MeshConfig.TLSConfig`), as istiod reads it for inbound mutual TLS.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeshMtls {
    /// `minProtocolVersion: TLSV1_3` (else TLS 1.2, istiod's default).
    pub min_tls13: bool,
    /// `cipherSuites`; none: istiod's `SupportedCiphers`.
    pub cipher_suites: Option<Vec<String>>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        let all = vec!["*".to_string()];
        MeshConfig {
            root_namespace: "istio-system".to_string(),
            default_service_export_to: all.clone(),
            default_virtual_service_export_to: all.clone(),
            default_destination_rule_export_to: all,
            locality_lb_setting: Some(LocalityLbSetting {
                enabled: Some(true),
                ..Default::default()
            }),
            zone_aware_lb_setting: None,
            h2_upgrade: false,
            connect_timeout_nanos: 10_000_000_000,
            plaintext_secrets: true,
            outbound_registry_only: false,
            inbound_localhost: false,
            trust_domain: "cluster.local".to_string(),
            default_connection_pool: None,
            default_outlier_detection: None,
            enable_auto_mtls: true,
            trust_domain_aliases: Vec::new(),
            mesh_mtls: MeshMtls::default(),
            ext_authz: Vec::new(),
            telemetry: MeshTelemetry::default(),
        }
    }
}

/// The fields of istio/api's `MeshConfig` (`mesh/v1alpha1/config.proto`).
pub const FIELDS: [&str; 50] = [
    "proxyListenPort",
    "proxyInboundListenPort",
    "proxyHttpPort",
    "connectTimeout",
    "hboneIdleTimeout",
    "protocolDetectionTimeout",
    "tcpKeepalive",
    "ingressClass",
    "ingressService",
    "ingressControllerMode",
    "ingressSelector",
    "enableTracing",
    "accessLogFile",
    "accessLogFormat",
    "accessLogEncoding",
    "enableEnvoyAccessLogService",
    "disableEnvoyListenerLog",
    "defaultConfig",
    "outboundTrafficPolicy",
    "inboundTrafficPolicy",
    "configSources",
    "enableAutoMtls",
    "trustDomain",
    "trustDomainAliases",
    "caCertificates",
    "defaultServiceExportTo",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "rootNamespace",
    "localityLbSetting",
    "zoneAwareLbSetting",
    "dnsRefreshRate",
    "h2UpgradePolicy",
    "inboundClusterStatName",
    "outboundClusterStatName",
    "certificates",
    "serviceSettings",
    "serviceScopeConfigs",
    "enablePrometheusMerge",
    "verifyCertificateAtClient",
    "ca",
    "extensionProviders",
    "defaultProviders",
    "discoverySelectors",
    "pathNormalization",
    "defaultHttpRetryPolicy",
    "meshMTLS",
    "tlsDefaults",
    "defaultTrafficPolicy",
    "serviceEntryVisibility",
];

/// The fields axon applies (`defaultConfig` only in part: its `tracing`, and the rest
/// reported field by field).
pub const APPLIED: [&str; 22] = [
    "rootNamespace",
    "defaultServiceExportTo",
    "defaultVirtualServiceExportTo",
    "defaultDestinationRuleExportTo",
    "localityLbSetting",
    "zoneAwareLbSetting",
    "h2UpgradePolicy",
    "connectTimeout",
    "trustDomain",
    "outboundTrafficPolicy",
    "inboundTrafficPolicy",
    "defaultTrafficPolicy",
    "enableAutoMtls",
    "trustDomainAliases",
    "meshMTLS",
    "extensionProviders",
    "enableTracing",
    "accessLogFile",
    "accessLogFormat",
    "accessLogEncoding",
    "defaultProviders",
    "defaultConfig",
];

#[derive(Debug, Clone, PartialEq, Error)]
pub enum MeshConfigError {
    #[error("not a MeshConfig document: {0}")]
    Yaml(String),
    #[error("line {line}: unknown field {field:?}: MeshConfig has no such field{hint}")]
    UnknownField {
        field: String,
        line: usize,
        hint: String,
    },
    #[error("line {line}: {field}: {reason}")]
    Invalid {
        field: String,
        line: usize,
        reason: String,
    },
}

/// A mesh config file, read: the settings (axon's defaults where it says nothing), and one
/// line per field accepted but not applied.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshFile {
    pub mesh: MeshConfig,
    /// The trust domain, if the file sets one (`trustDomain`).
    pub trust_domain: Option<String>,
    pub not_applied: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Applied {
    root_namespace: Option<String>,
    default_service_export_to: Option<Vec<String>>,
    default_virtual_service_export_to: Option<Vec<String>>,
    default_destination_rule_export_to: Option<Vec<String>>,
    locality_lb_setting: Option<serde_json::Value>,
    zone_aware_lb_setting: Option<serde_json::Value>,
    h2_upgrade_policy: Option<String>,
    connect_timeout: Option<String>,
    trust_domain: Option<String>,
    outbound_traffic_policy: Option<MeshOutboundPolicy>,
    inbound_traffic_policy: Option<MeshOutboundPolicy>,
    default_traffic_policy: Option<serde_json::Value>,
    enable_auto_mtls: Option<bool>,
    trust_domain_aliases: Option<Vec<String>>,
    #[serde(rename = "meshMTLS")]
    mesh_mtls: Option<MeshTlsDoc>,
    extension_providers: Option<serde_json::Value>,
    enable_tracing: Option<bool>,
    access_log_file: Option<String>,
    access_log_format: Option<String>,
    access_log_encoding: Option<String>,
    default_providers: Option<DefaultProviders>,
    default_config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `MeshConfig.TLSConfig`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct MeshTlsDoc {
    min_protocol_version: Option<String>,
    ecdh_curves: Option<Vec<String>>,
    cipher_suites: Option<Vec<String>>,
}

/// `MeshConfig.DefaultTrafficPolicy`, typed once checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefaultTrafficPolicy {
    connection_pool: Option<ConnectionPoolSettings>,
    outlier_detection: Option<OutlierDetection>,
}

/// `MeshConfig.OutboundTrafficPolicy` (only a mode; `egressProxy` is the Sidecar's), and
/// `MeshConfig.InboundTrafficPolicy` (a mode).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MeshOutboundPolicy {
    mode: Option<String>,
}

/// Reads a `MeshConfig` YAML document.
pub fn parse(text: &str) -> Result<MeshFile, MeshConfigError> {
    let value: serde_json::Value =
        serde_norway::from_str(text).map_err(|e| MeshConfigError::Yaml(e.to_string()))?;
    let value = match value {
        serde_json::Value::Null => serde_json::Value::Object(Default::default()),
        v => v,
    };
    let serde_json::Value::Object(map) = &value else {
        return Err(MeshConfigError::Yaml(
            "the document is not a mapping".into(),
        ));
    };
    let lines = super::yaml_lines::FieldLines::read(text);
    let line = |field: &str| lines.line_of(field).unwrap_or(1);
    let mut not_applied = Vec::new();
    for (field, v) in map {
        if !FIELDS.contains(&field.as_str()) {
            let hint = FIELDS
                .iter()
                .map(|f| {
                    (
                        strsim::levenshtein(&field.to_lowercase(), &f.to_lowercase()),
                        *f,
                    )
                })
                .min()
                .filter(|(distance, _)| *distance <= (field.len() / 3).max(2))
                .map(|(_, f)| format!(" (did you mean {f:?}?)"))
                .unwrap_or_default();
            return Err(MeshConfigError::UnknownField {
                field: field.clone(),
                line: line(field),
                hint,
            });
        }
        if !APPLIED.contains(&field.as_str()) && !v.is_null() {
            not_applied.push(format!(
                "line {}: {field}: accepted but not applied by axon",
                line(field)
            ));
        }
    }
    let invalid = |field: &str, reason: String| MeshConfigError::Invalid {
        field: field.to_string(),
        line: line(field),
        reason,
    };
    let applied: Applied =
        serde_json::from_value(value.clone()).map_err(|e| MeshConfigError::Yaml(e.to_string()))?;
    let mut mesh = MeshConfig::default();
    if let Some(ns) = applied.root_namespace.filter(|ns| !ns.is_empty()) {
        mesh.root_namespace = ns;
    }
    for (field, from, to) in [
        (
            "defaultServiceExportTo",
            applied.default_service_export_to,
            &mut mesh.default_service_export_to,
        ),
        (
            "defaultVirtualServiceExportTo",
            applied.default_virtual_service_export_to,
            &mut mesh.default_virtual_service_export_to,
        ),
        (
            "defaultDestinationRuleExportTo",
            applied.default_destination_rule_export_to,
            &mut mesh.default_destination_rule_export_to,
        ),
    ] {
        if let Some(list) = from.filter(|l| !l.is_empty()) {
            if let Some(bad) = list.iter().find(|e| e.is_empty() || e.contains('/')) {
                return Err(invalid(
                    field,
                    format!("{bad:?} is not `*`, `.`, `~` or a namespace"),
                ));
            }
            *to = list;
        }
    }
    if let Some(v) = applied.locality_lb_setting.filter(|v| !v.is_null()) {
        if let Some(reason) = super::validate::locality_lb_setting(&v).into_iter().next() {
            return Err(invalid("localityLbSetting", reason));
        }
        mesh.locality_lb_setting = Some(
            serde_json::from_value(v).map_err(|e| invalid("localityLbSetting", e.to_string()))?,
        );
    }
    if let Some(v) = applied.zone_aware_lb_setting.filter(|v| !v.is_null()) {
        if let Some(reason) = super::validate::zone_aware_lb_setting(&v)
            .into_iter()
            .next()
        {
            return Err(invalid("zoneAwareLbSetting", reason));
        }
        mesh.zone_aware_lb_setting = Some(
            serde_json::from_value(v).map_err(|e| invalid("zoneAwareLbSetting", e.to_string()))?,
        );
    }
    match applied.h2_upgrade_policy.as_deref() {
        None | Some("DO_NOT_UPGRADE") => {}
        Some("UPGRADE") => mesh.h2_upgrade = true,
        Some(other) => {
            return Err(invalid(
                "h2UpgradePolicy",
                format!("{other:?} is not DO_NOT_UPGRADE or UPGRADE"),
            ));
        }
    }
    if let Some(t) = &applied.connect_timeout {
        match super::validate::parse_duration(t) {
            Some(nanos) if nanos >= 1_000_000 => mesh.connect_timeout_nanos = nanos,
            _ => {
                return Err(invalid(
                    "connectTimeout",
                    format!("{t:?} is not a duration of at least 1ms"),
                ));
            }
        }
    }
    match applied
        .outbound_traffic_policy
        .as_ref()
        .and_then(|p| p.mode.as_deref())
    {
        None | Some("ALLOW_ANY") => {}
        Some("REGISTRY_ONLY") => mesh.outbound_registry_only = true,
        Some("ALLOW_ANY_DYNAMIC_DNS") => not_applied.push(format!(
            "line {}: outboundTrafficPolicy.mode: ALLOW_ANY_DYNAMIC_DNS is served as ALLOW_ANY \
             by axon (no dynamic forward proxy)",
            line("outboundTrafficPolicy")
        )),
        Some(other) => {
            return Err(invalid(
                "outboundTrafficPolicy",
                format!("mode {other:?} is not ALLOW_ANY, REGISTRY_ONLY or ALLOW_ANY_DYNAMIC_DNS"),
            ));
        }
    }
    match applied
        .inbound_traffic_policy
        .as_ref()
        .and_then(|p| p.mode.as_deref())
    {
        None | Some("PASSTHROUGH") => {}
        Some("LOCALHOST") => mesh.inbound_localhost = true,
        Some(other) => {
            return Err(invalid(
                "inboundTrafficPolicy",
                format!("mode {other:?} is not PASSTHROUGH or LOCALHOST"),
            ));
        }
    }
    if let Some(v) = applied.default_traffic_policy.filter(|v| !v.is_null()) {
        let at = line("defaultTrafficPolicy");
        let (policy, notes) = default_traffic_policy(&v, at).map_err(|problem| {
            // `PATH: REASON`, the path under `defaultTrafficPolicy`.
            let (field, reason) = problem
                .split_once(": ")
                .unwrap_or(("defaultTrafficPolicy", problem.as_str()));
            MeshConfigError::Invalid {
                field: field.to_string(),
                line: at,
                reason: reason.to_string(),
            }
        })?;
        mesh.default_connection_pool = policy.connection_pool;
        mesh.default_outlier_detection = policy.outlier_detection;
        not_applied.extend(notes);
    }
    if let Some(on) = applied.enable_auto_mtls {
        mesh.enable_auto_mtls = on;
    }
    mesh.trust_domain_aliases = applied.trust_domain_aliases.unwrap_or_default();
    if let Some(tls) = applied.mesh_mtls {
        if tls.ecdh_curves.is_some() {
            return Err(invalid(
                "meshMTLS",
                "mesh TLS does not support ECDH curves configuration".to_string(),
            ));
        }
        match tls.min_protocol_version.as_deref() {
            None | Some("TLS_AUTO" | "TLSV1_2") => {}
            Some("TLSV1_3") => mesh.mesh_mtls.min_tls13 = true,
            Some(other) => {
                return Err(invalid(
                    "meshMTLS",
                    format!("minProtocolVersion {other:?} is not TLS_AUTO, TLSV1_2 or TLSV1_3"),
                ));
            }
        }
        mesh.mesh_mtls.cipher_suites = tls.cipher_suites;
    }
    if let Some(v) = applied.extension_providers.filter(|v| !v.is_null()) {
        let (ext_authz, _telemetry) =
            providers::read(&v).map_err(|reason| invalid("extensionProviders", reason))?;
        mesh.ext_authz = ext_authz;
        let (providers, notes) =
            telemetry::providers(&v).map_err(|reason| invalid("extensionProviders", reason))?;
        mesh.telemetry.providers = providers;
        let at = line("extensionProviders");
        not_applied.extend(notes.into_iter().map(|n| format!("line {at}: {n}")));
    }
    let fields = telemetry::Fields {
        enable_tracing: applied.enable_tracing,
        access_log_file: applied.access_log_file,
        access_log_format: applied.access_log_format,
        access_log_encoding: applied.access_log_encoding,
        default_providers: applied.default_providers,
        default_config: applied.default_config,
    };
    let notes = telemetry::read(fields, &mut mesh.telemetry, &line)
        .map_err(|(field, reason)| invalid(field, reason))?;
    not_applied.extend(notes);
    Ok(MeshFile {
        mesh,
        trust_domain: applied.trust_domain.filter(|t| !t.is_empty()),
        not_applied,
    })
}

/// istiod's `defaultTrafficPolicy` (`connectionPool` and `outlierDetection`, as a
/// DestinationRule's): checked against the API's fields and istiod's validation, typed, and
/// the lines of its fields axon does not apply (`http2ProtocolOptions`, `consecutiveErrors`).
fn default_traffic_policy(
    value: &serde_json::Value,
    line: usize,
) -> Result<(DefaultTrafficPolicy, Vec<String>), String> {
    use super::istio::schema;
    let findings = schema::check(value, &schema::MESH_DEFAULT_TRAFFIC_POLICY);
    let rename = |path: &str| path.replacen("spec", "defaultTrafficPolicy", 1);
    if let Some(unknown) = findings.unknown.first() {
        return Err(rename(unknown));
    }
    if let Some(reason) = super::validate::default_traffic_policy(value)
        .into_iter()
        .next()
    {
        return Err(reason);
    }
    let policy =
        serde_json::from_value(value.clone()).map_err(|e| format!("defaultTrafficPolicy: {e}"))?;
    let notes = findings
        .not_applied
        .iter()
        .map(|path| {
            format!(
                "line {line}: {}: accepted but not applied by axon",
                rename(path)
            )
        })
        .collect();
    Ok((policy, notes))
}

#[cfg(test)]
mod tests;
