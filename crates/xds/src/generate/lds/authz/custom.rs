//! CUSTOM AuthorizationPolicies, as istiod's `extauthz.go` builds them: per provider of
//! MeshConfig `extensionProviders`, an RBAC filter whose shadow rules (stat prefix
//! `istio_ext_authz_`, policies named `istio-ext-authz-PROVIDER-ns[NS]-policy[NAME]-rule[N]`)
//! mark the requests the policies select, then the `ext_authz` filter, enabled only for
//! those (`filter_enabled_metadata` on the shadow engine's effective policy id). HTTP
//! providers check HTTP chains (`http_service` to `outbound|PORT||HOST`), gRPC providers
//! HTTP and TCP chains. A provider that is not defined, does not resolve to a service, or
//! several providers on one workload, become DENY rules of what the policies select, as
//! istiod's `getBadCustomDenyRules`: never let through.

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::{
    ApiVersion, GrpcService, HeaderValue, HttpUri, grpc_service, http_uri,
};
use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::http::ext_authz::v3::{
    AuthorizationRequest, AuthorizationResponse, BufferSettings, ExtAuthz, HttpService, ext_authz,
};
use envoy_types::pb::envoy::extensions::filters::network::ext_authz::v3::ExtAuthz as TcpExtAuthz;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListStringMatcher, MetadataMatcher, StringMatcher, ValueMatcher, metadata_matcher,
    string_matcher::MatchPattern, value_matcher,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;

use super::wire::{HttpRbac, NetworkRbac, RbacRules};
use super::{DENY, domains, rules};
use crate::generate::lds::l4::duration;
use crate::resource::any;
use axon_config::config::Config;
use axon_config::istio::AuthzAction;
use axon_config::mesh::{ExtAuthzKind, ExtAuthzProvider};
use axon_model::authz::policy;
use axon_model::push_context::PushContext;

/// istiod's `extAuthzMatchPrefix` and the shadow rules' stat prefix.
const MATCH_PREFIX: &str = "istio-ext-authz";
const STAT_PREFIX: &str = "istio_ext_authz_";

/// A provider, as resolved for this context: its filter settings and cluster.
struct Resolved<'a> {
    provider: &'a ExtAuthzProvider,
    host: String,
    cluster: String,
}

/// The provider `name` of the mesh, resolved to a known service's cluster (istiod's
/// `LookupCluster`: `ns/host` or `host`, a service of the registry with the port).
fn provider<'a>(ctx: &'a PushContext, name: &str) -> Option<Resolved<'a>> {
    let provider = ctx.mesh.ext_authz.iter().find(|p| p.name == name)?;
    let host = provider
        .service
        .split_once('/')
        .map_or(provider.service.as_str(), |(_, h)| h);
    let service = ctx.service(host)?;
    service.port(provider.port)?;
    Some(Resolved {
        provider,
        host: host.to_string(),
        cluster: format!("outbound|{}||{host}", provider.port),
    })
}

/// The rules of `configs` (one provider's policies) named for it; `tcp`: for a TCP chain.
fn provider_rules(
    ctx: &PushContext,
    configs: &[&Arc<Config>],
    provider: &str,
    tcp: bool,
) -> (RbacRules, RbacRules) {
    let domains = domains(ctx);
    let (mut enforced, mut shadow) = (RbacRules::new(DENY), RbacRules::new(DENY));
    for config in configs {
        let Some(p) = policy(config) else { continue };
        let set = if p.dry_run {
            &mut shadow
        } else {
            &mut enforced
        };
        let name = |i: usize| {
            format!(
                "{MATCH_PREFIX}-{provider}-ns[{}]-policy[{}]-rule[{i}]",
                config.namespace(),
                config.name()
            )
        };
        for (i, rule) in p.rules.as_deref().unwrap_or_default().iter().enumerate() {
            if let Ok(policy) =
                rules::policy(rule, config.namespace(), AuthzAction::Deny, tcp, &domains)
            {
                set.insert(name(i), policy);
            }
        }
    }
    (enforced, shadow)
}

/// istiod's `generateFilterMatcherForProvider`: the shadow engine matched a policy of
/// `provider` (RBAC filter `filter`).
fn enabled_for(filter: &str, provider: &str) -> MetadataMatcher {
    MetadataMatcher {
        filter: filter.to_string(),
        path: vec![metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(format!(
                "{STAT_PREFIX}shadow_effective_policy_id"
            ))),
        }],
        value: Some(ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::StringMatch(StringMatcher {
                match_pattern: Some(MatchPattern::Prefix(format!("{MATCH_PREFIX}-{provider}"))),
                ..Default::default()
            })),
        }),
        ..Default::default()
    }
}

/// istiod's `generateHeaders`: case-insensitive, `*x` suffix, `x*` prefix, else exact.
fn headers(list: &[String]) -> Option<ListStringMatcher> {
    if list.is_empty() {
        return None;
    }
    Some(ListStringMatcher {
        patterns: list
            .iter()
            .map(|h| StringMatcher {
                ignore_case: true,
                match_pattern: Some(if let Some(rest) = h.strip_prefix('*') {
                    MatchPattern::Suffix(rest.to_string())
                } else if let Some(rest) = h.strip_suffix('*') {
                    MatchPattern::Prefix(rest.to_string())
                } else {
                    MatchPattern::Exact(h.clone())
                }),
            })
            .collect(),
    })
}

fn grpc_service(r: &Resolved) -> GrpcService {
    GrpcService {
        target_specifier: Some(grpc_service::TargetSpecifier::EnvoyGrpc(
            grpc_service::EnvoyGrpc {
                cluster_name: r.cluster.clone(),
                authority: r.host.clone(),
                ..Default::default()
            },
        )),
        timeout: Some(duration(r.provider.timeout_nanos)),
        ..Default::default()
    }
}

/// The HTTP `ext_authz` filter of a provider.
fn http_ext_authz(r: &Resolved) -> ExtAuthz {
    let p = r.provider;
    let mut out = ExtAuthz {
        transport_api_version: ApiVersion::V3 as i32,
        failure_mode_allow: p.fail_open,
        status_on_error: p
            .status_on_error
            .map(|code| HttpStatus { code: code as i32 }),
        filter_enabled_metadata: Some(enabled_for("envoy.filters.http.rbac", &p.name)),
        with_request_body: p.body.as_ref().map(|b| BufferSettings {
            max_request_bytes: b.max_request_bytes,
            allow_partial_message: b.allow_partial_message,
            pack_as_bytes: b.pack_as_bytes,
        }),
        ..Default::default()
    };
    match &p.kind {
        ExtAuthzKind::Grpc => {
            out.services = Some(ext_authz::Services::GrpcService(grpc_service(r)));
        }
        ExtAuthzKind::Http {
            path_prefix,
            include_request_headers,
            additional_headers,
            headers_to_upstream_on_allow,
            headers_to_downstream_on_deny,
            headers_to_downstream_on_allow,
        } => {
            let mut service = HttpService {
                path_prefix: path_prefix.clone(),
                server_uri: Some(HttpUri {
                    uri: format!("http://{}", r.host),
                    timeout: Some(duration(p.timeout_nanos)),
                    http_upstream_type: Some(http_uri::HttpUpstreamType::Cluster(
                        r.cluster.clone(),
                    )),
                }),
                ..Default::default()
            };
            if !additional_headers.is_empty() {
                service.authorization_request = Some(AuthorizationRequest {
                    headers_to_add: additional_headers
                        .iter()
                        .map(|(k, v)| HeaderValue {
                            key: k.clone(),
                            value: v.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                });
            }
            if !(headers_to_upstream_on_allow.is_empty()
                && headers_to_downstream_on_deny.is_empty()
                && headers_to_downstream_on_allow.is_empty())
            {
                service.authorization_response = Some(AuthorizationResponse {
                    allowed_upstream_headers: headers(headers_to_upstream_on_allow),
                    allowed_client_headers: headers(headers_to_downstream_on_deny),
                    allowed_client_headers_on_success: headers(headers_to_downstream_on_allow),
                    ..Default::default()
                });
            }
            out.allowed_headers = headers(include_request_headers);
            out.services = Some(ext_authz::Services::HttpService(service));
        }
    }
    out
}

/// The providers of `custom` policies, sorted, each once.
fn providers(custom: &[Arc<Config>]) -> Vec<String> {
    let mut out: Vec<String> = custom
        .iter()
        .filter_map(|c| policy(c))
        .filter_map(|p| p.provider.as_ref().map(|pr| pr.name.clone()))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn of_provider<'a>(custom: &'a [Arc<Config>], name: &str) -> Vec<&'a Arc<Config>> {
    custom
        .iter()
        .filter(|c| {
            policy(c)
                .and_then(|p| p.provider.as_ref())
                .is_some_and(|pr| pr.name == name)
        })
        .collect()
}

/// The HTTP filters of the CUSTOM policies `custom`.
pub(super) fn http_filters(ctx: &PushContext, custom: &[Arc<Config>]) -> Vec<HttpFilter> {
    let names = providers(custom);
    let rbac = |rbac: HttpRbac| HttpFilter {
        name: "envoy.filters.http.rbac".to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(rbac.to_any())),
        ..Default::default()
    };
    let mut out = Vec::new();
    for name in &names {
        let configs = of_provider(custom, name);
        let (enforced, shadow) = provider_rules(ctx, &configs, name, false);
        let resolved = (names.len() == 1).then(|| provider(ctx, name)).flatten();
        let Some(r) = resolved else {
            // istiod's `getBadCustomDenyRules`: deny what the policies select.
            let mut deny = enforced;
            for (key, policy) in shadow.entries() {
                deny.insert(key, policy);
            }
            out.push(rbac(HttpRbac {
                rules: Some(deny),
                ..Default::default()
            }));
            continue;
        };
        out.push(rbac(HttpRbac {
            rules: (!shadow.is_empty()).then_some(shadow),
            shadow_rules: Some(enforced),
            shadow_rules_stat_prefix: STAT_PREFIX.to_string(),
        }));
        out.push(HttpFilter {
            name: "envoy.filters.http.ext_authz".to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(any(&http_ext_authz(
                &r,
            )))),
            ..Default::default()
        });
    }
    out
}

/// The network filters of the CUSTOM policies `custom` (gRPC providers only check TCP, as
/// istiod's; an HTTP provider's policies leave TCP chains alone).
pub(super) fn network_filters(ctx: &PushContext, custom: &[Arc<Config>]) -> Vec<Filter> {
    let names = providers(custom);
    let rbac = |rbac: NetworkRbac| Filter {
        name: "envoy.filters.network.rbac".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(rbac.to_any())),
    };
    let mut out = Vec::new();
    for name in &names {
        let configs = of_provider(custom, name);
        let (enforced, shadow) = provider_rules(ctx, &configs, name, true);
        let resolved = (names.len() == 1).then(|| provider(ctx, name)).flatten();
        match resolved {
            None => {
                let mut deny = enforced;
                for (key, policy) in shadow.entries() {
                    deny.insert(key, policy);
                }
                out.push(rbac(NetworkRbac {
                    rules: Some(deny),
                    stat_prefix: "tcp.".to_string(),
                    ..Default::default()
                }));
            }
            Some(r) if r.provider.kind == ExtAuthzKind::Grpc => {
                out.push(rbac(NetworkRbac {
                    rules: (!shadow.is_empty()).then_some(shadow),
                    shadow_rules: Some(enforced),
                    shadow_rules_stat_prefix: STAT_PREFIX.to_string(),
                    stat_prefix: "tcp.".to_string(),
                }));
                out.push(Filter {
                    name: "envoy.filters.network.ext_authz".to_string(),
                    config_type: Some(filter::ConfigType::TypedConfig(any(&TcpExtAuthz {
                        stat_prefix: "tcp.".to_string(),
                        grpc_service: Some(grpc_service(&r)),
                        failure_mode_allow: r.provider.fail_open,
                        transport_api_version: ApiVersion::V3 as i32,
                        filter_enabled_metadata: Some(enabled_for(
                            "envoy.filters.network.rbac",
                            name,
                        )),
                        ..Default::default()
                    }))),
                });
            }
            Some(_) => {}
        }
    }
    out
}
