//! What of the Gateway API kinds axon accepts and does not apply: notes per object.

/// What of a Gateway API object axon accepts and does not apply, as
/// [`crate::config::Config::not_applied`] entries (`path: why`).
pub fn gateway_api_notes(spec: &crate::config::Spec) -> Vec<String> {
    use crate::config::Spec;
    let mut out = Vec::new();
    use crate::gateway_api::ParentReference;
    let mut parents = |refs: &[ParentReference]| {
        for (i, r) in refs.iter().enumerate() {
            let mesh_parent =
                r.is_service() || (r.group == "networking.istio.io" && r.kind == "ServiceEntry");
            if !r.is_gateway() && !mesh_parent {
                out.push(format!(
                    "spec.parentRefs[{i}]: kind {}/{}: a parent of this kind is another controller's (istiod ignores it)",
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
        Spec::KubernetesGateway(g) if g.tls.as_ref().is_some_and(|t| t.backend.is_some()) => {
            out.push("spec.tls.backend: the client certificate is checked (the Gateway's ResolvedRefs) but not presented to backends, as istiod does not (the Gateway API's GatewayBackendClientCertificate is not among its supported features)".into());
        }
        Spec::GatewayClass(c) if c.parameters_ref.is_some() => {
            out.push("spec.parametersRef: a GatewayClass's parameters are not read, as istiod reads none (its class defaults are a ConfigMap labelled gateway.istio.io/defaults-for-class)".into());
        }
        _ => {}
    }
    out
}
