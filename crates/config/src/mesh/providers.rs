//! MeshConfig `extensionProviders`, the external authorizers of CUSTOM AuthorizationPolicies
//! (`envoyExtAuthzHttp`, `envoyExtAuthzGrpc`), as istiod reads and checks them
//! (`authz/builder/extauthz.go`: a name unique, lowercase, at most 63 characters; a port in
//! range; `statusOnError` a status code; `pathPrefix` starting with `/`; no single `*`
//! header pattern). A provider of another kind (tracing, access logging) is not applied
//! here: the caller reports it.

use std::collections::BTreeMap;

use serde::Deserialize;

/// An external authorizer.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtAuthzProvider {
    pub name: String,
    /// `ns/host` or `host`: the service whose cluster the checks go to.
    pub service: String,
    pub port: u32,
    /// Nanoseconds; istiod's default 600 s.
    pub timeout_nanos: i128,
    pub fail_open: bool,
    pub status_on_error: Option<u32>,
    pub body: Option<RequestBody>,
    pub kind: ExtAuthzKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExtAuthzKind {
    Http {
        path_prefix: String,
        include_request_headers: Vec<String>,
        additional_headers: BTreeMap<String, String>,
        headers_to_upstream_on_allow: Vec<String>,
        headers_to_downstream_on_deny: Vec<String>,
        headers_to_downstream_on_allow: Vec<String>,
    },
    Grpc,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestBody {
    #[serde(default)]
    pub max_request_bytes: u32,
    #[serde(default)]
    pub allow_partial_message: bool,
    #[serde(default)]
    pub pack_as_bytes: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Doc {
    #[serde(default)]
    name: String,
    envoy_ext_authz_http: Option<HttpDoc>,
    envoy_ext_authz_grpc: Option<GrpcDoc>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HttpDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    timeout: Option<String>,
    #[serde(default)]
    path_prefix: String,
    #[serde(default)]
    fail_open: bool,
    #[serde(default)]
    clear_route_cache: bool,
    status_on_error: Option<String>,
    #[serde(default)]
    include_request_headers_in_check: Vec<String>,
    #[serde(default)]
    include_headers_in_check: Vec<String>,
    #[serde(default)]
    include_additional_headers_in_check: BTreeMap<String, String>,
    include_request_body_in_check: Option<RequestBody>,
    #[serde(default)]
    headers_to_upstream_on_allow: Vec<String>,
    #[serde(default)]
    headers_to_downstream_on_deny: Vec<String>,
    #[serde(default)]
    headers_to_downstream_on_allow: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GrpcDoc {
    #[serde(default)]
    service: String,
    #[serde(default)]
    port: u32,
    timeout: Option<String>,
    #[serde(default)]
    fail_open: bool,
    #[serde(default)]
    clear_route_cache: bool,
    status_on_error: Option<String>,
    include_request_body_in_check: Option<RequestBody>,
}

/// The external authorizers of `extensionProviders`, and the names of the other providers
/// (not applied by this). An error names the provider and the reason.
pub(super) fn read(
    value: &serde_json::Value,
) -> Result<(Vec<ExtAuthzProvider>, Vec<String>), String> {
    let docs: Vec<Doc> = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    let mut out: Vec<ExtAuthzProvider> = Vec::new();
    let mut others = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        let name = doc.name.clone();
        let at = |reason: String| format!("extensionProviders[{i}] ({name}): {reason}");
        check_name(&name).map_err(at)?;
        if out.iter().any(|p| p.name == name) || others.contains(&name) {
            return Err(at("extension provider name must be unique".into()));
        }
        let provider = match (doc.envoy_ext_authz_http, doc.envoy_ext_authz_grpc) {
            (Some(h), _) => {
                for (field, list) in [
                    (
                        "includeRequestHeadersInCheck",
                        &h.include_request_headers_in_check,
                    ),
                    ("includeHeadersInCheck", &h.include_headers_in_check),
                    ("headersToUpstreamOnAllow", &h.headers_to_upstream_on_allow),
                    (
                        "headersToDownstreamOnDeny",
                        &h.headers_to_downstream_on_deny,
                    ),
                    (
                        "headersToDownstreamOnAllow",
                        &h.headers_to_downstream_on_allow,
                    ),
                ] {
                    if list.iter().any(|v| v == "*") {
                        return Err(at(format!(
                            "a single wildcard (\"*\") is not supported, change it to either prefix or suffix match: {field}"
                        )));
                    }
                }
                if !h.path_prefix.is_empty() && !h.path_prefix.starts_with('/') {
                    return Err(at(format!(
                        "pathPrefix must begin with `/`, found: {:?}",
                        h.path_prefix
                    )));
                }
                let _ = h.clear_route_cache;
                let headers = if h.include_request_headers_in_check.is_empty() {
                    h.include_headers_in_check
                } else {
                    h.include_request_headers_in_check
                };
                common(
                    &h.service,
                    h.port,
                    h.timeout,
                    h.fail_open,
                    h.status_on_error,
                    h.include_request_body_in_check,
                    ExtAuthzKind::Http {
                        path_prefix: h.path_prefix,
                        include_request_headers: headers,
                        additional_headers: h.include_additional_headers_in_check,
                        headers_to_upstream_on_allow: h.headers_to_upstream_on_allow,
                        headers_to_downstream_on_deny: h.headers_to_downstream_on_deny,
                        headers_to_downstream_on_allow: h.headers_to_downstream_on_allow,
                    },
                    &name,
                )
                .map_err(at)?
            }
            (None, Some(g)) => {
                let _ = g.clear_route_cache;
                common(
                    &g.service,
                    g.port,
                    g.timeout,
                    g.fail_open,
                    g.status_on_error,
                    g.include_request_body_in_check,
                    ExtAuthzKind::Grpc,
                    &name,
                )
                .map_err(at)?
            }
            (None, None) => {
                others.push(name);
                continue;
            }
        };
        out.push(provider);
    }
    Ok((out, others))
}

#[allow(clippy::too_many_arguments)]
fn common(
    service: &str,
    port: u32,
    timeout: Option<String>,
    fail_open: bool,
    status_on_error: Option<String>,
    body: Option<RequestBody>,
    kind: ExtAuthzKind,
    name: &str,
) -> Result<ExtAuthzProvider, String> {
    if !(1..=65535).contains(&port) {
        return Err(format!(
            "port must be in the range [1, 65535], found: {port}"
        ));
    }
    if service.is_empty() {
        return Err("service must not be empty".to_string());
    }
    let timeout_nanos = match timeout {
        None => 600_000_000_000,
        Some(t) => crate::validate::parse_duration(&t).ok_or(format!("invalid timeout {t:?}"))?,
    };
    let status_on_error = match status_on_error.as_deref() {
        None | Some("") => None,
        Some(s) => match s.parse::<u32>() {
            Ok(code) if (100..=599).contains(&code) => Some(code),
            _ => return Err(format!("unsupported statusOnError {s}")),
        },
    };
    Ok(ExtAuthzProvider {
        name: name.to_string(),
        service: service.to_string(),
        port,
        timeout_nanos,
        fail_open,
        status_on_error,
        body,
        kind,
    })
}

/// istiod's `validateProviderName`.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("extension provider name must not be empty".into());
    }
    if name.len() > 63 {
        return Err(format!(
            "provider name too long (max 63 characters): {}",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "invalid character {c:?} (only lowercase letters, digits, and hyphens allowed)"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return Err("provider name cannot start or end with hyphen".into());
    }
    Ok(())
}
