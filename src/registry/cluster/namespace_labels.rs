//! The labels of the Namespaces a registry holds, as configs of kind
//! [`ConfigKind::Namespace`] (key: no namespace, the Namespace's name; its labels with
//! `kubernetes.io/metadata.name`, as the API server sets it): the Gateway API's
//! `allowedRoutes.namespaces.selector` reads them. A relist is buffered until it is complete,
//! so that a half-read list never drops a namespace.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Namespace;

use axon_config::config::{Config, ConfigKey, ConfigKind, NamespaceInfo, Spec};
use axon_config::config_set::ConfigSet;
use axon_config::istio::Labels;

/// The label the API server puts on every Namespace, its name.
const NAME_LABEL: &str = "kubernetes.io/metadata.name";

#[derive(Debug, Default)]
pub struct NamespaceLabels {
    held: BTreeMap<String, Labels>,
    /// A relist in progress.
    buffer: Option<BTreeMap<String, Labels>>,
    dirty: bool,
}

fn labels_of(ns: &Namespace) -> Option<(String, Labels)> {
    let name = ns.metadata.name.clone()?;
    let mut labels: Labels = ns
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    labels
        .entry(NAME_LABEL.to_string())
        .or_insert_with(|| name.clone());
    Some((name, labels))
}

impl NamespaceLabels {
    pub fn init(&mut self) {
        self.buffer = Some(BTreeMap::new());
    }

    pub fn init_apply(&mut self, ns: &Namespace) {
        if let (Some(buffer), Some((name, labels))) = (&mut self.buffer, labels_of(ns)) {
            buffer.insert(name, labels);
        }
    }

    pub fn init_done(&mut self) {
        if let Some(listed) = self.buffer.take()
            && listed != self.held
        {
            self.held = listed;
            self.dirty = true;
        }
    }

    pub fn apply(&mut self, ns: &Namespace) {
        if let Some((name, labels)) = labels_of(ns)
            && self.held.get(&name) != Some(&labels)
        {
            self.held.insert(name, labels);
            self.dirty = true;
        }
    }

    pub fn delete(&mut self, ns: &Namespace) {
        if let Some(name) = &ns.metadata.name
            && self.held.remove(name).is_some()
        {
            self.dirty = true;
        }
    }

    /// Whether `configs` must be brought up to date ([`Self::update`]).
    pub fn dirty(&self) -> bool {
        self.dirty
    }

    /// The configs must be brought up to date: which namespaces are read changed.
    pub fn touch(&mut self) {
        self.dirty = true;
    }

    /// Replaces the Namespace configs of `configs` with those held of the namespaces
    /// `allows` lets be read.
    pub fn update(&mut self, configs: &mut ConfigSet, allows: impl Fn(&str) -> bool) {
        configs.retain(|k, _| k.kind != ConfigKind::Namespace);
        for (name, labels) in self.held.iter().filter(|(n, _)| allows(n)) {
            let key = ConfigKey::new(ConfigKind::Namespace, "", name.as_str());
            configs.insert(
                key.clone(),
                Arc::new(Config {
                    key,
                    labels: labels.clone(),
                    created: None,
                    spec: Spec::Namespace(NamespaceInfo {}),
                    not_applied: Vec::new(),
                }),
            );
        }
        self.dirty = false;
    }
}
