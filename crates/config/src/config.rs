//! The config envelope: what kind of Istio object, which one, and its typed spec.
//!
//! Owns [`ConfigKind`], [`ConfigKey`] and [`Config`]. Registries produce `Config`s; the
//! `PushRequest` names changed ones by `ConfigKey`; the `PushContext` indexes them by kind.

use std::fmt;

use serde::Serialize;

use super::istio::{
    AuthorizationPolicy, DestinationRule, FetchedJwks, Gateway, Labels, PeerAuthentication,
    RequestAuthentication, ServiceEntry, Sidecar, Telemetry, VirtualService, WorkloadEntry,
    WorkloadGroup,
};
use crate::gateway_api::{
    BackendTlsPolicySpec, GatewayClassSpec, GatewaySpec, GrpcRouteSpec, HttpRouteSpec, L4RouteSpec,
    ReferenceGrantSpec,
};
use crate::secret::TlsSecret;

/// The API group of every kind axon reads.
pub const ISTIO_NETWORKING_GROUP: &str = "networking.istio.io";
/// Versions of that group that share one schema.
pub const ISTIO_NETWORKING_VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha3"];
/// The API group of Istio's security kinds.
pub const ISTIO_SECURITY_GROUP: &str = "security.istio.io";
/// Versions of that group that share one schema.
pub const ISTIO_SECURITY_VERSIONS: [&str; 2] = ["v1", "v1beta1"];
/// The API group of Istio's Telemetry.
pub const ISTIO_TELEMETRY_GROUP: &str = "telemetry.istio.io";
/// Versions of that group that share one schema.
pub const ISTIO_TELEMETRY_VERSIONS: [&str; 2] = ["v1", "v1alpha1"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ConfigKind {
    ServiceEntry,
    WorkloadEntry,
    WorkloadGroup,
    VirtualService,
    DestinationRule,
    Gateway,
    Sidecar,
    /// `security.istio.io`: not of the networking group, so not in [`ConfigKind::ALL`].
    PeerAuthentication,
    /// `security.istio.io`.
    AuthorizationPolicy,
    /// `security.istio.io`: not of the networking group, so not in [`ConfigKind::ALL`].
    RequestAuthentication,
    /// `telemetry.istio.io`: not of the networking group, so not in [`ConfigKind::ALL`].
    Telemetry,
    /// A JWKS axon fetched for a RequestAuthentication's `jwksUri` (or its issuer's OpenID
    /// discovery), sent by the binary's JWKS resolver; no user writes it. Its key: namespace
    /// empty, name the URL fetched first ([`crate::istio::JwksSource::url`]).
    Jwks,
    /// A Kubernetes `v1` Secret holding TLS material (`axon_model::secrets`); not of the
    /// networking group, so not in [`ConfigKind::ALL`].
    Secret,
    /// `gateway.networking.k8s.io` (the Gateway API, [`crate::gateway_api`]): not of the
    /// networking group, so not in [`ConfigKind::ALL`].
    GatewayClass,
    /// The Gateway API's `Gateway` (istiod's gvk `KubernetesGateway`), named so beside
    /// Istio's [`ConfigKind::Gateway`].
    KubernetesGateway,
    HttpRoute,
    GrpcRoute,
    TlsRoute,
    TcpRoute,
    ReferenceGrant,
    BackendTlsPolicy,
    /// A Kubernetes Namespace, its labels in [`Config::labels`] (the Gateway API's
    /// `allowedRoutes.namespaces.selector` reads them); made by the registries of Kubernetes
    /// objects, not written as a config. Its key: namespace empty, name the Namespace's.
    Namespace,
    /// A Kubernetes `v1` ConfigMap: one with a `ca.crt` is held as a config of kind
    /// [`ConfigKind::Secret`] named `configmap/NAME` (`parse::parse_config_map`), any other
    /// as a config of this kind that says only that it exists (a Gateway's
    /// `infrastructure.parametersRef` names one; its data is the gateway deployer's).
    ConfigMap,
}

impl ConfigKind {
    /// The kinds of the networking group.
    pub const ALL: [ConfigKind; 7] = [
        ConfigKind::ServiceEntry,
        ConfigKind::WorkloadEntry,
        ConfigKind::WorkloadGroup,
        ConfigKind::VirtualService,
        ConfigKind::DestinationRule,
        ConfigKind::Gateway,
        ConfigKind::Sidecar,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConfigKind::ServiceEntry => "ServiceEntry",
            ConfigKind::WorkloadEntry => "WorkloadEntry",
            ConfigKind::WorkloadGroup => "WorkloadGroup",
            ConfigKind::VirtualService => "VirtualService",
            ConfigKind::DestinationRule => "DestinationRule",
            ConfigKind::Gateway => "Gateway",
            ConfigKind::Sidecar => "Sidecar",
            ConfigKind::PeerAuthentication => "PeerAuthentication",
            ConfigKind::AuthorizationPolicy => "AuthorizationPolicy",
            ConfigKind::RequestAuthentication => "RequestAuthentication",
            ConfigKind::Telemetry => "Telemetry",
            ConfigKind::Jwks => "Jwks",
            ConfigKind::Secret => "Secret",
            ConfigKind::GatewayClass => "GatewayClass",
            ConfigKind::KubernetesGateway => "KubernetesGateway",
            ConfigKind::HttpRoute => "HTTPRoute",
            ConfigKind::GrpcRoute => "GRPCRoute",
            ConfigKind::TlsRoute => "TLSRoute",
            ConfigKind::TcpRoute => "TCPRoute",
            ConfigKind::ReferenceGrant => "ReferenceGrant",
            ConfigKind::BackendTlsPolicy => "BackendTLSPolicy",
            ConfigKind::Namespace => "Namespace",
            ConfigKind::ConfigMap => "ConfigMap",
        }
    }

    /// The `kind` users write: [`Self::as_str`], but `Gateway` for the Gateway API's.
    pub fn api_kind(self) -> &'static str {
        match self {
            ConfigKind::KubernetesGateway => "Gateway",
            other => other.as_str(),
        }
    }

    /// The kinds of the Gateway API axon reads, with the versions istiod reads each in
    /// (`pkg/config/schema/gvk`), its first the preferred.
    pub const GATEWAY_API: [(ConfigKind, &'static [&'static str]); 8] = [
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

    /// The Gateway API kind named `kind` as users write it (`Gateway` is
    /// [`ConfigKind::KubernetesGateway`]).
    pub fn from_gateway_api_kind(kind: &str) -> Option<ConfigKind> {
        Self::GATEWAY_API
            .iter()
            .map(|(k, _)| *k)
            .find(|k| k.api_kind() == kind)
    }

    /// The versions a Gateway API kind is read in (none for other kinds).
    pub fn gateway_api_versions(self) -> &'static [&'static str] {
        Self::GATEWAY_API
            .iter()
            .find(|(k, _)| *k == self)
            .map_or(&[], |(_, v)| v)
    }

    /// Whether it is a kind of the Gateway API.
    pub fn is_gateway_api(self) -> bool {
        matches!(
            self,
            ConfigKind::GatewayClass
                | ConfigKind::KubernetesGateway
                | ConfigKind::HttpRoute
                | ConfigKind::GrpcRoute
                | ConfigKind::TlsRoute
                | ConfigKind::TcpRoute
                | ConfigKind::ReferenceGrant
                | ConfigKind::BackendTlsPolicy
        )
    }

    pub fn from_kind(kind: &str) -> Option<ConfigKind> {
        ConfigKind::ALL.into_iter().find(|k| k.as_str() == kind)
    }
}

impl fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names one config object: `kind/namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ConfigKey {
    pub kind: ConfigKind,
    pub namespace: String,
    pub name: String,
}

impl ConfigKey {
    pub fn new(kind: ConfigKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ConfigKey {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.kind, self.namespace, self.name)
    }
}

/// The typed spec of a config object.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Spec {
    ServiceEntry(ServiceEntry),
    WorkloadEntry(WorkloadEntry),
    WorkloadGroup(WorkloadGroup),
    VirtualService(VirtualService),
    DestinationRule(DestinationRule),
    Gateway(Gateway),
    Sidecar(Sidecar),
    PeerAuthentication(PeerAuthentication),
    AuthorizationPolicy(AuthorizationPolicy),
    RequestAuthentication(RequestAuthentication),
    Telemetry(Telemetry),
    Jwks(FetchedJwks),
    Secret(TlsSecret),
    GatewayClass(GatewayClassSpec),
    KubernetesGateway(Box<GatewaySpec>),
    HttpRoute(HttpRouteSpec),
    GrpcRoute(GrpcRouteSpec),
    TlsRoute(L4RouteSpec),
    TcpRoute(L4RouteSpec),
    ReferenceGrant(ReferenceGrantSpec),
    BackendTlsPolicy(BackendTlsPolicySpec),
    /// A Namespace: its labels are the config's.
    Namespace(NamespaceInfo),
    /// A ConfigMap without a CA: that it exists.
    ConfigMap(ConfigMapInfo),
}

/// What axon holds of a ConfigMap without a CA: nothing but that it exists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigMapInfo {}

/// What axon holds of a Namespace beyond its labels: nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NamespaceInfo {}

impl Spec {
    pub fn kind(&self) -> ConfigKind {
        match self {
            Spec::ServiceEntry(_) => ConfigKind::ServiceEntry,
            Spec::WorkloadEntry(_) => ConfigKind::WorkloadEntry,
            Spec::WorkloadGroup(_) => ConfigKind::WorkloadGroup,
            Spec::VirtualService(_) => ConfigKind::VirtualService,
            Spec::DestinationRule(_) => ConfigKind::DestinationRule,
            Spec::Gateway(_) => ConfigKind::Gateway,
            Spec::Sidecar(_) => ConfigKind::Sidecar,
            Spec::PeerAuthentication(_) => ConfigKind::PeerAuthentication,
            Spec::AuthorizationPolicy(_) => ConfigKind::AuthorizationPolicy,
            Spec::RequestAuthentication(_) => ConfigKind::RequestAuthentication,
            Spec::Telemetry(_) => ConfigKind::Telemetry,
            Spec::Jwks(_) => ConfigKind::Jwks,
            Spec::Secret(_) => ConfigKind::Secret,
            Spec::GatewayClass(_) => ConfigKind::GatewayClass,
            Spec::KubernetesGateway(_) => ConfigKind::KubernetesGateway,
            Spec::HttpRoute(_) => ConfigKind::HttpRoute,
            Spec::GrpcRoute(_) => ConfigKind::GrpcRoute,
            Spec::TlsRoute(_) => ConfigKind::TlsRoute,
            Spec::TcpRoute(_) => ConfigKind::TcpRoute,
            Spec::ReferenceGrant(_) => ConfigKind::ReferenceGrant,
            Spec::BackendTlsPolicy(_) => ConfigKind::BackendTlsPolicy,
            Spec::Namespace(_) => ConfigKind::Namespace,
            Spec::ConfigMap(_) => ConfigKind::ConfigMap,
        }
    }
}

/// One Istio config object, as a registry holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    pub key: ConfigKey,
    pub labels: Labels,
    /// `metadata.creationTimestamp`, in nanoseconds since the Unix epoch; `None` when the
    /// object has none (a file may not), which istiod's order puts first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<i64>,
    pub spec: Spec,
    /// The paths of the fields it sets that axon accepts but does not apply
    /// (`spec.http[0].retries`), from [`super::istio::schema`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_applied: Vec<String>,
}

impl Config {
    pub fn kind(&self) -> ConfigKind {
        self.key.kind
    }
    pub fn namespace(&self) -> &str {
        &self.key.namespace
    }
    pub fn name(&self) -> &str {
        &self.key.name
    }

    /// istiod's `configCompareByCreationTime`: by creation time, then name, then namespace.
    pub fn creation_order(&self, other: &Config) -> std::cmp::Ordering {
        (self.created, self.name(), self.namespace()).cmp(&(
            other.created,
            other.name(),
            other.namespace(),
        ))
    }
}
