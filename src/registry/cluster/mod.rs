//! A cluster's state as axon reads it: `v1` Services, Pods and Namespaces and
//! `discovery.k8s.io/v1` EndpointSlices in, one synthetic ServiceEntry per Service out.
//!
//! Pure (no I/O, no actix): the one translation both sources of such objects use.
//!
//! ```text
//!  API server ─watch─▶ kubernetes::ServiceRegistry ─┐ apply / delete / init … (k8s-openapi objects)
//!  config dir ─read──▶ files::watch::WatchState ────┴─▶ services::ServiceObjectIndex ─▶ ServiceEntry Configs
//!                      (objects::DirectoryObjects)
//! ```
//!
//! [`gateway_deployment`] renders the objects of a managed Gateway, patched by istiod's
//! [`overlay`]s.
//!
//! [`services`] is the index (with [`namespaces`], the `--namespace-selector` filter the
//! Namespaces' labels feed; [`namespace_labels`], those labels held as Namespace configs;
//! [`store`], watch-list semantics; [`protocol`], a port's protocol); [`objects`] decodes the objects of a config directory into their k8s-openapi
//! types and feeds them to the index.

pub mod gateway_deployment;
pub mod namespace_labels;
pub mod namespaces;
pub mod objects;
pub mod overlay;
pub mod protocol;
pub mod services;
pub mod store;

/// How a cluster's objects are translated and filtered, wherever they are read from.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The cluster domain of Service hostnames (`NAME.NAMESPACE.svc.DOMAIN`).
    pub cluster_domain: String,
    /// Only namespaces whose labels match are read (istiod's discoverySelectors).
    pub namespace_selector: Option<namespaces::NamespaceSelector>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cluster_domain: axon_config::host::DEFAULT_CLUSTER_DOMAIN.to_string(),
            namespace_selector: None,
        }
    }
}
