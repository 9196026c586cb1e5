//! axon: istiod's pilot job as an actor system. This crate is the process: the actors, the
//! registries, the HTTP servers, the wiring and the command line, over the layer crates:
//!
//! ```text
//!  axon (actors, registry, http, cli) ─▶ axon-transport ─▶ axon-xds ─▶ axon-model ─▶ axon-config
//!  axon-metrics: a leaf for axon-transport and axon
//! ```
//!
//! A crate names only the crates it depends on, so the compiler refuses an upward import.
//! Inside this crate (`tests/it/layering.rs` checks it):
//!
//! - [`actors`]: the push pipeline, shells over state from `axon-model` and `axon-xds`.
//! - [`registry`]: where configs come from (a directory of YAML, Kubernetes); talks to the
//!   actors by message.
//! - [`http`]: the monitoring and debug servers, which ask actors by message.
//! - [`app`]: the wiring: `app::start(Settings) -> Handles`.
//! - [`limits`]: the actor-limits file; [`cli`]: flags and errors.

pub mod actors;
pub mod app;
pub mod cli;
pub mod http;
pub mod limits;
pub mod registry;
