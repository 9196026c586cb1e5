//! The Kubernetes objects a config directory may hold beside Istio config: `v1` Namespaces,
//! Services and Pods and `discovery.k8s.io/v1` EndpointSlices, as `kubectl get -o yaml`
//! writes them. This crate knows their kind, namespace and name and keeps the object as
//! read (JSON); the `axon` binary decodes them into their k8s-openapi types (it supplies the
//! [`ObjectCheck`] a [`FileSet`](crate::file_set::FileSet) runs on each one) and translates
//! them as it does the API server's. Other Kubernetes kinds are not read.

use std::fmt;
use std::sync::Arc;

/// A Kubernetes kind axon reads from a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKind {
    Namespace,
    Service,
    EndpointSlice,
    Pod,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Namespace,
        ObjectKind::Service,
        ObjectKind::EndpointSlice,
        ObjectKind::Pod,
    ];

    /// The kind of an object's `apiVersion` and `kind`, if axon reads it.
    pub fn of(api_version: &str, kind: &str) -> Option<ObjectKind> {
        ObjectKind::ALL
            .into_iter()
            .find(|k| k.api_version() == api_version && k.as_str() == kind)
    }

    pub fn api_version(self) -> &'static str {
        match self {
            ObjectKind::EndpointSlice => "discovery.k8s.io/v1",
            _ => "v1",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Namespace => "Namespace",
            ObjectKind::Service => "Service",
            ObjectKind::EndpointSlice => "EndpointSlice",
            ObjectKind::Pod => "Pod",
        }
    }

    /// Whether objects of the kind live in a namespace (a Namespace does not).
    pub fn is_namespaced(self) -> bool {
        self != ObjectKind::Namespace
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names one Kubernetes object: kind, namespace (empty for a Namespace) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub kind: ObjectKind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.kind, self.name)
        } else {
            write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// One Kubernetes object of a file: its key, and the object as read (its
/// `metadata.namespace` set to the default namespace when the document named none).
#[derive(Debug, Clone, PartialEq)]
pub struct KubeObject {
    pub key: ObjectKey,
    pub object: Arc<serde_json::Value>,
}

/// An object of a config directory that was added, changed or removed since the last
/// commit of its [`FileSet`](crate::file_set::FileSet).
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectChange {
    pub key: ObjectKey,
    pub old: Option<Arc<KubeObject>>,
    pub new: Option<Arc<KubeObject>>,
}

/// Why an object does not decode into its type: the field (`spec.ports[0].port`) and the
/// reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// Checks an object against its kind's type; supplied by the crate that has the types.
pub type ObjectCheck = fn(ObjectKind, &serde_json::Value) -> Result<(), FieldError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_known_by_api_version_and_kind() {
        assert_eq!(
            ObjectKind::of("discovery.k8s.io/v1", "EndpointSlice"),
            Some(ObjectKind::EndpointSlice)
        );
        assert_eq!(ObjectKind::of("v1", "Service"), Some(ObjectKind::Service));
        assert_eq!(ObjectKind::of("v1", "EndpointSlice"), None);
        assert_eq!(ObjectKind::of("apps/v1", "Deployment"), None);
        let key = ObjectKey {
            kind: ObjectKind::Pod,
            namespace: "demo".into(),
            name: "a".into(),
        };
        assert_eq!(key.to_string(), "Pod/demo/a");
    }
}
