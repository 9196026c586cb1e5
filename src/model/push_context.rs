//! `PushContext`: the immutable, indexed picture of the world that one push reads.
//!
//! Built by the SnapshotBuilder from the merged registries' configs. Each index is an `Arc`:
//! an update rebuilds only the indexes that the changed kinds feed and shares the rest with
//! the previous context, so a VirtualService edit does not re-index services or endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::config::{Config, ConfigKey, ConfigKind, Spec};
use super::host;
use super::istio::{DestinationRule, Gateway, Resolution, VirtualService};
use super::push_request::PushRequest;
use super::service::{Endpoint, Service, endpoints_of, services_of};

/// Every config of every source, ordered by key (kind first).
pub type ConfigSet = BTreeMap<ConfigKey, Arc<Config>>;

/// The configs of one kind, in key order.
pub fn of_kind(configs: &ConfigSet, kind: ConfigKind) -> impl Iterator<Item = &Arc<Config>> {
    let lo = ConfigKey::new(kind, "", "");
    configs
        .range(lo..)
        .take_while(move |(k, _)| k.kind == kind)
        .map(|(_, c)| c)
}

/// Services by hostname. When two entries declare the same host, the first by key wins.
#[derive(Debug, Default)]
pub struct ServiceIndex {
    pub by_host: BTreeMap<String, Arc<Service>>,
}

/// Endpoints by `(hostname, port)`.
#[derive(Debug, Default)]
pub struct EndpointIndex {
    pub by_service_port: BTreeMap<(String, u32), Arc<Vec<Endpoint>>>,
}

/// VirtualServices in key order, and by the gateway (`namespace/name`, or `mesh`) they bind.
#[derive(Debug, Default)]
pub struct VirtualServiceIndex {
    pub by_gateway: BTreeMap<String, Vec<Arc<Config>>>,
}

/// DestinationRules by the resolved host they apply to.
#[derive(Debug, Default)]
pub struct DestinationRuleIndex {
    pub by_host: BTreeMap<String, Arc<Config>>,
}

#[derive(Debug, Default)]
pub struct GatewayIndex {
    pub all: Vec<Arc<Config>>,
}

#[derive(Debug, Default)]
pub struct PushContext {
    /// Increases by one per built context; the xDS version of everything generated from it.
    pub version: u64,
    pub services: Arc<ServiceIndex>,
    pub endpoints: Arc<EndpointIndex>,
    pub virtual_services: Arc<VirtualServiceIndex>,
    pub destination_rules: Arc<DestinationRuleIndex>,
    pub gateways: Arc<GatewayIndex>,
}

impl PushContext {
    /// Builds the next context. Without a previous one, or for a forced or unscoped full push,
    /// every index is rebuilt; otherwise only those fed by the kinds in `request`.
    pub fn build(prev: Option<&PushContext>, configs: &ConfigSet, request: &PushRequest) -> Self {
        let version = prev.map_or(1, |p| p.version + 1);
        let Some(prev) = prev.filter(|_| !request.forced && !request.configs_updated.is_empty())
        else {
            return PushContext::build_all(version, configs);
        };
        let kinds: BTreeSet<ConfigKind> = request.configs_updated.iter().map(|k| k.kind).collect();
        let services_changed = request.full && kinds.contains(&ConfigKind::ServiceEntry);
        let services = if services_changed {
            Arc::new(index_services(configs))
        } else {
            prev.services.clone()
        };
        let endpoints = if services_changed || kinds.contains(&ConfigKind::WorkloadEntry) {
            Arc::new(index_endpoints(configs, &services))
        } else {
            prev.endpoints.clone()
        };
        let virtual_services = if kinds.contains(&ConfigKind::VirtualService) {
            Arc::new(index_virtual_services(configs))
        } else {
            prev.virtual_services.clone()
        };
        let destination_rules = if kinds.contains(&ConfigKind::DestinationRule) {
            Arc::new(index_destination_rules(configs))
        } else {
            prev.destination_rules.clone()
        };
        let gateways = if kinds.contains(&ConfigKind::Gateway) {
            Arc::new(index_gateways(configs))
        } else {
            prev.gateways.clone()
        };
        PushContext {
            version,
            services,
            endpoints,
            virtual_services,
            destination_rules,
            gateways,
        }
    }

    fn build_all(version: u64, configs: &ConfigSet) -> Self {
        let services = Arc::new(index_services(configs));
        PushContext {
            version,
            endpoints: Arc::new(index_endpoints(configs, &services)),
            services,
            virtual_services: Arc::new(index_virtual_services(configs)),
            destination_rules: Arc::new(index_destination_rules(configs)),
            gateways: Arc::new(index_gateways(configs)),
        }
    }

    pub fn service(&self, hostname: &str) -> Option<&Arc<Service>> {
        self.services.by_host.get(hostname)
    }

    pub fn endpoints(&self, hostname: &str, port: u32) -> &[Endpoint] {
        self.endpoints
            .by_service_port
            .get(&(hostname.to_string(), port))
            .map_or(&[], |e| e.as_slice())
    }

    pub fn destination_rule(&self, hostname: &str) -> Option<(&Config, &DestinationRule)> {
        let config = self.destination_rules.by_host.get(hostname)?;
        match &config.spec {
            Spec::DestinationRule(dr) => Some((config, dr)),
            _ => None,
        }
    }

    /// VirtualServices bound to a gateway named `namespace/name`.
    pub fn virtual_services_for_gateway(
        &self,
        gateway: &str,
    ) -> impl Iterator<Item = (&Config, &VirtualService)> {
        self.virtual_services
            .by_gateway
            .get(gateway)
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.spec {
                Spec::VirtualService(vs) => Some((c.as_ref(), vs)),
                _ => None,
            })
    }

    pub fn gateways(&self) -> impl Iterator<Item = (&Config, &Gateway)> {
        self.gateways.all.iter().filter_map(|c| match &c.spec {
            Spec::Gateway(gw) => Some((c.as_ref(), gw)),
            _ => None,
        })
    }
}

fn index_services(configs: &ConfigSet) -> ServiceIndex {
    let mut by_host = BTreeMap::new();
    for config in of_kind(configs, ConfigKind::ServiceEntry) {
        for service in services_of(config) {
            by_host
                .entry(service.hostname.clone())
                .or_insert_with(|| Arc::new(service));
        }
    }
    ServiceIndex { by_host }
}

fn index_endpoints(configs: &ConfigSet, services: &ServiceIndex) -> EndpointIndex {
    let mut by_service_port = BTreeMap::new();
    for service in services.by_host.values() {
        let Some(Spec::ServiceEntry(se)) = configs.get(&service.source).map(|c| &c.spec) else {
            continue;
        };
        for port in &service.ports {
            let workloads = of_kind(configs, ConfigKind::WorkloadEntry)
                .filter(|c| c.namespace() == service.namespace);
            let mut endpoints = endpoints_of(se, port, workloads);
            if endpoints.is_empty()
                && se.resolution == Resolution::Dns
                && se.workload_selector.is_none()
                && !service.hostname.starts_with('*')
            {
                // A DNS entry without endpoints resolves its own host.
                endpoints.push(Endpoint {
                    address: service.hostname.clone(),
                    port: port.target_port.unwrap_or(port.number),
                    labels: Default::default(),
                    weight: 1,
                    locality: String::new(),
                });
            }
            by_service_port.insert((service.hostname.clone(), port.number), Arc::new(endpoints));
        }
    }
    EndpointIndex { by_service_port }
}

fn index_virtual_services(configs: &ConfigSet) -> VirtualServiceIndex {
    let mut by_gateway: BTreeMap<String, Vec<Arc<Config>>> = BTreeMap::new();
    for config in of_kind(configs, ConfigKind::VirtualService) {
        let Spec::VirtualService(vs) = &config.spec else {
            continue;
        };
        let gateways: BTreeSet<String> = if vs.gateways.is_empty() {
            BTreeSet::from(["mesh".to_string()])
        } else {
            vs.gateways
                .iter()
                .map(|g| gateway_ref(g, config.namespace()))
                .collect()
        };
        for gateway in gateways {
            by_gateway.entry(gateway).or_default().push(config.clone());
        }
    }
    VirtualServiceIndex { by_gateway }
}

/// A VirtualService's gateway reference as `namespace/name` (or `mesh`).
pub fn gateway_ref(reference: &str, namespace: &str) -> String {
    if reference == "mesh" || reference.contains('/') {
        reference.to_string()
    } else {
        format!("{namespace}/{reference}")
    }
}

fn index_destination_rules(configs: &ConfigSet) -> DestinationRuleIndex {
    let mut by_host = BTreeMap::new();
    for config in of_kind(configs, ConfigKind::DestinationRule) {
        if let Spec::DestinationRule(dr) = &config.spec {
            by_host
                .entry(host::resolve(&dr.host, config.namespace()))
                .or_insert_with(|| config.clone());
        }
    }
    DestinationRuleIndex { by_host }
}

fn index_gateways(configs: &ConfigSet) -> GatewayIndex {
    GatewayIndex {
        all: of_kind(configs, ConfigKind::Gateway).cloned().collect(),
    }
}
