//! Config sets: every config of a source by key, the ids of the sources, how two sets
//! compare (which keys changed, and whether only endpoints did) and how the sources' sets
//! merge into the one a `PushContext` is built from.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::config::{Config, ConfigKey, ConfigKind};

/// Every config of a source (or of all sources, merged), by key.
pub type ConfigSet = BTreeMap<ConfigKey, Arc<Config>>;

/// The configs of one kind, by key.
pub fn of_kind(configs: &ConfigSet, kind: ConfigKind) -> impl Iterator<Item = &Arc<Config>> {
    let lo = ConfigKey::new(kind, "", "");
    configs
        .range(lo..)
        .take_while(move |(k, _)| k.kind == kind)
        .map(|(_, c)| c)
}

/// The configs of one kind by namespace, each namespace's oldest first
/// ([`Config::creation_order`]): the order istiod reads policies in.
pub fn by_namespace_oldest_first(
    configs: &ConfigSet,
    kind: ConfigKind,
) -> BTreeMap<String, Vec<Arc<Config>>> {
    let mut all: Vec<&Arc<Config>> = of_kind(configs, kind).collect();
    all.sort_by(|a, b| a.creation_order(b));
    let mut by_namespace: BTreeMap<String, Vec<Arc<Config>>> = BTreeMap::new();
    for config in all {
        by_namespace
            .entry(config.namespace().to_string())
            .or_default()
            .push(config.clone());
    }
    by_namespace
}

/// Names a registry: [`FILES`], [`KUBERNETES_SERVICES`], [`KUBERNETES_ISTIO`].
pub type SourceId = &'static str;

/// The config directory.
pub const FILES: SourceId = "files";
/// Kubernetes Services, EndpointSlices and Pods, as ServiceEntries.
pub const KUBERNETES_SERVICES: SourceId = "kubernetes";
/// networking.istio.io objects read from Kubernetes.
pub const KUBERNETES_ISTIO: SourceId = "kubernetes-istio";

/// The keys that differ between two config sets, and whether every difference touches
/// endpoints only (then the change takes the EDS fast path). Every registry uses this.
///
/// The endpoints of a headless service (resolution NONE, no address: a listener per
/// endpoint) are listeners too, so a change to them is a full push, as istiod pushes one for
/// a `Passthrough` service's endpoints: its ServiceEntry's own, or a WorkloadEntry it
/// selects (that ServiceEntry is then among the changed keys, so that the proxies that see
/// it are pushed).
pub fn compare(old: &ConfigSet, new: &ConfigSet) -> (BTreeSet<ConfigKey>, bool) {
    let mut changed = diff(old, new);
    let mut endpoints_only = !changed.is_empty();
    let mut selecting = BTreeSet::new();
    for key in &changed {
        let (before, after) = (old.get(key), new.get(key));
        endpoints_only &= endpoints_only_change(before, after);
        for (set, config) in [(old, before), (new, after)] {
            if let Some(config) = config {
                let headless = headless_services_of(set, config);
                endpoints_only &= headless.is_empty();
                selecting.extend(headless);
            }
        }
    }
    // A proxy depends on the ServiceEntry, not on the WorkloadEntries it selects: name it.
    changed.extend(selecting);
    (changed, endpoints_only)
}

/// The headless ServiceEntries (resolution NONE, no address) `config` is or belongs to: itself,
/// or those selecting a WorkloadEntry in its namespace.
fn headless_services_of(set: &ConfigSet, config: &Config) -> Vec<ConfigKey> {
    use super::config::Spec;
    use super::istio::{Resolution, ServiceEntry};
    // Only its TCP-like ports are listeners per endpoint: HTTP ones route on the wildcard
    // (istiod pushes in full only when a port is not HTTP).
    let headless = |se: &ServiceEntry| {
        se.resolution == Resolution::None
            && se.addresses.iter().all(|a| a.is_empty() || a == "0.0.0.0")
            && se.ports.iter().any(|p| {
                super::validate::protocol(&p.protocol) != Some(super::validate::Protocol::Http)
            })
    };
    match &config.spec {
        Spec::ServiceEntry(se) if headless(se) => vec![config.key.clone()],
        Spec::WorkloadEntry(we) => set
            .values()
            .filter(|c| match &c.spec {
                Spec::ServiceEntry(se) => {
                    c.namespace() == config.namespace()
                        && headless(se)
                        && se.workload_selector.as_ref().is_some_and(|s| {
                            s.labels.iter().all(|(k, v)| we.labels.get(k) == Some(v))
                        })
                }
                _ => false,
            })
            .map(|c| c.key.clone())
            .collect(),
        _ => Vec::new(),
    }
}

fn endpoints_only_change(old: Option<&Arc<Config>>, new: Option<&Arc<Config>>) -> bool {
    use super::config::{ConfigKind, Spec};
    let kind = old.or(new).map(|c| c.kind());
    match (old.map(|c| &c.spec), new.map(|c| &c.spec)) {
        _ if kind == Some(ConfigKind::WorkloadEntry) => true,
        (Some(Spec::ServiceEntry(a)), Some(Spec::ServiceEntry(b))) => {
            let (mut a, mut b) = (a.clone(), b.clone());
            a.endpoints.clear();
            b.endpoints.clear();
            a == b && old.map(|c| &c.labels) == new.map(|c| &c.labels)
        }
        _ => false,
    }
}

/// Keys added, removed, or whose config differs (labels or spec).
pub fn diff(old: &ConfigSet, new: &ConfigSet) -> BTreeSet<ConfigKey> {
    let mut changed: BTreeSet<ConfigKey> = old
        .keys()
        .filter(|k| !new.contains_key(*k))
        .cloned()
        .collect();
    for (key, config) in new {
        match old.get(key) {
            Some(prev) if Arc::ptr_eq(prev, config) || prev == config => {}
            _ => {
                changed.insert(key.clone());
            }
        }
    }
    changed
}

/// One config set from all sources. A single source is shared as is; with several, a key
/// that more than one defines is taken from the config directory (`files`) first, then from
/// the first other source by id (`kubernetes` before `kubernetes-istio`).
pub fn merge_sources(sources: &BTreeMap<SourceId, Arc<ConfigSet>>) -> Arc<ConfigSet> {
    let mut iter = sources.values();
    match (iter.next(), iter.next()) {
        (None, _) => Arc::default(),
        (Some(only), None) => only.clone(),
        _ => {
            let mut ordered: Vec<(&SourceId, &Arc<ConfigSet>)> = sources.iter().collect();
            ordered.sort_by_key(|(id, _)| (**id != FILES, **id));
            let mut merged = ConfigSet::new();
            // Later inserts overwrite: insert the winners last.
            for (_, set) in ordered.into_iter().rev() {
                merged.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            Arc::new(merged)
        }
    }
}
