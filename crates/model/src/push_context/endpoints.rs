//! The endpoint index of a `PushContext`: built from the ServiceEntries' endpoints and the
//! WorkloadEntries they select, updated for an endpoint-only change (only the services fed
//! by a changed config are recomputed), and what an endpoint-only push carries
//! ([`changed_clusters`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::*;

/// WorkloadEntries by namespace (what a ServiceEntry's selector may pick).
fn workloads_by_namespace(configs: &ConfigSet) -> BTreeMap<&str, Vec<&Arc<Config>>> {
    let mut out: BTreeMap<&str, Vec<&Arc<Config>>> = BTreeMap::new();
    for c in of_kind(configs, ConfigKind::WorkloadEntry) {
        out.entry(c.namespace()).or_default().push(c);
    }
    out
}

/// The endpoints of every port of one service.
fn service_endpoints(
    configs: &ConfigSet,
    service: &Service,
    workloads: &BTreeMap<&str, Vec<&Arc<Config>>>,
) -> Vec<(ServicePort, Arc<Vec<Endpoint>>)> {
    let Some(Spec::ServiceEntry(se)) = configs.get(&service.source).map(|c| &c.spec) else {
        return Vec::new();
    };
    let in_namespace = workloads
        .get(service.namespace.as_str())
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    service
        .ports
        .iter()
        .map(|port| {
            let mut endpoints = endpoints_of(se, port, in_namespace.iter().copied());
            if endpoints.is_empty()
                && matches!(se.resolution, Resolution::Dns | Resolution::DnsRoundRobin)
                && se.workload_selector.is_none()
                && !service.hostname.starts_with('*')
            {
                // A DNS or DNS_ROUND_ROBIN entry without endpoints resolves its own host
                // (istiod's `convertServices`).
                endpoints.push(Endpoint {
                    address: service.hostname.clone(),
                    port: port.target_port.unwrap_or(port.number),
                    labels: Default::default(),
                    weight: 1,
                    locality: String::new(),
                    network: String::new(),
                    service_account: String::new(),
                });
            }
            ((service.hostname.clone(), port.number), Arc::new(endpoints))
        })
        .collect()
}

pub(super) fn index_endpoints(configs: &ConfigSet, services: &ServiceIndex) -> EndpointIndex {
    let workloads = workloads_by_namespace(configs);
    let by_service_port: BTreeMap<_, _> = services
        .by_host
        .values()
        .flat_map(|s| service_endpoints(configs, s, &workloads))
        .collect();
    EndpointIndex {
        by_address: AddressIndex::build(&by_service_port),
        by_service_port,
    }
}

/// The endpoint index after an endpoint-only change: only the services fed by a changed
/// ServiceEntry, or selecting WorkloadEntries in a namespace where one changed, are recomputed.
pub(super) fn update_endpoints(
    prev: &EndpointIndex,
    configs: &ConfigSet,
    services: &ServiceIndex,
    changed: &BTreeSet<ConfigKey>,
) -> EndpointIndex {
    let workload_namespaces: BTreeSet<&str> = changed
        .iter()
        .filter(|k| k.kind == ConfigKind::WorkloadEntry)
        .map(|k| k.namespace.as_str())
        .collect();
    let affected: Vec<&Arc<Service>> = services
        .by_host
        .values()
        .filter(|s| {
            changed.contains(&s.source)
                || (workload_namespaces.contains(s.namespace.as_str())
                    && matches!(
                        configs.get(&s.source).map(|c| &c.spec),
                        Some(Spec::ServiceEntry(se)) if se.workload_selector.is_some()
                    ))
        })
        .collect();
    let workloads = workloads_by_namespace(configs);
    let mut by_service_port = prev.by_service_port.clone();
    let mut by_address = prev.by_address.clone();
    for service in affected {
        let host = &service.hostname;
        let of_host = (host.clone(), 0)..=(host.clone(), u32::MAX);
        let old: Vec<_> = prev.by_service_port.range(of_host).collect();
        for (key, _) in &old {
            by_service_port.remove(*key);
        }
        let new = service_endpoints(configs, service, &workloads);
        by_address = by_address.replace_host(
            host,
            old.iter().flat_map(|(_, eps)| eps.iter()),
            new.iter()
                .flat_map(|((_, port), eps)| eps.iter().map(move |e| (*port, e))),
        );
        by_service_port.extend(new);
    }
    EndpointIndex {
        by_address,
        by_service_port,
    }
}

/// Of the clusters named in `names`, those whose endpoints differ between `old` and `new`:
/// what an endpoint-only push sends (istiod's incremental EDS). With the differences that
/// `new` recorded when it was built, this looks up only the few changed clusters' names.
pub fn changed_clusters(
    old: &PushContext,
    new: &PushContext,
    names: &BTreeSet<String>,
) -> BTreeSet<String> {
    let Some(changes) = new.endpoint_changes_since(old) else {
        return names
            .iter()
            .filter(|name| cluster_endpoints_changed(old, new, name))
            .cloned()
            .collect();
    };
    let mut out = BTreeSet::new();
    for (host, port) in changes.iter() {
        let subsets = new
            .destination_rules_of(host)
            .flat_map(|(_, dr)| dr.subsets.iter().map(|s| s.name.as_str()));
        for subset in std::iter::once("").chain(subsets) {
            let name = crate::service::outbound_cluster_name(*port, subset, host);
            // A subset whose own endpoints did not move (another subset's did) is not sent.
            if names.contains(&name)
                && old.subset_endpoints(host, *port, subset)
                    != new.subset_endpoints(host, *port, subset)
            {
                out.insert(name);
            }
        }
    }
    out
}

/// The `(hostname, port)`s whose endpoints differ between two indexes.
pub(super) fn endpoint_differences(
    old: &EndpointIndex,
    new: &EndpointIndex,
) -> BTreeSet<(String, u32)> {
    let mut out: BTreeSet<(String, u32)> = old
        .by_service_port
        .keys()
        .filter(|k| !new.by_service_port.contains_key(*k))
        .cloned()
        .collect();
    for (key, endpoints) in &new.by_service_port {
        match old.by_service_port.get(key) {
            Some(prev) if Arc::ptr_eq(prev, endpoints) || prev == endpoints => {}
            _ => {
                out.insert(key.clone());
            }
        }
    }
    out
}

fn cluster_endpoints_changed(old: &PushContext, new: &PushContext, name: &str) -> bool {
    crate::service::parse_outbound_cluster_name(name).is_some_and(|(port, subset, host)| {
        old.subset_endpoints(host, port, subset) != new.subset_endpoints(host, port, subset)
    })
}

impl PushContext {
    /// The endpoints of the cluster `host:port` of `subset` (empty: all of them): those
    /// whose labels match the subset's in the first DestinationRule of the host that defines
    /// it, as EDS selects them for a cluster name; none for a subset no rule defines.
    pub fn subset_endpoints(&self, host: &str, port: u32, subset: &str) -> Vec<&Endpoint> {
        let endpoints = self.endpoints(host, port);
        if subset.is_empty() {
            return endpoints.iter().collect();
        }
        let labels = self
            .destination_rules_of(host)
            .find_map(|(_, dr)| dr.subsets.iter().find(|s| s.name == subset))
            .map(|s| &s.labels);
        match labels {
            Some(labels) => endpoints
                .iter()
                .filter(|ep| crate::service::labels_match(labels, &ep.labels))
                .collect(),
            None => Vec::new(),
        }
    }
}
