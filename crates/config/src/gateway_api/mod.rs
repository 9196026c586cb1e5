//! The Kubernetes Gateway API (`gateway.networking.k8s.io`) as users write it: GatewayClass,
//! Gateway, HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, ReferenceGrant and BackendTLSPolicy,
//! in the versions istiod reads (`pkg/config/schema/gvk`), decoded strictly into one shape
//! per kind (the versions differ only in which fields exist) with the CRDs' defaults applied.
//!
//! Layout: [`common`] (references, selectors, header matches), [`gateway`] (GatewayClass,
//! Gateway), [`routes`] (the four route kinds), [`policy`] (ReferenceGrant,
//! BackendTLSPolicy). Validation (the CRDs' OpenAPI constraints and CEL rules) is
//! `crate::validate::gateway_api`'s; the translation to what Envoy is served is
//! `axon-model`'s.

pub mod common;
pub mod gateway;
pub mod policy;
pub mod routes;

pub use common::{
    BackendObjectReference, BackendRef, GROUP, HeaderMatch, HeaderModifier, HttpHeader,
    LabelSelector, LocalObjectReference, MatchType, ObjectReference, ParentReference,
    SecretObjectReference,
};
pub use gateway::{
    AllowedRoutes, FromNamespaces, GatewayAddress, GatewayClassSpec, GatewaySpec, Listener,
    ListenerTls, RouteGroupKind, TlsMode,
};
pub use policy::{BackendTlsPolicySpec, ReferenceGrantSpec};
pub use routes::{
    FilterType, GrpcRouteSpec, HttpBackendRef, HttpPathMatch, HttpRouteFilter, HttpRouteMatch,
    HttpRouteRule, HttpRouteSpec, L4RouteSpec, PathMatchType,
};

use crate::config::ConfigKind;

/// The Gateway API group of the experimental kinds axon does not read (`XBackend`,
/// `XListenerSet`, ...): reported as not served.
pub const EXPERIMENTAL_GROUP: &str = "gateway.networking.x-k8s.io";

/// The controller of the built-in class `istio` (istiod's `ManagedGatewayController`).
pub const ISTIO_CONTROLLER: &str = "istio.io/gateway-controller";

/// The kinds of the group axon reads, with the versions istiod reads each in.
pub const KINDS: [(ConfigKind, &[&str]); 8] = [
    (ConfigKind::GatewayClass, &["v1", "v1beta1", "v1alpha2"]),
    (
        ConfigKind::KubernetesGateway,
        &["v1", "v1beta1", "v1alpha2"],
    ),
    (ConfigKind::HttpRoute, &["v1", "v1beta1", "v1alpha2"]),
    (ConfigKind::GrpcRoute, &["v1", "v1alpha2"]),
    (ConfigKind::TlsRoute, &["v1", "v1alpha2"]),
    (ConfigKind::TcpRoute, &["v1", "v1alpha2"]),
    (ConfigKind::ReferenceGrant, &["v1", "v1beta1", "v1alpha2"]),
    (ConfigKind::BackendTlsPolicy, &["v1"]),
];

/// Kinds of the group that axon (like istiod, without its experimental features) does not
/// serve: such a document is reported as not served.
pub const NOT_SERVED_KINDS: [&str; 2] = ["ListenerSet", "UDPRoute"];

/// The kind of the group named `kind` (`Gateway` is [`ConfigKind::KubernetesGateway`]).
pub fn kind_of(kind: &str) -> Option<ConfigKind> {
    KINDS.iter().map(|(k, _)| *k).find(|k| k.api_kind() == kind)
}

/// The versions `kind` is read in.
pub fn versions_of(kind: ConfigKind) -> &'static [&'static str] {
    KINDS
        .iter()
        .find(|(k, _)| *k == kind)
        .map_or(&[], |(_, v)| v)
}

/// What of a Gateway API object axon accepts and does not apply, as
/// [`crate::config::Config::not_applied`] entries (`path: why`).
pub fn not_applied(spec: &crate::config::Spec) -> Vec<String> {
    use crate::config::Spec;
    let mut out = Vec::new();
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
                if l.tls
                    .as_ref()
                    .is_some_and(|t| !t.certificate_refs.is_empty())
                {
                    out.push(format!(
                        "spec.listeners[{i}].tls.certificateRefs: axon does not serve kubernetes-gateway:// certificates over SDS yet: the listener has no certificate"
                    ));
                }
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
