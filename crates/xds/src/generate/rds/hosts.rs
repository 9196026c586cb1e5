//! How a VirtualService's destination hosts read ([`Hosts`]), for the route actions and
//! their hash policies.

use axon_config::host;

/// How a VirtualService's destination hosts read: short names resolved in its namespace,
/// except under Gateway API semantics, where they are taken as they are (istiod resolves no
/// shortname of such a VirtualService, `mergeVirtualServices`: a denied backend's empty
/// host stays empty).
#[derive(Clone, Copy)]
pub(crate) struct Hosts<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) gateway_semantics: bool,
}

impl Hosts<'_> {
    pub(crate) fn resolve(&self, h: &str) -> String {
        if self.gateway_semantics {
            h.to_string()
        } else {
            host::resolve(h, self.namespace)
        }
    }
}
