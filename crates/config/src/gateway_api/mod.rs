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

/// The Gateway API group of the experimental kinds axon does not read (`XBackend`,
/// `XListenerSet`, ...): reported as not served.
pub const EXPERIMENTAL_GROUP: &str = "gateway.networking.x-k8s.io";

/// The controller of the built-in class `istio` (istiod's `ManagedGatewayController`).
pub const ISTIO_CONTROLLER: &str = "istio.io/gateway-controller";

/// Kinds of the group that axon (like istiod, without its experimental features) does not
/// serve: such a document is reported as not served.
pub const NOT_SERVED_KINDS: [&str; 2] = ["ListenerSet", "UDPRoute"];
