//! Envoy `Node` → [`NodeInfo`]: the id, and the Istio metadata keys axon reads
//! (`NAMESPACE`, `LABELS`, `GENERATOR`, `INTERCEPTION_MODE`, `SERVICE_ACCOUNT`, `IDLE_TIMEOUT`,
//! `NETWORK`, `TLS_CLIENT_CERT_CHAIN`/`TLS_CLIENT_KEY`/`TLS_CLIENT_ROOT_CERT`, `ISTIO_VERSION`,
//! `CLUSTER_ID`),
//! and `locality`; and back ([`to_node`]).

use envoy_types::pb::envoy::config::core::v3::{Locality as CoreLocality, Node};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};

use axon_config::istio::Labels;
use axon_model::locality::Locality;
use axon_model::proxy::{MetadataCerts, NodeInfo};

/// What axon reads of an Envoy `Node`.
pub fn node_info(node: &Node) -> NodeInfo {
    {
        let field = |key: &str| node.metadata.as_ref().and_then(|m| m.fields.get(key));
        NodeInfo {
            id: node.id.clone(),
            cluster: node.cluster.clone(),
            namespace: field("NAMESPACE").and_then(string_value),
            labels: field("LABELS").map(labels).unwrap_or_default(),
            generator: field("GENERATOR").and_then(string_value),
            interception_mode: field("INTERCEPTION_MODE").and_then(string_value),
            service_account: field("SERVICE_ACCOUNT").and_then(string_value),
            idle_timeout: field("IDLE_TIMEOUT").and_then(string_value),
            network: field("NETWORK").and_then(string_value),
            client_certs: field("TLS_CLIENT_CERT_CHAIN")
                .and_then(string_value)
                .filter(|c| !c.is_empty())
                .map(|cert_chain| MetadataCerts {
                    cert_chain,
                    key: field("TLS_CLIENT_KEY")
                        .and_then(string_value)
                        .unwrap_or_default(),
                    root_cert: field("TLS_CLIENT_ROOT_CERT")
                        .and_then(string_value)
                        .unwrap_or_default(),
                }),
            istio_version: field("ISTIO_VERSION").and_then(string_value),
            istio_filters: node.extensions.iter().any(|e| e.name == "istio.stats"),
            proxy_tracing: field("PROXY_CONFIG")
                .and_then(|c| struct_field(c, "tracing"))
                .and_then(|t| axon_config::mesh::proxy_tracing_of(&json(t))),
            mesh_id: field("MESH_ID").and_then(string_value),
            cluster_id: field("CLUSTER_ID").and_then(string_value),
            num_trusted_proxies: field("PROXY_CONFIG")
                .and_then(|c| struct_field(c, "gatewayTopology"))
                .and_then(|t| struct_field(t, "numTrustedProxies"))
                .and_then(|n| match &n.kind {
                    Some(Kind::NumberValue(n)) if *n >= 0.0 && *n <= u32::MAX as f64 => {
                        Some(*n as u32)
                    }
                    Some(Kind::StringValue(s)) => s.parse().ok(),
                    _ => None,
                }),
            locality: node.locality.as_ref().map(|l| Locality {
                region: l.region.clone(),
                zone: l.zone.clone(),
                subzone: l.sub_zone.clone(),
            }),
        }
    }
}

/// The Envoy `Node` that reads as `info` ([`node_info`]'s inverse): what `/debug/nodes`
/// shows of a connected proxy and `axon impact` reads back.
pub fn to_node(info: &NodeInfo) -> Node {
    let s = |v: &str| Value {
        kind: Some(Kind::StringValue(v.to_string())),
    };
    let mut fields = std::collections::BTreeMap::new();
    let mut put = |key: &str, value: Option<&String>| {
        if let Some(v) = value {
            fields.insert(key.to_string(), s(v));
        }
    };
    put("NAMESPACE", info.namespace.as_ref());
    put("GENERATOR", info.generator.as_ref());
    put("INTERCEPTION_MODE", info.interception_mode.as_ref());
    put("SERVICE_ACCOUNT", info.service_account.as_ref());
    put("IDLE_TIMEOUT", info.idle_timeout.as_ref());
    put("NETWORK", info.network.as_ref());
    put("ISTIO_VERSION", info.istio_version.as_ref());
    put("CLUSTER_ID", info.cluster_id.as_ref());
    put("MESH_ID", info.mesh_id.as_ref());
    if let Some(certs) = &info.client_certs {
        put("TLS_CLIENT_CERT_CHAIN", Some(&certs.cert_chain));
        put("TLS_CLIENT_KEY", Some(&certs.key));
        put("TLS_CLIENT_ROOT_CERT", Some(&certs.root_cert));
    }
    let object = |fields: std::collections::HashMap<String, Value>| Value {
        kind: Some(Kind::StructValue(Struct { fields })),
    };
    if !info.labels.is_empty() {
        let labels = info.labels.iter().map(|(k, v)| (k.clone(), s(v))).collect();
        fields.insert("LABELS".to_string(), object(labels));
    }
    let mut proxy_config = std::collections::HashMap::new();
    if let Some(n) = info.num_trusted_proxies {
        let number = Value {
            kind: Some(Kind::NumberValue(f64::from(n))),
        };
        let topology = object([("numTrustedProxies".to_string(), number)].into());
        proxy_config.insert("gatewayTopology".to_string(), topology);
    }
    if let Some(t) = &info.proxy_tracing {
        let mut tracing = serde_json::json!({
            "customTags": t.custom_tags,
            "maxPathTagLength": t.max_path_tag_length,
        });
        if let Some(s) = t.sampling {
            tracing["sampling"] = serde_json::json!(s);
        }
        if let Some(e) = t.enable_istio_tags {
            tracing["enableIstioTags"] = serde_json::json!(e);
        }
        proxy_config.insert("tracing".to_string(), crate::resource::json_value(&tracing));
    }
    if !proxy_config.is_empty() {
        fields.insert("PROXY_CONFIG".to_string(), object(proxy_config));
    }
    Node {
        id: info.id.clone(),
        cluster: info.cluster.clone(),
        metadata: Some(Struct {
            fields: fields.into_iter().collect(),
        }),
        locality: info.locality.as_ref().map(|l| CoreLocality {
            region: l.region.clone(),
            zone: l.zone.clone(),
            sub_zone: l.subzone.clone(),
        }),
        extensions: if info.istio_filters {
            vec![envoy_types::pb::envoy::config::core::v3::Extension {
                name: "istio.stats".to_string(),
                ..Default::default()
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    }
}

/// The field `name` of a struct value.
fn struct_field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match &v.kind {
        Some(Kind::StructValue(Struct { fields })) => fields.get(name),
        _ => None,
    }
}

/// A protobuf `Value` as JSON (a number is a float, as protobuf's JSON has it).
fn json(v: &Value) -> serde_json::Value {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => serde_json::Value::Null,
        Some(Kind::BoolValue(b)) => serde_json::Value::Bool(*b),
        Some(Kind::NumberValue(n)) => serde_json::Number::from_f64(*n)
            .map_or(serde_json::Value::Null, serde_json::Value::Number),
        Some(Kind::StringValue(s)) => serde_json::Value::String(s.clone()),
        Some(Kind::ListValue(l)) => serde_json::Value::Array(l.values.iter().map(json).collect()),
        Some(Kind::StructValue(Struct { fields })) => {
            serde_json::Value::Object(fields.iter().map(|(k, v)| (k.clone(), json(v))).collect())
        }
    }
}

fn string_value(v: &Value) -> Option<String> {
    match &v.kind {
        Some(Kind::StringValue(s)) => Some(s.clone()),
        _ => None,
    }
}

/// A `LABELS` struct; non-string values are ignored.
fn labels(v: &Value) -> Labels {
    match &v.kind {
        Some(Kind::StructValue(Struct { fields })) => fields
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), string_value(v)?)))
            .collect(),
        _ => Labels::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value {
            kind: Some(Kind::StringValue(v.to_string())),
        }
    }

    #[test]
    fn a_node_written_back_reads_the_same() {
        let info = NodeInfo {
            id: "sidecar~10.0.0.1~a-1.shop~shop.svc.cluster.local".into(),
            cluster: "a.shop".into(),
            namespace: Some("shop".into()),
            labels: [("app".to_string(), "a".to_string())].into(),
            generator: Some("grpc".into()),
            interception_mode: Some("TPROXY".into()),
            service_account: Some("a".into()),
            idle_timeout: Some("30s".into()),
            locality: Some(axon_model::locality::Locality {
                region: "r".into(),
                zone: "z".into(),
                subzone: "s".into(),
            }),
            network: Some("n1".into()),
            client_certs: None,
            istio_version: Some("1.28.0".into()),
            cluster_id: Some("Kubernetes".into()),
            mesh_id: Some("cluster.local".into()),
            istio_filters: true,
            proxy_tracing: axon_config::mesh::proxy_tracing_of(&serde_json::json!({
                "sampling": 42.0,
                "maxPathTagLength": 64.0,
                "customTags": {"team": {"literal": {"value": "shop"}}},
            })),
            num_trusted_proxies: Some(2),
        };
        assert_eq!(node_info(&to_node(&info)), info);
    }

    #[test]
    fn reads_istio_metadata() {
        let node = Node {
            id: "router~1.1.1.1~gw.ns~ns.svc.cluster.local".into(),
            metadata: Some(Struct {
                fields: [
                    ("NAMESPACE".to_string(), s("ns")),
                    ("IDLE_TIMEOUT".to_string(), s("30s")),
                    (
                        "LABELS".to_string(),
                        Value {
                            kind: Some(Kind::StructValue(Struct {
                                fields: [("istio".to_string(), s("ingressgateway"))].into(),
                            })),
                        },
                    ),
                ]
                .into(),
            }),
            ..Default::default()
        };
        let info = node_info(&node);
        assert_eq!(info.namespace.as_deref(), Some("ns"));
        assert_eq!(info.idle_timeout.as_deref(), Some("30s"));
        assert_eq!(
            info.labels.get("istio").map(String::as_str),
            Some("ingressgateway")
        );
    }
}
