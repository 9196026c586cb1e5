//! `PushContext`: the immutable, indexed picture of the world that one push reads.
//!
//! Built by the SnapshotBuilder from the merged registries' configs. Each index is an `Arc`:
//! an update rebuilds only the indexes that the changed kinds feed and shares the rest with
//! the previous context, so a VirtualService edit does not re-index services or endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::address_index::AddressIndex;
use super::authz::AuthzIndex;
use super::peer_authn::PeerAuthnIndex;
use super::push_request::PushRequest;
use super::request_authn::{JwksIndex, RequestAuthnIndex};
use super::secrets::SecretIndex;
use super::service::{Endpoint, Service, endpoints_of, labels_match, services_of};
use super::telemetry::TelemetryIndex;
use super::visibility::ExportTo;
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::ConfigSet;
use axon_config::host;
use axon_config::istio::{DestinationRule, Gateway, Labels, Resolution, Sidecar};
use axon_config::mesh::MeshConfig;

mod delegate;
mod destination_rules;
mod endpoints;
mod virtual_services;

pub use destination_rules::ChosenRule;

pub use endpoints::changed_clusters;
use endpoints::{endpoint_differences, index_endpoints, update_endpoints};
use virtual_services::index_virtual_services;
pub use virtual_services::{VirtualServiceIndex, VirtualServiceProblem, gateway_ref};

pub use crate::service::{KUBERNETES_SOURCE, SOURCE_LABEL};
pub use axon_config::config_set::of_kind;

/// Services by hostname (when two entries declare the same host, a ServiceEntry written as
/// such wins over one made from a Kubernetes Service, then the first by key), and by
/// namespace.
#[derive(Debug, Default)]
pub struct ServiceIndex {
    pub by_host: BTreeMap<String, Arc<Service>>,
    pub by_namespace: BTreeMap<String, Vec<Arc<Service>>>,
    /// Services a sidecar's outbound listeners cannot tell apart
    /// ([`crate::service::listener_conflicts`]), logged when the index is rebuilt.
    pub listener_conflicts: Vec<String>,
}

/// Endpoints by `(hostname, port)`, and the service ports each address serves (a proxy's
/// own workload ports, found by its IP).
#[derive(Debug, Default)]
pub struct EndpointIndex {
    pub by_service_port: BTreeMap<(String, u32), Arc<Vec<Endpoint>>>,
    /// Address → `(hostname, service port, endpoint port)`.
    pub by_address: AddressIndex,
}

/// DestinationRules by the resolved host they apply to, in key order.
#[derive(Debug, Default)]
pub struct DestinationRuleIndex {
    pub by_host: BTreeMap<String, Vec<Arc<Config>>>,
    /// The rules with a `workloadSelector`, by namespace: which of them select a proxy is
    /// part of what it sees (`SidecarScope` keys).
    pub with_selector: BTreeMap<String, Vec<Arc<Config>>>,
    /// Whether any rule may order or weigh endpoints per proxy locality
    /// ([`super::locality::rule_depends_on_locality`]): if none does, every proxy shares each
    /// load assignment.
    pub locality_dependent: bool,
    /// The labels the rules' `failoverPriority` entries read.
    pub failover_labels: BTreeSet<String>,
}

/// Sidecar resources by namespace, in key order.
#[derive(Debug, Default)]
pub struct SidecarIndex {
    pub by_namespace: BTreeMap<String, Vec<Arc<Config>>>,
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
    pub sidecars: Arc<SidecarIndex>,
    /// TLS Secrets by namespace and name (`super::secrets`).
    pub secrets: Arc<SecretIndex>,
    /// PeerAuthentications, composed as istiod does (`super::peer_authn`).
    pub peer_authn: Arc<PeerAuthnIndex>,
    /// AuthorizationPolicies (`super::authz`).
    pub authz: Arc<AuthzIndex>,
    /// RequestAuthentications, selected as istiod does (`super::request_authn`).
    pub request_authn: Arc<RequestAuthnIndex>,
    /// Telemetries (`super::telemetry`).
    pub telemetry: Arc<TelemetryIndex>,
    /// The JWKS the resolver fetched for their rules (`super::request_authn`).
    pub jwks: Arc<JwksIndex>,
    pub mesh: Arc<MeshConfig>,
    /// Answers computed from this context, shared by the proxies that ask the same question.
    pub memo: super::memo::Memo,
    /// What the Gateway API objects turned into (`super::gateway_api`).
    pub gateway_api: Arc<super::gateway_api::GatewayApiIndex>,
    /// The derived configs (`super::gateway_api`) that changed with the request this context
    /// was built for: pushes must treat them as updated ([`Self::effective_request`]).
    pub derived_updates: BTreeSet<ConfigKey>,
    /// For a context made by an endpoint-only request: the `(hostname, port)`s whose
    /// endpoints differ from the previous context's (the one of version `version - 1`).
    pub endpoint_changes: Option<Arc<BTreeSet<(String, u32)>>>,
}

impl PushContext {
    /// What, beyond its scope, a proxy's load assignments (EDS, and the inline ones of DNS
    /// clusters) depend on: its locality and the values of the labels `failoverPriority`
    /// entries read. `None` when no DestinationRule orders endpoints per proxy.
    pub fn locality_key(&self, proxy: &super::proxy::Proxy) -> Option<String> {
        if !self.locality_dependent() {
            return None;
        }
        let labels = proxy.locality.augment(&proxy.labels, &proxy.network);
        let values: Vec<&str> = self
            .destination_rules
            .failover_labels
            .iter()
            .map(|l| labels.get(l).map_or("", String::as_str))
            .collect();
        Some(format!("{}|{}", proxy.locality.label(), values.join("|")))
    }

    /// Whether some load assignment may be ordered or weighed per proxy: a DestinationRule
    /// says so ([`DestinationRuleIndex::locality_dependent`]), or the mesh's default does
    /// (zone-aware routing, `distribute` rules, or a default outlier detection).
    pub fn locality_dependent(&self) -> bool {
        self.destination_rules.locality_dependent
            || self
                .mesh
                .zone_aware_lb_setting
                .as_ref()
                .is_some_and(|z| z.enabled != Some(false))
            || self
                .mesh
                .locality_lb_setting
                .as_ref()
                .is_some_and(|l| !l.distribute.is_empty() && l.enabled != Some(false))
            // The mesh's default outlier detection turns locality failover on everywhere.
            || self.mesh.default_outlier_detection.is_some()
    }

    /// Builds the next context. Without a previous one, or for a forced or unscoped full push,
    /// every index is rebuilt; otherwise only those fed by the kinds in `request`.
    pub fn build(
        prev: Option<&PushContext>,
        configs: &ConfigSet,
        request: &PushRequest,
        mesh: &Arc<MeshConfig>,
    ) -> Self {
        let expanded =
            super::gateway_api::expand(prev.map(|p| p.gateway_api.as_ref()), configs, request);
        let Some((gateway_api, configs, expanded_request)) = expanded else {
            return PushContext::build_istio(prev, configs, request, mesh);
        };
        let mut ctx = PushContext::build_istio(prev, &configs, &expanded_request, mesh);
        ctx.derived_updates = expanded_request
            .configs_updated
            .difference(&request.configs_updated)
            .cloned()
            .collect();
        ctx.gateway_api = gateway_api;
        ctx
    }

    /// `request` as the pushes of this context must read it: with the derived configs that
    /// changed ([`Self::derived_updates`]).
    pub fn effective_request(&self, request: &PushRequest) -> PushRequest {
        let mut request = request.clone();
        request
            .configs_updated
            .extend(self.derived_updates.iter().cloned());
        request
    }

    fn build_istio(
        prev: Option<&PushContext>,
        configs: &ConfigSet,
        request: &PushRequest,
        mesh: &Arc<MeshConfig>,
    ) -> Self {
        let version = prev.map_or(1, |p| p.version + 1);
        let Some(prev) = prev.filter(|p| {
            !request.forced && !request.configs_updated.is_empty() && Arc::ptr_eq(&p.mesh, mesh)
        }) else {
            return PushContext::build_all(version, configs, mesh);
        };
        let kinds: BTreeSet<ConfigKind> = request.configs_updated.iter().map(|k| k.kind).collect();
        // An endpoint-only request (`full = false`) keeps the services and swaps endpoints.
        let services_changed = request.full && kinds.contains(&ConfigKind::ServiceEntry);
        let services = if services_changed {
            Arc::new(index_services(configs, mesh))
        } else {
            prev.services.clone()
        };
        let endpoints_changed =
            kinds.contains(&ConfigKind::ServiceEntry) || kinds.contains(&ConfigKind::WorkloadEntry);
        let endpoints: Arc<EndpointIndex> = if endpoints_changed && !request.full {
            Arc::new(update_endpoints(
                &prev.endpoints,
                configs,
                &services,
                &request.configs_updated,
            ))
        } else if endpoints_changed {
            Arc::new(index_endpoints(configs, &services))
        } else {
            prev.endpoints.clone()
        };
        let virtual_services = if kinds.contains(&ConfigKind::VirtualService) {
            Arc::new(index_virtual_services(
                configs,
                &mesh.default_virtual_service_export_to,
            ))
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
        let sidecars = if kinds.contains(&ConfigKind::Sidecar) {
            Arc::new(index_sidecars(configs))
        } else {
            prev.sidecars.clone()
        };
        let secrets = if kinds.contains(&ConfigKind::Secret) {
            Arc::new(SecretIndex::build(configs))
        } else {
            prev.secrets.clone()
        };
        let peer_authn = if kinds.contains(&ConfigKind::PeerAuthentication) {
            Arc::new(PeerAuthnIndex::build(configs, &mesh.root_namespace))
        } else {
            prev.peer_authn.clone()
        };
        let authz = if kinds.contains(&ConfigKind::AuthorizationPolicy) {
            Arc::new(AuthzIndex::build(configs, &mesh.root_namespace))
        } else {
            prev.authz.clone()
        };
        let request_authn = if kinds.contains(&ConfigKind::RequestAuthentication) {
            Arc::new(RequestAuthnIndex::build(configs, &mesh.root_namespace))
        } else {
            prev.request_authn.clone()
        };
        let telemetry = if kinds.contains(&ConfigKind::Telemetry) {
            Arc::new(TelemetryIndex::build(configs, &mesh.root_namespace))
        } else {
            prev.telemetry.clone()
        };
        let jwks = if kinds.contains(&ConfigKind::Jwks) {
            Arc::new(JwksIndex::build(configs))
        } else {
            prev.jwks.clone()
        };
        let endpoint_changes =
            (!request.full).then(|| Arc::new(endpoint_differences(&prev.endpoints, &endpoints)));
        PushContext {
            version,
            endpoint_changes,
            services,
            endpoints,
            virtual_services,
            destination_rules,
            gateways,
            sidecars,
            secrets,
            peer_authn,
            authz,
            request_authn,
            telemetry,
            jwks,
            mesh: mesh.clone(),
            memo: Default::default(),
            gateway_api: Default::default(),
            derived_updates: Default::default(),
        }
    }

    fn build_all(version: u64, configs: &ConfigSet, mesh: &Arc<MeshConfig>) -> Self {
        let services = Arc::new(index_services(configs, mesh));
        PushContext {
            version,
            endpoints: Arc::new(index_endpoints(configs, &services)),
            services,
            virtual_services: Arc::new(index_virtual_services(
                configs,
                &mesh.default_virtual_service_export_to,
            )),
            destination_rules: Arc::new(index_destination_rules(configs)),
            gateways: Arc::new(index_gateways(configs)),
            sidecars: Arc::new(index_sidecars(configs)),
            secrets: Arc::new(SecretIndex::build(configs)),
            peer_authn: Arc::new(PeerAuthnIndex::build(configs, &mesh.root_namespace)),
            authz: Arc::new(AuthzIndex::build(configs, &mesh.root_namespace)),
            request_authn: Arc::new(RequestAuthnIndex::build(configs, &mesh.root_namespace)),
            telemetry: Arc::new(TelemetryIndex::build(configs, &mesh.root_namespace)),
            jwks: Arc::new(JwksIndex::build(configs)),
            mesh: mesh.clone(),
            memo: Default::default(),
            endpoint_changes: None,
            gateway_api: Default::default(),
            derived_updates: Default::default(),
        }
    }

    /// The `(hostname, port)`s whose endpoints differ from `old`'s, when this context was made
    /// from `old` by an endpoint-only request (not when a proxy skipped a context between).
    pub fn endpoint_changes_since(&self, old: &PushContext) -> Option<&BTreeSet<(String, u32)>> {
        self.endpoint_changes
            .as_deref()
            .filter(|_| old.version + 1 == self.version)
    }

    /// Where `export_to` of a config of `kind` in `namespace` lets it be seen from (the
    /// mesh's default for the kind when it sets none).
    pub fn export_to(&self, kind: ConfigKind, export_to: &[String], namespace: &str) -> ExportTo {
        let default = match kind {
            ConfigKind::VirtualService => &self.mesh.default_virtual_service_export_to,
            ConfigKind::DestinationRule => &self.mesh.default_destination_rule_export_to,
            _ => &self.mesh.default_service_export_to,
        };
        ExportTo::resolve(export_to, namespace, default)
    }

    /// Sidecar resources of `namespace`, in key order.
    pub fn sidecars_in(&self, namespace: &str) -> impl Iterator<Item = (&Config, &Sidecar)> {
        self.sidecars
            .by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.spec {
                Spec::Sidecar(sc) => Some((c.as_ref(), sc)),
                _ => None,
            })
    }

    /// How many workloads each RequestAuthentication applies to (`/debug/configz`, `axon
    /// validate`): the workloads are the distinct endpoints (address, namespace, labels) of
    /// the services in this context: Pods and WorkloadEntries; a proxy without an endpoint (a
    /// gateway's Deployment without a Service) is not counted.
    pub fn request_authn_selected(&self) -> BTreeMap<ConfigKey, usize> {
        if self.request_authn.is_empty() {
            return BTreeMap::new();
        }
        let workloads = self.workloads();
        self.request_authn
            .selected_counts(workloads.iter().map(|(ns, _, labels)| (*ns, *labels)))
    }

    /// How many workloads of the endpoints each AuthorizationPolicy applies to
    /// (`/debug/configz`, `axon validate`).
    pub fn authz_selected(&self) -> BTreeMap<ConfigKey, usize> {
        if self.authz.is_empty() {
            return BTreeMap::new();
        }
        let mut counts: BTreeMap<ConfigKey, usize> = BTreeMap::new();
        for (ns, _, labels) in self.workloads() {
            for config in self.authz.for_workload(ns, labels).all() {
                *counts.entry(config.key.clone()).or_default() += 1;
            }
        }
        for (ns, name) in self.authz.all_keys() {
            counts
                .entry(ConfigKey::new(ConfigKind::AuthorizationPolicy, ns, name))
                .or_default();
        }
        counts
    }

    /// The workloads of the services' endpoints: namespace, address, labels, each once.
    fn workloads(&self) -> BTreeSet<(&str, &str, &Labels)> {
        let mut workloads = BTreeSet::new();
        for ((host, _), endpoints) in &self.endpoints.by_service_port {
            let Some(service) = self.service(host) else {
                continue;
            };
            for e in endpoints.iter() {
                workloads.insert((service.namespace.as_str(), e.address.as_str(), &e.labels));
            }
        }
        workloads
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

    /// istiod's `ServiceAccounts`: the identities the endpoints of `hostname:port` run as
    /// (`spiffe://TRUST_DOMAIN/ns/NS/sa/SA` for each endpoint's service account, in the
    /// service's namespace), then the ServiceEntry's `subjectAltNames`; sorted, each once.
    pub fn service_accounts(&self, hostname: &str, port: u32) -> Vec<String> {
        let Some(service) = self.service(hostname) else {
            return Vec::new();
        };
        let mut out: BTreeSet<String> = self
            .endpoints(hostname, port)
            .iter()
            .filter(|e| !e.service_account.is_empty())
            .map(|e| {
                format!(
                    "spiffe://{}/ns/{}/sa/{}",
                    self.mesh.trust_domain, service.namespace, e.service_account
                )
            })
            .collect();
        out.extend(service.subject_alt_names.iter().cloned());
        out.into_iter().collect()
    }

    /// The DestinationRule of `hostname` (the first by key, whatever its namespace).
    pub fn destination_rule(&self, hostname: &str) -> Option<(&Config, &DestinationRule)> {
        self.destination_rules_of(hostname).next()
    }

    /// The DestinationRule of `hostname` that a proxy in `namespace` uses, leaving out the
    /// rules with a `workloadSelector` ([`Self::destination_rule_for_workload`]).
    pub fn destination_rule_for(&self, hostname: &str, namespace: &str) -> Option<ChosenRule<'_>> {
        self.destination_rule_for_workload(hostname, namespace, None)
    }

    /// Every DestinationRule of `hostname`, in key order.
    pub fn destination_rules_of(
        &self,
        hostname: &str,
    ) -> impl Iterator<Item = (&Config, &DestinationRule)> {
        self.destination_rules
            .by_host
            .get(hostname)
            .into_iter()
            .flatten()
            .filter_map(|c| match &c.spec {
                Spec::DestinationRule(dr) => Some((c.as_ref(), dr)),
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

fn index_services(configs: &ConfigSet, mesh: &MeshConfig) -> ServiceIndex {
    let mut by_host = BTreeMap::new();
    let from_kubernetes =
        |c: &Arc<Config>| c.labels.get(SOURCE_LABEL).map(String::as_str) == Some(KUBERNETES_SOURCE);
    let written = of_kind(configs, ConfigKind::ServiceEntry).filter(|c| !from_kubernetes(c));
    let synthetic = of_kind(configs, ConfigKind::ServiceEntry).filter(|c| from_kubernetes(c));
    for config in written.chain(synthetic) {
        for service in services_of(config, &mesh.default_service_export_to) {
            by_host
                .entry(service.hostname.clone())
                .or_insert_with(|| Arc::new(service));
        }
    }
    let mut by_namespace: BTreeMap<String, Vec<Arc<Service>>> = BTreeMap::new();
    for service in by_host.values() {
        by_namespace
            .entry(service.namespace.clone())
            .or_default()
            .push(service.clone());
    }
    let listener_conflicts =
        crate::service::listener_conflicts(by_host.values().map(|s| s.as_ref()));
    ServiceIndex {
        by_host,
        by_namespace,
        listener_conflicts,
    }
}

/// `(hostname, port)`: what the endpoint index is keyed by.
pub type ServicePort = (String, u32);

fn index_destination_rules(configs: &ConfigSet) -> DestinationRuleIndex {
    let mut by_host: BTreeMap<String, Vec<Arc<Config>>> = BTreeMap::new();
    let mut with_selector: BTreeMap<String, Vec<Arc<Config>>> = BTreeMap::new();
    let mut locality_dependent = false;
    let mut failover_labels = BTreeSet::new();
    for config in of_kind(configs, ConfigKind::DestinationRule) {
        if let Spec::DestinationRule(dr) = &config.spec {
            locality_dependent |= super::locality::rule_depends_on_locality(dr);
            failover_labels.extend(super::locality::failover_labels(dr).map(str::to_string));
            by_host
                .entry(host::resolve(&dr.host, config.namespace()))
                .or_default()
                .push(config.clone());
            if dr.workload_selector.is_some() {
                with_selector
                    .entry(config.namespace().to_string())
                    .or_default()
                    .push(config.clone());
            }
        }
    }
    DestinationRuleIndex {
        by_host,
        with_selector,
        locality_dependent,
        failover_labels,
    }
}

fn index_sidecars(configs: &ConfigSet) -> SidecarIndex {
    let mut by_namespace: BTreeMap<String, Vec<Arc<Config>>> = BTreeMap::new();
    for config in of_kind(configs, ConfigKind::Sidecar) {
        by_namespace
            .entry(config.namespace().to_string())
            .or_default()
            .push(config.clone());
    }
    SidecarIndex { by_namespace }
}

fn index_gateways(configs: &ConfigSet) -> GatewayIndex {
    GatewayIndex {
        all: of_kind(configs, ConfigKind::Gateway).cloned().collect(),
    }
}
