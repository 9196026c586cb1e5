//! A connected proxy's identity, parsed from its Envoy node.
//!
//! Istio's node id is `TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.cluster.local`; the ADS adapter
//! turns the protocol `Node` into a [`NodeInfo`] and [`Proxy::from_node`] checks it.

use std::fmt;

use thiserror::Error;

use super::locality::Locality;
use axon_config::istio::Labels;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProxyType {
    /// A gateway (istiod's `router`).
    Router,
    Sidecar,
}

/// What the ADS adapter reads off the Envoy `Node`, without protocol types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeInfo {
    pub id: String,
    pub cluster: String,
    /// `metadata.NAMESPACE`, if set.
    pub namespace: Option<String>,
    /// `metadata.LABELS`.
    pub labels: Labels,
    /// `metadata.GENERATOR` (`grpc` for proxyless gRPC clients).
    pub generator: Option<String>,
    /// `metadata.INTERCEPTION_MODE` (`REDIRECT`, `TPROXY` or `NONE`).
    pub interception_mode: Option<String>,
    /// `metadata.SERVICE_ACCOUNT`, if set (checked against the client's identity on the TLS
    /// port).
    pub service_account: Option<String>,
    /// `metadata.IDLE_TIMEOUT`, a Go duration (`10s`), if set.
    pub idle_timeout: Option<String>,
    /// Envoy's `node.locality`, if set.
    pub locality: Option<Locality>,
    /// `metadata.NETWORK`, if set.
    pub network: Option<String>,
    /// `metadata.TLS_CLIENT_CERT_CHAIN`, `TLS_CLIENT_KEY` and `TLS_CLIENT_ROOT_CERT`, if set.
    pub client_certs: Option<MetadataCerts>,
    /// `metadata.ISTIO_VERSION`, if set (istio's pilot-agent sets it).
    pub istio_version: Option<String>,
    /// `metadata.PROXY_CONFIG.tracing`, if set: the proxy's own tracing settings (istiod's
    /// `ProxyConfigOrDefault`).
    pub proxy_tracing: Option<axon_config::mesh::ProxyTracing>,
    /// Its Envoy has Istio's own filters (`istio.stats` among `node.extensions`): the Envoy
    /// of istio's proxy image, not an upstream build.
    pub istio_filters: bool,
    /// `metadata.MESH_ID` and `metadata.CLUSTER_ID`, if set (tracing's Istio tags; syncz
    /// reports the cluster the proxy runs in).
    pub mesh_id: Option<String>,
    pub cluster_id: Option<String>,
    /// `metadata.PROXY_CONFIG.gatewayTopology.numTrustedProxies` (the pod's
    /// `proxy.istio.io/config`, as pilot-agent sends it), if set.
    pub num_trusted_proxies: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum InvalidNode {
    #[error("node id is empty")]
    EmptyId,
    #[error("node id {0:?} is not TYPE~IP~POD.NAMESPACE~DOMAIN")]
    Malformed(String),
    #[error("node id {0:?}: unknown proxy type {1:?} (want router or sidecar)")]
    UnknownType(String, String),
}

/// The client certificate files of a proxy's node metadata (`TLS_CLIENT_CERT_CHAIN`,
/// `TLS_CLIENT_KEY`, `TLS_CLIENT_ROOT_CERT`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetadataCerts {
    pub cert_chain: String,
    pub key: String,
    pub root_cert: String,
}

/// A proxy as the generators see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Proxy {
    pub id: String,
    pub proxy_type: ProxyType,
    pub ip: String,
    /// `POD.NAMESPACE`.
    pub pod: String,
    pub namespace: String,
    pub labels: Labels,
    pub generator: Option<String>,
    /// No iptables capture (`INTERCEPTION_MODE: NONE`): no virtual listeners on 15001/15006;
    /// traffic reaches the proxy only through bound listeners.
    pub interception_none: bool,
    /// `INTERCEPTION_MODE: TPROXY`: the virtual listeners are transparent and inbound
    /// connections keep their original source (`original_src`, mark 1337).
    pub tproxy: bool,
    /// `IDLE_TIMEOUT` in nanoseconds: its HTTP connection managers' idle timeout (istiod
    /// ignores one that does not parse, as does axon).
    pub idle_timeout: Option<i128>,
    /// Where it runs ([`Locality::of_proxy`]): the localities of the endpoints it is sent
    /// are ordered or weighed from here.
    pub locality: Locality,
    /// Its network (`NETWORK`; empty if unknown): its `topology.istio.io/network` label for
    /// `failoverPriority`.
    pub network: String,
    /// The client certificate files its node metadata names (istiod's `metadataCerts`): a
    /// DestinationRule's `MUTUAL` and `ISTIO_MUTUAL` use them.
    pub client_certs: Option<MetadataCerts>,
    /// Run by istio's pilot-agent (`ISTIO_VERSION` in its metadata): its bootstrap has the
    /// `sds-grpc` cluster of the agent's workload certificate, which `ISTIO_MUTUAL` reads.
    pub istio_agent: bool,
    /// A gateway's `gatewayTopology.numTrustedProxies`: the `X-Forwarded-For` hops its
    /// connection managers trust (istiod's `xff_num_trusted_hops`).
    pub num_trusted_proxies: u32,
    /// Its namespace was proven: the TLS port authorized its identity for it. Only then, or
    /// with `MeshConfig::plaintext_secrets`, are TLS Secrets served to it.
    pub verified: bool,
    /// Run by istio's agent and built with Istio's filters: it is given the metadata
    /// exchange and `istio.stats` filters (an upstream Envoy would reject the listener).
    pub istio_stats: bool,
    /// Its own `defaultConfig.tracing` (`PROXY_CONFIG`), over the mesh's.
    pub proxy_tracing: Option<axon_config::mesh::ProxyTracing>,
    /// Envoy's `node.cluster` (istiod's service cluster): the service name of the spans it
    /// reports.
    pub cluster: String,
    /// `MESH_ID` and `CLUSTER_ID` (empty if not set): tracing's Istio tags.
    pub mesh_id: String,
    pub cluster_id: String,
}

impl Proxy {
    pub fn from_node(node: NodeInfo) -> Result<Proxy, InvalidNode> {
        if node.id.is_empty() {
            return Err(InvalidNode::EmptyId);
        }
        let parts: Vec<&str> = node.id.split('~').collect();
        let [kind, ip, pod, domain] = parts[..] else {
            return Err(InvalidNode::Malformed(node.id));
        };
        if ip.is_empty() || pod.is_empty() {
            return Err(InvalidNode::Malformed(node.id));
        }
        let proxy_type = match kind {
            "router" => ProxyType::Router,
            "sidecar" => ProxyType::Sidecar,
            other => return Err(InvalidNode::UnknownType(node.id.clone(), other.to_string())),
        };
        let namespace = node
            .namespace
            .filter(|ns| !ns.is_empty())
            .or_else(|| pod.split_once('.').map(|(_, ns)| ns.to_string()))
            .or_else(|| domain.split('.').next().map(str::to_string))
            .filter(|ns| !ns.is_empty())
            .ok_or_else(|| InvalidNode::Malformed(node.id.clone()))?;
        let locality = Locality::of_proxy(&node.labels, node.locality);
        Ok(Proxy {
            verified: false,
            cluster: node.cluster,
            proxy_tracing: node.proxy_tracing,
            istio_stats: node.istio_filters
                && node.istio_version.as_deref().is_some_and(|v| !v.is_empty()),
            mesh_id: node.mesh_id.unwrap_or_default(),
            cluster_id: node.cluster_id.unwrap_or_default(),
            locality,
            network: node.network.unwrap_or_default(),
            client_certs: node.client_certs,
            istio_agent: node.istio_version.is_some_and(|v| !v.is_empty()),
            num_trusted_proxies: node.num_trusted_proxies.unwrap_or(0),
            proxy_type,
            ip: ip.to_string(),
            pod: pod.to_string(),
            namespace,
            labels: node.labels,
            generator: node.generator,
            interception_none: node
                .interception_mode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("NONE")),
            tproxy: node
                .interception_mode
                .as_deref()
                .is_some_and(|m| m.eq_ignore_ascii_case("TPROXY")),
            idle_timeout: node
                .idle_timeout
                .as_deref()
                .and_then(axon_config::validate::parse_duration)
                .filter(|ns| *ns >= 0),
            id: node.id,
        })
    }

    /// Whether every label of `selector` is on this proxy (an empty selector matches all).
    pub fn matches_selector(&self, selector: &Labels) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }
}

impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> NodeInfo {
        NodeInfo {
            id: id.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn parses_istio_node_ids() {
        let p = Proxy::from_node(node(
            "router~10.0.0.1~ingress-7d.istio-system~istio-system.svc.cluster.local",
        ))
        .unwrap();
        assert_eq!(p.proxy_type, ProxyType::Router);
        assert_eq!(p.namespace, "istio-system");
        assert_eq!(p.ip, "10.0.0.1");
        let p = Proxy::from_node(node("sidecar~1.2.3.4~a-1.shop~shop.svc.cluster.local")).unwrap();
        assert_eq!(p.proxy_type, ProxyType::Sidecar);
        assert_eq!(p.namespace, "shop");
    }

    #[test]
    fn rejects_bad_ids() {
        assert_eq!(Proxy::from_node(node("")), Err(InvalidNode::EmptyId));
        assert!(matches!(
            Proxy::from_node(node("envoy-1")),
            Err(InvalidNode::Malformed(_))
        ));
        assert!(matches!(
            Proxy::from_node(node("waypoint~1.1.1.1~a.b~b.svc.cluster.local")),
            Err(InvalidNode::UnknownType(..))
        ));
    }
}
