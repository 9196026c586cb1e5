//! The model: Istio config, services, proxies, push requests and the immutable `PushContext`.
//!
//! Pure code: nothing here knows actix, tonic, kube or Envoy's protos. Registries build
//! [`config::Config`]s; the SnapshotBuilder turns them into a [`push_context::PushContext`];
//! the xDS generators read it for one [`proxy::Proxy`] at a time.

pub mod address_index;
pub mod applied;
pub mod config;
pub mod config_set;
pub mod file_set;
/// Builders for tests and benchmarks: a context from YAML, a proxy from a node id.
#[doc(hidden)]
pub mod fixtures;
pub mod gateway;
pub mod host;
pub mod identity;
pub mod istio;
pub mod locality;
pub mod log_safe;
pub mod memo;
pub mod mesh;
pub mod parse;
pub mod proxy;
pub mod push_context;
pub mod push_request;
pub mod secrets;
pub mod service;
pub mod sidecar_scope;
pub mod timestamp;
pub mod token_review;
pub mod traffic_policy;
pub mod validate;
pub mod visibility;
pub mod yaml_bounds;
pub mod yaml_lines;
