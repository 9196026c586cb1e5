//! `security.istio.io` `RequestAuthentication` (istio/api `security/v1/request_authentication.proto`
//! and `jwt.proto`, which `v1beta1` shares): which workloads it applies to (a selector, or
//! `targetRef`/`targetRefs` to a Gateway API Gateway), and the JWT rules their proxies check
//! requests' tokens against.

use serde::{Deserialize, Serialize};

use super::MatchLabels;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestAuthentication {
    /// The workloads it applies to; none: every workload of its namespace, or in the root
    /// namespace of the mesh.
    pub selector: Option<MatchLabels>,
    pub target_ref: Option<PolicyTargetReference>,
    #[serde(default)]
    pub target_refs: Vec<PolicyTargetReference>,
    #[serde(default)]
    pub jwt_rules: Vec<JwtRule>,
}

impl RequestAuthentication {
    /// `targetRefs`, or `targetRef` alone when `targetRefs` is empty (istiod's `GetTargetRefs`).
    pub fn target_refs(&self) -> Vec<&PolicyTargetReference> {
        if self.target_refs.is_empty() {
            self.target_ref.iter().collect()
        } else {
            self.target_refs.iter().collect()
        }
    }
}

/// `istio.type.v1beta1.PolicyTargetReference`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyTargetReference {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
}

/// The Gateway API group a `targetRef` to a Gateway names.
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

impl PolicyTargetReference {
    /// Whether it names a Gateway API `Gateway` (istiod's `matchesGroupKind(.., KubernetesGateway)`).
    pub fn is_gateway_api_gateway(&self) -> bool {
        self.kind == "Gateway" && self.group == GATEWAY_API_GROUP
    }
}

/// `istio.security.v1beta1.JWTRule`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtRule {
    #[serde(default)]
    pub issuer: String,
    #[serde(default)]
    pub audiences: Vec<String>,
    #[serde(default)]
    pub jwks_uri: String,
    /// A JWKS, inline (JSON).
    #[serde(default)]
    pub jwks: String,
    #[serde(default)]
    pub from_headers: Vec<JwtHeader>,
    #[serde(default)]
    pub from_params: Vec<String>,
    #[serde(default)]
    pub from_cookies: Vec<String>,
    #[serde(default)]
    pub output_payload_to_header: String,
    #[serde(default)]
    pub forward_original_token: bool,
    #[serde(default)]
    pub output_claim_to_headers: Vec<ClaimToHeader>,
    /// A duration (`"5s"`): the JWKS fetch's timeout; none: 5s.
    pub timeout: Option<String>,
    /// Claims whose values are space-delimited strings (beside `scope` and `permission`).
    pub space_delimited_claims: Option<Vec<String>>,
}

/// `istio.security.v1beta1.JWTHeader`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JwtHeader {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub prefix: String,
}

/// `istio.security.v1beta1.ClaimToHeader`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimToHeader {
    #[serde(default)]
    pub header: String,
    #[serde(default)]
    pub claim: String,
}

/// Where the keys of a rule without inline `jwks` come from: its `jwksUri`, or its issuer's
/// OpenID discovery document (`ISSUER/.well-known/openid-configuration`), as istiod resolves.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum JwksSource {
    Uri(String),
    Discovery(String),
}

/// The suffix istiod appends to an issuer for OpenID discovery.
pub const OPENID_DISCOVERY_SUFFIX: &str = "/.well-known/openid-configuration";

impl JwksSource {
    /// The URL fetched first: the JWKS, or the discovery document naming it.
    pub fn url(&self) -> String {
        match self {
            JwksSource::Uri(uri) => uri.clone(),
            JwksSource::Discovery(issuer) => format!("{issuer}{OPENID_DISCOVERY_SUFFIX}"),
        }
    }
}

impl JwtRule {
    /// Where its keys are fetched from; none when they are inline (or it names no issuer
    /// nor URI, which validation refuses).
    pub fn jwks_source(&self) -> Option<JwksSource> {
        if !self.jwks.is_empty() {
            None
        } else if !self.jwks_uri.is_empty() {
            Some(JwksSource::Uri(self.jwks_uri.clone()))
        } else if !self.issuer.is_empty() {
            Some(JwksSource::Discovery(self.issuer.clone()))
        } else {
            None
        }
    }
}

/// A JWKS axon fetched (`ConfigKind::Jwks`, an internal kind no user writes): the source it
/// was fetched from, and the key set, or none when the fetch failed and no earlier fetch
/// succeeded (then proxies get istiod's fail-closed key set that verifies no token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchedJwks {
    pub source: JwksSource,
    pub keys: Option<String>,
}
