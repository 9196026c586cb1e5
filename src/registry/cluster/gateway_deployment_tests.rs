//! The rendered objects against istiod's `kube-gateway.yaml` (its
//! `gatewaycommon/testdata/deployment/*.yaml` goldens as the reference).

use super::*;
use axon_config::gateway_api::gateway::{GatewayAddress, GatewayInfrastructure};
use serde_json::{Value, json};

pub(super) fn settings() -> DeploymentSettings {
    DeploymentSettings {
        proxy_image: "docker.io/istio/proxyv2:1.28.0".into(),
        discovery_address: "istiod.istio-system.svc:15012".into(),
        cluster_id: "Kubernetes".into(),
        mesh_id: "cluster.local".into(),
        trust_domain: "cluster.local".into(),
        domain_suffix: "cluster.local".into(),
    }
}

pub(super) fn spec(value: Value) -> GatewaySpec {
    serde_json::from_value(value).unwrap()
}

pub(super) fn two_listeners() -> GatewaySpec {
    spec(json!({
        "gatewayClassName": "istio",
        "listeners": [
            {"name": "http", "port": 80, "protocol": "HTTP"},
            {"name": "web.tls", "port": 443, "protocol": "HTTPS",
             "tls": {"certificateRefs": [{"name": "cert"}]}},
            {"name": "http-again", "port": 80, "protocol": "HTTP"},
        ],
    }))
}

fn render_json(
    spec: &GatewaySpec,
    labels: &[(&str, &str)],
    annotations: &[(&str, &str)],
) -> [Value; 3] {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let annotations = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let gw = GatewayObject {
        namespace: "shop",
        name: "gw",
        uid: "uid-1",
        labels: &labels,
        annotations: &annotations,
        spec,
    };
    let r = render(&gw, &settings()).expect("managed");
    [
        serde_json::to_value(&r.service_account).unwrap(),
        serde_json::to_value(&r.deployment).unwrap(),
        serde_json::to_value(&r.service).unwrap(),
    ]
}

pub(super) fn env_of(deployment: &Value) -> BTreeMap<String, Value> {
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let v = e
                .get("value")
                .cloned()
                .unwrap_or_else(|| e["valueFrom"].clone());
            (e["name"].as_str().unwrap().to_string(), v)
        })
        .collect()
}

#[test]
fn a_gateway_with_two_listeners_gets_its_account_deployment_and_service() {
    let [sa, dep, svc] = render_json(&two_listeners(), &[("team", "a")], &[("note", "x")]);
    let owner = json!([{"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                        "name": "gw", "uid": "uid-1"}]);
    let labels = json!({"team": "a",
        "istio.io/dataplane-mode": "none",
        "gateway.networking.k8s.io/gateway-name": "gw",
        "gateway.networking.k8s.io/gateway-class-name": "istio",
        "gateway.istio.io/managed": "istio.io-gateway-controller"});
    // A server-side apply's body names its kind.
    assert_eq!(
        (&sa["apiVersion"], &sa["kind"]),
        (&json!("v1"), &json!("ServiceAccount"))
    );
    assert_eq!(
        (&dep["apiVersion"], &dep["kind"]),
        (&json!("apps/v1"), &json!("Deployment"))
    );
    assert_eq!(
        (&svc["apiVersion"], &svc["kind"]),
        (&json!("v1"), &json!("Service"))
    );
    for object in [&sa, &dep, &svc] {
        assert_eq!(object["metadata"]["name"], "gw-istio");
        assert_eq!(object["metadata"]["namespace"], "shop");
        assert_eq!(object["metadata"]["ownerReferences"], owner);
        assert_eq!(object["metadata"]["labels"], labels);
        assert_eq!(object["metadata"]["annotations"], json!({"note": "x"}));
    }
    let spec = &dep["spec"];
    assert_eq!(
        spec["selector"],
        json!({"matchLabels": {"gateway.networking.k8s.io/gateway-name": "gw"}})
    );
    let pod_labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(pod_labels["sidecar.istio.io/inject"], "false");
    assert_eq!(pod_labels["service.istio.io/canonical-name"], "gw-istio");
    assert_eq!(pod_labels["service.istio.io/canonical-revision"], "latest");
    assert_eq!(pod_labels["gateway.networking.k8s.io/gateway-name"], "gw");
    assert_eq!(pod_labels["team"], "a");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "gw-istio");
    assert_eq!(
        pod["securityContext"]["sysctls"],
        json!([{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}])
    );
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "istio-proxy");
    assert_eq!(c["image"], "docker.io/istio/proxyv2:1.28.0");
    assert_eq!(
        c["args"].as_array().unwrap()[..4],
        [
            json!("proxy"),
            json!("router"),
            json!("--domain"),
            json!("$(POD_NAMESPACE).svc.cluster.local")
        ]
    );
    let ports: Vec<i64> = c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_i64().unwrap())
        .collect();
    assert_eq!(ports, [15020, 15021, 15090]);
    let env = env_of(&dep);
    assert_eq!(env["PILOT_CERT_PROVIDER"], "istiod");
    assert_eq!(env["CA_ADDR"], "istiod.istio-system.svc:15012");
    assert_eq!(
        env["PROXY_CONFIG"],
        r#"{"discoveryAddress":"istiod.istio-system.svc:15012"}"#
    );
    assert_eq!(
        env["POD_NAME"],
        json!({"fieldRef": {"fieldPath": "metadata.name"}})
    );
    assert_eq!(
        env["POD_NAMESPACE"],
        json!({"fieldRef": {"fieldPath": "metadata.namespace"}})
    );
    assert_eq!(
        env["INSTANCE_IP"],
        json!({"fieldRef": {"fieldPath": "status.podIP"}})
    );
    assert_eq!(
        env["SERVICE_ACCOUNT"],
        json!({"fieldRef": {"fieldPath": "spec.serviceAccountName"}})
    );
    assert_eq!(env["ISTIO_META_CLUSTER_ID"], "Kubernetes");
    assert_eq!(env["ISTIO_META_WORKLOAD_NAME"], "gw-istio");
    assert_eq!(
        env["ISTIO_META_OWNER"],
        "kubernetes://apis/apps/v1/namespaces/shop/deployments/gw-istio"
    );
    assert_eq!(env["ISTIO_META_MESH_ID"], "cluster.local");
    assert_eq!(env["TRUST_DOMAIN"], "cluster.local");
    assert_eq!(
        env["GOMEMLIMIT"],
        json!({"resourceFieldRef": {"resource": "limits.memory", "divisor": "1"}})
    );
    assert_eq!(
        c["readinessProbe"]["httpGet"],
        json!({"path": "/healthz/ready", "port": 15021, "scheme": "HTTP"})
    );
    assert_eq!(c["startupProbe"]["failureThreshold"], 30);
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).unwrap().clone();
    assert_eq!(
        volume("istio-token")["projected"]["sources"][0]["serviceAccountToken"],
        json!({"path": "istio-token", "expirationSeconds": 43200, "audience": "istio-ca"})
    );
    assert_eq!(
        volume("istiod-ca-cert")["configMap"]["name"],
        "istio-ca-root-cert"
    );
    assert_eq!(
        volume("istio-envoy")["emptyDir"],
        json!({"medium": "Memory"})
    );
    assert!(volume("istio-podinfo")["downwardAPI"]["items"].is_array());
    // The Service: status-port, then one port per distinct listener port.
    let s = &svc["spec"];
    assert_eq!(s["type"], "LoadBalancer");
    assert_eq!(s["ipFamilyPolicy"], "PreferDualStack");
    assert_eq!(
        s["selector"],
        json!({"gateway.networking.k8s.io/gateway-name": "gw"})
    );
    assert_eq!(
        s["ports"],
        json!([
            {"name": "status-port", "port": 15021, "protocol": "TCP", "appProtocol": "tcp"},
            {"name": "http", "port": 80, "protocol": "TCP", "appProtocol": "http"},
            {"name": "web-tls", "port": 443, "protocol": "TCP", "appProtocol": "https"},
        ])
    );
    assert!(s.get("loadBalancerIP").is_none());
}

#[test]
fn infrastructure_labels_and_annotations_replace_the_gateways_own() {
    let mut spec = two_listeners();
    spec.infrastructure = Some(GatewayInfrastructure {
        labels: BTreeMap::from([("infra".into(), "yes".into())]),
        annotations: BTreeMap::from([("a".into(), "b".into())]),
        parameters_ref: None,
    });
    let [sa, dep, _] = render_json(
        &spec,
        &[("team", "a")],
        &[("note", "x"), ("gateway.istio.io/controller-version", "5")],
    );
    for object in [&sa, &dep] {
        let labels = &object["metadata"]["labels"];
        assert_eq!(labels["infra"], "yes");
        assert!(labels.get("team").is_none(), "{labels}");
        assert_eq!(object["metadata"]["annotations"], json!({"a": "b"}));
    }
    assert_eq!(
        dep["spec"]["template"]["metadata"]["labels"]["infra"],
        "yes"
    );
    // The controls are not copied from the Gateway's annotations either.
    let [_, dep, _] = render_json(
        &two_listeners(),
        &[],
        &[("gateway.istio.io/controller-version", "5")],
    );
    assert_eq!(dep["metadata"]["annotations"], json!({}));
}

#[test]
fn an_ip_address_is_the_load_balancers_and_a_hostname_is_not_managed() {
    let mut spec = two_listeners();
    spec.addresses = vec![GatewayAddress {
        address_type: "IPAddress".into(),
        value: "10.9.8.7".into(),
    }];
    let [_, _, svc] = render_json(&spec, &[], &[]);
    assert_eq!(svc["spec"]["loadBalancerIP"], "10.9.8.7");
    // A ClusterIP Service (the annotation) has none.
    let [_, _, svc] = render_json(
        &spec,
        &[],
        &[("networking.istio.io/service-type", "ClusterIP")],
    );
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert!(svc["spec"].get("loadBalancerIP").is_none());

    let empty = BTreeMap::new();
    let gw = |spec| GatewayObject {
        namespace: "shop",
        name: "gw",
        uid: "u",
        labels: &empty,
        annotations: &empty,
        spec,
    };
    spec.addresses[0].address_type = "Hostname".into();
    assert!(render(&gw(&spec), &settings()).is_none());
    let mut other = two_listeners();
    other.gateway_class_name = "other".into();
    assert!(render(&gw(&other), &settings()).is_none());
}

#[test]
fn overrides_rename_the_objects_and_the_account() {
    let [sa, dep, svc] = render_json(
        &two_listeners(),
        &[],
        &[
            ("gateway.istio.io/name-override", "edge"),
            ("gateway.istio.io/service-account", "edge-sa"),
        ],
    );
    assert_eq!(sa["metadata"]["name"], "edge-sa");
    assert_eq!(dep["metadata"]["name"], "edge");
    assert_eq!(svc["metadata"]["name"], "edge");
    assert_eq!(
        dep["spec"]["template"]["spec"]["serviceAccountName"],
        "edge-sa"
    );
}

#[test]
fn port_names_are_unique_and_at_most_63_characters() {
    let long = "l".repeat(70);
    let spec = spec(json!({
        "gatewayClassName": "istio",
        "listeners": [
            {"name": "status-port", "port": 8080, "protocol": "TCP"},
            {"name": long, "port": 8081, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
            {"name": long, "port": 8082, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
        ],
    }));
    let names: Vec<String> = service_ports(&spec)
        .into_iter()
        .map(|p| p.name.unwrap())
        .collect();
    assert_eq!(names[1], "status-port-8080");
    assert_eq!(names[2], "l".repeat(63));
    assert_eq!(names[3], format!("{}-8082", "l".repeat(58)));
    assert!(names.iter().all(|n| n.len() <= 63));
}
