//! Backends (istiod's `buildDestination`): a Service backend is its hostname and port; a
//! reference to another namespace needs a ReferenceGrant (for routes bound to Gateways).
//! What cannot be resolved stays in place, so that its share of the traffic goes to a
//! cluster that does not exist and Envoy answers 500 for it, as the spec requires.

use axon_config::config::{Config, ConfigKind};
use axon_config::gateway_api::BackendObjectReference;
use axon_config::istio::{Destination, PortSelector};

use super::Inputs;

/// Why a backend was not resolved: soft (the destination is kept, the route is served) or
/// hard (the whole route is not served).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BackendError {
    /// `BackendNotFound`, `RefNotPermitted`, `InvalidKind`: the destination stays.
    Soft(String),
    /// `InvalidDestination`: the route is dropped.
    Hard(String),
}

/// The destination of `to` for a route `route` of kind `kind`; `enforce_grants` for routes
/// bound to Gateways (mesh routes do not check ReferenceGrants).
pub(crate) fn destination(
    inputs: &Inputs,
    route: &Config,
    kind: ConfigKind,
    to: &BackendObjectReference,
    enforce_grants: bool,
) -> (Destination, Option<BackendError>) {
    let ns = to
        .namespace
        .clone()
        .unwrap_or_else(|| route.namespace().to_string());
    if enforce_grants
        && !inputs.reference_allowed(
            kind,
            route.namespace(),
            (&to.group, &to.kind, &to.name),
            &ns,
        )
    {
        return (
            Destination::default(),
            Some(BackendError::Soft(format!(
                "backendRef {}/{ns} not accessible to a {} in namespace {:?} (missing a ReferenceGrant?) (RefNotPermitted)",
                to.name,
                kind.api_kind(),
                route.namespace()
            ))),
        );
    }
    let port = to.port.map(|number| PortSelector { number });
    match (to.group.as_str(), to.kind.as_str()) {
        ("", "Service") => {
            if to.name.contains('.') {
                return (
                    Destination::default(),
                    Some(BackendError::Hard(
                        "service name invalid; the name of the Service must be used, not the hostname. (InvalidDestination)".into(),
                    )),
                );
            }
            let host = axon_config::host::resolve(&to.name, &ns);
            let error = (!inputs.services.contains_key(&host)).then(|| {
                BackendError::Soft(format!("backend({host}) not found (BackendNotFound)"))
            });
            (
                Destination {
                    host,
                    subset: String::new(),
                    port,
                },
                error,
            )
        }
        ("networking.istio.io", "Hostname") => {
            if to.namespace.is_some() {
                return (
                    Destination::default(),
                    Some(BackendError::Hard(
                        "namespace may not be set with Hostname type (InvalidDestination)".into(),
                    )),
                );
            }
            let error = (!inputs.services.contains_key(&to.name)).then(|| {
                BackendError::Soft(format!("backend({}) not found (BackendNotFound)", to.name))
            });
            (
                Destination {
                    host: to.name.clone(),
                    subset: String::new(),
                    port,
                },
                error,
            )
        }
        (group, kind) => (
            Destination::default(),
            Some(BackendError::Soft(format!(
                "referencing unsupported backendRef: group {group:?} kind {kind:?} (InvalidKind)"
            ))),
        ),
    }
}
