//! `security.istio.io` `PeerAuthentication` (istio/api `security/v1/peer_authentication.proto`,
//! which `v1beta1` shares): which workloads it applies to, and the mutual TLS mode they accept,
//! over all ports and per port.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::MatchLabels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerAuthentication {
    /// The workloads it applies to; none (or no labels): the namespace's, or in the root
    /// namespace the mesh's.
    pub selector: Option<MatchLabels>,
    pub mtls: Option<PeerMtls>,
    /// Per workload port (the port the workload listens on, not a service port); keys are
    /// the port numbers, as JSON writes map keys.
    pub port_level_mtls: Option<BTreeMap<String, PeerMtls>>,
}

impl PeerAuthentication {
    /// Whether it names workloads (a selector with labels), else it is the namespace's or
    /// the mesh's.
    pub fn has_selector(&self) -> bool {
        self.selector
            .as_ref()
            .is_some_and(|s| !s.match_labels.is_empty())
    }

    /// Its mode, `Unset` when it sets none.
    pub fn mode(&self) -> MtlsMode {
        self.mtls.as_ref().map_or(MtlsMode::Unset, |m| m.mode)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PeerMtls {
    #[serde(default)]
    pub mode: MtlsMode,
}

/// `PeerAuthentication.MutualTLS.Mode`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MtlsMode {
    /// Inherit from the parent (namespace, then mesh); the mesh's default is PERMISSIVE.
    #[default]
    Unset,
    /// No TLS: plaintext only.
    Disable,
    /// Both mutual TLS and plaintext.
    Permissive,
    /// Mutual TLS only.
    Strict,
}

impl MtlsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            MtlsMode::Unset => "UNSET",
            MtlsMode::Disable => "DISABLE",
            MtlsMode::Permissive => "PERMISSIVE",
            MtlsMode::Strict => "STRICT",
        }
    }
}
