//! istiod's overlays on a Gateway's objects (`deploymentcontroller.go` `render`,
//! `fetchParameters`): which ConfigMap the Gateway names, the HorizontalPodAutoscaler and
//! PodDisruptionBudget of the template, and [`render_with`], the objects patched by
//! [`overlay`].

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Serialize;
use serde::de::DeserializeOwned;

use axon_config::gateway_api::GatewaySpec;

use super::{DeploymentSettings, GATEWAY_NAME_LABEL, GatewayObject, Rendered, template};
use crate::registry::cluster::overlay::{self, Kind, OverlayError};

/// Why a Gateway's objects cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// istiod's status message for a `parametersRef` it does not read.
    #[error("Unsupported parametersRef group/kind {group}/{kind}, only ConfigMap is supported")]
    UnsupportedParametersRef { group: String, kind: String },
    #[error(transparent)]
    Overlay(#[from] OverlayError),
}

/// The name of the ConfigMap, in the Gateway's namespace, that `infrastructure.parametersRef`
/// names (istiod's `fetchParameters`); only a core ConfigMap is supported.
pub fn parameters_ref(spec: &GatewaySpec) -> Result<Option<String>, RenderError> {
    let Some(r) = spec
        .infrastructure
        .as_ref()
        .and_then(|i| i.parameters_ref.as_ref())
    else {
        return Ok(None);
    };
    if r.group.is_empty() && r.kind == "ConfigMap" {
        Ok(Some(r.name.clone()))
    } else {
        Err(RenderError::UnsupportedParametersRef {
            group: r.group.clone(),
            kind: r.kind.clone(),
        })
    }
}

/// istiod's `render`: the objects of `gw` patched by `overlays`, the `data` of the
/// class-defaults ConfigMap then of the `parametersRef` one (a later overlay wins); `Ok(None)`
/// when `gw` is not of class `istio` or not managed. The HorizontalPodAutoscaler and the
/// PodDisruptionBudget are rendered only when some overlay patches them. An invalid
/// `parametersRef`, an unsupported overlay key, a patch that does not apply or one that
/// changes an object's identity is an error, and nothing is rendered.
pub fn render_with(
    gw: &GatewayObject<'_>,
    settings: &DeploymentSettings,
    overlays: &[&BTreeMap<String, String>],
) -> Result<Option<Rendered>, RenderError> {
    let Some(t) = template(gw, settings) else {
        return Ok(None);
    };
    parameters_ref(gw.spec)?;
    Ok(Some(Rendered {
        service_account: overlay::apply(Kind::ServiceAccount, &t.service_account, overlays)?,
        deployment: overlay::apply(Kind::Deployment, &t.deployment, overlays)?,
        service: overlay::apply(Kind::Service, &t.service, overlays)?,
        horizontal_pod_autoscaler: optional(
            Kind::HorizontalPodAutoscaler,
            t.horizontal_pod_autoscaler,
            overlays,
        )?,
        pod_disruption_budget: optional(
            Kind::PodDisruptionBudget,
            t.pod_disruption_budget,
            overlays,
        )?,
    }))
}

/// An object of a kind rendered only when an overlay patches it (`requiredOverlays`).
fn optional<T: Serialize + DeserializeOwned>(
    kind: Kind,
    object: Option<T>,
    overlays: &[&BTreeMap<String, String>],
) -> Result<Option<T>, OverlayError> {
    match object {
        Some(o) if !kind.needs_overlay() || overlay::patches(kind, overlays) => {
            overlay::apply(kind, &o, overlays).map(Some)
        }
        _ => Ok(None),
    }
}

/// The template's HorizontalPodAutoscaler: of the Deployment `name`, at most one replica
/// until an overlay says more.
pub(super) fn horizontal_pod_autoscaler(
    metadata: ObjectMeta,
    name: &str,
) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata,
        spec: Some(HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: name.into(),
            },
            max_replicas: 1,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The template's PodDisruptionBudget: of the pods of the Gateway `gateway`.
pub(super) fn pod_disruption_budget(metadata: ObjectMeta, gateway: &str) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata,
        spec: Some(PodDisruptionBudgetSpec {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    GATEWAY_NAME_LABEL.to_string(),
                    gateway.to_string(),
                )])),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "overlays_tests.rs"]
mod tests;
