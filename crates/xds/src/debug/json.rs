//! Envoy's protos as proto3 JSON, the way Envoy's admin `/config_dump` prints them: field
//! names as in the `.proto` (`connect_timeout`, Envoy's `preserve_proto_field_names`), every
//! `Any` with its `@type` and its fields, default values left out, 64-bit integers as
//! strings, enums by name, well-known types in their JSON forms (`"5s"`).
//!
//! envoy-types generates prost types without serde, so the encoding goes through
//! prost-reflect: a message is encoded, decoded as a `DynamicMessage` of the descriptor set
//! envoy-types ships (`descriptors/envoy-types-0.7.7.bin`, its `src/generated/types.bin`,
//! kept beside this crate because envoy-types does not export it), and serialized. The
//! descriptor set is decoded once, on first use.

use std::sync::OnceLock;

use envoy_types::pb::envoy::admin::v3::ConfigDump;
use prost::{Message, Name};
use prost_reflect::{DescriptorPool, DynamicMessage, ReflectMessage, SerializeOptions};

/// The descriptor set of every proto envoy-types was generated from.
const DESCRIPTORS: &[u8] = include_bytes!("../../descriptors/envoy-types-0.7.7.bin");

/// Why a message could not be written as JSON.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("the descriptor set does not decode: {0}")]
    Descriptors(String),
    #[error("no descriptor for {0}")]
    UnknownType(String),
    #[error("{type_name} does not decode against its descriptor: {error}")]
    Decode { type_name: String, error: String },
    #[error("{type_name} does not serialize: {error}")]
    Serialize { type_name: String, error: String },
    #[error(
        "no config dump section has a repeated field {0:?} (e.g. dynamic_active_clusters, dynamic_listeners, dynamic_route_configs, dynamic_endpoint_configs, dynamic_active_secrets)"
    )]
    NoSuchResource(String),
}

pub type Result<T, E = JsonError> = std::result::Result<T, E>;

fn pool() -> Result<&'static DescriptorPool> {
    static POOL: OnceLock<Result<DescriptorPool, String>> = OnceLock::new();
    POOL.get_or_init(|| DescriptorPool::decode(DESCRIPTORS).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| JsonError::Descriptors(e.clone()))
}

/// `msg` as Envoy's admin API prints it.
pub fn to_json<M: Message + Name>(msg: &M) -> Result<serde_json::Value> {
    encoded_to_json(&M::full_name(), &msg.encode_to_vec())
}

/// The encoded message `bytes` of the protobuf type `type_name` (`envoy.config.cluster.v3.Cluster`)
/// as Envoy's admin API prints it.
pub fn encoded_to_json(type_name: &str, bytes: &[u8]) -> Result<serde_json::Value> {
    serialize(&decode(type_name, bytes)?)
}

fn decode(type_name: &str, bytes: &[u8]) -> Result<DynamicMessage> {
    let descriptor = pool()?
        .get_message_by_name(type_name)
        .ok_or_else(|| JsonError::UnknownType(type_name.to_string()))?;
    DynamicMessage::decode(descriptor, bytes).map_err(|e| JsonError::Decode {
        type_name: type_name.to_string(),
        error: e.to_string(),
    })
}

fn serialize(message: &DynamicMessage) -> Result<serde_json::Value> {
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(true)
        .skip_default_fields(true);
    message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| JsonError::Serialize {
            type_name: message.descriptor().full_name().to_string(),
            error: e.to_string(),
        })
}

/// An Envoy `Node` from its proto3 JSON (either field-name form), as `/debug/nodes` writes
/// it and `axon impact --proxies FILE` reads it.
pub fn node_from_json(text: &str) -> Result<envoy_types::pb::envoy::config::core::v3::Node> {
    let name = "envoy.config.core.v3.Node";
    let descriptor = pool()?
        .get_message_by_name(name)
        .ok_or_else(|| JsonError::UnknownType(name.to_string()))?;
    let mut de = serde_json::Deserializer::from_str(text);
    let message =
        DynamicMessage::deserialize(descriptor, &mut de).map_err(|e| JsonError::Decode {
            type_name: name.to_string(),
            error: e.to_string(),
        })?;
    message.transcode_to().map_err(|e| JsonError::Decode {
        type_name: name.to_string(),
        error: e.to_string(),
    })
}

/// Envoy's `/config_dump?resource=FIELD`: the items of the repeated field `FIELD` of the
/// dump's sections (`dynamic_active_clusters`, ...), each with its own `@type`, as
/// `{"configs": [...]}`.
pub fn select_resource(dump: &ConfigDump, field: &str) -> Result<serde_json::Value> {
    let mut found = false;
    let mut items = Vec::new();
    for section in &dump.configs {
        let type_name = section.type_url.rsplit('/').next().unwrap_or_default();
        let message = decode(type_name, &section.value)?;
        let Some(descriptor) = message.descriptor().get_field_by_name(field) else {
            continue;
        };
        if !descriptor.is_list() {
            continue;
        }
        found = true;
        let Some(list) = message.get_field(&descriptor).as_list().map(<[_]>::to_vec) else {
            continue;
        };
        for item in list {
            let Some(item) = item.as_message() else {
                continue;
            };
            let mut json = serialize(item)?;
            if let serde_json::Value::Object(map) = &mut json {
                let type_url = format!("type.googleapis.com/{}", item.descriptor().full_name());
                let mut typed = serde_json::Map::new();
                typed.insert("@type".into(), type_url.into());
                typed.extend(std::mem::take(map));
                *map = typed;
            }
            items.push(json);
        }
    }
    if !found {
        return Err(JsonError::NoSuchResource(field.to_string()));
    }
    Ok(serde_json::json!({ "configs": items }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
    use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
    use envoy_types::pb::google::protobuf::Duration;
    use serde_json::json;

    #[test]
    fn writes_proto_field_names_wellknown_types_and_enums_as_envoy_does() {
        let cluster = Cluster {
            name: "outbound|80||a.default.svc.cluster.local".into(),
            connect_timeout: Some(Duration {
                seconds: 10,
                nanos: 0,
            }),
            per_connection_buffer_limit_bytes: Some(
                envoy_types::pb::google::protobuf::UInt32Value { value: 32768 },
            ),
            lb_policy: 1, // LEAST_REQUEST
            ..Default::default()
        };
        assert_eq!(
            to_json(&cluster).unwrap(),
            json!({
                "name": "outbound|80||a.default.svc.cluster.local",
                "connect_timeout": "10s",
                "per_connection_buffer_limit_bytes": 32768,
                "lb_policy": "LEAST_REQUEST",
            })
        );
    }

    #[test]
    fn an_any_names_its_type_and_shows_its_fields() {
        let filter = TypedExtensionConfig {
            name: "envoy.filters.http.router".into(),
            typed_config: Some(envoy_types::util::pack_any(Router {
                suppress_envoy_headers: true,
                ..Default::default()
            })),
        };
        assert_eq!(
            to_json(&filter).unwrap(),
            json!({
                "name": "envoy.filters.http.router",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
                    "suppress_envoy_headers": true,
                },
            })
        );
    }

    #[test]
    fn an_unknown_type_is_an_error_not_a_panic() {
        assert!(matches!(
            encoded_to_json("no.such.Type", b""),
            Err(JsonError::UnknownType(_))
        ));
        assert!(matches!(
            encoded_to_json("envoy.config.cluster.v3.Cluster", b"\xff\xff"),
            Err(JsonError::Decode { .. })
        ));
    }
}
