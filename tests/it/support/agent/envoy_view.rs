//! What an Envoy says about the secrets its agent served: the SDS secrets it has active
//! (`/config_dump?resource=dynamic_active_secrets`) and the certificates it holds (`/certs`).

use std::collections::BTreeMap;

use super::rotation::normalize_serial;
use crate::support::Envoy;

/// A certificate in Envoy's `/certs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldCert {
    /// Lowercase hex without leading zeros, as [`super::AgentStatus::serial`].
    pub serial: String,
    /// The URI SANs (a workload's SPIFFE identity).
    pub uris: Vec<String>,
    /// A trust anchor (`ca_cert`) rather than a certificate Envoy presents (`cert_chain`).
    pub ca: bool,
}

/// The active SDS secrets: name → version.
pub fn active_secrets(envoy: &Envoy) -> BTreeMap<String, String> {
    let r = envoy.admin_request("/config_dump?resource=dynamic_active_secrets");
    let Ok(dump) = serde_json::from_str::<serde_json::Value>(&r.body) else {
        return BTreeMap::new();
    };
    let configs = dump["configs"].as_array().cloned().unwrap_or_default();
    configs
        .iter()
        .filter_map(|c| {
            let name = c["name"].as_str()?;
            Some((name.to_string(), c["version_info"].as_str()?.to_string()))
        })
        .collect()
}

/// Every certificate in `/certs`, trust anchors and presented ones.
pub fn held_certs(envoy: &Envoy) -> Vec<HeldCert> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&envoy.admin_get("/certs")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for context in v["certificates"].as_array().into_iter().flatten() {
        for (field, ca) in [("ca_cert", true), ("cert_chain", false)] {
            for cert in context[field].as_array().into_iter().flatten() {
                let Some(serial) = cert["serial_number"].as_str() else {
                    continue;
                };
                let uris = cert["subject_alt_names"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|san| san["uri"].as_str().map(str::to_string))
                    .collect();
                out.push(HeldCert {
                    serial: normalize_serial(serial),
                    uris,
                    ca,
                });
            }
        }
    }
    out
}

/// Whether Envoy presents a certificate with `serial` (as the agent reports it).
pub fn presents(envoy: &Envoy, serial: &str) -> bool {
    held_certs(envoy)
        .iter()
        .any(|c| !c.ca && c.serial == normalize_serial(serial))
}
