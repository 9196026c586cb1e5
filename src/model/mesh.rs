//! Mesh-wide settings that shape every `PushContext` (istiod's MeshConfig, the parts axon reads).

/// Mesh-wide defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshConfig {
    /// Where a Sidecar without a selector applies to every namespace (istiod's root namespace).
    pub root_namespace: String,
    /// `exportTo` of a ServiceEntry, VirtualService or DestinationRule that sets none.
    pub default_export_to: Vec<String>,
}

impl Default for MeshConfig {
    fn default() -> Self {
        MeshConfig {
            root_namespace: "istio-system".to_string(),
            default_export_to: vec!["*".to_string()],
        }
    }
}
