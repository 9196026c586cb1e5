//! AuthorizationPolicy as istiod's authz builder (`pilot/pkg/security/authz/builder/`) puts
//! it in a proxy's chains: on HTTP chains `envoy.filters.http.rbac` filters, on TCP chains
//! `envoy.filters.network.rbac` filters before the `tcp_proxy`, for the AUDIT (action `LOG`),
//! DENY and ALLOW policies that apply to the proxy (`model::authz`), in that order, each
//! rule a policy named `ns[NS]-policy[NAME]-rule[N]` (a policy without rules: one that never
//! matches, so an ALLOW without rules denies everything); a dry-run policy
//! (`istio.io/dry-run: "true"`) goes into the shadow rules (stat prefix
//! `istio_dry_run_allow_`/`istio_dry_run_deny_`), enforced nowhere. Rules are translated by
//! `rules.rs`.
//!
//! CUSTOM policies go first, through the external authorizers of MeshConfig
//! `extensionProviders` (`custom.rs`).
//!
//! Envoy's `RBAC.policies` is a map; prost encodes a map in its hash order, different in every
//! process, so the filters are encoded through `wire.rs`, which writes the entries sorted.

mod custom;
mod matchers;
mod rules;
#[cfg(test)]
mod tests;
mod wire;

use envoy_types::pb::envoy::config::listener::v3::{Filter, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, http_filter,
};

use axon_config::config::Config;
use axon_model::authz::{ProxyPolicies, policy};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use wire::{HttpRbac, NetworkRbac, RbacRules};

/// Envoy's RBAC actions.
const ALLOW: i32 = 0;
const DENY: i32 = 1;
const LOG: i32 = 2;

/// The policies that apply to `proxy`.
pub(super) fn policies(ctx: &PushContext, proxy: &Proxy) -> ProxyPolicies {
    if ctx.authz.is_empty() {
        return ProxyPolicies::default();
    }
    ctx.authz.for_workload(&proxy.namespace, &proxy.labels)
}

/// The trust domain and its aliases (istiod's trust domain bundle).
fn domains(ctx: &PushContext) -> Vec<String> {
    let mut out = vec![ctx.mesh.trust_domain.clone()];
    for alias in &ctx.mesh.trust_domain_aliases {
        if !out.contains(alias) {
            out.push(alias.clone());
        }
    }
    out
}

/// Enforced and dry-run rules of one action.
struct Built {
    rules: Option<RbacRules>,
    shadow: Option<RbacRules>,
}

/// istiod's `Builder.build` for `configs` of one action.
fn build(
    ctx: &PushContext,
    configs: &[std::sync::Arc<Config>],
    action: i32,
    tcp: bool,
) -> Option<Built> {
    if configs.is_empty() {
        return None;
    }
    let domains = domains(ctx);
    let (mut enforced, mut shadow) = (None::<RbacRules>, None::<RbacRules>);
    for config in configs {
        let Some(p) = policy(config) else { continue };
        let target = if p.dry_run {
            &mut shadow
        } else {
            &mut enforced
        };
        let set = target.get_or_insert_with(|| RbacRules::new(action));
        let name = |i: usize| {
            format!(
                "ns[{}]-policy[{}]-rule[{i}]",
                config.namespace(),
                config.name()
            )
        };
        let rules = p.rules.as_deref().unwrap_or_default();
        for (i, rule) in rules.iter().enumerate() {
            if let Ok(policy) = rules::policy(rule, config.namespace(), p.action, tcp, &domains) {
                set.insert(name(i), policy);
            }
        }
        if rules.is_empty() {
            set.insert(name(0), wire::never());
        }
    }
    Some(Built {
        rules: enforced,
        shadow,
    })
}

fn shadow_prefix(action: i32) -> &'static str {
    match action {
        ALLOW => "istio_dry_run_allow_",
        DENY => "istio_dry_run_deny_",
        _ => "",
    }
}

/// The HTTP RBAC filters of `proxy`: CUSTOM's (denying what no provider can check), then
/// AUDIT, DENY and ALLOW, as istiod orders them (the JWT filter goes between CUSTOM's and
/// the others).
pub(super) fn http_filters(ctx: &PushContext, proxy: &Proxy) -> (Vec<HttpFilter>, Vec<HttpFilter>) {
    let p = policies(ctx, proxy);
    if p.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let filter = |built: Built, action: i32| HttpFilter {
        name: "envoy.filters.http.rbac".to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            HttpRbac {
                shadow_rules_stat_prefix: built
                    .shadow
                    .as_ref()
                    .map(|_| shadow_prefix(action).to_string())
                    .unwrap_or_default(),
                rules: built.rules,
                shadow_rules: built.shadow,
            }
            .to_any(),
        )),
        ..Default::default()
    };
    let custom = custom::http_filters(ctx, &p.custom);
    let mut local = Vec::new();
    for (configs, action) in [(&p.audit, LOG), (&p.deny, DENY), (&p.allow, ALLOW)] {
        if let Some(built) = build(ctx, configs, action, false) {
            local.push(filter(built, action));
        }
    }
    (custom, local)
}

/// The network RBAC filters of `proxy`'s TCP chains, in istiod's order.
pub(super) fn network_filters(ctx: &PushContext, proxy: &Proxy) -> Vec<Filter> {
    let p = policies(ctx, proxy);
    if p.is_empty() {
        return Vec::new();
    }
    let mut out = custom::network_filters(ctx, &p.custom);
    for (configs, action) in [(&p.audit, LOG), (&p.deny, DENY), (&p.allow, ALLOW)] {
        if let Some(built) = build(ctx, configs, action, true) {
            out.push(Filter {
                name: "envoy.filters.network.rbac".to_string(),
                config_type: Some(filter::ConfigType::TypedConfig(
                    NetworkRbac {
                        shadow_rules_stat_prefix: built
                            .shadow
                            .as_ref()
                            .map(|_| shadow_prefix(action).to_string())
                            .unwrap_or_default(),
                        rules: built.rules,
                        shadow_rules: built.shadow,
                        stat_prefix: "tcp.".to_string(),
                    }
                    .to_any(),
                )),
            });
        }
    }
    out
}
