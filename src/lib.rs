//! axon: istiod's pilot job as an actor system.
//!
//! - [`model`]: pure Istio config, services, proxies, `PushRequest` and `PushContext`.
//! - [`xds`]: Envoy's protocol: generators, subscription state, the ADS adapter.
//! - [`actors`]: the push pipeline (registries, Debouncer, SnapshotBuilder, PushQueue,
//!   ConnectionActors).
//! - [`kube`]: Kubernetes as a source (Services and EndpointSlices, Istio config), watched.
//! - [`limits`], [`metrics`], [`monitoring`], [`cli`]: the process around them.

pub mod actors;
pub mod cli;
pub mod debug;
pub mod kube;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod monitoring;
pub mod xds;
