//! axon: istiod's pilot job as an actor system.
//!
//! The dependency rule (`A → B`: A may import B; `tests/layering.rs` checks it):
//!
//! ```text
//!  cli (wiring) → everything
//!  http, registry ─▶ actors ─▶ transport ─▶ xds ─▶ model
//!  metrics: a leaf for all but model and xds; limits: a leaf for actors and cli
//! ```
//!
//! - [`model`]: pure Istio config, config sets, services, proxies, `PushRequest`,
//!   `PushContext`, `SidecarScope`.
//! - [`xds`]: Envoy's protocol: generators, the per-stream protocol state machine, wire
//!   encoding and decoding. No actix, tokio or tonic.
//! - [`transport`]: ADS over tonic: the service, response bodies, stream admission.
//! - [`actors`]: the push pipeline, shells over state from `model` and `xds`.
//! - [`registry`]: where configs come from (a directory of YAML, Kubernetes).
//! - [`http`]: the monitoring and debug servers, which ask actors by message.
//! - [`limits`], [`metrics`], [`cli`]: the process around them.

pub mod actors;
pub mod cli;
pub mod http;
pub mod limits;
pub mod metrics;
pub mod model;
pub mod registry;
pub mod transport;
pub mod xds;
