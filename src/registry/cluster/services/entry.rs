//! What one Service becomes: its ServiceEntry config (hosts, ports, resolution, exportTo)
//! and its endpoints from the EndpointSlices' ready endpoints and their Pods.

use super::*;

impl ServiceObjectIndex {
    /// The ServiceEntry of one Service.
    pub(super) fn entry(&self, key: &ObjKey) -> Option<Config> {
        let svc = self.services.get(key)?;
        let host = kubernetes_hostname(&key.name, &key.namespace, &self.cluster_domain);
        let (resolution, endpoints) = match &svc.shape {
            Shape::ClusterIp => (Resolution::Static, self.endpoints(key, svc)),
            // A headless Service's endpoints are its pods: a sidecar listens per pod for its TCP
            // and sniffed ports (`lds::outbound`); its cluster is the original destination.
            Shape::Headless => (Resolution::None, self.endpoints(key, svc)),
            Shape::ExternalName(name) => (
                Resolution::Dns,
                vec![WorkloadEntry {
                    address: name.clone(),
                    ..Default::default()
                }],
            ),
        };
        let se = ServiceEntry {
            hosts: vec![host],
            addresses: match svc.shape {
                Shape::ClusterIp => svc.addresses.clone(),
                _ => Vec::new(),
            },
            ports: svc.ports.clone(),
            // istiod's `MeshExternal: len(externalName) > 0` (kube `conversion.go`).
            location: match svc.shape {
                Shape::ExternalName(_) => Location::MeshExternal,
                _ => Location::MeshInternal,
            },
            resolution,
            endpoints,
            workload_selector: None,
            export_to: svc.export_to.clone(),
            subject_alt_names: Vec::new(),
        };
        Some(Config {
            key: ConfigKey::new(
                ConfigKind::ServiceEntry,
                &key.namespace,
                format!("{NAME_PREFIX}{}", key.name),
            ),
            labels: Labels::from([(SOURCE_LABEL.to_string(), KUBERNETES_SOURCE.to_string())]),
            created: None,
            spec: Spec::ServiceEntry(se),
            not_applied: Vec::new(),
        })
    }

    /// The endpoints of a Service from its slices, in a stable order.
    fn endpoints(&self, key: &ObjKey, svc: &ServiceInfo) -> Vec<WorkloadEntry> {
        let mut out: BTreeMap<(String, Vec<(String, u32)>), WorkloadEntry> = BTreeMap::new();
        for slice_key in self.slices_by_service.get(key).into_iter().flatten() {
            let Some(slice) = self.slices.get(slice_key) else {
                continue;
            };
            for ep in &slice.endpoints {
                if !ep.ready && !svc.publish_not_ready {
                    continue;
                }
                let pod = ep
                    .pod
                    .as_ref()
                    .and_then(|p| self.pods.get(&ObjKey::new(&key.namespace, p)));
                let labels = pod.map(|p| p.labels.clone()).unwrap_or_default();
                let entry = WorkloadEntry {
                    address: ep.address.clone(),
                    ports: slice.ports.clone(),
                    locality: locality(&labels, &ep.zone),
                    labels,
                    network: String::new(),
                    weight: None,
                    service_account: pod.map(|p| p.service_account.clone()).unwrap_or_default(),
                };
                let order = (
                    ep.address.clone(),
                    slice.ports.iter().map(|(k, v)| (k.clone(), *v)).collect(),
                );
                out.insert(order, entry);
            }
        }
        out.into_values().collect()
    }
}

/// istiod's locality: the Pod's `istio-locality` label (`region.zone.subzone`), else
/// `region/zone/subzone` from the Pod's region label, the endpoint's zone and the Pod's
/// subzone label. Empty when nothing is known.
fn locality(pod_labels: &Labels, zone: &str) -> String {
    if let Some(l) = pod_labels.get("istio-locality").filter(|l| !l.is_empty()) {
        return l.replace('.', "/");
    }
    let label = |k: &str| pod_labels.get(k).map(String::as_str).unwrap_or("");
    let zone = if zone.is_empty() {
        label("topology.kubernetes.io/zone")
    } else {
        zone
    };
    let joined = format!(
        "{}/{}/{}",
        label("topology.kubernetes.io/region"),
        zone,
        label("topology.istio.io/subzone")
    );
    joined.trim_end_matches('/').to_string()
}
