//! The strategic merge patch against apimachinery's `strategicpatch` semantics, and istiod's
//! checks of an overlay.

use super::*;
use serde_json::json;

fn merge(kind: Kind, original: Value, patch: &str) -> Result<Value, PatchError> {
    strategic_merge(kind, original, parse_patch(patch).unwrap())
}

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "gw-istio", "namespace": "shop", "labels": {"a": "1", "b": "2"}},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
            "template": {"spec": {
                "containers": [
                    {"name": "istio-proxy", "image": "proxyv2", "args": ["proxy", "router"],
                     "env": [{"name": "A", "value": "a"}, {"name": "B", "value": "b"},
                             {"name": "C", "value": "c"}],
                     "ports": [{"containerPort": 15020, "name": "metrics"}]},
                    {"name": "sidecar", "image": "other"},
                ],
                "tolerations": [{"key": "x", "operator": "Exists"}],
            }},
        },
    })
}

fn proxy(v: &Value) -> &Value {
    &v["spec"]["template"]["spec"]["containers"][0]
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect()
}

#[test]
fn maps_merge_recursively_and_a_null_deletes_a_key() {
    let out = merge(
        Kind::Deployment,
        deployment(),
        "metadata: {labels: {b: null, c: '3'}}\nspec: {replicas: 3, paused: true}",
    )
    .unwrap();
    assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
    assert_eq!(out["metadata"]["name"], "gw-istio");
    assert_eq!(out["spec"]["replicas"], 3);
    assert_eq!(out["spec"]["paused"], true);
    assert_eq!(out["spec"]["strategy"]["type"], "RollingUpdate");
}

#[test]
fn containers_merge_by_name_keeping_their_other_fields() {
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        resources: {requests: {cpu: 222m}}\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    let containers = &out["spec"]["template"]["spec"]["containers"];
    assert_eq!(names(containers), ["istio-proxy", "sidecar"]);
    assert_eq!(proxy(&out)["image"], "proxyv2");
    assert_eq!(proxy(&out)["args"], json!(["proxy", "router"]));
    assert_eq!(
        proxy(&out)["resources"],
        json!({"requests": {"cpu": "222m"}})
    );
    assert_eq!(names(&proxy(&out)["env"]), ["A", "B", "C"]);
}

#[test]
fn env_merges_by_name_in_apimachinerys_order() {
    // The patch's elements in its order, the others in the original's, interleaved by the
    // original's order: a new element lands before the original's elements that follow.
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env:\n        - {name: B, value: b2}\n        - {name: D, value: d}\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    let env = &proxy(&out)["env"];
    assert_eq!(names(env), ["A", "B", "D", "C"]);
    assert_eq!(env[1], json!({"name": "B", "value": "b2"}));
    // Only new: first.
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env: [{name: Z, value: z}]\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(names(&proxy(&out)["env"]), ["Z", "A", "B", "C"]);
    // Ports by containerPort.
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        ports: [{containerPort: 15020, protocol: TCP}]\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(
        proxy(&out)["ports"],
        json!([{"containerPort": 15020, "name": "metrics", "protocol": "TCP"}])
    );
}

#[test]
fn a_patch_delete_element_removes_the_original_of_its_key() {
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - {name: sidecar, $patch: delete}\n      - name: istio-proxy\n        env: [{name: B, $patch: delete}]\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(
        names(&out["spec"]["template"]["spec"]["containers"]),
        ["istio-proxy"]
    );
    assert_eq!(names(&proxy(&out)["env"]), ["A", "C"]);
    // Without its merge key, an error.
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - {$patch: delete}\n";
    assert!(matches!(
        merge(Kind::Deployment, deployment(), patch),
        Err(PatchError::NoMergeKey { key, .. }) if key == "name"
    ));
}

#[test]
fn patch_replace_replaces_a_list_or_a_map_and_patch_delete_empties_a_map() {
    let patch = "spec:\n  template:\n    spec:\n      containers:\n      - name: istio-proxy\n        env: [{name: X, value: x}, {$patch: replace}]\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(proxy(&out)["env"], json!([{"name": "X", "value": "x"}]));
    let patch = "spec: {strategy: {$patch: replace, type: Recreate}}";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let patch = "spec: {strategy: {$patch: delete}}";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({}));
    // A `$patch` map where the original has nothing is dropped (apimachinery's
    // removeDirectives).
    let patch = "spec: {minReadySeconds: 5, selector: {$patch: replace, matchLabels: {a: b}}}";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert!(out["spec"].get("selector").is_none());
    assert_eq!(out["spec"]["minReadySeconds"], 5);
}

#[test]
fn a_list_without_a_merge_key_is_replaced() {
    let patch = "spec:\n  template:\n    spec:\n      tolerations: [{key: y, operator: Exists}]\n      containers:\n      - {name: istio-proxy, args: [proxy]}\n";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "y", "operator": "Exists"}])
    );
    assert_eq!(proxy(&out)["args"], json!(["proxy"]));
    // The tables are by kind: in a Service, `spec.template.spec.containers` is no merge list.
    let service =
        json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "i"}]}}}});
    let out = merge(
        Kind::Service,
        service,
        "spec: {template: {spec: {containers: [{name: a}]}}}",
    )
    .unwrap();
    assert_eq!(
        out["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a"}])
    );
}

#[test]
fn service_ports_merge_by_port() {
    let service = json!({"spec": {"type": "LoadBalancer", "ports": [
        {"name": "status-port", "port": 15021, "protocol": "TCP"},
        {"name": "http", "port": 80, "protocol": "TCP"},
    ]}});
    let patch = "spec:\n  type: ClusterIP\n  ports:\n  - {port: 80, nodePort: 30080}\n  - {port: 8080, name: extra}\n";
    let out = merge(Kind::Service, service, patch).unwrap();
    assert_eq!(out["spec"]["type"], "ClusterIP");
    assert_eq!(
        out["spec"]["ports"],
        json!([
            {"name": "status-port", "port": 15021, "protocol": "TCP"},
            {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080},
            {"port": 8080, "name": "extra"},
        ])
    );
}

#[test]
fn a_pod_disruption_budgets_selector_is_replaced_whole() {
    let pdb = json!({"spec": {"selector": {"matchLabels": {"a": "1"}}}});
    let out = merge(
        Kind::PodDisruptionBudget,
        pdb,
        "spec: {selector: {matchLabels: {b: '2'}}}",
    )
    .unwrap();
    assert_eq!(out["spec"]["selector"], json!({"matchLabels": {"b": "2"}}));
}

#[test]
fn retain_keys_clears_the_unlisted_keys_of_the_original() {
    let patch = "spec: {strategy: {$retainKeys: [type], type: Recreate}}";
    let out = merge(Kind::Deployment, deployment(), patch).unwrap();
    assert_eq!(out["spec"]["strategy"], json!({"type": "Recreate"}));
    let patch = "spec: {strategy: {$retainKeys: [type], rollingUpdate: {maxSurge: 2}}}";
    assert!(matches!(
        merge(Kind::Deployment, deployment(), patch),
        Err(PatchError::BadRetainKeys { path }) if path == "spec.strategy"
    ));
}

#[test]
fn finalizers_merge_as_a_set_and_delete_from_primitive_list_removes() {
    let object = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = merge(
        Kind::ServiceAccount,
        object.clone(),
        "metadata: {finalizers: [c, a]}",
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["c", "a", "b"]));
    let out = merge(
        Kind::ServiceAccount,
        object,
        "metadata: {$deleteFromPrimitiveList/finalizers: [a]}",
    )
    .unwrap();
    assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
}

#[test]
fn unsupported_directives_are_errors() {
    let patch =
        "spec:\n  template:\n    spec:\n      $setElementOrder/containers: [{name: sidecar}]\n";
    assert!(matches!(
        merge(Kind::Deployment, deployment(), patch),
        Err(PatchError::SetElementOrder { .. })
    ));
    let patch = "spec:\n  template:\n    spec:\n      containers: [{$patch: merge}]\n";
    assert!(matches!(
        merge(Kind::Deployment, deployment(), patch),
        Err(PatchError::ListMergeDirective { .. })
    ));
    assert!(matches!(
        merge(Kind::Deployment, deployment(), "spec: {$patch: nonsense}"),
        Err(PatchError::BadDirective { path, .. }) if path == "spec"
    ));
    let patch = "spec:\n  template:\n    spec:\n      containers: [{name: a}, [b]]\n";
    assert!(matches!(
        merge(Kind::Deployment, deployment(), patch),
        Err(PatchError::ElementTypes { .. })
    ));
}

#[test]
fn a_patch_is_a_yaml_map_or_empty() {
    assert_eq!(parse_patch("").unwrap(), Map::new());
    assert!(parse_patch("- a").is_err());
    assert!(parse_patch("a: [").is_err());
}

#[test]
fn apply_checks_the_keys_and_the_identity() {
    let sa = k8s_openapi::api::core::v1::ServiceAccount {
        metadata: ObjectMeta {
            name: Some("gw-istio".into()),
            namespace: Some("shop".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let overlays = BTreeMap::from([(
        "serviceAccount".to_string(),
        "metadata: {labels: {x: y}}".to_string(),
    )]);
    let out = apply(Kind::ServiceAccount, &sa, &[&overlays]).unwrap();
    assert_eq!(out.metadata.labels.unwrap()["x"], "y");
    let bad = BTreeMap::from([("configMap".to_string(), String::new())]);
    let err = apply(Kind::ServiceAccount, &sa, &[&overlays, &bad]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported overlay \"configMap\" (supported: [deployment horizontalPodAutoscaler \
         podDisruptionBudget service serviceAccount])"
    );
    for patch in [
        "metadata: {namespace: other}",
        "metadata: {finalizers: [f]}",
        "metadata: {ownerReferences: [{apiVersion: v1, kind: K, name: n, uid: u}]}",
        "metadata: {managedFields: [{manager: m}]}",
    ] {
        let o = BTreeMap::from([("serviceAccount".to_string(), patch.to_string())]);
        assert_eq!(
            apply(Kind::ServiceAccount, &sa, &[&o]),
            Err(OverlayError::IllegalMetadataChange {
                key: "serviceAccount".into()
            }),
            "{patch}"
        );
    }
    let o = BTreeMap::from([("serviceAccount".to_string(), "- x".to_string())]);
    assert!(matches!(
        apply(Kind::ServiceAccount, &sa, &[&o]),
        Err(OverlayError::Yaml { .. })
    ));
}

#[test]
fn a_long_list_merges_by_index_not_by_search() {
    // 30,000 new env vars and 30,000 finalizers: a search per element would be quadratic.
    let env: Vec<Value> = (0..30_000)
        .map(|i| json!({"name": format!("V{i}"), "value": "x"}))
        .collect();
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "istio-proxy", "env": env}]}}}});
    let Value::Object(patch) = patch else {
        unreachable!()
    };
    let out = strategic_merge(Kind::Deployment, deployment(), patch).unwrap();
    let env = proxy(&out)["env"].as_array().unwrap();
    assert_eq!(env.len(), 30_003);
    assert_eq!(
        (&env[0]["name"], &env[30_002]["name"]),
        (&json!("V0"), &json!("C"))
    );
    let finalizers: Vec<String> = (0..30_000).map(|i| format!("f{i}")).collect();
    let Value::Object(patch) = json!({"metadata": {"finalizers": finalizers}}) else {
        unreachable!()
    };
    let original = json!({"metadata": {"finalizers": ["f1", "a"]}});
    let out = strategic_merge(Kind::ServiceAccount, original, patch).unwrap();
    let finalizers = out["metadata"]["finalizers"].as_array().unwrap();
    assert_eq!(finalizers.len(), 30_001);
    assert_eq!(
        (&finalizers[1], &finalizers[30_000]),
        (&json!("f1"), &json!("a"))
    );
}
