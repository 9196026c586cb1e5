//! The registries: where configs come from. Each is an actor over a pure index, and each
//! sends the same [`ConfigUpdate`](crate::actors::messages::ConfigUpdate) to the Debouncer
//! through one [`outbox::Outbox`].
//!
//! ```text
//!  config directory ─▶ files::FileRegistry (files::watch::WatchState, own thread) ─┐
//!  API server ─▶ kubernetes::ServiceRegistry (Services, EndpointSlices, Pods)      ├─ Outbox ─ConfigUpdate─▶ Debouncer
//!  API server ─▶ kubernetes::IstioRegistry (networking.istio.io)                   ┤
//!  JWKS endpoints ─▶ jwks (a task: RequestAuthentication keys, as ConfigKind::Jwks) ┘
//! ```
//!
//! Services, EndpointSlices, Pods and Namespaces, from the API server or from documents of
//! the config directory, become ServiceEntries through one pure translation, [`cluster`].
//!
//! Every registry answers [`GetConfigz`](crate::actors::messages::GetConfigz)
//! (`/debug/configz`).

pub mod cluster;
pub mod files;
pub mod jwks;
pub mod kubernetes;
pub mod outbox;
