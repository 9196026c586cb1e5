//! axon-model: the world view built from config: services, proxies, push requests and the
//! immutable `PushContext`.
//!
//! Pure code: nothing here knows actix, tonic, kube or Envoy's protos. Registries build
//! `axon_config::config::Config`s; the SnapshotBuilder turns them into a
//! [`push_context::PushContext`]; the xDS generators read it for one [`proxy::Proxy`] at a
//! time, through its [`sidecar_scope::SidecarScope`].

pub mod address_index;
pub mod authz;
/// Builders for tests and benchmarks: a context from YAML, a proxy from a node id.
#[doc(hidden)]
pub mod fixtures;
pub mod gateway;
pub mod gateway_api;
pub mod identity;
pub mod locality;
pub mod memo;
pub mod peer_authn;
pub mod proxy;
pub mod push_context;
pub mod push_request;
pub mod request_authn;
pub mod secrets;
pub mod service;
pub mod sidecar_scope;
pub mod telemetry;
pub mod token_review;
pub mod traffic_policy;
pub mod visibility;
