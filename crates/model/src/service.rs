//! Services and endpoints, as the registries describe them.
//!
//! A ServiceEntry becomes one [`Service`] per host; its endpoints come from its inline
//! `endpoints` or from the WorkloadEntries its `workloadSelector` picks in its namespace.

use std::sync::Arc;

use serde::Serialize;

use super::visibility::ExportTo;
use axon_config::config::{Config, ConfigKey, Spec};
use axon_config::host;
use axon_config::istio::{Labels, Location, Resolution, ServiceEntry, WorkloadEntry};

/// The label a registry puts on the ServiceEntries it makes, saying where they came from.
pub const SOURCE_LABEL: &str = "axon.io/source";
/// [`SOURCE_LABEL`]'s value on ServiceEntries made from Kubernetes Services.
pub const KUBERNETES_SOURCE: &str = "kubernetes";

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Port {
    pub name: String,
    pub number: u32,
    pub protocol: String,
    pub target_port: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Service {
    pub hostname: String,
    pub namespace: String,
    pub ports: Vec<Port>,
    pub resolution: Resolution,
    #[serde(skip)]
    pub export_to: ExportTo,
    /// The config this service came from.
    pub source: ConfigKey,
    /// The ServiceEntry's `subjectAltNames`: the names a DestinationRule's `tls` checks the
    /// upstream's certificate for when it names none (istiod's `serviceAccounts`).
    pub subject_alt_names: Vec<String>,
    /// The ServiceEntry's `location` is `MESH_EXTERNAL` (its default): istiod's
    /// `MeshExternal`. Such a destination's clusters never use the proxy's metadata client
    /// certificates and carry the `istio` metadata `external: true` (`cds`).
    pub mesh_external: bool,
    /// The ServiceEntry's `metadata.creationTimestamp` (istiod's `CreationTime`): which of the
    /// services on one workload port is its primary one (`sidecar_scope::InboundPort`).
    #[serde(skip)]
    pub created: Option<i64>,
    /// The ServiceEntry's `addresses` (a Kubernetes Service's ClusterIPs): IPs and CIDRs, in
    /// the entry's order, `0.0.0.0` left out (istiod's `ClusterVIPs`). A sidecar's TCP and
    /// sniffed ports listen on the first one (`lds`); none: the wildcard `0.0.0.0`.
    pub addresses: Vec<String>,
    /// Made from a Kubernetes Service (istiod's `ServiceRegistry == Kubernetes`): a headless
    /// one's virtual hosts also take `*.HOST` domains, and one without endpoints still gets
    /// per-endpoint listeners (none) rather than a wildcard one.
    pub from_kubernetes: bool,
    /// The ServiceEntry selects WorkloadEntries (`workloadSelector`): without any yet, a
    /// headless one has no endpoints to listen for, and no wildcard listener either.
    pub selects_workloads: bool,
}

impl Service {
    pub fn port(&self, number: u32) -> Option<&Port> {
        self.ports.iter().find(|p| p.number == number)
    }

    /// Headless (istiod's `Passthrough` without an address): resolution NONE and no address,
    /// so a sidecar listens per endpoint for its TCP and sniffed ports.
    pub fn is_headless(&self) -> bool {
        self.resolution == Resolution::None && self.addresses.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Endpoint {
    pub address: String,
    pub port: u32,
    pub labels: Labels,
    pub weight: u32,
    pub locality: String,
    /// The WorkloadEntry's (or ServiceEntry endpoint's) `network`: its
    /// `topology.istio.io/network` label for `failoverPriority`.
    pub network: String,
    /// The WorkloadEntry's `serviceAccount` (a Pod's, from Kubernetes): the identity
    /// `ISTIO_MUTUAL` checks the upstream for.
    pub service_account: String,
}

/// The label of a workload run beside istio's agent (`security.istio.io/tlsMode: istio`,
/// set by istio's injector on Pods and WorkloadEntries): its endpoints are called with
/// mutual TLS where auto mTLS is on.
pub const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";
/// istiod's `DisabledTLSModeLabel`: an endpoint without the label.
pub const TLS_MODE_DISABLED: &str = "disabled";
/// istiod's `IstioMutualTLSModeLabel`.
pub const TLS_MODE_ISTIO: &str = "istio";

impl Endpoint {
    /// istiod's endpoint `TLSMode`: its `security.istio.io/tlsMode` label, else `disabled`.
    pub fn tls_mode(&self) -> &str {
        self.labels
            .get(TLS_MODE_LABEL)
            .map_or(TLS_MODE_DISABLED, String::as_str)
    }
}

/// Protocols served through an HTTP connection manager (the others get a cluster only).
pub fn is_http_protocol(protocol: &str) -> bool {
    axon_config::validate::protocol(protocol) == Some(axon_config::validate::Protocol::Http)
}

/// Whether a port's protocol is none Istio knows (none given, or an unknown name): istiod's
/// `protocol.Unsupported`, whose traffic a sidecar sniffs (`ListenerProtocolAuto`).
pub fn is_sniffed_protocol(protocol: &str) -> bool {
    axon_config::validate::protocol(protocol).is_none()
}

/// The outbound listener conflicts among `services`, as istiod reports its TCP-over-TCP
/// ones: TCP or sniffed ports of several services on one address and port (a VIP, a CIDR,
/// or the wildcard for services without addresses), which a sidecar cannot tell apart: the
/// oldest service (then by host) gets the traffic. Headless services (per
/// endpoint listeners) and TLS ports (told apart by SNI) never conflict so.
pub fn listener_conflicts<'a>(services: impl Iterator<Item = &'a Service>) -> Vec<String> {
    let mut by_key: std::collections::BTreeMap<(String, u32), Vec<&str>> = Default::default();
    // istiod's order: the oldest first, then by host and namespace.
    let mut services: Vec<&Service> = services.collect();
    services.sort_by(|a, b| {
        (a.created, &a.hostname, &a.namespace).cmp(&(b.created, &b.hostname, &b.namespace))
    });
    for service in services
        .into_iter()
        .filter(|s| !s.hostname.starts_with('*'))
    {
        if service.is_headless() {
            continue;
        }
        let addresses: Vec<&str> = if service.addresses.is_empty() {
            vec!["0.0.0.0"]
        } else {
            service.addresses.iter().map(String::as_str).collect()
        };
        for port in &service.ports {
            let upper = port.protocol.to_ascii_uppercase();
            if is_http_protocol(&upper) || matches!(upper.as_str(), "TLS" | "HTTPS" | "UDP") {
                continue;
            }
            for address in &addresses {
                by_key
                    .entry((address.to_string(), port.number))
                    .or_default()
                    .push(&service.hostname);
            }
        }
    }
    by_key
        .into_iter()
        .filter(|(_, hosts)| hosts.len() > 1)
        .map(|((address, port), hosts)| {
            format!(
                "services {} share the outbound listener {address}_{port} with nothing to tell them apart: {} gets its traffic (give each service an address of its own)",
                hosts.join(", "),
                hosts[0]
            )
        })
        .collect()
}

/// Whether every label of `selector` is in `labels`.
pub fn labels_match(selector: &Labels, labels: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The services a ServiceEntry config declares, one per host; `default_export_to` applies
/// when the entry sets no `exportTo`.
pub fn services_of(config: &Config, default_export_to: &[String]) -> Vec<Service> {
    let Spec::ServiceEntry(se) = &config.spec else {
        return Vec::new();
    };
    let ports: Vec<Port> = se
        .ports
        .iter()
        .map(|p| Port {
            name: p.name.clone(),
            number: p.number,
            protocol: p.protocol.to_ascii_uppercase(),
            target_port: p.target_port,
        })
        .collect();
    se.hosts
        .iter()
        .map(|h| Service {
            hostname: host::resolve(h, config.namespace()),
            namespace: config.namespace().to_string(),
            ports: ports.clone(),
            resolution: se.resolution,
            export_to: ExportTo::resolve(&se.export_to, config.namespace(), default_export_to),
            source: config.key.clone(),
            subject_alt_names: se.subject_alt_names.clone(),
            mesh_external: se.location == Location::MeshExternal,
            created: config.created,
            addresses: se
                .addresses
                .iter()
                .filter(|a| !a.is_empty() && a.as_str() != "0.0.0.0")
                .cloned()
                .collect(),
            from_kubernetes: config.labels.get(SOURCE_LABEL).map(String::as_str)
                == Some(KUBERNETES_SOURCE),
            selects_workloads: se.workload_selector.is_some(),
        })
        .collect()
}

/// Endpoints of a ServiceEntry for one of its ports. `workloads` are the WorkloadEntries of
/// the entry's namespace (used only when it has a `workloadSelector`).
pub fn endpoints_of<'a>(
    se: &ServiceEntry,
    port: &Port,
    workloads: impl Iterator<Item = &'a Arc<Config>>,
) -> Vec<Endpoint> {
    let to_endpoint = |we: &WorkloadEntry| Endpoint {
        address: we.address.clone(),
        port: we
            .ports
            .get(&port.name)
            .copied()
            .or(port.target_port)
            .unwrap_or(port.number),
        labels: we.labels.clone(),
        weight: we.weight.filter(|w| *w > 0).unwrap_or(1),
        locality: we.locality.clone(),
        network: we.network.clone(),
        service_account: we.service_account.clone(),
    };
    let mut out: Vec<Endpoint> = match &se.workload_selector {
        Some(selector) => workloads
            .filter_map(|c| match &c.spec {
                Spec::WorkloadEntry(we) if labels_match(&selector.labels, &we.labels) => Some(we),
                _ => None,
            })
            .filter(|we| !we.address.is_empty())
            .map(to_endpoint)
            .collect(),
        None => se
            .endpoints
            .iter()
            .filter(|we| !we.address.is_empty())
            .map(to_endpoint)
            .collect(),
    };
    out.sort();
    out.dedup();
    out
}

/// istiod's cluster name: `outbound|PORT|SUBSET|HOST`.
pub fn outbound_cluster_name(port: u32, subset: &str, host: &str) -> String {
    format!("outbound|{port}|{subset}|{host}")
}

/// The parts of an `outbound|PORT|SUBSET|HOST` name.
pub fn parse_outbound_cluster_name(name: &str) -> Option<(u32, &str, &str)> {
    let mut parts = name.splitn(4, '|');
    let (Some("outbound"), Some(port), Some(subset), Some(host)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return None;
    };
    Some((port.parse().ok()?, subset, host))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_names_round_trip() {
        let n = outbound_cluster_name(80, "v1", "a.b.svc.cluster.local");
        assert_eq!(n, "outbound|80|v1|a.b.svc.cluster.local");
        assert_eq!(
            parse_outbound_cluster_name(&n),
            Some((80, "v1", "a.b.svc.cluster.local"))
        );
        assert_eq!(parse_outbound_cluster_name("inbound|80||"), None);
    }
}
