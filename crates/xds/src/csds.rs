//! Streams' sync state as CSDS reports it (`envoy.service.status.v3.ClientConfig`): the
//! resources of an `istio.io/debug/syncz` answer, istiod's `debugSyncz` and
//! `debugSyncStatus` (`pilot/pkg/xds/statusgen.go`).

use envoy_types::pb::envoy::admin::v3::UpdateFailureState;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::status::v3::client_config::GenericXdsConfig;
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ConfigStatus};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};

use crate::protocol::stream::{ConnectionStatus, TypeStatus};
use crate::resource::Resource;

/// The sync state of every proxy in `statuses` that `namespace` lets the caller see, one
/// CSDS `ClientConfig` each, named by the proxy's id: istiod's `debugSyncz`. Streams that
/// subscribe to nothing (a debug client such as istioctl itself) are not proxies.
pub fn syncz(statuses: &[ConnectionStatus], namespace: Option<&str>) -> Vec<Resource> {
    statuses
        .iter()
        .filter(|s| !s.types.is_empty() && namespace.is_none_or(|ns| s.namespace == ns))
        .map(|s| Resource::new(s.proxy.clone(), &client_config(s)))
        .collect()
}

/// One stream's sync state as CSDS reports it.
pub fn client_config(status: &ConnectionStatus) -> ClientConfig {
    let string = |s: &str| Value {
        kind: Some(Kind::StringValue(s.to_string())),
    };
    let mut metadata = Struct::default();
    metadata
        .fields
        .insert("NAMESPACE".into(), string(&status.namespace));
    if let Some(cluster) = &status.cluster_id {
        metadata.fields.insert("CLUSTER_ID".into(), string(cluster));
    }
    if let Some(version) = &status.istio_version {
        metadata
            .fields
            .insert("ISTIO_VERSION".into(), string(version));
    }
    let mut generic: Vec<GenericXdsConfig> = status.types.iter().map(generic_config).collect();
    generic.sort_by(|a, b| a.type_url.cmp(&b.type_url));
    ClientConfig {
        node: Some(Node {
            id: status.proxy.clone(),
            metadata: Some(metadata),
            ..Default::default()
        }),
        generic_xds_configs: generic,
        ..Default::default()
    }
}

fn generic_config(t: &TypeStatus) -> GenericXdsConfig {
    GenericXdsConfig {
        type_url: t.type_url.clone(),
        version_info: t.version_sent.clone().unwrap_or_default(),
        config_status: config_status(t) as i32,
        error_state: t.last_error.as_ref().map(|e| UpdateFailureState {
            details: e.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// istiod's `debugSyncStatus`: ERROR after a NACK, NOT_SENT before the first response,
/// SYNCED when the last nonce sent is ACKed, STALE otherwise.
pub fn config_status(t: &TypeStatus) -> ConfigStatus {
    if t.last_error.is_some() {
        return ConfigStatus::Error;
    }
    match (&t.nonce_sent, &t.nonce_acked) {
        (None, _) => ConfigStatus::NotSent,
        (Some(sent), Some(acked)) if sent == acked => ConfigStatus::Synced,
        _ => ConfigStatus::Stale,
    }
}
