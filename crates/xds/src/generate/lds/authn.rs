//! The JWT filter of a proxy's RequestAuthentications, as istiod's `JwtFilter` and
//! `convertToEnvoyJwtConfig` (`pilot/pkg/security/authn/policy_applier.go`) build it:
//! `envoy.filters.http.jwt_authn`, one provider `origins-N` per JWT rule of the policies
//! that apply (`model::request_authn`, ordered by issuer), each with its keys inline (the
//! rule's `jwks`, else what the resolver fetched for its `jwksUri` or issuer, else a key set
//! that verifies no token, so that a policy whose keys could not be fetched fails closed, as
//! istiod's `PublicOnlyJwks`). Its requirement: a token, if present, must be valid (an invalid
//! one is refused with 401); a missing one passes (AuthorizationPolicy decides). With several
//! providers, istiod's OR of each provider and the AND of `{provider OR allow_missing}`.
//!
//! Inserted first in the HTTP filters of sidecars' inbound chains (`lds::inbound`) and of
//! gateways' connection managers (`lds::gateway`), as istiod's listener builder does; on
//! gateways it clears the route cache, so that routes on JWT claims (`rds::matching::claims`)
//! are chosen on the verified payload.

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::config::route::v3::{RouteMatch, route_match::PathSpecifier};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtAuthentication, JwtClaimToHeader, JwtHeader, JwtProvider, JwtRequirement,
    JwtRequirementAndList, JwtRequirementOrList, RequirementRule,
    jwt_provider::{JwksSourceSpecifier, NormalizePayload},
    jwt_requirement::RequiresType,
    requirement_rule::RequirementType,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::google::protobuf::{Any, Empty};
use prost::{Message, Name};

use axon_config::istio::JwtRule;
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;

/// The filter's name, which claim route matches read the metadata of.
pub(crate) const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// The dynamic metadata key the verified payload is put under (istiod's
/// `EnvoyJwtFilterPayload`).
pub(crate) const JWT_PAYLOAD: &str = "payload";

/// A JWK set of one RSA public key whose private key was thrown away when it was made: no
/// token verifies against it. Served for a rule whose keys could not be fetched, so that
/// its policy fails closed, as istiod's `PublicOnlyJwks` (a key of axon's own).
pub(crate) const FAIL_CLOSED_JWKS: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"uSISvXdinC4myYlyMiTcJGBgdbi8QKbl_hhAwnDywGs9mn-w0QEBxl0BTThWY8nXk3337Exg7332Dn_qWurMeZSkxXpRzAQYvTWHsNCpcVmUNPu1jBuQ5T15r30eDanxWAk67RILwVDtZy7BU8keC0YyEmcWTR-_5OiP47_2qadUY2Ui4FKLxWciOMoe9lzoXtZDmG6AXLWvoU0aVsMo9ivov6pFVr2c2UPVs4IqXkhy6en8UKqwkMpPJq_sGso2o3ZUDyI8UzhwvjQuYSpmS4fwCecsojYBfwL_QuLfdZYNvzDsT0iJbCFOFcs02hjd_B2JcOx8s85NLZuX1uyKTw"}]}"#;

/// The claims every provider reads as space-delimited strings (istiod's defaults).
const DEFAULT_SPACE_DELIMITED: [&str; 2] = ["permission", "scope"];

/// The JWT filter of `proxy`, or none when no RequestAuthentication with a rule applies.
pub(super) fn jwt_filter(ctx: &PushContext, proxy: &Proxy) -> Option<HttpFilter> {
    if ctx.request_authn.is_empty() {
        return None;
    }
    let rules = ctx.request_authn.rules_for(&proxy.namespace, &proxy.labels);
    if rules.is_empty() {
        return None;
    }
    let clear_route_cache = proxy.proxy_type != ProxyType::Sidecar;
    let providers: Vec<(String, JwtProvider)> = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let keys = match rule.jwks_source() {
                None => rule.jwks.clone(),
                Some(source) => ctx
                    .jwks
                    .keys(&source)
                    .unwrap_or(FAIL_CLOSED_JWKS)
                    .to_string(),
            };
            (
                format!("origins-{i}"),
                provider(rule, keys, clear_route_cache),
            )
        })
        .collect();
    Some(HttpFilter {
        name: JWT_FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(Any {
            type_url: JwtAuthentication::type_url(),
            value: encode(&requirement(&providers), &providers),
        })),
        ..Default::default()
    })
}

/// One rule's provider (istiod's `JwtProvider` in `convertToEnvoyJwtConfig`).
fn provider(rule: &JwtRule, keys: String, clear_route_cache: bool) -> JwtProvider {
    JwtProvider {
        issuer: rule.issuer.clone(),
        audiences: rule.audiences.clone(),
        forward: rule.forward_original_token,
        forward_payload_header: rule.output_payload_to_header.clone(),
        payload_in_metadata: JWT_PAYLOAD.to_string(),
        normalize_payload_in_metadata: Some(NormalizePayload {
            space_delimited_claims: space_delimited_claims(rule.space_delimited_claims.as_deref()),
        }),
        clear_route_cache,
        claim_to_headers: rule
            .output_claim_to_headers
            .iter()
            .map(|c| JwtClaimToHeader {
                header_name: c.header.clone(),
                claim_name: c.claim.clone(),
                ..Default::default()
            })
            .collect(),
        from_headers: rule
            .from_headers
            .iter()
            .map(|h| JwtHeader {
                name: h.name.clone(),
                value_prefix: h.prefix.clone(),
            })
            .collect(),
        from_params: rule.from_params.clone(),
        from_cookies: rule.from_cookies.clone(),
        jwks_source_specifier: Some(JwksSourceSpecifier::LocalJwks(DataSource {
            specifier: Some(Specifier::InlineString(keys)),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// istiod's `buildSpaceDelimitedClaims`: the defaults when the rule names none, else the
/// union with them, sorted.
fn space_delimited_claims(listed: Option<&[String]>) -> Vec<String> {
    let mut claims: Vec<String> = DEFAULT_SPACE_DELIMITED.map(String::from).to_vec();
    if let Some(listed) = listed {
        claims.extend(listed.iter().cloned());
        claims.sort();
        claims.dedup();
    }
    claims
}

fn provider_name(name: &str) -> JwtRequirement {
    JwtRequirement {
        requires_type: Some(RequiresType::ProviderName(name.to_string())),
    }
}

/// The filter's one rule on `/`: `{P OR allow_missing}` for one provider; for several,
/// `OR{P1, P2, ..., AND{OR{P1, allow_missing}, OR{P2, allow_missing}, ...}}` (the inner AND
/// refuses any invalid token present, the outer OR lets providers share a location).
fn requirement(providers: &[(String, JwtProvider)]) -> JwtAuthentication {
    let inner: Vec<JwtRequirement> = providers
        .iter()
        .map(|(name, _)| JwtRequirement {
            requires_type: Some(RequiresType::RequiresAny(JwtRequirementOrList {
                requirements: vec![
                    provider_name(name),
                    JwtRequirement {
                        requires_type: Some(RequiresType::AllowMissing(Empty {})),
                    },
                ],
            })),
        })
        .collect();
    let requires = if inner.len() == 1 {
        inner.into_iter().next()
    } else {
        let mut outer: Vec<JwtRequirement> = providers
            .iter()
            .map(|(name, _)| provider_name(name))
            .collect();
        outer.push(JwtRequirement {
            requires_type: Some(RequiresType::RequiresAll(JwtRequirementAndList {
                requirements: inner,
            })),
        });
        Some(JwtRequirement {
            requires_type: Some(RequiresType::RequiresAny(JwtRequirementOrList {
                requirements: outer,
            })),
        })
    };
    JwtAuthentication {
        rules: vec![RequirementRule {
            r#match: Some(RouteMatch {
                path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
                ..Default::default()
            }),
            requirement_type: requires.map(RequirementType::Requires),
        }],
        bypass_cors_preflight: true,
        ..Default::default()
    }
}

/// `auth` encoded with `providers` as its `providers` map, entries in name order. prost
/// encodes a map field in its `HashMap`'s order, which differs between processes; a map
/// entry is a repeated field, so the entries are appended by hand, in order: the same
/// filter encodes (and is versioned) the same in every replica.
fn encode(auth: &JwtAuthentication, providers: &[(String, JwtProvider)]) -> Vec<u8> {
    use prost::encoding::{WireType, encode_key, encode_varint, message, string};
    const PROVIDERS_TAG: u32 = 1;
    let mut sorted: Vec<&(String, JwtProvider)> = providers.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut buf = auth.encode_to_vec();
    for (name, provider) in sorted {
        let len = string::encoded_len(1, name) + message::encoded_len(2, provider);
        encode_key(PROVIDERS_TAG, WireType::LengthDelimited, &mut buf);
        encode_varint(len as u64, &mut buf);
        string::encode(1, name, &mut buf);
        message::encode(2, provider, &mut buf);
    }
    buf
}

#[cfg(test)]
mod tests;
