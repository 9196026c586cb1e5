//! What of the Gateway API kinds axon accepts and does not apply: notes per object.

/// What of a Gateway API object axon accepts and does not apply, as
/// [`crate::config::Config::not_applied`] entries (`path: why`).
pub fn gateway_api_notes(spec: &crate::config::Spec) -> Vec<String> {
    use crate::config::Spec;
    let mut out = Vec::new();
    use crate::gateway_api::{FromNamespaces, ParentReference};
    let mut parents = |refs: &[ParentReference]| {
        for (i, r) in refs.iter().enumerate() {
            if !r.is_gateway() {
                out.push(format!(
                    "spec.parentRefs[{i}]: a parent of kind {}/{} (a mesh route) is not served by axon yet",
                    r.group, r.kind
                ));
            }
        }
    };
    match spec {
        Spec::HttpRoute(r) => {
            parents(&r.parent_refs);
            for (i, rule) in r.rules.iter().enumerate() {
                if rule.session_persistence.is_some() {
                    out.push(format!("spec.rules[{i}].sessionPersistence"));
                }
            }
        }
        Spec::GrpcRoute(r) => {
            parents(&r.parent_refs);
            for (i, rule) in r.rules.iter().enumerate() {
                if rule.session_persistence.is_some() {
                    out.push(format!("spec.rules[{i}].sessionPersistence"));
                }
            }
        }
        Spec::TlsRoute(r) | Spec::TcpRoute(r) => parents(&r.parent_refs),
        Spec::KubernetesGateway(g) => {
            if g.infrastructure.is_some() {
                out.push("spec.infrastructure: axon deploys no gateway yet".into());
            }
            if let Some(tls) = &g.tls {
                if tls.frontend.is_some() {
                    out.push("spec.tls.frontend".into());
                }
                if tls.backend.is_some() {
                    out.push("spec.tls.backend".into());
                }
            }
            for (i, l) in g.listeners.iter().enumerate() {
                if l.allowed_routes.namespaces.from == FromNamespaces::Selector {
                    out.push(format!(
                        "spec.listeners[{i}].allowedRoutes.namespaces.selector: namespace labels are not read: only kubernetes.io/metadata.name is matched"
                    ));
                }
            }
        }
        Spec::GatewayClass(c) if c.parameters_ref.is_some() => {
            out.push("spec.parametersRef".into());
        }
        Spec::BackendTlsPolicy(_) => {
            out.push("spec: BackendTLSPolicy is not applied by axon yet".into())
        }
        _ => {}
    }
    out
}
