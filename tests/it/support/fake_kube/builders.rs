//! Object builders for the fake API server's tests: JSON, as the API server serves them.

use serde_json::{Value, json};

fn labels_json(labels: &[(&str, &str)]) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect(),
    )
}

pub fn namespace(name: &str, labels: &[(&str, &str)]) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "labels": labels_json(labels)}})
}

/// A ClusterIP Service with `(name, port)` ports.
pub fn service(ns: &str, name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP", "targetPort": p}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ports": ports}})
}

/// A Pod with labels.
pub fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": labels_json(labels)},
           "spec": {"serviceAccountName": "default", "containers": [{"name": "app", "image": "app"}]},
           "status": {"phase": "Running", "podIP": "127.0.0.1"}})
}

/// An EndpointSlice of `service`, with one `(port name, port)` and `(address, pod)`
/// endpoints, all ready.
pub fn endpoint_slice(
    ns: &str,
    name: &str,
    service: &str,
    port: (&str, u16),
    endpoints: &[(&str, &str)],
) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(addr, pod)| {
            json!({"addresses": [addr], "conditions": {"ready": true},
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": pod}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": ns,
                        "labels": {"kubernetes.io/service-name": service}},
           "addressType": "IPv4",
           "ports": [{"name": port.0, "port": port.1, "protocol": "TCP"}],
           "endpoints": endpoints})
}

/// An Istio object from YAML (apiVersion, kind, metadata and spec).
pub fn istio(yaml: &str) -> Value {
    serde_norway::from_str(yaml).expect("valid Istio YAML")
}
