//! istiod's Gateway deployment overlays (`gatewaycommon/deploymentcontroller.go`
//! `applyOverlay`, `strategicMergePatchYAML`): a ConfigMap's `data` maps the keys
//! `deployment`, `service`, `serviceAccount`, `horizontalPodAutoscaler` and
//! `podDisruptionBudget` to YAML strategic merge patches of the rendered object of that kind.
//!
//! Owns the strategic merge patch, over `serde_json::Value`, as apimachinery's
//! `strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta` applies one (parallel lists
//! merged, unmatched nulls ignored) for those five kinds:
//! - maps merge recursively; a `null` value deletes the key; a scalar, or a value of another
//!   type than the original's, replaces it (its nulls and `$patch` maps dropped);
//! - the lists the Kubernetes types mark `patchStrategy: merge` merge (the tables of
//!   `overlay/schema.rs`, by field from each kind's root): lists of objects element-wise by their
//!   `patchMergeKey` (PodSpec `containers`, `initContainers`, `ephemeralContainers`,
//!   `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` by `name`,
//!   `hostAliases` by `ip`, `topologySpreadConstraints` by `topologyKey`; a container's `env`
//!   by `name`, `ports` by `containerPort`, `volumeMounts` by `mountPath`, `volumeDevices` by
//!   `devicePath`; a Service's `ports` by `port`; `ownerReferences` by `uid`; status
//!   `conditions` by `type`; a ServiceAccount's `secrets` by `name`), `finalizers` as a set
//!   of scalars; in apimachinery's order (the patch's elements in its order, the others in
//!   the original's, interleaved by the original's: a new element lands before the original
//!   elements that follow). Every other list is replaced, and so is a PodDisruptionBudget's
//!   `spec.selector` (`patchStrategy: replace`);
//! - directives, as apimachinery applies them: `$patch: replace` and `$patch: delete` in a
//!   map (replaced by the rest of the patch map; emptied) and in an element of a merged list
//!   (the list replaced by the patch's other elements; the original's element of that key
//!   removed), `$retainKeys` (keys of the original not listed are cleared; a patch key not
//!   listed is an error), `$deleteFromPrimitiveList/FIELD` (removes the listed scalars).
//!   Rejected: `$setElementOrder/FIELD` ([`PatchError::SetElementOrder`]: kubectl's ordering
//!   directive, not written by hand) and, as by apimachinery, `$patch: merge` in a list.
//!
//! Unlike apimachinery, which looks fields up in the Go types, a field the tables do not
//! know merges as a map or is replaced rather than failing the patch; and the lookups are
//! indexed, a patch being user input (apimachinery's are linear searches per element).
//!
//! Then istiod's checks ([`apply`]): an overlay key outside the five is an error, and so is
//! a patch that changes the object's identity (name, namespace, uid, ownerReferences,
//! finalizers…: "illegal metadata change"). Pure; [`super::gateway_deployment::render_with`]
//! applies the overlays to what it renders.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

mod merge;
mod schema;
use schema::Schema;

/// The five kinds an overlay patches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    ServiceAccount,
    Deployment,
    Service,
    HorizontalPodAutoscaler,
    PodDisruptionBudget,
}

/// The overlay keys istiod supports (`supportedOverlays`), sorted as its error lists them.
pub const SUPPORTED: [&str; 5] = [
    "deployment",
    "horizontalPodAutoscaler",
    "podDisruptionBudget",
    "service",
    "serviceAccount",
];

impl Kind {
    /// The overlay's key in a ConfigMap's `data`.
    pub fn key(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "serviceAccount",
            Kind::Deployment => "deployment",
            Kind::Service => "service",
            Kind::HorizontalPodAutoscaler => "horizontalPodAutoscaler",
            Kind::PodDisruptionBudget => "podDisruptionBudget",
        }
    }

    /// Whether the object exists only when an overlay patches it (`requiredOverlays`).
    pub fn needs_overlay(self) -> bool {
        matches!(
            self,
            Kind::HorizontalPodAutoscaler | Kind::PodDisruptionBudget
        )
    }

    fn schema(self) -> Schema {
        match self {
            Kind::ServiceAccount => schema::SERVICE_ACCOUNT,
            Kind::Deployment => schema::DEPLOYMENT,
            Kind::Service => schema::SERVICE,
            Kind::HorizontalPodAutoscaler => schema::WITH_CONDITIONS,
            Kind::PodDisruptionBudget => schema::PDB,
        }
    }
}

/// Why a strategic merge patch does not apply (apimachinery's errors, with the path).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("{path}: unknown patch type {directive} (`$patch` is replace or delete)")]
    BadDirective { path: String, directive: String },
    #[error("{path}: merging lists cannot yet be specified in the patch (`$patch: merge`)")]
    ListMergeDirective { path: String },
    #[error("{path}: an element has no merge key `{key}`")]
    NoMergeKey { path: String, key: String },
    #[error("{path}: cannot merge lists of objects without a merge key")]
    NoMergeKeyForList { path: String },
    #[error("{path}: list elements are not all of one type, or are lists")]
    ElementTypes { path: String },
    #[error("{path}: $retainKeys must be a list naming every field the patch sets")]
    BadRetainKeys { path: String },
    #[error("{path}: `{key}` is not of the form $deleteFromPrimitiveList/FIELD")]
    BadDeleteList { path: String, key: String },
    #[error("{path}: `{key}`: $setElementOrder directives are not supported")]
    SetElementOrder { path: String, key: String },
}

/// Why istiod's overlays do not apply to an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverlayError {
    #[error("unsupported overlay {key:?} (supported: [{}])", SUPPORTED.join(" "))]
    UnsupportedKey { key: String },
    #[error("overlay {key:?}: not a YAML map: {message}")]
    Yaml { key: String, message: String },
    #[error("overlay {key:?}: strategic merge patch failed: {source}")]
    Patch {
        key: String,
        #[source]
        source: PatchError,
    },
    #[error("overlay {key:?}: the patched object is invalid: {message}")]
    Invalid { key: String, message: String },
    #[error("overlay {key:?}: illegal metadata change")]
    IllegalMetadataChange { key: String },
}

/// Whether some overlay map patches `kind`.
pub fn patches(kind: Kind, overlays: &[&BTreeMap<String, String>]) -> bool {
    overlays.iter().any(|o| o.contains_key(kind.key()))
}

/// istiod's `applyOverlay`: `object` of `kind` patched by each map's `kind` overlay in
/// order; every map's keys must be supported, and the patched object keep its identity.
pub fn apply<T: Serialize + DeserializeOwned>(
    kind: Kind,
    object: &T,
    overlays: &[&BTreeMap<String, String>],
) -> Result<T, OverlayError> {
    let key = kind.key();
    if let Some(k) = overlays
        .iter()
        .flat_map(|o| o.keys())
        .find(|k| !SUPPORTED.contains(&k.as_str()))
    {
        return Err(OverlayError::UnsupportedKey { key: k.clone() });
    }
    let invalid = |e: serde_json::Error| OverlayError::Invalid {
        key: key.into(),
        message: e.to_string(),
    };
    let original = serde_json::to_value(object).map_err(invalid)?;
    let mut value = original.clone();
    for yaml in overlays.iter().filter_map(|o| o.get(key)) {
        let patch = parse_patch(yaml).map_err(|message| OverlayError::Yaml {
            key: key.into(),
            message,
        })?;
        value = strategic_merge(kind, value, patch).map_err(|source| OverlayError::Patch {
            key: key.into(),
            source,
        })?;
    }
    let metadata = |v: &Value| -> Result<ObjectMeta, OverlayError> {
        let m = v.get("metadata").cloned().unwrap_or(Value::Null);
        Ok(serde_json::from_value::<Option<ObjectMeta>>(m)
            .map_err(invalid)?
            .unwrap_or_default())
    };
    if !same_identity(&metadata(&original)?, &metadata(&value)?) {
        return Err(OverlayError::IllegalMetadataChange { key: key.into() });
    }
    serde_json::from_value(value).map_err(invalid)
}

/// istiod's comparison of the metadata before and after the overlays (managed fields are
/// never allowed).
fn same_identity(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    a.name == b.name
        && a.generate_name == b.generate_name
        && a.namespace == b.namespace
        && a.uid == b.uid
        && a.resource_version == b.resource_version
        && a.generation == b.generation
        && a.creation_timestamp == b.creation_timestamp
        && a.deletion_timestamp == b.deletion_timestamp
        && a.deletion_grace_period_seconds == b.deletion_grace_period_seconds
        && a.owner_references == b.owner_references
        && a.finalizers.as_deref().unwrap_or_default()
            == b.finalizers.as_deref().unwrap_or_default()
        && a.managed_fields.as_deref().unwrap_or_default().is_empty()
        && b.managed_fields.as_deref().unwrap_or_default().is_empty()
}

/// An overlay's YAML (bounded as config files are): a map, or empty for none.
pub fn parse_patch(yaml: &str) -> Result<Map<String, Value>, String> {
    axon_config::yaml_bounds::YamlBounds::default()
        .check(yaml)
        .map_err(|e| e.to_string())?;
    match serde_norway::from_str::<Value>(yaml).map_err(|e| e.to_string())? {
        Value::Null => Ok(Map::new()),
        Value::Object(m) => Ok(m),
        other => Err(format!("a patch is a map, not {other}")),
    }
}

/// `patch` applied to `original`, an object of `kind`.
pub fn strategic_merge(
    kind: Kind,
    original: Value,
    patch: Map<String, Value>,
) -> Result<Value, PatchError> {
    let original = match original {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    merge::merge_map(original, patch, kind.schema(), "").map(Value::Object)
}

#[cfg(test)]
#[path = "overlay_tests.rs"]
mod tests;
