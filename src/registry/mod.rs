//! The registries: where configs come from. Each is an actor over a pure index, and each
//! sends the same [`ConfigUpdate`](crate::actors::messages::ConfigUpdate) to the Debouncer
//! through one [`outbox::Outbox`].
//!
//! ```text
//!  config directory ─▶ files::FileRegistry (files::watch::WatchState, own thread) ─┐
//!  API server ─▶ kubernetes::ServiceRegistry (Services, EndpointSlices, Pods)      ├─ Outbox ─ConfigUpdate─▶ Debouncer
//!  API server ─▶ kubernetes::IstioRegistry (networking.istio.io)                   ┘
//! ```
//!
//! Every registry answers [`GetConfigz`] (`/debug/configz`).

pub mod files;
pub mod kubernetes;
pub mod outbox;

use actix::prelude::*;

/// The configs a registry holds and the problems it found (`/debug/configz`).
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetConfigz;
