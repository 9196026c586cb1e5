//! `HTTPRoute`, `GRPCRoute`, `TLSRoute` and `TCPRoute` (`apis/v1/httproute_types.go`,
//! `grpcroute_types.go`, `tlsroute_types.go`, `tcproute_types.go`), with the CRD defaults:
//! an HTTPRoute without rules has one rule matching every path, a match without a path
//! matches the prefix `/`, a redirect answers 302, a mirror's fraction is out of 100.

use serde::{Deserialize, Serialize};

use super::common::{
    BackendObjectReference, BackendRef, HeaderMatch, HeaderModifier, LocalObjectReference,
    MatchType, ParentReference, SessionPersistence, one, service_kind,
};

/// `HTTPRouteSpec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default = "default_http_rules")]
    pub rules: Vec<HttpRouteRule>,
    /// Experimental: whether the route attaches to the default Gateways.
    pub use_default_gateways: Option<String>,
}

fn default_http_rules() -> Vec<HttpRouteRule> {
    vec![HttpRouteRule {
        name: None,
        matches: default_matches(),
        filters: Vec::new(),
        backend_refs: Vec::new(),
        timeouts: None,
        retry: None,
        session_persistence: None,
    }]
}

fn default_matches() -> Vec<HttpRouteMatch> {
    vec![HttpRouteMatch::default()]
}

/// `HTTPRouteRule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRule {
    pub name: Option<String>,
    #[serde(default = "default_matches")]
    pub matches: Vec<HttpRouteMatch>,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    pub timeouts: Option<HttpRouteTimeouts>,
    pub retry: Option<HttpRouteRetry>,
    pub session_persistence: Option<SessionPersistence>,
}

/// `HTTPRouteMatch`: every part given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteMatch {
    #[serde(default)]
    pub path: HttpPathMatch,
    #[serde(default)]
    pub headers: Vec<HeaderMatch>,
    #[serde(default)]
    pub query_params: Vec<HeaderMatch>,
    pub method: Option<String>,
}

/// `HTTPPathMatch`; the default is the prefix `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpPathMatch {
    #[serde(default, rename = "type")]
    pub match_type: PathMatchType,
    #[serde(default = "slash")]
    pub value: String,
}

impl Default for HttpPathMatch {
    fn default() -> Self {
        HttpPathMatch {
            match_type: PathMatchType::PathPrefix,
            value: slash(),
        }
    }
}

fn slash() -> String {
    "/".to_string()
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathMatchType {
    Exact,
    #[default]
    PathPrefix,
    RegularExpression,
}

/// `HTTPRouteFilter`: `type` names the one field that is set (validated).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteFilter {
    #[serde(rename = "type")]
    pub filter_type: FilterType,
    pub request_header_modifier: Option<HeaderModifier>,
    pub response_header_modifier: Option<HeaderModifier>,
    pub request_mirror: Option<RequestMirror>,
    pub request_redirect: Option<RequestRedirect>,
    pub url_rewrite: Option<UrlRewrite>,
    pub cors: Option<Cors>,
    pub external_auth: Option<serde_json::Value>,
    pub extension_ref: Option<LocalObjectReference>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FilterType {
    RequestHeaderModifier,
    ResponseHeaderModifier,
    RequestMirror,
    RequestRedirect,
    URLRewrite,
    ExtensionRef,
    CORS,
    ExternalAuth,
}

impl FilterType {
    /// The filter's field name, as the CEL rules name it.
    pub fn field(self) -> &'static str {
        match self {
            FilterType::RequestHeaderModifier => "requestHeaderModifier",
            FilterType::ResponseHeaderModifier => "responseHeaderModifier",
            FilterType::RequestMirror => "requestMirror",
            FilterType::RequestRedirect => "requestRedirect",
            FilterType::URLRewrite => "urlRewrite",
            FilterType::ExtensionRef => "extensionRef",
            FilterType::CORS => "cors",
            FilterType::ExternalAuth => "externalAuth",
        }
    }
}

/// `HTTPRequestMirrorFilter`: `percent` or `fraction` of the requests (all when neither).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestMirror {
    pub backend_ref: BackendObjectReference,
    pub percent: Option<u32>,
    pub fraction: Option<Fraction>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Fraction {
    pub numerator: u32,
    #[serde(default = "hundred")]
    pub denominator: u32,
}

fn hundred() -> u32 {
    100
}

/// `HTTPRequestRedirectFilter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRedirect {
    pub scheme: Option<String>,
    pub hostname: Option<String>,
    pub path: Option<HttpPathModifier>,
    pub port: Option<u32>,
    #[serde(default = "found")]
    pub status_code: u32,
}

fn found() -> u32 {
    302
}

/// `HTTPURLRewriteFilter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UrlRewrite {
    pub hostname: Option<String>,
    pub path: Option<HttpPathModifier>,
}

/// `HTTPPathModifier`: `type` names the one value that is set (validated).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpPathModifier {
    #[serde(rename = "type")]
    pub modifier_type: PathModifierType,
    pub replace_full_path: Option<String>,
    pub replace_prefix_match: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PathModifierType {
    ReplaceFullPath,
    ReplacePrefixMatch,
}

/// `HTTPCORSFilter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cors {
    #[serde(default)]
    pub allow_origins: Vec<String>,
    pub allow_credentials: Option<bool>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    #[serde(default = "five")]
    pub max_age: u32,
}

fn five() -> u32 {
    5
}

/// `HTTPBackendRef` (also GRPCRoute's `GRPCBackendRef`): a weighted backend with filters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpBackendRef {
    #[serde(default)]
    pub group: String,
    #[serde(default = "service_kind")]
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub port: Option<u32>,
    #[serde(default = "one")]
    pub weight: u32,
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
}

impl HttpBackendRef {
    pub fn object(&self) -> BackendObjectReference {
        BackendObjectReference {
            group: self.group.clone(),
            kind: self.kind.clone(),
            name: self.name.clone(),
            namespace: self.namespace.clone(),
            port: self.port,
        }
    }
}

/// `HTTPRouteTimeouts`: Gateway API durations (`1s`, `500ms`; `0s` disables).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteTimeouts {
    pub request: Option<String>,
    pub backend_request: Option<String>,
}

/// `HTTPRouteRetry`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRetry {
    #[serde(default)]
    pub codes: Vec<u32>,
    pub attempts: Option<u32>,
    pub backoff: Option<String>,
}

/// `GRPCRouteSpec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<GrpcRouteRule>,
    pub use_default_gateways: Option<String>,
}

/// `GRPCRouteRule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub matches: Vec<GrpcRouteMatch>,
    /// Of the HTTP filter types, only the header modifiers, the mirror and `ExtensionRef`
    /// are GRPCRoute's (validated).
    #[serde(default)]
    pub filters: Vec<HttpRouteFilter>,
    #[serde(default)]
    pub backend_refs: Vec<HttpBackendRef>,
    pub session_persistence: Option<SessionPersistence>,
}

/// `GRPCRouteMatch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteMatch {
    pub method: Option<GrpcMethodMatch>,
    #[serde(default)]
    pub headers: Vec<HeaderMatch>,
}

/// `GRPCMethodMatch`: a service, a method or both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcMethodMatch {
    #[serde(default, rename = "type")]
    pub match_type: MatchType,
    pub service: Option<String>,
    pub method: Option<String>,
}

/// `TLSRouteSpec` and `TCPRouteSpec` (a TCPRoute has no hostnames).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4RouteSpec {
    #[serde(default)]
    pub parent_refs: Vec<ParentReference>,
    #[serde(default)]
    pub hostnames: Vec<String>,
    #[serde(default)]
    pub rules: Vec<L4RouteRule>,
    pub use_default_gateways: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4RouteRule {
    pub name: Option<String>,
    #[serde(default)]
    pub backend_refs: Vec<BackendRef>,
}
