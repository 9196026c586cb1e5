//! `VirtualService`: HTTP routes for hosts, bound to gateways or the mesh.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Labels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualService {
    #[serde(default)]
    pub hosts: Vec<String>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub http: Vec<HttpRoute>,
    /// TCP and TLS routes, as validated (typed by [`Self::tcp_routes`], [`Self::tls_routes`]).
    #[serde(default)]
    pub tcp: Vec<serde_json::Value>,
    #[serde(default)]
    pub tls: Vec<serde_json::Value>,
    #[serde(default)]
    pub export_to: Vec<String>,
    /// How the routes are read: [`RouteSemantics::Gateway`] for one converted from Gateway
    /// API routes (istiod's `internal.istio.io/route-semantics`). Never read from a file.
    #[serde(skip)]
    pub semantics: RouteSemantics,
    /// istiod's `internal.istio.io/parents`: `KIND/NAME.NAMESPACE` of the Gateway API routes
    /// it was made from (`HTTPRoute/r.ns`, `TLSRoute/t.ns`). Never read from a file.
    #[serde(skip)]
    pub parents: Vec<String>,
}

/// How a VirtualService's routes are read (istiod's `internal.istio.io/route-semantics`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub enum RouteSemantics {
    /// A user's VirtualService.
    #[default]
    Istio,
    /// Derived from a Gateway API route.
    Gateway,
}

impl VirtualService {
    /// Whether the routes have Gateway API semantics (istiod's `UseGatewaySemantics`).
    pub fn gateway_semantics(&self) -> bool {
        self.semantics == RouteSemantics::Gateway
    }

    /// Host `h` of this VirtualService in `namespace` as istiod reads it: a short name
    /// resolved in the namespace (`ResolveVirtualServiceShortnames`), except under Gateway
    /// API semantics, whose hosts are taken as they are (istiod's `mergeVirtualServices`).
    pub fn resolve_host(&self, h: &str, namespace: &str) -> String {
        if self.gateway_semantics() {
            h.to_string()
        } else {
            crate::host::resolve(h, namespace)
        }
    }

    /// Whether it was made from a TLSRoute: its parents start `TLSRoute/` (istiod reads the
    /// joined `internal.istio.io/parents`; a TLSRoute's VirtualService has no other parent).
    pub fn from_tls_route(&self) -> bool {
        self.parents
            .first()
            .is_some_and(|p| p.starts_with("TLSRoute/"))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRoute {
    #[serde(default)]
    pub name: String,
    #[serde(default, rename = "match")]
    pub matches: Vec<HttpMatchRequest>,
    #[serde(default)]
    pub route: Vec<HttpRouteDestination>,
    pub redirect: Option<HttpRedirect>,
    pub direct_response: Option<HttpDirectResponse>,
    pub rewrite: Option<HttpRewrite>,
    /// A duration (`1s`, `250ms`); `None`: no timeout, as istiod.
    pub timeout: Option<String>,
    pub retries: Option<HttpRetry>,
    pub headers: Option<Headers>,
    /// The child VirtualService whose routes replace this one, merged with it
    /// (`push_context::delegate`).
    pub delegate: Option<Delegate>,
    pub fault: Option<HttpFault>,
    pub mirror: Option<Destination>,
    #[serde(default)]
    pub mirrors: Vec<HttpMirrorPolicy>,
    pub mirror_percentage: Option<Percent>,
    /// Deprecated integer percent (`mirrorPercent`, or the CRD's `mirror_percent`).
    #[serde(alias = "mirror_percent")]
    pub mirror_percent: Option<u32>,
    pub cors_policy: Option<CorsPolicy>,
}

/// `delegate`: a VirtualService without hosts, by name (and namespace: the root's when
/// empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delegate {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// A percentage, `0.0`–`100.0`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Percent {
    #[serde(default)]
    pub value: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpMirrorPolicy {
    pub destination: Option<Destination>,
    pub percentage: Option<Percent>,
}

/// `fault`: delays and aborts Envoy injects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpFault {
    pub delay: Option<FaultDelay>,
    pub abort: Option<FaultAbort>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultDelay {
    pub fixed_delay: Option<String>,
    pub exponential_delay: Option<String>,
    pub percentage: Option<Percent>,
    /// Deprecated integer percent.
    pub percent: Option<i32>,
}

/// The gRPC status codes by name, in code order (grpc's `doc/statuscodes.md`): the
/// `grpcStatus` of an abort must be one of them.
pub const GRPC_STATUS_CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultAbort {
    pub http_status: Option<i32>,
    pub grpc_status: Option<String>,
    pub http2_error: Option<String>,
    pub percentage: Option<Percent>,
}

/// `corsPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CorsPolicy {
    /// Deprecated exact origins.
    #[serde(default)]
    pub allow_origin: Vec<String>,
    #[serde(default)]
    pub allow_origins: Vec<StringMatch>,
    #[serde(default)]
    pub allow_methods: Vec<String>,
    #[serde(default)]
    pub allow_headers: Vec<String>,
    #[serde(default)]
    pub expose_headers: Vec<String>,
    pub max_age: Option<String>,
    pub allow_credentials: Option<bool>,
    /// `FORWARD` (the default) or `IGNORE`.
    pub unmatched_preflights: Option<String>,
}

/// `redirect`: answered by Envoy with a 3xx, never routed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRedirect {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub authority: String,
    pub port: Option<u32>,
    /// `FROM_PROTOCOL_DEFAULT` or `FROM_REQUEST_PORT`.
    pub derive_port: Option<String>,
    #[serde(default)]
    pub scheme: String,
    pub redirect_code: Option<u32>,
    #[serde(default)]
    pub prefix_rewrite: String,
}

/// `directResponse`: answered by Envoy itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpDirectResponse {
    #[serde(default)]
    pub status: u32,
    pub body: Option<HttpBody>,
}

/// A body: `string`, or `bytes` (base64, as protobuf JSON has bytes).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpBody {
    pub string: Option<String>,
    pub bytes: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRewrite {
    #[serde(default)]
    pub uri: String,
    #[serde(default)]
    pub authority: String,
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegexRewrite {
    #[serde(default, rename = "match")]
    pub pattern: String,
    #[serde(default)]
    pub rewrite: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRetry {
    /// 0 (or absent, in a `retries` that is present) disables retries.
    #[serde(default)]
    pub attempts: i64,
    pub per_try_timeout: Option<String>,
    #[serde(default)]
    pub retry_on: String,
    pub retry_remote_localities: Option<bool>,
    pub retry_ignore_previous_hosts: Option<bool>,
    pub backoff: Option<String>,
}

/// Header operations on the request and the response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Headers {
    pub request: Option<HeaderOperations>,
    pub response: Option<HeaderOperations>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeaderOperations {
    #[serde(default)]
    pub set: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub add: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub remove: Vec<String>,
}

/// The conditions of one match block: what the request must carry (uri, scheme, method,
/// authority, headers, query parameters; headers it must not carry), and which proxies the
/// block applies to at all (listener port, gateways, source labels and namespace).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpMatchRequest {
    /// Appended to the HTTPRoute's name in the Envoy route's name (`ROUTE.MATCH`).
    #[serde(default)]
    pub name: String,
    pub uri: Option<StringMatch>,
    pub scheme: Option<StringMatch>,
    pub method: Option<StringMatch>,
    pub authority: Option<StringMatch>,
    #[serde(default)]
    pub headers: BTreeMap<String, StringMatch>,
    pub port: Option<u32>,
    #[serde(default)]
    pub gateways: Vec<String>,
    #[serde(default)]
    pub source_labels: Labels,
    #[serde(default)]
    pub query_params: BTreeMap<String, StringMatch>,
    /// Exact and prefix `uri` matches ignore case.
    #[serde(default)]
    pub ignore_uri_case: bool,
    /// Headers whose match excludes the request (`{}`: the header's presence).
    #[serde(default)]
    pub without_headers: BTreeMap<String, StringMatch>,
    #[serde(default)]
    pub source_namespace: String,
    /// The Envoy route's `stat_prefix`.
    #[serde(default)]
    pub stat_prefix: String,
}

/// The header-name prefix of istiod's JWT claim matches (`@request.auth.claims.group`).
pub const JWT_CLAIM_HEADER: &str = "@request.auth.claims";

/// The claim path of a header match on a JWT claim, as istiod's `jwt.ToRoutingClaim`:
/// `@request.auth.claims.a.b` or `@request.auth.claims[a][b]` is `["a", "b"]`; `None` for
/// any other header.
pub fn routing_claim(header: &str) -> Option<Vec<String>> {
    let prefix = header.get(..JWT_CLAIM_HEADER.len())?;
    if !prefix.eq_ignore_ascii_case(JWT_CLAIM_HEADER) {
        return None;
    }
    let rest = &header[JWT_CLAIM_HEADER.len()..];
    if let Some(dotted) = rest.strip_prefix('.').filter(|r| !r.is_empty()) {
        return Some(dotted.split('.').map(str::to_string).collect());
    }
    let bracketed = rest.strip_prefix('[')?.strip_suffix(']')?;
    (!bracketed.is_empty()).then(|| bracketed.split("][").map(str::to_string).collect())
}

/// One of `exact`, `prefix`, `regex` (and Istio's newer `suffix`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringMatch {
    pub exact: Option<String>,
    pub prefix: Option<String>,
    pub regex: Option<String>,
    pub suffix: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpRouteDestination {
    pub destination: Option<Destination>,
    #[serde(default)]
    pub weight: i32,
    pub headers: Option<Headers>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    #[serde(default)]
    pub host: String,
    #[serde(default)]
    pub subset: String,
    pub port: Option<PortSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PortSelector {
    #[serde(default)]
    pub number: u32,
}

impl VirtualService {
    /// The `tcp` routes, typed (one that does not type, which validation rejected, is
    /// skipped).
    pub fn tcp_routes(&self) -> Vec<TcpRoute> {
        typed_all(&self.tcp)
    }

    /// The `tls` routes, typed as [`Self::tcp_routes`].
    pub fn tls_routes(&self) -> Vec<TlsRoute> {
        typed_all(&self.tls)
    }
}

fn typed_all<T: serde::de::DeserializeOwned>(values: &[serde_json::Value]) -> Vec<T> {
    values
        .iter()
        .filter_map(|v| serde_json::from_value(v.clone()).ok())
        .collect()
}

/// `TCPRoute`: opaque TCP to weighted destinations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TcpRoute {
    #[serde(default, rename = "match", deserialize_with = "nullable")]
    pub matches: Vec<L4MatchAttributes>,
    #[serde(default, deserialize_with = "nullable")]
    pub route: Vec<RouteDestination>,
}

/// `TLSRoute`: TLS forwarded by SNI to weighted destinations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsRoute {
    #[serde(default, rename = "match", deserialize_with = "nullable")]
    pub matches: Vec<TlsMatchAttributes>,
    #[serde(default, deserialize_with = "nullable")]
    pub route: Vec<RouteDestination>,
}

/// `L4MatchAttributes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct L4MatchAttributes {
    #[serde(default, deserialize_with = "nullable")]
    pub destination_subnets: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub port: u32,
    #[serde(default, deserialize_with = "nullable")]
    pub source_subnet: String,
    #[serde(default, deserialize_with = "nullable")]
    pub source_labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    pub gateways: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub source_namespace: String,
}

/// `TLSMatchAttributes`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TlsMatchAttributes {
    #[serde(default, deserialize_with = "nullable")]
    pub sni_hosts: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub destination_subnets: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub port: u32,
    #[serde(default, deserialize_with = "nullable")]
    pub source_labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    pub gateways: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub source_namespace: String,
}

impl TlsMatchAttributes {
    /// istiod's `convertTLSMatchToL4Match`: the same match without its SNI hosts.
    pub fn to_l4(&self) -> L4MatchAttributes {
        L4MatchAttributes {
            destination_subnets: self.destination_subnets.clone(),
            port: self.port,
            source_subnet: String::new(),
            source_labels: self.source_labels.clone(),
            gateways: self.gateways.clone(),
            source_namespace: self.source_namespace.clone(),
        }
    }
}

/// `RouteDestination`: an L4 destination and its weight.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteDestination {
    pub destination: Option<Destination>,
    #[serde(default, deserialize_with = "nullable")]
    pub weight: i32,
}

/// `null` (a YAML key with no value) reads as the default.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
