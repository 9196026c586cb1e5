//! A config directory's Kubernetes objects (`axon_config::kubernetes`: Namespaces,
//! Services, EndpointSlices, Pods, as `kubectl get -o yaml` writes them) decoded into their
//! k8s-openapi types and fed to the [`ServiceObjectIndex`] the ServiceRegistry feeds from the
//! API server: one translation for both.
//!
//! [`check`] is the [`ObjectCheck`](axon_config::kubernetes::ObjectCheck) a `FileSet` runs
//! on every object it reads, so a malformed one is refused with its file, line and field
//! before it is held. [`DirectoryObjects`] takes each commit's changed objects as watch
//! events (Namespaces first, then the rest) and, like the ServiceRegistry on a relist, feeds
//! again the objects of a namespace the selector starts to select. Owned by the directory's
//! `WatchState`; pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeOwned;

use super::Settings;
use super::namespaces::NamespaceFilter;
use super::services::ServiceObjectIndex;
use axon_config::config_set::ConfigSet;
use axon_config::kubernetes::{FieldError, KubeObject, ObjectChange, ObjectKey, ObjectKind};

/// Whether `value` decodes into the type of `kind`; else the field and why not.
pub fn check(kind: ObjectKind, value: &serde_json::Value) -> Result<(), FieldError> {
    decode(kind, value).map(drop)
}

/// An object in its k8s-openapi type.
#[derive(Debug)]
enum Object {
    Namespace(Box<Namespace>),
    Service(Box<Service>),
    EndpointSlice(Box<EndpointSlice>),
    Pod(Box<Pod>),
}

fn typed<T: DeserializeOwned>(value: &serde_json::Value) -> Result<Box<T>, FieldError> {
    serde_path_to_error::deserialize(value)
        .map(Box::new)
        .map_err(|e| FieldError {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })
}

fn decode(kind: ObjectKind, value: &serde_json::Value) -> Result<Object, FieldError> {
    Ok(match kind {
        ObjectKind::Namespace => Object::Namespace(typed(value)?),
        ObjectKind::Service => Object::Service(typed(value)?),
        ObjectKind::EndpointSlice => Object::EndpointSlice(typed(value)?),
        ObjectKind::Pod => Object::Pod(typed(value)?),
    })
}

/// The Kubernetes objects of a config directory, translated. See the module documentation.
#[derive(Debug)]
pub struct DirectoryObjects {
    index: ServiceObjectIndex,
}

impl DirectoryObjects {
    pub fn new(settings: &Settings) -> Self {
        let filter = NamespaceFilter::new(settings.namespace_selector.clone());
        DirectoryObjects {
            index: ServiceObjectIndex::new(&settings.cluster_domain, filter),
        }
    }

    /// Feeds a commit's `changes` to the index; `all` is every object the directory holds
    /// now (the objects of a namespace that starts to be selected are fed again from it).
    pub fn apply(&mut self, changes: &[ObjectChange], all: &BTreeMap<ObjectKey, Arc<KubeObject>>) {
        let (namespaces, rest): (Vec<&ObjectChange>, Vec<&ObjectChange>) = changes
            .iter()
            .partition(|c| c.key.kind == ObjectKind::Namespace);
        let mut added = std::collections::BTreeSet::new();
        for change in namespaces.into_iter().chain(rest) {
            match (&change.new, &change.old) {
                (Some(new), _) => {
                    if let Some(ns) = self.feed(new) {
                        added.extend(ns);
                    }
                }
                (None, Some(old)) => {
                    if let Ok(object) = decode(old.key.kind, &old.object) {
                        self.delete(&object);
                    }
                }
                (None, None) => {}
            }
        }
        // As the ServiceRegistry relists: what a newly selected namespace holds is read now.
        for object in all.values() {
            if object.key.kind != ObjectKind::Namespace && added.contains(&object.key.namespace) {
                self.feed(object);
            }
        }
    }

    /// Applies one object; for a Namespace, the namespaces it made selected.
    fn feed(&mut self, object: &KubeObject) -> Option<std::collections::BTreeSet<String>> {
        // Every object was checked when its file was read; one that does not decode (a
        // FileSet without the check) is not held.
        match decode(object.key.kind, &object.object).ok()? {
            Object::Namespace(ns) => return Some(self.index.apply_namespace(&ns).added),
            Object::Service(svc) => self.index.apply_service(&svc),
            Object::EndpointSlice(slice) => self.index.apply_slice(&slice),
            Object::Pod(pod) => self.index.apply_pod(&pod),
        }
        None
    }

    fn delete(&mut self, object: &Object) {
        match object {
            Object::Namespace(ns) => {
                self.index.delete_namespace(ns);
            }
            Object::Service(svc) => self.index.delete_service(svc),
            Object::EndpointSlice(slice) => self.index.delete_slice(slice),
            Object::Pod(pod) => self.index.delete_pod(pod),
        }
    }

    /// The ServiceEntries of the directory's Services (see [`ServiceObjectIndex::configs`]).
    pub fn configs(&mut self) -> Arc<ConfigSet> {
        self.index.configs()
    }

    /// Counts of objects held, by kind (`/debug/configz`).
    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        self.index.counts()
    }
}

#[cfg(test)]
mod tests;
