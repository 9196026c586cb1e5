//! The index of Istio config read from Kubernetes (the Istio kinds, the Gateway API kinds,
//! and the TLS Secrets: a Secret without TLS keys is not held).
//!
//! Owned by the IstioRegistry, which feeds it watch events per kind. Each object arrives as
//! JSON (a kube `DynamicObject`) and is typed and validated by [`parse_value`], exactly as a
//! file's document is. An invalid object is kept out and reported with its kind, namespace,
//! name and reason; if an earlier version of it was valid, that version keeps being served
//! (the last good one), as for files. Only the typed spec and labels are held, so an update
//! of the resourceVersion or status alone is no change.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::registry::cluster::namespaces::{NamespaceChange, NamespaceFilter};
use crate::registry::cluster::store::{ObjKey, Store};
use axon_config::config::{Config, ConfigKind};
use axon_config::config_set::ConfigSet;
use axon_config::parse::{DocOutcome, parse_cluster_secret, parse_config_map, parse_value};

/// An object that was not accepted, as reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub kind: ConfigKind,
    pub key: ObjKey,
    pub reason: String,
    /// Whether an earlier, valid version is still served.
    pub kept_previous: bool,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.key, self.reason)?;
        if self.kept_previous {
            f.write_str(" (the last valid version is kept)")?;
        }
        Ok(())
    }
}

/// The index. See the module documentation.
#[derive(Debug)]
pub struct IstioObjectIndex {
    namespaces: NamespaceFilter,
    kinds: BTreeMap<ConfigKind, Store<Arc<Config>>>,
    rejected: BTreeMap<(ConfigKind, ObjKey), Rejected>,
    /// Configs accepted whose fields not applied changed, to report ([`Self::take_notes`]).
    notes: Vec<(ConfigKind, ObjKey, Vec<String>)>,
    changed: bool,
    configs: Arc<ConfigSet>,
}

impl IstioObjectIndex {
    pub fn new(namespaces: NamespaceFilter) -> Self {
        IstioObjectIndex {
            namespaces,
            kinds: BTreeMap::new(),
            rejected: BTreeMap::new(),
            notes: Vec::new(),
            changed: false,
            configs: Arc::default(),
        }
    }

    /// The objects accepted since the last call whose fields accepted and not applied are
    /// new or changed: `(kind, object, field paths)`, to log once.
    pub fn take_notes(&mut self) -> Vec<(ConfigKind, ObjKey, Vec<String>)> {
        std::mem::take(&mut self.notes)
    }

    /// The objects currently rejected.
    pub fn rejected(&self) -> impl Iterator<Item = &Rejected> {
        self.rejected.values()
    }

    /// A (re)list of `kind` begins. Its rejections are found again from the list.
    pub fn init(&mut self, kind: ConfigKind) {
        self.kinds.entry(kind).or_default().init();
        self.rejected.retain(|(k, _), _| *k != kind);
    }

    pub fn init_done(&mut self, kind: ConfigKind) {
        let changes = self.kinds.entry(kind).or_default().init_done();
        self.changed |= !changes.is_empty();
    }

    /// An object of the (re)list of `kind`. Returns its rejection, if it is rejected.
    pub fn init_apply(
        &mut self,
        kind: ConfigKind,
        api_version: &str,
        object: serde_json::Value,
    ) -> Option<Rejected> {
        let (key, value, rejected) = self.typed(kind, api_version, object)?;
        self.kinds.entry(kind).or_default().init_apply(key, value);
        rejected
    }

    /// An added or modified object. Returns its rejection, if it is rejected.
    pub fn apply(
        &mut self,
        kind: ConfigKind,
        api_version: &str,
        object: serde_json::Value,
    ) -> Option<Rejected> {
        let (key, value, rejected) = self.typed(kind, api_version, object)?;
        let change = self.kinds.entry(kind).or_default().apply(key, value);
        self.changed |= change.is_some();
        rejected
    }

    pub fn delete(&mut self, kind: ConfigKind, namespace: &str, name: &str) {
        let key = ObjKey::new(namespace, name);
        self.rejected.remove(&(kind, key.clone()));
        let change = self.kinds.entry(kind).or_default().delete(&key);
        self.changed |= change.is_some();
    }

    pub fn init_namespaces(&mut self) {
        self.namespaces.init();
    }

    pub fn init_namespace(&mut self, ns: &k8s_openapi::api::core::v1::Namespace) {
        self.namespaces.init_apply(ns);
    }

    pub fn namespaces_listed(&mut self) -> NamespaceChange {
        let change = self.namespaces.init_done();
        self.purge(&change);
        change
    }

    pub fn apply_namespace(
        &mut self,
        ns: &k8s_openapi::api::core::v1::Namespace,
    ) -> NamespaceChange {
        let change = self.namespaces.apply(ns);
        self.purge(&change);
        change
    }

    pub fn delete_namespace(
        &mut self,
        ns: &k8s_openapi::api::core::v1::Namespace,
    ) -> NamespaceChange {
        let change = self.namespaces.delete(ns);
        self.purge(&change);
        change
    }

    fn purge(&mut self, change: &NamespaceChange) {
        for ns in &change.removed {
            for store in self.kinds.values_mut() {
                self.changed |= !store.purge_namespace(ns).is_empty();
            }
            self.rejected.retain(|(_, key), _| key.namespace != *ns);
        }
    }

    /// Types one object: its key, the config to hold (the new one, the last good one for a
    /// rejected object, or none), and its rejection. `None` for an object without a name.
    fn typed(
        &mut self,
        kind: ConfigKind,
        api_version: &str,
        mut object: serde_json::Value,
    ) -> Option<(ObjKey, Option<Arc<Config>>, Option<Rejected>)> {
        let meta = object.get("metadata")?;
        let name = meta.get("name")?.as_str()?.to_string();
        let namespace = meta
            .get("namespace")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string();
        let key = ObjKey::new(namespace, name);
        // A cluster-scoped object (a GatewayClass) is of no namespace: never filtered out.
        if !key.namespace.is_empty() && !self.namespaces.allows(&key.namespace) {
            self.rejected.remove(&(kind, key.clone()));
            return Some((key, None, None));
        }
        // List items may come without apiVersion and kind: the watch says what they are.
        if let Some(map) = object.as_object_mut() {
            map.insert("apiVersion".into(), api_version.into());
            map.insert("kind".into(), kind.api_kind().into());
        }
        let outcome = if kind == ConfigKind::Secret {
            parse_cluster_secret(&object, &key.namespace)
        } else if kind == ConfigKind::ConfigMap {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            parse_config_map(&object, &key.namespace, now)
        } else {
            parse_value(object, &key.namespace)
        };
        let reason = match outcome {
            // A Secret without TLS keys (most of a cluster's): not held, not reported.
            DocOutcome::Unsupported { .. }
                if matches!(kind, ConfigKind::Secret | ConfigKind::ConfigMap) =>
            {
                self.rejected.remove(&(kind, key.clone()));
                return Some((key, None, None));
            }
            DocOutcome::Config(config) => {
                self.rejected.remove(&(kind, key.clone()));
                let before = self.kinds.get(&kind).and_then(|s| s.get(&key));
                if !config.not_applied.is_empty()
                    && before.is_none_or(|b| b.not_applied != config.not_applied)
                {
                    self.notes
                        .push((kind, key.clone(), config.not_applied.clone()));
                }
                return Some((key, Some(Arc::new(*config)), None));
            }
            DocOutcome::Invalid(e) => e.to_string(),
            DocOutcome::Empty => "empty object".to_string(),
            DocOutcome::Unsupported { api_version, kind } => {
                format!("{kind} ({api_version}) is not served")
            }
            // The kinds watched here are Istio's, the Gateway API's and Secrets: never one of
            // these.
            DocOutcome::Kubernetes(object) => format!("{} is not Istio config", object.key),
        };
        let previous = self.kinds.get(&kind).and_then(|s| s.get(&key)).cloned();
        let rejected = Rejected {
            kind,
            key: key.clone(),
            reason,
            kept_previous: previous.is_some(),
        };
        self.rejected.insert((kind, key.clone()), rejected.clone());
        Some((key, previous, Some(rejected)))
    }

    /// Whether anything changed since the last [`IstioObjectIndex::configs`].
    pub fn is_changed(&self) -> bool {
        self.changed
    }

    /// Every held config. Unchanged configs keep their `Arc`.
    pub fn configs(&mut self) -> Arc<ConfigSet> {
        if std::mem::take(&mut self.changed) {
            let set: ConfigSet = self
                .kinds
                .values()
                .flat_map(|s| s.iter().map(|(_, c)| (c.key.clone(), c.clone())))
                .collect();
            self.configs = Arc::new(set);
        }
        self.configs.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axon_config::file_set::compare;
    use serde_json::json;

    const V1: &str = "networking.istio.io/v1";

    fn vs(ns: &str, name: &str, host: &str, rv: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
            "spec": {"hosts": [host], "http": [{"route": [{"destination": {"host": host}}]}]},
            "status": {"observedGeneration": rv},
        })
    }

    #[test]
    fn objects_are_typed_validated_and_keyed() {
        let mut idx = IstioObjectIndex::new(NamespaceFilter::new(None));
        assert!(
            idx.apply(
                ConfigKind::VirtualService,
                V1,
                vs("shop", "r", "reviews", "1")
            )
            .is_none()
        );
        let gw = json!({"apiVersion": "networking.istio.io/v1beta1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "istio-system"},
            "spec": {"selector": {"istio": "ingressgateway"},
                     "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}});
        assert!(
            idx.apply(ConfigKind::Gateway, "networking.istio.io/v1beta1", gw)
                .is_none()
        );
        let configs = idx.configs();
        let keys: Vec<String> = configs.keys().map(ToString::to_string).collect();
        assert_eq!(keys, ["VirtualService/shop/r", "Gateway/istio-system/gw"]);
    }

    #[test]
    fn an_invalid_update_keeps_the_last_good_version() {
        let mut idx = IstioObjectIndex::new(NamespaceFilter::new(None));
        idx.apply(
            ConfigKind::VirtualService,
            V1,
            vs("shop", "r", "reviews", "1"),
        );
        let good = idx.configs();
        let broken = json!({"metadata": {"name": "r", "namespace": "shop"},
            "spec": {"hosts": "reviews", "http": [{"route": []}]}});
        let rejected = idx
            .apply(ConfigKind::VirtualService, V1, broken)
            .expect("rejected");
        assert_eq!(rejected.key.to_string(), "shop/r");
        assert!(rejected.kept_previous);
        assert!(
            rejected.to_string().starts_with("VirtualService shop/r: "),
            "{rejected}"
        );
        assert!(!idx.is_changed());
        assert!(compare(&good, &idx.configs()).0.is_empty());
        assert_eq!(idx.rejected().count(), 1);
        // A new object that is invalid is simply not served.
        let bad_new = json!({"metadata": {"name": "n", "namespace": "shop"}});
        let r = idx
            .apply(ConfigKind::VirtualService, V1, bad_new)
            .expect("rejected");
        assert!(!r.kept_previous && r.reason.contains("spec"), "{r}");
        assert_eq!(idx.configs().len(), 1);
        // Fixed: served, and no longer reported.
        idx.apply(
            ConfigKind::VirtualService,
            V1,
            vs("shop", "r", "ratings", "3"),
        );
        assert!(idx.is_changed());
        assert_eq!(idx.rejected().count(), 1);
        idx.delete(ConfigKind::VirtualService, "shop", "n");
        assert_eq!(idx.rejected().count(), 0);
    }

    #[test]
    fn resource_version_and_status_alone_change_nothing() {
        let mut idx = IstioObjectIndex::new(NamespaceFilter::new(None));
        idx.apply(
            ConfigKind::VirtualService,
            V1,
            vs("shop", "r", "reviews", "1"),
        );
        let before = idx.configs();
        idx.apply(
            ConfigKind::VirtualService,
            V1,
            vs("shop", "r", "reviews", "7"),
        );
        assert!(!idx.is_changed());
        assert!(Arc::ptr_eq(&before, &idx.configs()));
    }

    #[test]
    fn a_relist_replaces_the_kind_and_the_selector_filters() {
        let filter = NamespaceFilter::new(Some("mesh=on".parse().unwrap()));
        let mut idx = IstioObjectIndex::new(filter);
        let ns = |name: &str, on: bool| k8s_openapi::api::core::v1::Namespace {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                labels: on.then(|| [("mesh".to_string(), "on".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        idx.init_namespaces();
        idx.init_namespace(&ns("shop", true));
        idx.init_namespace(&ns("other", false));
        idx.namespaces_listed();
        idx.init(ConfigKind::VirtualService);
        idx.init_apply(ConfigKind::VirtualService, V1, vs("shop", "a", "a", "1"));
        idx.init_apply(ConfigKind::VirtualService, V1, vs("shop", "b", "b", "1"));
        idx.init_apply(ConfigKind::VirtualService, V1, vs("other", "c", "c", "1"));
        assert!(idx.configs().is_empty(), "nothing before the list is done");
        idx.init_done(ConfigKind::VirtualService);
        assert_eq!(idx.configs().len(), 2);
        // A relist after 410 Gone: b was deleted meanwhile, d added.
        idx.init(ConfigKind::VirtualService);
        idx.init_apply(ConfigKind::VirtualService, V1, vs("shop", "a", "a", "5"));
        idx.init_apply(ConfigKind::VirtualService, V1, vs("shop", "d", "d", "6"));
        idx.init_done(ConfigKind::VirtualService);
        let names: Vec<String> = idx.configs().keys().map(|k| k.name.clone()).collect();
        assert_eq!(names, ["a", "d"]);
        // The namespace stops matching: purged.
        idx.apply_namespace(&ns("shop", false));
        assert!(idx.configs().is_empty());
    }

    const GATEWAY_API: &str = "gateway.networking.k8s.io/v1";

    fn http_route(path: &str) -> serde_json::Value {
        json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"parentRefs": [{"name": "gw"}],
                     "rules": [{"matches": [{"path": {"value": path}}],
                                "backendRefs": [{"name": "web", "port": 8080}]}]},
        })
    }

    #[test]
    fn gateway_api_objects_are_typed_and_a_bad_update_keeps_the_last_good_one() {
        let mut idx = IstioObjectIndex::new(NamespaceFilter::new(None));
        // List items come without kind: the Gateway API's Gateway is named `Gateway`.
        let gw = json!({"metadata": {"name": "gw", "namespace": "shop"},
            "spec": {"gatewayClassName": "istio",
                     "listeners": [{"name": "http", "port": 8080, "protocol": "HTTP"}]}});
        assert_eq!(
            idx.apply(ConfigKind::KubernetesGateway, GATEWAY_API, gw),
            None
        );
        assert_eq!(
            idx.apply(ConfigKind::HttpRoute, GATEWAY_API, http_route("/api")),
            None
        );
        let keys: Vec<String> = idx.configs().keys().map(ToString::to_string).collect();
        assert_eq!(keys, ["KubernetesGateway/shop/gw", "HTTPRoute/shop/web"]);
        let good = idx.configs();
        let mut bad = http_route("/v2");
        bad["spec"]["rules"][0]["colour"] = json!("blue");
        let r = idx
            .apply(ConfigKind::HttpRoute, GATEWAY_API, bad)
            .expect("an unknown field is rejected");
        assert!(r.kept_previous && r.reason.contains("colour"), "{r}");
        assert!(compare(&good, &idx.configs()).0.is_empty());
        // A version istiod does not read the kind in is refused with the versions it reads.
        let r = idx
            .apply(
                ConfigKind::HttpRoute,
                "gateway.networking.k8s.io/v1alpha3",
                http_route("/api"),
            )
            .expect("rejected");
        assert!(r.reason.contains("v1beta1"), "{r}");
    }

    #[test]
    fn a_cluster_scoped_gateway_class_passes_the_namespace_selector() {
        let filter = NamespaceFilter::new(Some("mesh=on".parse().unwrap()));
        let mut idx = IstioObjectIndex::new(filter);
        let class = json!({"metadata": {"name": "istio"},
            "spec": {"controllerName": "istio.io/gateway-controller"}});
        assert_eq!(
            idx.apply(ConfigKind::GatewayClass, GATEWAY_API, class),
            None
        );
        // A namespaced one of a namespace not selected is dropped.
        idx.apply(ConfigKind::HttpRoute, GATEWAY_API, http_route("/api"));
        let keys: Vec<String> = idx.configs().keys().map(ToString::to_string).collect();
        assert_eq!(keys, ["GatewayClass//istio"]);
    }
}
