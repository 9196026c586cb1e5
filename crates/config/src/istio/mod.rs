//! Istio API types, as serde structs.
//!
//! Owns the shapes of the `networking.istio.io` kinds that axon reads (`v1`, `v1beta1` and
//! `v1alpha3` share one schema), and of `security.istio.io`'s PeerAuthentication,
//! AuthorizationPolicy and RequestAuthentication, and `telemetry.istio.io`'s Telemetry. Fields that Istio has and axon does not use are accepted and
//! ignored by serde; what is here is what the generators and the validator read.

mod authorization_policy;
mod destination_rule;
mod gateway;
mod peer_authentication;
mod request_authentication;
pub mod schema;
mod service_entry;
mod sidecar;
mod telemetry;
pub mod traffic_policy;
mod virtual_service;
mod workload_entry;

pub use authorization_policy::{
    Action as AuthzAction, AuthorizationPolicy, Condition as AuthzCondition, Operation,
    PolicyTargetRef, Rule as AuthzRule, Source as AuthzSource,
};
pub use destination_rule::{DestinationRule, MatchLabels, Subset};
pub use gateway::{
    Gateway, GatewayApiSelection, GatewayPort, Server, ServerTlsMode, ServerTlsSettings,
    TlsCertificate,
};
pub use peer_authentication::{MtlsMode, PeerAuthentication, PeerMtls};
pub use request_authentication::{
    ClaimToHeader, FetchedJwks, GATEWAY_API_GROUP, JwksSource, JwtHeader, JwtRule,
    OPENID_DISCOVERY_SUFFIX, PolicyTargetReference, RequestAuthentication,
};
pub use service_entry::{Location, Resolution, ServiceEntry, ServicePort, WorkloadSelector};
pub use sidecar::{CaptureMode, IstioEgressListener, Sidecar, SidecarPort};
pub use telemetry::{
    AccessLogging, CustomTag, ISTIO_METRICS, LogFilter, MetricSelector, Metrics, MetricsOverrides,
    ModeSelector, ProviderRef, TagOverride, TagSource, TagValue, Telemetry, Tracing, WorkloadMode,
};
pub use traffic_policy::{PolicyDoc, TrafficPolicy};
pub use virtual_service::{
    CorsPolicy, Delegate, Destination, FaultAbort, FaultDelay, GRPC_STATUS_CODES, HeaderOperations,
    Headers, HttpBody, HttpDirectResponse, HttpFault, HttpMatchRequest, HttpMirrorPolicy,
    HttpRedirect, HttpRetry, HttpRewrite, HttpRoute, HttpRouteDestination, JWT_CLAIM_HEADER,
    L4MatchAttributes, Percent, PortSelector, RegexRewrite, RouteDestination, RouteSemantics,
    StringMatch, TcpRoute, TlsMatchAttributes, TlsRoute, VirtualService, routing_claim,
};
pub use workload_entry::{WorkloadEntry, WorkloadGroup};

use std::collections::BTreeMap;

/// Label maps are ordered so that equal specs compare and hash the same.
pub type Labels = BTreeMap<String, String>;
