//! The Kubernetes service index: Services, EndpointSlices, Pods and Namespaces in, one
//! synthetic ServiceEntry [`Config`] per Service out.
//!
//! Owned by the ServiceRegistry, which feeds it watch events (apply, delete, and the
//! init/init-apply/init-done of a list or relist, per kind). Translation follows istiod:
//! host `NAME.NAMESPACE.svc.DOMAIN`; port protocol from `appProtocol` or the port name
//! ([`super::protocol`]); `MESH_INTERNAL` (an ExternalName Service `MESH_EXTERNAL`, as
//! istiod's); `STATIC` with inline endpoints from the ready
//! endpoints of the Service's EndpointSlices (all of them with `publishNotReadyAddresses`),
//! each with its Pod's labels (so DestinationRule subsets work), service account and
//! locality (`region/zone/subzone` from the Pod's `istio-locality` label, else the Pod's
//! `topology.kubernetes.io/region`, the endpoint's `zone` and the Pod's
//! `topology.istio.io/subzone`); a headless Service (`clusterIP: None`) is `NONE` (original
//! destination) and an ExternalName Service `DNS` to its external name; `exportTo` from the
//! `networking.istio.io/exportTo` annotation. Every entry carries the label
//! `axon.io/source: kubernetes` and is named `svc:NAME`, so it never collides with a
//! ServiceEntry written as such.
//!
//! Only what the translation reads is held, so a change of resourceVersion or status alone
//! changes nothing; a change of endpoints alone changes only the entry's `endpoints` (the
//! EDS fast path).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::namespaces::{NamespaceChange, NamespaceFilter};
use super::protocol::port_protocol;
use super::store::{Change, ObjKey, Store};
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::ConfigSet;
use axon_config::host::kubernetes_hostname;
use axon_config::istio::{Labels, Location, Resolution, ServiceEntry, ServicePort, WorkloadEntry};
use axon_model::push_context::{KUBERNETES_SOURCE, SOURCE_LABEL};

/// The label an EndpointSlice names its Service with.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The annotation istiod reads a Service's `exportTo` from.
pub const EXPORT_TO_ANNOTATION: &str = "networking.istio.io/exportTo";
/// Prefix of the synthetic ServiceEntries' names.
pub const NAME_PREFIX: &str = "svc:";

/// What the translation reads of a Service.
#[derive(Debug, Clone, PartialEq)]
struct ServiceInfo {
    ports: Vec<ServicePort>,
    addresses: Vec<String>,
    shape: Shape,
    export_to: Vec<String>,
    publish_not_ready: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Shape {
    ClusterIp,
    Headless,
    ExternalName(String),
}

/// What the translation reads of an EndpointSlice.
#[derive(Debug, Clone, PartialEq)]
struct SliceInfo {
    service: String,
    /// Service port name → port on the endpoints.
    ports: BTreeMap<String, u32>,
    endpoints: Vec<SliceEndpoint>,
}

#[derive(Debug, Clone, PartialEq)]
struct SliceEndpoint {
    address: String,
    ready: bool,
    /// The Pod behind it (same namespace as the slice).
    pod: Option<String>,
    zone: String,
}

/// What the translation reads of a Pod.
#[derive(Debug, Clone, PartialEq)]
struct PodInfo {
    labels: Labels,
    service_account: String,
}

/// A watched kind of the service index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceKind {
    Namespace,
    Service,
    EndpointSlice,
    Pod,
}

/// The index. See the module documentation.
#[derive(Debug)]
pub struct ServiceObjectIndex {
    cluster_domain: String,
    namespaces: NamespaceFilter,
    services: Store<ServiceInfo>,
    slices: Store<SliceInfo>,
    pods: Store<PodInfo>,
    slices_by_service: BTreeMap<ObjKey, BTreeSet<ObjKey>>,
    slices_by_pod: BTreeMap<ObjKey, BTreeSet<ObjKey>>,
    /// Services whose entry must be rebuilt.
    dirty: BTreeSet<ObjKey>,
    configs: ConfigSet,
    /// `configs` as last handed out, while nothing is dirty.
    shared: Option<Arc<ConfigSet>>,
    /// The Namespaces' labels, held as configs too.
    namespace_labels: super::namespace_labels::NamespaceLabels,
}

impl ServiceObjectIndex {
    pub fn new(cluster_domain: &str, namespaces: NamespaceFilter) -> Self {
        ServiceObjectIndex {
            cluster_domain: cluster_domain.to_string(),
            namespaces,
            services: Store::default(),
            slices: Store::default(),
            pods: Store::default(),
            slices_by_service: BTreeMap::new(),
            slices_by_pod: BTreeMap::new(),
            dirty: BTreeSet::new(),
            configs: ConfigSet::new(),
            shared: None,
            namespace_labels: Default::default(),
        }
    }

    /// Counts of objects held, by kind (`/debug/configz`).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        BTreeMap::from([
            ("services", self.services.len()),
            ("endpointslices", self.slices.len()),
            ("pods", self.pods.len()),
        ])
    }

    // ---- Services -------------------------------------------------------------------

    pub fn init(&mut self, kind: ServiceKind) {
        match kind {
            ServiceKind::Namespace => {
                self.namespaces.init();
                self.namespace_labels.init();
            }
            ServiceKind::Service => self.services.init(),
            ServiceKind::EndpointSlice => self.slices.init(),
            ServiceKind::Pod => self.pods.init(),
        }
    }

    /// The list of `kind` is complete. Returns how the selected namespaces changed (for a
    /// Namespace list): the registry relists the other kinds when namespaces were added.
    pub fn init_done(&mut self, kind: ServiceKind) -> NamespaceChange {
        match kind {
            ServiceKind::Namespace => {
                self.namespace_labels.init_done();
                let change = self.namespaces.init_done();
                self.purge(&change);
                return change;
            }
            ServiceKind::Service => {
                let changes = self.services.init_done();
                self.dirty.extend(changes.into_iter().map(|c| c.key));
            }
            ServiceKind::EndpointSlice => {
                for change in self.slices.init_done() {
                    self.slice_changed(change);
                }
            }
            ServiceKind::Pod => {
                for change in self.pods.init_done() {
                    self.pod_changed(&change.key);
                }
            }
        }
        NamespaceChange::default()
    }

    pub fn init_service(&mut self, svc: &Service) {
        if let Some(key) = ObjKey::of(&svc.metadata) {
            let info = self.service_info(&key, svc);
            self.services.init_apply(key, info);
        }
    }

    pub fn apply_service(&mut self, svc: &Service) {
        if let Some(key) = ObjKey::of(&svc.metadata) {
            let info = self.service_info(&key, svc);
            if let Some(change) = self.services.apply(key, info) {
                self.dirty.insert(change.key);
            }
        }
    }

    pub fn delete_service(&mut self, svc: &Service) {
        if let Some(change) = ObjKey::of(&svc.metadata).and_then(|k| self.services.delete(&k)) {
            self.dirty.insert(change.key);
        }
    }

    fn service_info(&self, key: &ObjKey, svc: &Service) -> Option<ServiceInfo> {
        if !self.namespaces.allows(&key.namespace) {
            return None;
        }
        let spec = svc.spec.as_ref()?;
        let shape = match (spec.type_.as_deref(), spec.cluster_ip.as_deref()) {
            // An ExternalName Service without a name is not served.
            (Some("ExternalName"), _) => {
                Shape::ExternalName(spec.external_name.clone().filter(|n| !n.is_empty())?)
            }
            (_, Some("None")) => Shape::Headless,
            _ => Shape::ClusterIp,
        };
        let ports = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let number = u32::try_from(p.port)
                    .ok()
                    .filter(|n| (1..=65535).contains(n))?;
                let target_port = match &p.target_port {
                    Some(IntOrString::Int(t)) => u32::try_from(*t).ok().filter(|t| *t > 0),
                    _ => None,
                };
                Some(ServicePort {
                    number,
                    protocol: port_protocol(
                        number,
                        p.protocol.as_deref(),
                        p.app_protocol.as_deref(),
                        p.name.as_deref(),
                    ),
                    name: p.name.clone().unwrap_or_default(),
                    target_port,
                })
            })
            .collect();
        let mut addresses: Vec<String> = spec
            .cluster_ips
            .iter()
            .flatten()
            .chain(spec.cluster_ip.iter())
            .filter(|a| !a.is_empty() && *a != "None")
            .cloned()
            .collect();
        addresses.sort();
        addresses.dedup();
        let export_to = svc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(EXPORT_TO_ANNOTATION))
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        Some(ServiceInfo {
            ports,
            addresses,
            shape,
            export_to,
            publish_not_ready: spec.publish_not_ready_addresses == Some(true),
        })
    }

    // ---- EndpointSlices ---------------------------------------------------------------

    pub fn init_slice(&mut self, slice: &EndpointSlice) {
        if let Some(key) = ObjKey::of(&slice.metadata) {
            let info = self.slice_info(&key, slice);
            self.slices.init_apply(key, info);
        }
    }

    pub fn apply_slice(&mut self, slice: &EndpointSlice) {
        if let Some(key) = ObjKey::of(&slice.metadata) {
            let info = self.slice_info(&key, slice);
            if let Some(change) = self.slices.apply(key, info) {
                self.slice_changed(change);
            }
        }
    }

    pub fn delete_slice(&mut self, slice: &EndpointSlice) {
        if let Some(change) = ObjKey::of(&slice.metadata).and_then(|k| self.slices.delete(&k)) {
            self.slice_changed(change);
        }
    }

    fn slice_info(&self, key: &ObjKey, slice: &EndpointSlice) -> Option<SliceInfo> {
        if !self.namespaces.allows(&key.namespace) {
            return None;
        }
        let service = slice.metadata.labels.as_ref()?.get(SERVICE_NAME_LABEL)?;
        let ip = matches!(slice.address_type.as_str(), "IPv4" | "IPv6");
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                let port = u32::try_from(p.port?).ok().filter(|p| *p > 0)?;
                Some((p.name.clone().unwrap_or_default(), port))
            })
            .collect();
        let endpoints = slice
            .endpoints
            .iter()
            .filter(|_| ip)
            .filter_map(|ep| {
                let pod = ep
                    .target_ref
                    .as_ref()
                    .filter(|r| r.kind.as_deref() == Some("Pod"))
                    .and_then(|r| r.name.clone());
                Some(SliceEndpoint {
                    address: ep.addresses.first()?.clone(),
                    // A nil `ready` means ready.
                    ready: ep.conditions.as_ref().and_then(|c| c.ready) != Some(false),
                    pod,
                    zone: ep.zone.clone().unwrap_or_default(),
                })
            })
            .collect();
        Some(SliceInfo {
            service: service.clone(),
            ports,
            endpoints,
        })
    }

    /// Keeps the reverse indexes in step with a slice change and marks its services dirty.
    fn slice_changed(&mut self, change: Change<SliceInfo>) {
        let key = change.key;
        if let Some(old) = change.old {
            let service = ObjKey::new(&key.namespace, &old.service);
            remove_ref(&mut self.slices_by_service, &service, &key);
            for pod in old.endpoints.iter().filter_map(|e| e.pod.as_ref()) {
                remove_ref(
                    &mut self.slices_by_pod,
                    &ObjKey::new(&key.namespace, pod),
                    &key,
                );
            }
            self.dirty.insert(service);
        }
        if let Some(new) = self.slices.get(&key) {
            let service = ObjKey::new(&key.namespace, &new.service);
            for pod in new.endpoints.iter().filter_map(|e| e.pod.as_ref()) {
                self.slices_by_pod
                    .entry(ObjKey::new(&key.namespace, pod))
                    .or_default()
                    .insert(key.clone());
            }
            self.slices_by_service
                .entry(service.clone())
                .or_default()
                .insert(key);
            self.dirty.insert(service);
        }
    }

    // ---- Pods --------------------------------------------------------------------------

    pub fn init_pod(&mut self, pod: &Pod) {
        if let Some(key) = ObjKey::of(&pod.metadata) {
            let info = self.pod_info(&key, pod);
            self.pods.init_apply(key, info);
        }
    }

    pub fn apply_pod(&mut self, pod: &Pod) {
        if let Some(key) = ObjKey::of(&pod.metadata) {
            let info = self.pod_info(&key, pod);
            if let Some(change) = self.pods.apply(key, info) {
                self.pod_changed(&change.key);
            }
        }
    }

    pub fn delete_pod(&mut self, pod: &Pod) {
        if let Some(change) = ObjKey::of(&pod.metadata).and_then(|k| self.pods.delete(&k)) {
            self.pod_changed(&change.key);
        }
    }

    fn pod_info(&self, key: &ObjKey, pod: &Pod) -> Option<PodInfo> {
        if !self.namespaces.allows(&key.namespace) {
            return None;
        }
        Some(PodInfo {
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            service_account: pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .unwrap_or_default(),
        })
    }

    fn pod_changed(&mut self, pod: &ObjKey) {
        for slice in self.slices_by_pod.get(pod).into_iter().flatten() {
            if let Some(info) = self.slices.get(slice) {
                self.dirty
                    .insert(ObjKey::new(&slice.namespace, &info.service));
            }
        }
    }

    // ---- Namespaces --------------------------------------------------------------------

    /// A Namespace was added or changed; see [`ServiceObjectIndex::init_done`] for the result.
    pub fn apply_namespace(&mut self, ns: &Namespace) -> NamespaceChange {
        self.namespace_labels.apply(ns);
        let change = self.namespaces.apply(ns);
        self.purge(&change);
        change
    }

    pub fn delete_namespace(&mut self, ns: &Namespace) -> NamespaceChange {
        self.namespace_labels.delete(ns);
        let change = self.namespaces.delete(ns);
        self.purge(&change);
        change
    }

    pub fn init_namespace(&mut self, ns: &Namespace) {
        self.namespace_labels.init_apply(ns);
        self.namespaces.init_apply(ns);
    }

    /// Drops every object of the namespaces no longer selected.
    fn purge(&mut self, change: &NamespaceChange) {
        if !change.added.is_empty() || !change.removed.is_empty() {
            self.namespace_labels.touch();
        }
        for ns in &change.removed {
            for c in self.services.purge_namespace(ns) {
                self.dirty.insert(c.key);
            }
            for c in self.slices.purge_namespace(ns) {
                self.slice_changed(c);
            }
            for c in self.pods.purge_namespace(ns) {
                self.pod_changed(&c.key);
            }
        }
    }

    // ---- Output ------------------------------------------------------------------------

    /// The current entries, with the dirty ones rebuilt. Entries that did not change keep
    /// their `Arc`, so comparing with the previous set is cheap.
    pub fn configs(&mut self) -> Arc<ConfigSet> {
        if self.dirty.is_empty()
            && !self.namespace_labels.dirty()
            && let Some(shared) = &self.shared
        {
            return shared.clone();
        }
        if self.namespace_labels.dirty() {
            let filter = &self.namespaces;
            self.namespace_labels
                .update(&mut self.configs, |ns| filter.allows(ns));
        }
        for key in std::mem::take(&mut self.dirty) {
            let config_key = ConfigKey::new(
                ConfigKind::ServiceEntry,
                &key.namespace,
                format!("{NAME_PREFIX}{}", key.name),
            );
            match self.entry(&key) {
                Some(config) => {
                    if self.configs.get(&config_key).map(|c| c.as_ref()) != Some(&config) {
                        self.configs.insert(config_key, Arc::new(config));
                    }
                }
                None => {
                    self.configs.remove(&config_key);
                }
            }
        }
        let shared = Arc::new(self.configs.clone());
        self.shared = Some(shared.clone());
        shared
    }
}

fn remove_ref(map: &mut BTreeMap<ObjKey, BTreeSet<ObjKey>>, from: &ObjKey, slice: &ObjKey) {
    if let Some(set) = map.get_mut(from) {
        set.remove(slice);
        if set.is_empty() {
            map.remove(from);
        }
    }
}

mod entry;
#[cfg(test)]
mod tests;
