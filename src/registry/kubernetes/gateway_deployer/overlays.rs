//! The ConfigMaps a managed Gateway's objects are rendered with, as istiod's deployment
//! controller reads them (`deploymentcontroller.go` `render`): first the oldest ConfigMap of
//! axon's namespace labelled `gateway.istio.io/defaults-for-class: CLASS` (the class
//! defaults), then the ConfigMap of the Gateway's namespace its
//! `infrastructure.parametersRef` names. Their `data` are the overlays the renderer applies.
//!
//! Pure: ConfigMap events in, what changed out. Only the ConfigMaps that matter are kept (the
//! labelled ones of axon's namespace, and those a Gateway names); a Gateway naming one not
//! seen yet has it read once by the deployer ([`Overlays::set_parameters`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::core::v1::ConfigMap;

use crate::registry::cluster::gateway_deployment::CLASS_DEFAULTS_LABEL;

/// A ConfigMap's data (its overlays by object kind).
pub(super) type Data = BTreeMap<String, String>;

/// A ConfigMap's namespace and name.
pub(super) type CmKey = (String, String);

/// What a ConfigMap event changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Changed {
    /// The defaults of these classes.
    Classes(BTreeSet<String>),
    /// A ConfigMap Gateways name.
    Parameters(CmKey),
}

/// The overlays known; see the module's description.
#[derive(Debug, Default)]
pub(super) struct Overlays {
    system_namespace: String,
    /// Class defaults: by class, by (creation time, name), their data.
    defaults: BTreeMap<String, BTreeMap<(String, String), Data>>,
    /// ConfigMaps Gateways name: their data, or `None` when known absent.
    parameters: HashMap<CmKey, Option<Data>>,
    /// A relist under way: the ConfigMaps listed so far.
    relisting: Option<Vec<ConfigMap>>,
}

impl Overlays {
    pub(super) fn new(system_namespace: &str) -> Self {
        Overlays {
            system_namespace: system_namespace.to_string(),
            ..Default::default()
        }
    }

    /// Whether the parametersRef ConfigMap `key` is known (present or absent).
    pub(super) fn knows(&self, key: &CmKey) -> bool {
        self.parameters.contains_key(key)
    }

    /// Records what the deployer read of a ConfigMap a Gateway names.
    pub(super) fn set_parameters(&mut self, key: CmKey, data: Option<Data>) {
        self.parameters.insert(key, data);
    }

    /// The overlays of a Gateway of `class` naming `parameters`: class defaults first.
    /// `Err` names a parametersRef ConfigMap known to be absent (istiod renders nothing then).
    pub(super) fn for_gateway(
        &self,
        class: &str,
        parameters: Option<&CmKey>,
    ) -> Result<Vec<&Data>, String> {
        let mut out = Vec::new();
        if let Some(oldest) = self.defaults.get(class).and_then(|d| d.values().next()) {
            out.push(oldest);
        }
        if let Some(key) = parameters {
            match self.parameters.get(key) {
                Some(Some(data)) => out.push(data),
                _ => {
                    return Err(format!(
                        "parametersRef targeting configmap {}/{}, but configmap does not exist",
                        key.0, key.1
                    ));
                }
            }
        }
        Ok(out)
    }

    /// A ConfigMap applied (or listed) or deleted: what changed of what matters (a ConfigMap
    /// of axon's namespace may be both a class's defaults and a Gateway's parameters).
    pub(super) fn event(&mut self, cm: &ConfigMap, deleted: bool) -> Vec<Changed> {
        let (Some(ns), Some(name)) = (cm.metadata.namespace.clone(), cm.metadata.name.clone())
        else {
            return Vec::new();
        };
        let mut changed = Vec::new();
        if ns == self.system_namespace {
            // Dropped from whichever class it was the defaults of, then added to its class.
            let mut classes = BTreeSet::new();
            for (class, of_class) in self.defaults.iter_mut() {
                let before = of_class.len();
                of_class.retain(|(_, n), _| *n != name);
                if of_class.len() != before {
                    classes.insert(class.clone());
                }
            }
            if let Some(class) = class_of(cm).filter(|_| !deleted) {
                self.defaults
                    .entry(class.clone())
                    .or_default()
                    .insert((created(cm), name.clone()), data(cm));
                classes.insert(class);
            }
            if !classes.is_empty() {
                changed.push(Changed::Classes(classes));
            }
        }
        let key = (ns, name);
        if let Some(known) = self.parameters.get_mut(&key) {
            let now = (!deleted).then(|| data(cm));
            if *known != now {
                *known = now;
                changed.push(Changed::Parameters(key));
            }
        }
        changed
    }

    /// A relist of ConfigMaps begins.
    pub(super) fn relist_start(&mut self) {
        self.relisting = Some(Vec::new());
    }

    /// One ConfigMap of a relist: kept only if it may matter (a labelled one of axon's
    /// namespace, or one a Gateway names), so a relist holds no more than the overlays.
    pub(super) fn relisted(&mut self, cm: ConfigMap) {
        let (Some(ns), Some(name)) = (&cm.metadata.namespace, &cm.metadata.name) else {
            return;
        };
        let matters = (*ns == self.system_namespace && class_of(&cm).is_some())
            || self.parameters.contains_key(&(ns.clone(), name.clone()));
        if matters {
            self.relisting.get_or_insert_with(Vec::new).push(cm);
        }
    }

    /// Keeps only the parametersRef ConfigMaps `named` says a Gateway still names.
    pub(super) fn retain(&mut self, named: impl Fn(&CmKey) -> bool) {
        self.parameters.retain(|k, _| named(k));
    }

    /// A relist is complete: what it listed replaces what was known; returns every class and
    /// parametersRef ConfigMap that changed.
    pub(super) fn relist_done(&mut self) -> Vec<Changed> {
        let listed = self.relisting.take().unwrap_or_default();
        let old_defaults = std::mem::take(&mut self.defaults);
        let old_parameters: HashMap<CmKey, Option<Data>> =
            self.parameters.keys().map(|k| (k.clone(), None)).collect();
        let before_parameters = std::mem::replace(&mut self.parameters, old_parameters);
        for cm in &listed {
            self.event(cm, false);
        }
        let mut changed = Vec::new();
        let classes: BTreeSet<String> = old_defaults
            .keys()
            .chain(self.defaults.keys())
            .filter(|c| old_defaults.get(*c) != self.defaults.get(*c))
            .cloned()
            .collect();
        if !classes.is_empty() {
            changed.push(Changed::Classes(classes));
        }
        for (key, now) in &self.parameters {
            if before_parameters.get(key) != Some(now) {
                changed.push(Changed::Parameters(key.clone()));
            }
        }
        changed
    }
}

/// The class a ConfigMap holds the defaults of (its `gateway.istio.io/defaults-for-class`).
fn class_of(cm: &ConfigMap) -> Option<String> {
    cm.metadata
        .labels
        .as_ref()?
        .get(CLASS_DEFAULTS_LABEL)
        .cloned()
}

/// Its creation time, as text that sorts oldest first (RFC 3339 in UTC).
fn created(cm: &ConfigMap) -> String {
    cm.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default()
}

fn data(cm: &ConfigMap) -> Data {
    cm.data.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    fn cm(ns: &str, name: &str, class: Option<&str>, created: &str, replicas: u32) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: class.map(|c| BTreeMap::from([(CLASS_DEFAULTS_LABEL.into(), c.into())])),
                creation_timestamp: Some(Time(created.parse().unwrap())),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(
                "deployment".into(),
                format!("spec: {{replicas: {replicas}}}"),
            )])),
            ..Default::default()
        }
    }

    fn replicas(data: &Data) -> &str {
        &data["deployment"]
    }

    #[test]
    fn the_oldest_class_defaults_then_the_parameters() {
        let mut o = Overlays::new("axon-system");
        let newer = cm("axon-system", "b", Some("istio"), "2026-02-01T00:00:00Z", 3);
        let older = cm("axon-system", "a", Some("istio"), "2026-01-01T00:00:00Z", 2);
        assert_eq!(
            o.event(&newer, false),
            [Changed::Classes(BTreeSet::from(["istio".to_string()]))]
        );
        o.event(&older, false);
        // A labelled ConfigMap of another namespace is not the class's.
        let elsewhere = cm("shop", "c", Some("istio"), "2025-01-01T00:00:00Z", 9);
        assert!(o.event(&elsewhere, false).is_empty());
        let key = ("shop".to_string(), "opts".to_string());
        // Named by a Gateway but not known: an error until read.
        assert!(o.for_gateway("istio", Some(&key)).is_err());
        // An event of a ConfigMap no Gateway names is dropped.
        assert!(
            o.event(&cm("shop", "opts", None, "2026-01-01T00:00:00Z", 5), false)
                .is_empty()
        );
        o.set_parameters(
            key.clone(),
            Some(data(&cm("shop", "opts", None, "2026-01-01T00:00:00Z", 5))),
        );
        let got: Vec<&str> = o
            .for_gateway("istio", Some(&key))
            .unwrap()
            .into_iter()
            .map(replicas)
            .collect();
        assert_eq!(got, ["spec: {replicas: 2}", "spec: {replicas: 5}"]);
        // Edited: a change; the same again: none.
        let edited = cm("shop", "opts", None, "2026-01-01T00:00:00Z", 6);
        assert_eq!(o.event(&edited, false), [Changed::Parameters(key.clone())]);
        assert!(o.event(&edited, false).is_empty());
        // Deleted: known absent.
        assert_eq!(o.event(&edited, true), [Changed::Parameters(key.clone())]);
        assert!(o.for_gateway("istio", Some(&key)).is_err());
        // The older defaults deleted: the newer one serves.
        o.event(&older, true);
        assert_eq!(
            replicas(o.for_gateway("istio", None).unwrap()[0]),
            "spec: {replicas: 3}"
        );
        // Its label removed: no defaults.
        let mut unlabelled = newer.clone();
        unlabelled.metadata.labels = None;
        assert_eq!(
            o.event(&unlabelled, false),
            [Changed::Classes(BTreeSet::from(["istio".to_string()]))]
        );
        assert!(o.for_gateway("istio", None).unwrap().is_empty());
    }

    #[test]
    fn a_relist_replaces_what_was_known() {
        let mut o = Overlays::new("axon-system");
        let key = ("shop".to_string(), "opts".to_string());
        o.event(
            &cm("axon-system", "a", Some("istio"), "2026-01-01T00:00:00Z", 2),
            false,
        );
        o.set_parameters(
            key.clone(),
            Some(data(&cm("shop", "opts", None, "2026-01-01T00:00:00Z", 5))),
        );
        o.relist_start();
        o.relisted(cm("shop", "opts", None, "2026-01-01T00:00:00Z", 7));
        let changed = o.relist_done();
        assert!(changed.contains(&Changed::Classes(BTreeSet::from(["istio".to_string()]))));
        assert!(changed.contains(&Changed::Parameters(key.clone())));
        let got = o.for_gateway("istio", Some(&key)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(replicas(got[0]), "spec: {replicas: 7}");
    }

    #[test]
    fn a_config_map_of_axons_namespace_may_be_class_defaults_and_parameters_both() {
        let mut o = Overlays::new("axon-system");
        let key = ("axon-system".to_string(), "both".to_string());
        o.set_parameters(key.clone(), None);
        let both = cm(
            "axon-system",
            "both",
            Some("istio"),
            "2026-01-01T00:00:00Z",
            3,
        );
        assert_eq!(
            o.event(&both, false),
            [
                Changed::Classes(BTreeSet::from(["istio".to_string()])),
                Changed::Parameters(key.clone())
            ]
        );
        assert_eq!(
            replicas(o.for_gateway("istio", Some(&key)).unwrap()[1]),
            "spec: {replicas: 3}"
        );
    }
}
