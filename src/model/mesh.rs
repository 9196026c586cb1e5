//! Mesh-wide settings that shape every `PushContext` (istiod's MeshConfig, the parts axon reads).

use super::istio::traffic_policy::LocalityLbSetting;

/// Mesh-wide defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshConfig {
    /// Where a Sidecar without a selector applies to every namespace (istiod's root namespace).
    pub root_namespace: String,
    /// `exportTo` of a ServiceEntry, VirtualService or DestinationRule that sets none.
    pub default_export_to: Vec<String>,
    /// The locality load balancing of clusters whose DestinationRule sets none: istiod's
    /// default mesh config enables it (`enabled: true`, no rules), so a cluster with outlier
    /// detection fails over by locality.
    pub locality_lb_setting: Option<LocalityLbSetting>,
    /// Whether TLS Secrets are served to proxies whose identity is not verified (the
    /// plaintext xDS port); istiod never does (`--plaintext-secrets`).
    pub plaintext_secrets: bool,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            root_namespace: "istio-system".to_string(),
            default_export_to: vec!["*".to_string()],
            locality_lb_setting: Some(LocalityLbSetting {
                enabled: Some(true),
                ..Default::default()
            }),
            plaintext_secrets: true,
        }
    }
}
