//! `Gateway`: servers (port, hosts, TLS settings) on the proxies that its selector picks.

use serde::{Deserialize, Serialize};

use super::Labels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gateway {
    #[serde(default)]
    pub servers: Vec<Server>,
    #[serde(default)]
    pub selector: Labels,
    /// Set on a Gateway derived from a Gateway API Gateway: which proxies serve it (istiod's
    /// `internal.istio.io/gateway-service` and friends); `None` for a user's Gateway,
    /// selected by `selector`. Never read from a file.
    #[serde(skip)]
    pub gateway_api: Option<GatewayApiSelection>,
}

/// Which proxies serve a Gateway derived from a Gateway API Gateway.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
pub struct GatewayApiSelection {
    /// The Gateway API Gateway's name (proxies labelled `gateway.networking.k8s.io/gateway-name:
    /// NAME` in the Gateway's namespace serve it when `managed`).
    pub gateway_name: String,
    /// Hostnames (FQDN, `NAME-istio.NS.svc.cluster.local` or the manual `spec.addresses`
    /// Service) of the Services whose workloads serve it, in the Gateway's namespace.
    pub services: Vec<String>,
    /// Automated deployment (no Hostname addresses).
    pub managed: bool,
    /// The service account the managed deployment runs as (for SDS later; carried only).
    pub service_account: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Server {
    pub port: Option<GatewayPort>,
    #[serde(default)]
    pub bind: String,
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub name: String,
    pub tls: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayPort {
    #[serde(default)]
    pub number: u32,
    #[serde(default)]
    pub protocol: String,
    #[serde(default)]
    pub name: String,
    pub target_port: Option<u32>,
}

impl Server {
    /// The server's `tls`, typed (`None` without one; validation rejected one that does not
    /// type).
    pub fn tls_settings(&self) -> Option<ServerTlsSettings> {
        serde_json::from_value(self.tls.clone()?).ok()
    }
}

/// `ServerTLSSettings`: how a gateway server terminates (or passes through) TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerTlsSettings {
    #[serde(default, deserialize_with = "nullable")]
    pub https_redirect: bool,
    /// `PASSTHROUGH` when absent (the proto's zero value).
    #[serde(default, deserialize_with = "nullable")]
    pub mode: ServerTlsMode,
    #[serde(default, deserialize_with = "nullable")]
    pub server_certificate: String,
    #[serde(default, deserialize_with = "nullable")]
    pub private_key: String,
    #[serde(default, deserialize_with = "nullable")]
    pub ca_certificates: String,
    #[serde(default, deserialize_with = "nullable")]
    pub ca_crl: String,
    #[serde(default, deserialize_with = "nullable")]
    pub credential_name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub credential_names: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub ca_cert_credential_name: String,
    #[serde(default, deserialize_with = "nullable")]
    pub tls_certificates: Vec<TlsCertificate>,
    #[serde(default, deserialize_with = "nullable")]
    pub subject_alt_names: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub verify_certificate_spki: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub verify_certificate_hash: Vec<String>,
    /// `TLS_AUTO`, `TLSV1_0` … `TLSV1_3`; absent is `TLS_AUTO`.
    #[serde(default, deserialize_with = "nullable")]
    pub min_protocol_version: String,
    #[serde(default, deserialize_with = "nullable")]
    pub max_protocol_version: String,
    #[serde(default, deserialize_with = "nullable")]
    pub cipher_suites: Vec<String>,
    pub insecure_skip_verify: Option<bool>,
}

/// `ServerTLSSettings.TLSCertificate`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsCertificate {
    #[serde(default, deserialize_with = "nullable")]
    pub server_certificate: String,
    #[serde(default, deserialize_with = "nullable")]
    pub private_key: String,
    #[serde(default, deserialize_with = "nullable")]
    pub ca_certificates: String,
}

/// `ServerTLSSettings.TLSmode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerTlsMode {
    #[default]
    Passthrough,
    Simple,
    Mutual,
    AutoPassthrough,
    IstioMutual,
    OptionalMutual,
}

impl ServerTlsMode {
    /// PASSTHROUGH or AUTO_PASSTHROUGH: the gateway forwards the TLS bytes by SNI.
    pub fn is_passthrough(self) -> bool {
        matches!(self, Self::Passthrough | Self::AutoPassthrough)
    }
}

/// `null` (a YAML key with no value) reads as the default.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
