//! A Gateway as the deployer reads it: decoded from the watch, its controller-version
//! annotation weighed against this controller's (istiod's `ManagedGatewayControllerVersion`),
//! and whether a change of ConfigMaps touches its overlays.

use std::collections::BTreeMap;

use kube::api::DynamicObject;

use super::overlays::Changed;
use crate::registry::cluster::gateway_deployment;
use axon_config::gateway_api::GatewaySpec;

/// istiod's `ControllerVersionAnnotation` and its `ControllerVersion`: a Gateway marked with
/// a larger number is managed by a newer controller.
pub(super) const CONTROLLER_VERSION_ANNOTATION: &str = "gateway.istio.io/controller-version";
pub(super) const CONTROLLER_VERSION: u32 = 5;

/// A Gateway's namespace and name.
pub(super) type Key = (String, String);

/// One Gateway as the watch gives it: its metadata and its typed spec.
#[derive(Clone)]
pub(super) struct Gateway {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) uid: String,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) annotations: BTreeMap<String, String>,
    pub(super) spec: GatewaySpec,
}

impl Gateway {
    pub(super) fn key(&self) -> Key {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Whether a change of ConfigMaps touches `gw`'s overlays.
pub(super) fn uses(gw: &Gateway, changed: &Changed) -> bool {
    match changed {
        Changed::Classes(classes) => classes.contains(&gw.spec.gateway_class_name),
        Changed::Parameters((ns, name)) => {
            *ns == gw.namespace
                && gateway_deployment::parameters_ref(&gw.spec)
                    .is_ok_and(|p| p.as_ref() == Some(name))
        }
    }
}

/// How a Gateway's controller-version annotation stands to this controller's (istiod's
/// `ManagedGatewayControllerVersion`).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Version {
    /// Absent or older: this controller takes it over and writes its version.
    Older,
    /// This controller's.
    Same,
    /// A newer controller's, or one it cannot read: left alone.
    Newer(String),
}

pub(super) fn controller_version(gw: &Gateway) -> Version {
    match gw.annotations.get(CONTROLLER_VERSION_ANNOTATION) {
        None => Version::Older,
        Some(v) => match v.parse::<u32>() {
            Ok(n) if n < CONTROLLER_VERSION => Version::Older,
            Ok(n) if n == CONTROLLER_VERSION => Version::Same,
            _ => Version::Newer(v.clone()),
        },
    }
}

/// The Gateway of a watched object; `None` (logged) when its spec does not decode.
pub(super) fn decode(obj: &DynamicObject) -> Option<Gateway> {
    let meta = &obj.metadata;
    let namespace = meta.namespace.clone().unwrap_or_default();
    let name = meta.name.clone().unwrap_or_default();
    let spec = match serde_json::from_value::<GatewaySpec>(obj.data["spec"].clone()) {
        Ok(spec) => spec,
        Err(error) => {
            tracing::warn!(%namespace, gateway = %name, %error, "gateway deployment: the Gateway's spec does not decode; skipped");
            return None;
        }
    };
    Some(Gateway {
        namespace,
        name,
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        annotations: meta.annotations.clone().unwrap_or_default(),
        spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_version(v: Option<&str>) -> Gateway {
        Gateway {
            namespace: "shop".into(),
            name: "gw".into(),
            uid: "u".into(),
            labels: Default::default(),
            annotations: v
                .map(|v| [(CONTROLLER_VERSION_ANNOTATION.to_string(), v.to_string())].into())
                .unwrap_or_default(),
            spec: serde_json::from_value(serde_json::json!({
                "gatewayClassName": "istio", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]
            }))
            .unwrap(),
        }
    }

    #[test]
    fn the_controller_version_decides_who_manages_a_gateway() {
        assert_eq!(controller_version(&with_version(None)), Version::Older);
        assert_eq!(controller_version(&with_version(Some("1"))), Version::Older);
        assert_eq!(controller_version(&with_version(Some("5"))), Version::Same);
        assert_eq!(
            controller_version(&with_version(Some("6"))),
            Version::Newer("6".into())
        );
        // A version it cannot read is a newer scheme's: left alone, as istiod.
        assert_eq!(
            controller_version(&with_version(Some("v2"))),
            Version::Newer("v2".into())
        );
    }
}
