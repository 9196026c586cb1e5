//! Kubernetes as a source of services, Istio config and the Gateway API.
//!
//! ```text
//!  API server ──list/watch──▶ watch.rs (kube watcher tasks, one per kind, with backoff)
//!                               │ WatchEvent<K> (Init / InitApply / InitDone / Apply / Delete),
//!                               │ awaited: a watcher waits for its registry
//!                               ▼
//!  ServiceRegistry  (cluster::services: Service, EndpointSlice, Pod, Namespace → ServiceEntries)
//!  IstioRegistry    (config.rs: Istio and gateway.networking.k8s.io objects → Configs)
//!                               │ ConfigUpdate { source: "kubernetes" | "kubernetes-istio" },
//!                               ▼ through each one's Outbox
//!                           Debouncer
//! ```
//!
//! Beside them, [`peers`] watches the peer Service's EndpointSlices (`--peer-service`) for the
//! Fleet actor, [`root_cert`] keeps the CA's root in the `istio-ca-root-cert` ConfigMap of
//! every namespace (`--ca-dir`), [`ca_secret`] keeps the CA's signing material in istiod's
//! Secrets (`cacerts`, `istio-ca-secret`), and [`webhook_config`] the validating webhook's
//! caBundle (`--webhook-config-name`); [`GatewayDeployer`] applies the ServiceAccount,
//! Deployment and Service of each managed Gateway of class `istio` (`--gateway-deployment`).
//! The Gateway API status writer and the deployer each do their work only while holding
//! their [`lease`] (one replica at a time).
//!
//! The indexes ([`ServiceObjectIndex`](crate::registry::cluster::services::ServiceObjectIndex),
//! in [`crate::registry::cluster`], which the config directory feeds too;
//! [`config::IstioObjectIndex`]) are pure: objects in, a [`ConfigSet`] out, tested without I/O.
//! The actors ([`ServiceRegistry`], [`IstioRegistry`]) only forward watch events to them and
//! send what changed through their [`Outbox`].

pub mod ca_secret;
pub mod config;
mod gateway_deployer;
pub mod gateway_status;
mod istio_registry;
pub mod lease;
pub mod peers;
pub mod root_cert;
mod service_registry;
pub mod token_review;
pub mod watch;
pub mod webhook_config;

use std::sync::Arc;
use std::time::Instant;

use thiserror::Error;

pub use crate::registry::cluster::Settings;
use crate::registry::outbox::{Outbox, Published};
use axon_config::config_set::ConfigSet;

pub use axon_config::config_set::{
    KUBERNETES_ISTIO as ISTIO_SOURCE, KUBERNETES_SERVICES as SERVICES_SOURCE,
};
pub use gateway_deployer::{GatewayDeployer, LEASE as GATEWAY_DEPLOYMENT_LEASE};
pub use istio_registry::IstioRegistry;
pub use service_registry::ServiceRegistry;

/// Publishes a Kubernetes registry's configs through its outbox, and logs what that did.
fn publish(out: &mut Outbox, configs: Arc<ConfigSet>, started: Instant) {
    let n = configs.len();
    match out.publish(configs, started) {
        Published::Initial => {
            tracing::info!(
                source = out.source(),
                configs = n,
                "Kubernetes registry synced"
            )
        }
        Published::Unchanged => {
            tracing::debug!(source = out.source(), "Kubernetes event changed no config")
        }
        Published::Held | Published::Changed => {}
    }
}

/// The watch of Namespaces: with a selector, only the matching ones.
fn namespace_config(settings: &Settings) -> kube::runtime::watcher::Config {
    let config = kube::runtime::watcher::Config::default();
    match &settings.namespace_selector {
        Some(s) => config.labels(&s.to_label_selector()),
        None => config,
    }
}

/// What can go wrong between axon and the API server.
#[derive(Debug, Error)]
pub enum Error {
    #[error("no Kubernetes configuration (in-cluster or kubeconfig): {0}")]
    Config(#[from] kube::config::InferConfigError),
    #[error("Kubernetes client: {0}")]
    Client(#[from] kube::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A Kubernetes client from the in-cluster config, or from `KUBECONFIG` /
/// `~/.kube/config` outside a cluster.
pub async fn client() -> Result<kube::Client> {
    let config = kube::Config::infer().await?;
    Ok(kube::Client::try_from(config)?)
}
