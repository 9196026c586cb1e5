//! Envoy `Node` → [`NodeInfo`]: the id, and the Istio metadata keys axon reads
//! (`NAMESPACE`, `LABELS`, `GENERATOR`, `INTERCEPTION_MODE`, `SERVICE_ACCOUNT`, `IDLE_TIMEOUT`,
//! `NETWORK`, `TLS_CLIENT_CERT_CHAIN`/`TLS_CLIENT_KEY`/`TLS_CLIENT_ROOT_CERT`, `ISTIO_VERSION`,
//! `CLUSTER_ID`),
//! and `locality`.

use envoy_types::pb::envoy::config::core::v3::Node;
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

/// The field `name` of a struct value.
fn struct_field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match &v.kind {
        Some(Kind::StructValue(Struct { fields })) => fields.get(name),
        _ => None,
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
