//! [`render_with`] against istiod's overlay cases (`gatewaycommon/deploymentcontroller_test.go`
//! `customizations` and `illegal_customizations`, their `testdata/deployment` goldens).

use std::collections::BTreeMap;

use serde_json::json;

use super::super::tests::{env_of, settings, spec, two_listeners};
use super::*;
use crate::registry::cluster::gateway_deployment::{GatewayObject, render};

fn with_params(name: &str) -> GatewaySpec {
    spec(json!({
        "gatewayClassName": "istio",
        "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        "infrastructure": {
            "labels": {"foo": "bar"},
            "parametersRef": {"group": "", "kind": "ConfigMap", "name": name},
        },
    }))
}

fn data(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
    entries
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The Gateway `default/namespace` of istiod's overlay cases.
fn overlaid(
    spec: &GatewaySpec,
    overlays: &[&BTreeMap<String, String>],
) -> (Option<Rendered>, Result<Option<Rendered>, RenderError>) {
    let none = BTreeMap::new();
    let gw = GatewayObject {
        namespace: "default",
        name: "namespace",
        uid: "uid-1",
        labels: &none,
        annotations: &none,
        spec,
    };
    (
        render(&gw, &settings()),
        render_with(&gw, &settings(), overlays),
    )
}

fn render_overlaid(
    spec: &GatewaySpec,
    overlays: &[&BTreeMap<String, String>],
) -> Result<Option<Rendered>, RenderError> {
    overlaid(spec, overlays).1
}

/// istiod's `customizations` case (`gatewaycommon/testdata/deployment/customizations.yaml`).
fn customizations() -> BTreeMap<String, String> {
    data(&[
        ("podDisruptionBudget", "spec:\n  minAvailable: 1"),
        (
            "horizontalPodAutoscaler",
            "spec:\n  minReplicas: 2\n  maxReplicas: 2",
        ),
        (
            "deployment",
            "metadata:\n  annotations:\n    cm-annotation: cm-annotation-value\nspec:\n  replicas: 4\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env:\n        - {name: EXTRA, value: \"1\"}\n        - {name: TRUST_DOMAIN, value: example.org}\n        resources:\n          requests:\n            cpu: 222m",
        ),
    ])
}

#[test]
fn parameters_ref_names_a_config_map_and_nothing_else() {
    assert_eq!(
        parameters_ref(&with_params("gw-options")),
        Ok(Some("gw-options".into()))
    );
    assert_eq!(parameters_ref(&two_listeners()), Ok(None));
    let mut other = with_params("p");
    let r = other
        .infrastructure
        .as_mut()
        .and_then(|i| i.parameters_ref.as_mut())
        .unwrap();
    r.group = "invalid.io".into();
    r.kind = "InvalidParameters".into();
    let err = parameters_ref(&other).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Unsupported parametersRef group/kind invalid.io/InvalidParameters, only ConfigMap is \
         supported"
    );
    assert_eq!(render_overlaid(&other, &[]), Err(err));
}

#[test]
fn a_parameters_ref_overlay_patches_the_deployment() {
    let params = customizations();
    let r = render_overlaid(&with_params("gw-options"), &[&params])
        .unwrap()
        .unwrap();
    let dep = serde_json::to_value(&r.deployment).unwrap();
    assert_eq!(dep["spec"]["replicas"], 4);
    assert_eq!(
        dep["metadata"]["annotations"],
        json!({"cm-annotation": "cm-annotation-value"})
    );
    let container = &dep["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["name"], "istio-proxy");
    assert_eq!(container["image"], "docker.io/istio/proxyv2:1.28.0");
    assert_eq!(container["resources"], json!({"requests": {"cpu": "222m"}}));
    let env = env_of(&dep);
    assert_eq!(env["EXTRA"], "1");
    assert_eq!(env["TRUST_DOMAIN"], "example.org");
    assert_eq!(env["PILOT_CERT_PROVIDER"], "istiod");
    // The other objects are as without overlays, and no overlay is `render`.
    let (plain, none) = overlaid(&with_params("gw-options"), &[]);
    let plain = plain.unwrap();
    assert_eq!(none, Ok(Some(plain.clone())));
    assert_eq!(r.service, plain.service);
    assert_eq!(r.service_account, plain.service_account);
    assert_eq!(plain.horizontal_pod_autoscaler, None);
    assert_eq!(plain.pod_disruption_budget, None);
}

#[test]
fn the_autoscaler_and_disruption_budget_exist_only_when_overlaid() {
    let params = customizations();
    let r = render_overlaid(&with_params("gw-options"), &[&params])
        .unwrap()
        .unwrap();
    let hpa = serde_json::to_value(r.horizontal_pod_autoscaler.unwrap()).unwrap();
    let pdb = serde_json::to_value(r.pod_disruption_budget.unwrap()).unwrap();
    let labels = json!({"foo": "bar",
        "istio.io/dataplane-mode": "none",
        "gateway.networking.k8s.io/gateway-name": "namespace",
        "gateway.networking.k8s.io/gateway-class-name": "istio",
        "gateway.istio.io/managed": "istio.io-gateway-controller"});
    let owner = json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "name": "namespace", "uid": "uid-1"}]);
    assert_eq!(
        (&hpa["apiVersion"], &hpa["kind"]),
        (&json!("autoscaling/v2"), &json!("HorizontalPodAutoscaler"))
    );
    assert_eq!(
        (&pdb["apiVersion"], &pdb["kind"]),
        (&json!("policy/v1"), &json!("PodDisruptionBudget"))
    );
    for object in [&hpa, &pdb] {
        assert_eq!(object["metadata"]["name"], "namespace-istio");
        assert_eq!(object["metadata"]["namespace"], "default");
        assert_eq!(object["metadata"]["labels"], labels);
        assert_eq!(object["metadata"]["ownerReferences"], owner);
    }
    assert_eq!(
        hpa["spec"],
        json!({"minReplicas": 2, "maxReplicas": 2, "scaleTargetRef":
            {"apiVersion": "apps/v1", "kind": "Deployment", "name": "namespace-istio"}})
    );
    assert_eq!(
        pdb["spec"],
        json!({"minAvailable": 1, "selector":
            {"matchLabels": {"gateway.networking.k8s.io/gateway-name": "namespace"}}})
    );
    // Each only when an overlay has its key; an empty patch still makes it.
    let only_pdb = data(&[("podDisruptionBudget", "")]);
    let r = render_overlaid(&with_params("gw-options"), &[&only_pdb])
        .unwrap()
        .unwrap();
    assert_eq!(r.horizontal_pod_autoscaler, None);
    let pdb = serde_json::to_value(r.pod_disruption_budget.unwrap()).unwrap();
    assert!(pdb["spec"].get("minAvailable").is_none());
    let only_hpa = data(&[("horizontalPodAutoscaler", "spec: {minReplicas: 3}")]);
    let r = render_overlaid(&two_listeners(), &[&only_hpa])
        .unwrap()
        .unwrap();
    assert_eq!(r.pod_disruption_budget, None);
    let hpa = r.horizontal_pod_autoscaler.unwrap().spec.unwrap();
    assert_eq!((hpa.min_replicas, hpa.max_replicas), (Some(3), 1));
}

#[test]
fn class_defaults_apply_before_the_parameters_ref() {
    let defaults = data(&[
        ("deployment", "spec: {replicas: 2, minReadySeconds: 7}"),
        ("service", "spec: {type: ClusterIP}"),
    ]);
    let params = data(&[("deployment", "spec: {replicas: 5}")]);
    let r = render_overlaid(&with_params("p"), &[&defaults, &params])
        .unwrap()
        .unwrap();
    let spec = r.deployment.spec.unwrap();
    assert_eq!((spec.replicas, spec.min_ready_seconds), (Some(5), Some(7)));
    assert_eq!(r.service.spec.unwrap().type_.as_deref(), Some("ClusterIP"));
}

#[test]
fn an_unsupported_overlay_key_is_an_error() {
    let params = data(&[("deployment", "spec: {replicas: 2}"), ("configMap", "x: y")]);
    let err = render_overlaid(&with_params("p"), &[&params]).unwrap_err();
    assert_eq!(
        err,
        RenderError::Overlay(OverlayError::UnsupportedKey {
            key: "configMap".into()
        })
    );
    assert!(
        err.to_string()
            .contains("supported: [deployment horizontalPodAutoscaler")
    );
}

#[test]
fn renaming_an_object_is_an_illegal_metadata_change() {
    // istiod's `illegal_customizations` case: nothing is rendered.
    let params = data(&[("deployment", "metadata:\n  name: not-allowed")]);
    let err = render_overlaid(&with_params("gw-options"), &[&params]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "overlay \"deployment\": illegal metadata change"
    );
    let params = data(&[("service", "spec: {ports: [{name: p}]}")]);
    assert!(matches!(
        render_overlaid(&with_params("gw-options"), &[&params]),
        Err(RenderError::Overlay(OverlayError::Patch { .. }))
    ));
}
