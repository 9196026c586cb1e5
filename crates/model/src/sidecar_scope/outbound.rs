//! The outbound traffic policy a sidecar's scope carries (istiod's
//! `SidecarScope.OutboundTrafficPolicy`, `pilot/pkg/model/sidecar.go`): the Sidecar's
//! `outboundTrafficPolicy` when it sets one, else the mesh's `outboundTrafficPolicy.mode`
//! (no `egressProxy`). `ALLOW_ANY` lets traffic to unknown destinations out to the original
//! destination (or to the `egressProxy` cluster); `REGISTRY_ONLY` blocks it (HTTP: istiod's
//! `block_all` virtual host, 502; TCP: `BlackHoleCluster`).

use serde::Deserialize;

use crate::service::outbound_cluster_name;
use axon_config::istio::Destination;

/// What happens to traffic for a destination the sidecar does not know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// `REGISTRY_ONLY`: blocked.
    pub registry_only: bool,
    /// `ALLOW_ANY` with `egressProxy`: the cluster unknown traffic goes to instead of the
    /// original destination (istiod's `GetDestinationCluster(egressProxy, nil, 0)`:
    /// `outbound|PORT|SUBSET|HOST`, the host as written, the port 0 when the destination names none).
    pub egress_cluster: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Raw {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    egress_proxy: Option<Destination>,
}

impl OutboundPolicy {
    /// The policy of a sidecar whose Sidecar sets `sidecar` (its `outboundTrafficPolicy`, as
    /// validated at load), in a mesh whose mode is REGISTRY_ONLY when `mesh_registry_only`.
    pub fn resolve(
        sidecar: Option<&serde_json::Value>,
        mesh_registry_only: bool,
    ) -> OutboundPolicy {
        let Some(value) = sidecar.filter(|v| !v.is_null()) else {
            return OutboundPolicy {
                registry_only: mesh_registry_only,
                egress_cluster: None,
            };
        };
        let raw: Raw = serde_json::from_value(value.clone()).unwrap_or_default();
        // istiod's default mode (the enum's zero) is REGISTRY_ONLY.
        let registry_only = raw.mode.as_deref().is_none_or(|m| m == "REGISTRY_ONLY");
        let egress_cluster = raw
            .egress_proxy
            .filter(|_| !registry_only)
            .filter(|d| !d.host.is_empty())
            .map(|d| {
                let port = d.port.as_ref().map_or(0, |p| p.number);
                outbound_cluster_name(port, &d.subset, &d.host)
            });
        OutboundPolicy {
            registry_only,
            egress_cluster,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str, mesh: bool) -> OutboundPolicy {
        let v: serde_json::Value = serde_norway::from_str(yaml).unwrap();
        OutboundPolicy::resolve(Some(&v), mesh)
    }

    #[test]
    fn the_sidecar_wins_over_the_mesh_and_egress_proxy_needs_allow_any() {
        assert!(OutboundPolicy::resolve(None, true).registry_only);
        assert_eq!(
            OutboundPolicy::resolve(None, false),
            OutboundPolicy::default()
        );
        assert!(!policy("{mode: ALLOW_ANY}", true).registry_only);
        assert!(policy("{mode: REGISTRY_ONLY}", false).registry_only);
        assert!(policy("{}", false).registry_only);
        let p = policy(
            "{mode: ALLOW_ANY, egressProxy: {host: egress.example.com, subset: a, port: {number: 8080}}}",
            false,
        );
        assert_eq!(
            p.egress_cluster.as_deref(),
            Some("outbound|8080|a|egress.example.com")
        );
        let p = policy(
            "{mode: ALLOW_ANY, egressProxy: {host: egress.example.com}}",
            false,
        );
        assert_eq!(
            p.egress_cluster.as_deref(),
            Some("outbound|0||egress.example.com")
        );
    }
}
