//! One AuthorizationPolicy rule as an Envoy RBAC `Policy`, as istiod's `authz/model` builds
//! it (`model.go`, `generator.go`, `matcher/`): each `from` a principal (its source keys
//! ANDed, the rule's source `when` conditions after them), each `to` a permission (its
//! operation keys ANDed, the destination `when` conditions after them); a key's values ORed,
//! its `not` values as one NOT of their OR. Values keep istiod's wildcards: `*` any
//! (present), `*x` suffix, `x*` prefix.
//!
//! On a TCP chain the HTTP-only keys (paths, methods, hosts, headers, request principals and
//! claims) cannot be checked: for ALLOW the rule is dropped (it allows nothing more), for
//! DENY and AUDIT the key is left out (the rule matches more), as istiod's `checkError`.

// Envoy deprecates the `metadata` matchers of RBAC; istiod still writes them.
#![allow(deprecated)]

use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::rbac::v3::{
    Permission, Policy, Principal, permission, principal,
};
use envoy_types::pb::envoy::extensions::path::r#match::uri_template::v3::UriTemplateMatchConfig;
use envoy_types::pb::envoy::r#type::matcher::v3::{
    MetadataMatcher, PathMatcher, StringMatcher, ValueMatcher, path_matcher,
};

use super::matchers::{
    JWT_FILTER, cidr, exact, header_matcher, host_matcher, metadata_matcher, or_values, prefix,
    regex, regex_quote, string_matcher, string_value, suffix,
};

use crate::resource::any;
use axon_config::istio::{AuthzAction, AuthzRule};

/// The key of the JWT filter's metadata that holds the verified payload.
const JWT_PAYLOAD: &str = "payload";

/// Why a rule yields no policy on a chain.
#[derive(Debug, PartialEq)]
pub(super) struct Skipped(pub String);

/// One key of a rule: its values and not-values, and how they become matchers.
struct Key<'a> {
    name: &'a str,
    values: &'a [String],
    not_values: &'a [String],
}

/// The rule as a policy; `namespace`: the policy's (a service account without one is of it);
/// `aliases`: the mesh's trust domain and aliases, over which principals are spread.
pub(super) fn policy(
    rule: &AuthzRule,
    namespace: &str,
    action: AuthzAction,
    tcp: bool,
    domains: &[String],
) -> Result<Policy, Skipped> {
    let strict = action == AuthzAction::Allow;
    // `when`: destination keys are permissions, the rest principals (istiod's split).
    let (mut dest_when, mut src_when) = (Vec::new(), Vec::new());
    for when in &rule.when {
        let key = Key {
            name: &when.key,
            values: &when.values,
            not_values: &when.not_values,
        };
        match when.key.as_str() {
            "destination.ip" | "destination.port" | "connection.sni" => dest_when.push(key),
            k if k.starts_with("experimental.envoy.filters.") => dest_when.push(key),
            _ => src_when.push(key),
        }
    }
    let mut permissions = Vec::new();
    for to in rule
        .to
        .iter()
        .flatten()
        .map(Some)
        .chain(rule.to.is_none().then_some(None))
    {
        let mut and = Vec::new();
        if let Some(op) = to.and_then(|t| t.operation.as_ref()) {
            for key in [
                Key {
                    name: "hosts",
                    values: &op.hosts,
                    not_values: &op.not_hosts,
                },
                Key {
                    name: "methods",
                    values: &op.methods,
                    not_values: &op.not_methods,
                },
                Key {
                    name: "paths",
                    values: &op.paths,
                    not_values: &op.not_paths,
                },
                Key {
                    name: "ports",
                    values: &op.ports,
                    not_values: &op.not_ports,
                },
            ] {
                and.extend(permission_key(&key, tcp, strict)?);
            }
        }
        for key in &dest_when {
            and.extend(permission_key(key, tcp, strict)?);
        }
        if and.is_empty() {
            and.push(Permission {
                rule: Some(permission::Rule::Any(true)),
            });
        }
        permissions.push(Permission {
            rule: Some(permission::Rule::AndRules(permission::Set { rules: and })),
        });
    }
    let mut principals = Vec::new();
    for from in rule
        .from
        .iter()
        .flatten()
        .map(Some)
        .chain(rule.from.is_none().then_some(None))
    {
        let mut and = Vec::new();
        if let Some(s) = from.and_then(|f| f.source.as_ref()) {
            for key in [
                Key {
                    name: "source.principal",
                    values: &s.principals,
                    not_values: &s.not_principals,
                },
                Key {
                    name: "request.auth.principal",
                    values: &s.request_principals,
                    not_values: &s.not_request_principals,
                },
                Key {
                    name: "source.serviceAccount",
                    values: &s.service_accounts,
                    not_values: &s.not_service_accounts,
                },
                Key {
                    name: "source.trustDomain",
                    values: &s.trust_domains,
                    not_values: &s.not_trust_domains,
                },
                Key {
                    name: "source.namespace",
                    values: &s.namespaces,
                    not_values: &s.not_namespaces,
                },
                Key {
                    name: "remote.ip",
                    values: &s.remote_ip_blocks,
                    not_values: &s.not_remote_ip_blocks,
                },
                Key {
                    name: "source.ip",
                    values: &s.ip_blocks,
                    not_values: &s.not_ip_blocks,
                },
            ] {
                and.extend(principal_key(&key, namespace, tcp, strict, domains)?);
            }
        }
        for key in &src_when {
            and.extend(principal_key(key, namespace, tcp, strict, domains)?);
        }
        if and.is_empty() {
            and.push(Principal {
                identifier: Some(principal::Identifier::Any(true)),
            });
        }
        principals.push(Principal {
            identifier: Some(principal::Identifier::AndIds(principal::Set { ids: and })),
        });
    }
    Ok(Policy {
        permissions,
        principals,
        ..Default::default()
    })
}

fn http_only(key: &Key, tcp: bool, strict: bool) -> Result<bool, Skipped> {
    if !tcp {
        return Ok(false);
    }
    if strict {
        return Err(Skipped(format!("{:?} is HTTP only", key.name)));
    }
    Ok(true)
}

/// A permission key's matchers: the OR of its values, then NOT of the OR of its not-values.
fn permission_key(key: &Key, tcp: bool, strict: bool) -> Result<Vec<Permission>, Skipped> {
    if key.values.is_empty() && key.not_values.is_empty() {
        return Ok(Vec::new());
    }
    let one = |value: &str| -> Result<Option<Permission>, Skipped> {
        let rule = match key.name {
            "hosts" => permission::Rule::Header(host_matcher(value)),
            "methods" => permission::Rule::Header(header_matcher(":method", value)),
            "paths" if value.contains('{') => permission::Rule::UriTemplate(TypedExtensionConfig {
                name: "uri-template".to_string(),
                typed_config: Some(any(&UriTemplateMatchConfig {
                    path_template: path_template(value),
                })),
            }),
            "paths" => permission::Rule::UrlPath(PathMatcher {
                rule: Some(path_matcher::Rule::Path(string_matcher(value, ""))),
            }),
            "ports" | "destination.port" => match value.parse::<u32>() {
                Ok(port) if port <= 65535 => permission::Rule::DestinationPort(port),
                _ => return Err(Skipped(format!("invalid port {value}"))),
            },
            "destination.ip" => permission::Rule::DestinationIp(
                cidr(value).ok_or_else(|| Skipped(format!("invalid IP {value}")))?,
            ),
            "connection.sni" => permission::Rule::RequestedServerName(string_matcher(value, "")),
            name => {
                // `experimental.envoy.filters.FILTER[KEY]`: that filter's metadata.
                let inner = name
                    .trim_start_matches("experimental.")
                    .trim_end_matches(']');
                let Some((filter, path)) = inner.split_once('[') else {
                    return Err(Skipped(format!("invalid key {name}")));
                };
                let list = value.starts_with('[') && value.ends_with(']');
                let m = string_matcher(value.trim_matches(|c| c == '[' || c == ']'), "");
                permission::Rule::Metadata(metadata_matcher(filter, &[path], string_value(m), list))
            }
        };
        Ok(Some(Permission { rule: Some(rule) }))
    };
    if matches!(key.name, "hosts" | "methods" | "paths") && http_only(key, tcp, strict)? {
        return Ok(Vec::new());
    }
    let or = |values: &[String]| -> Result<Option<Permission>, Skipped> {
        let mut rules = Vec::new();
        for v in values {
            rules.extend(one(v)?);
        }
        if rules.is_empty() {
            return Ok(None);
        }
        Ok(Some(Permission {
            rule: Some(permission::Rule::OrRules(permission::Set { rules })),
        }))
    };
    let mut out = Vec::new();
    out.extend(or(key.values)?);
    if let Some(not) = or(key.not_values)? {
        out.push(Permission {
            rule: Some(permission::Rule::NotRule(Box::new(not))),
        });
    }
    Ok(out)
}

/// A principal key's matchers.
fn principal_key(
    key: &Key,
    namespace: &str,
    tcp: bool,
    strict: bool,
    domains: &[String],
) -> Result<Vec<Principal>, Skipped> {
    if key.values.is_empty() && key.not_values.is_empty() {
        return Ok(Vec::new());
    }
    let name = key.name;
    let jwt = name.starts_with("request.auth.");
    if (jwt || name.starts_with("request.headers[")) && http_only(key, tcp, strict)? {
        return Ok(Vec::new());
    }
    let authenticated = |m: StringMatcher| {
        principal::Identifier::Authenticated(principal::Authenticated {
            principal_name: Some(m),
        })
    };
    let one = |value: &str| -> Result<Vec<principal::Identifier>, Skipped> {
        Ok(match name {
            "source.principal" => spread_trust_domains(value, domains)
                .iter()
                .map(|v| authenticated(string_matcher(v, "spiffe://")))
                .collect(),
            "source.namespace" => {
                let ns = value
                    .split('*')
                    .map(regex_quote)
                    .collect::<Vec<_>>()
                    .join(".*");
                vec![authenticated(regex(&format!(".*/ns/{ns}/.*")))]
            }
            "source.serviceAccount" => {
                let (ns, sa) = value.split_once('/').unwrap_or((namespace, value));
                vec![authenticated(regex(&format!(
                    "spiffe://.+/ns/{}/(.+/|)sa/{}(/.+)?",
                    regex_quote(ns),
                    regex_quote(sa)
                )))]
            }
            "source.trustDomain" => {
                let m = match value {
                    "*" => prefix("spiffe://"),
                    v if !v.contains('*') => prefix(&format!("spiffe://{v}/")),
                    v => {
                        let (a, b) = v.split_once('*').unwrap_or((v, ""));
                        regex(&format!(
                            "spiffe://{}[^/]*{}/.*",
                            regex_quote(a),
                            regex_quote(b)
                        ))
                    }
                };
                vec![authenticated(m)]
            }
            "source.ip" => vec![principal::Identifier::DirectRemoteIp(
                cidr(value).ok_or_else(|| Skipped(format!("invalid IP {value}")))?,
            )],
            "remote.ip" => vec![principal::Identifier::RemoteIp(
                cidr(value).ok_or_else(|| Skipped(format!("invalid IP {value}")))?,
            )],
            header if header.starts_with("request.headers[") => {
                let h = header
                    .trim_start_matches("request.headers[")
                    .trim_end_matches(']');
                vec![principal::Identifier::Header(header_matcher(h, value))]
            }
            _ => return Err(Skipped(format!("unknown attribute {name}"))),
        })
    };
    // The JWT keys take their values together (istiod's extended generators).
    let group = |values: &[String]| -> Result<Option<Principal>, Skipped> {
        if values.is_empty() {
            return Ok(None);
        }
        if jwt {
            return Ok(Some(jwt_principal(name, values)?));
        }
        let mut ids = Vec::new();
        for v in values {
            ids.extend(one(v)?.into_iter().map(|id| Principal {
                identifier: Some(id),
            }));
        }
        Ok(Some(Principal {
            identifier: Some(principal::Identifier::OrIds(principal::Set { ids })),
        }))
    };
    let mut out = Vec::new();
    out.extend(group(key.values)?);
    if let Some(not) = group(key.not_values)? {
        out.push(Principal {
            identifier: Some(principal::Identifier::NotId(Box::new(not))),
        });
    }
    Ok(out)
}

/// `request.auth.principal` (`ISS/SUB`), `.audiences`, `.presenter` and `.claims[...]`, read
/// from the JWT filter's `payload` metadata.
fn jwt_principal(name: &str, values: &[String]) -> Result<Principal, Skipped> {
    let metadata = |m: MetadataMatcher| Principal {
        identifier: Some(principal::Identifier::Metadata(m)),
    };
    let one_of = |claims: &[&str]| {
        let matchers: Vec<ValueMatcher> = values
            .iter()
            .map(|v| string_value(string_matcher(v, "")))
            .collect();
        let value = or_values(matchers);
        let mut path = vec![JWT_PAYLOAD];
        path.extend_from_slice(claims);
        metadata(metadata_matcher(JWT_FILTER, &path, value, true))
    };
    match name {
        "request.auth.principal" => {
            let any = || regex(".+");
            let mut ids = Vec::new();
            for value in values {
                let (iss, sub) = match value.rfind('/') {
                    Some(i) => (&value[..i], Some(&value[i + 1..])),
                    None => (value.as_str(), None),
                };
                let (m_iss, m_sub) = match (value.as_str(), sub) {
                    ("*", _) => (any(), any()),
                    (v, Some(sub)) if v.starts_with('*') => (
                        if iss == "*" {
                            any()
                        } else {
                            suffix(iss.trim_start_matches('*'))
                        },
                        exact(sub),
                    ),
                    (v, None) if v.starts_with('*') => (any(), suffix(v.trim_start_matches('*'))),
                    (v, Some(sub)) if v.ends_with('*') => (
                        exact(iss),
                        if sub == "*" {
                            any()
                        } else {
                            prefix(sub.trim_end_matches('*'))
                        },
                    ),
                    (v, None) if v.ends_with('*') => (prefix(v.trim_end_matches('*')), any()),
                    (_, sub) => (exact(iss), exact(sub.unwrap_or_default())),
                };
                let claim = |claim: &str, m: StringMatcher| {
                    metadata(metadata_matcher(
                        JWT_FILTER,
                        &[JWT_PAYLOAD, claim],
                        string_value(m),
                        false,
                    ))
                };
                ids.push(Principal {
                    identifier: Some(principal::Identifier::AndIds(principal::Set {
                        ids: vec![claim("iss", m_iss), claim("sub", m_sub)],
                    })),
                });
            }
            Ok(if ids.len() == 1 {
                ids.remove(0)
            } else {
                Principal {
                    identifier: Some(principal::Identifier::OrIds(principal::Set { ids })),
                }
            })
        }
        "request.auth.audiences" => Ok(one_of(&["aud"])),
        "request.auth.presenter" => Ok(one_of(&["azp"])),
        claims => {
            let rest = claims.trim_start_matches("request.auth.claims");
            let names =
                nested_brackets(rest).ok_or_else(|| Skipped(format!("invalid key {claims}")))?;
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Ok(one_of(&names))
        }
    }
}

/// istiod's `extractNameInNestedBrackets`: `[a][b]` is `a`, `b`; `[a.b]` is one name.
fn nested_brackets(s: &str) -> Option<Vec<String>> {
    if !s.starts_with('[') || !s.ends_with(']') {
        return None;
    }
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(body) = rest.strip_prefix('[') {
        let end = body.find(']')?;
        if body[..end].contains('[') {
            return Some(vec![s[1..s.len() - 1].to_string()]);
        }
        out.push(body[..end].to_string());
        rest = &body[end + 1..];
    }
    if rest.is_empty() {
        Some(out)
    } else {
        Some(vec![s[1..s.len() - 1].to_string()])
    }
}

/// A principal written in one trust domain of the mesh, in each of them (istiod's
/// `ReplaceTrustDomainAliases`): only with aliases, and only for the mesh's domains.
fn spread_trust_domains(value: &str, domains: &[String]) -> Vec<String> {
    let Some((td, rest)) = value.split_once('/') else {
        return vec![value.to_string()];
    };
    if domains.len() < 2 || !domains.iter().any(|d| d == td) {
        return vec![value.to_string()];
    }
    domains.iter().map(|d| format!("{d}/{rest}")).collect()
}

/// istiod's `PathTemplateMatcher`: `{*}` one segment, `{**}` any number.
fn path_template(value: &str) -> String {
    value.replace("{**}", "**").replace("{*}", "*")
}
