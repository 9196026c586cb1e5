//! AuthorizationPolicy, as istiod's `ValidateAuthorizationPolicy` checks it: one of `selector`
//! and `targetRef(s)`; CUSTOM with a provider and without the source keys it cannot check; a
//! provider only with CUSTOM; DENY and CUSTOM with rules; `from`, `to`, their `source` and
//! `operation` present and not empty; IPs and CIDRs, ports, and `when` keys istiod knows.

use super::fields::Errors;
use super::names::{ip_or_cidr, selector};
use crate::istio::{AuthorizationPolicy, AuthzAction, AuthzSource, Operation};

/// The `when` keys istiod accepts (`security.ValidateAttribute`): exact ones, and prefixes of
/// the bracketed ones.
const KEYS: [&str; 12] = [
    "source.ip",
    "remote.ip",
    "source.namespace",
    "source.principal",
    "source.serviceAccount",
    "source.trustDomain",
    "request.auth.principal",
    "request.auth.audiences",
    "request.auth.presenter",
    "destination.ip",
    "destination.port",
    "connection.sni",
];
const PREFIXES: [&str; 3] = [
    "request.headers[",
    "request.auth.claims[",
    "experimental.envoy.filters.",
];

pub(super) fn authorization_policy(errs: &mut Errors, p: &AuthorizationPolicy) {
    let targeted = p.target_refs().next().is_some();
    if p.selector.is_some() && targeted {
        errs.add(
            "spec",
            "only one of targetRefs or workloadSelector can be set",
        );
    }
    if p.target_ref.is_some() && !p.target_refs.is_empty() {
        errs.add("spec", "only one of targetRefs or targetRef can be set");
    }
    if let Some(sel) = &p.selector {
        selector(errs, "spec.selector.matchLabels", &sel.match_labels);
    }
    for (i, target) in p.target_refs().enumerate() {
        if target.name.is_empty() || target.kind.is_empty() {
            errs.add(format!("spec.targetRefs[{i}]"), "kind and name must be set");
        }
    }
    match p.action {
        AuthzAction::Custom => match &p.rules {
            None => errs.add(
                "spec.rules",
                "CUSTOM action without `rules` is meaningless as it will never be triggered, add \
                 an empty rule `{}` if you want it be triggered for every request",
            ),
            Some(_) if p.provider.as_ref().is_none_or(|pr| pr.name.is_empty()) => {
                errs.add("spec.provider.name", "`provider.name` must not be empty")
            }
            Some(_) => {}
        },
        AuthzAction::Deny if p.rules.is_none() => errs.add(
            "spec.rules",
            "DENY action without `rules` is meaningless as it will never be triggered, add an \
             empty rule `{}` if you want it be triggered for every request",
        ),
        _ => {}
    }
    if p.provider.is_some() && p.action != AuthzAction::Custom {
        errs.add(
            "spec.provider",
            "`provider` must not be with non CUSTOM action",
        );
    }
    for (i, rule) in p.rules.iter().flatten().enumerate() {
        let path = format!("spec.rules[{i}]");
        if rule.from.as_ref().is_some_and(Vec::is_empty) {
            errs.add(format!("{path}.from"), "`from` must not be empty");
        }
        for (j, from) in rule.from.iter().flatten().enumerate() {
            let at = format!("{path}.from[{j}].source");
            match &from.source {
                None => errs.add(&at, "`from.source` must not be nil"),
                Some(src) => source(errs, &at, src, p.action == AuthzAction::Custom),
            }
        }
        if rule.to.as_ref().is_some_and(Vec::is_empty) {
            errs.add(format!("{path}.to"), "`to` must not be empty");
        }
        for (j, to) in rule.to.iter().flatten().enumerate() {
            let at = format!("{path}.to[{j}].operation");
            match &to.operation {
                None => errs.add(&at, "`to.operation` must not be nil"),
                Some(op) => operation(errs, &at, op),
            }
        }
        for (j, when) in rule.when.iter().enumerate() {
            let at = format!("{path}.when[{j}]");
            let key = when.key.as_str();
            let known = KEYS.contains(&key)
                || PREFIXES
                    .iter()
                    .any(|pre| key.starts_with(pre) && (pre.ends_with('.') || key.ends_with(']')));
            if !known {
                errs.add(format!("{at}.key"), format!("unknown attribute: {key}"));
            }
            if when.values.is_empty() && when.not_values.is_empty() {
                errs.add(
                    &at,
                    "at least one of values or notValues must be set for key",
                );
            }
            if p.action == AuthzAction::Custom
                && (matches!(
                    key,
                    "source.namespace"
                        | "source.serviceAccount"
                        | "source.trustDomain"
                        | "source.principal"
                ) || key.starts_with("request.auth."))
            {
                errs.add(
                    format!("{at}.key"),
                    format!("{key} is currently not supported with CUSTOM action"),
                );
            }
            let values = when.values.iter().chain(&when.not_values);
            if matches!(key, "source.ip" | "remote.ip" | "destination.ip") {
                for v in values {
                    if !ip_or_cidr(v) {
                        errs.add(&at, format!("invalid IP address or CIDR range: {v}"));
                    }
                }
            } else if key == "destination.port" {
                for v in values {
                    if !is_port(v) {
                        errs.add(&at, format!("invalid port: {v}"));
                    }
                }
            }
        }
    }
}

fn source(errs: &mut Errors, at: &str, s: &AuthzSource, custom: bool) {
    let lists = [
        ("principals", &s.principals),
        ("notPrincipals", &s.not_principals),
        ("requestPrincipals", &s.request_principals),
        ("notRequestPrincipals", &s.not_request_principals),
        ("namespaces", &s.namespaces),
        ("notNamespaces", &s.not_namespaces),
        ("serviceAccounts", &s.service_accounts),
        ("notServiceAccounts", &s.not_service_accounts),
        ("trustDomains", &s.trust_domains),
        ("notTrustDomains", &s.not_trust_domains),
        ("ipBlocks", &s.ip_blocks),
        ("notIpBlocks", &s.not_ip_blocks),
        ("remoteIpBlocks", &s.remote_ip_blocks),
        ("notRemoteIpBlocks", &s.not_remote_ip_blocks),
    ];
    if lists.iter().all(|(_, l)| l.is_empty()) {
        errs.add(at, "`from.source` must not be empty");
    }
    let named =
        s.principals.len() + s.not_principals.len() + s.namespaces.len() + s.not_namespaces.len();
    if named > 0 && s.service_accounts.len() + s.not_service_accounts.len() > 0 {
        errs.add(
            at,
            "cannot set serviceAccounts with namespaces or principals",
        );
    }
    for (name, list) in lists {
        if list.iter().any(String::is_empty) {
            errs.add(
                format!("{at}.{name}"),
                format!("empty value found in {name}"),
            );
        }
        if custom && !list.is_empty() && !name.to_ascii_lowercase().contains("ipblocks") {
            errs.add(
                format!("{at}.{name}"),
                format!("From.{name} is currently not supported with CUSTOM action"),
            );
        }
        if name.to_ascii_lowercase().contains("ipblocks") {
            for v in list.iter().filter(|v| !v.is_empty() && !ip_or_cidr(v)) {
                errs.add(
                    format!("{at}.{name}"),
                    format!("invalid IP address or CIDR range: {v}"),
                );
            }
        }
    }
}

fn operation(errs: &mut Errors, at: &str, op: &Operation) {
    let lists = [
        ("hosts", &op.hosts),
        ("notHosts", &op.not_hosts),
        ("ports", &op.ports),
        ("notPorts", &op.not_ports),
        ("methods", &op.methods),
        ("notMethods", &op.not_methods),
        ("paths", &op.paths),
        ("notPaths", &op.not_paths),
    ];
    if lists.iter().all(|(_, l)| l.is_empty()) {
        errs.add(at, "`to.operation` must not be empty");
    }
    for (name, list) in lists {
        if list.iter().any(String::is_empty) {
            errs.add(
                format!("{at}.{name}"),
                format!("empty value found in {name}"),
            );
        }
    }
    for v in op.ports.iter().chain(&op.not_ports) {
        if !v.is_empty() && !is_port(v) {
            errs.add(format!("{at}.ports"), format!("invalid port: {v}"));
        }
    }
}

fn is_port(v: &str) -> bool {
    v.parse::<u32>().is_ok_and(|p| p <= 65535)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::check;

    #[test]
    fn istiod_rules() {
        for ok in [
            "action: DENY\nrules: [{from: [{source: {namespaces: [foo]}}]}]",
            "rules: [{to: [{operation: {methods: [GET], paths: [/api/*]}}], when: [{key: 'request.headers[x-a]', values: [b]}]}]",
            "{}",
            "action: CUSTOM\nprovider: {name: ext}\nrules: [{}]",
            "selector: {matchLabels: {app: a}}\nrules: [{from: [{source: {ipBlocks: [10.0.0.0/8]}}]}]",
        ] {
            assert!(
                check("AuthorizationPolicy", ok).is_ok(),
                "{ok}: {:?}",
                check("AuthorizationPolicy", ok)
            );
        }
        for (bad, want) in [
            ("action: DENY", "DENY action without `rules`"),
            (
                "action: CUSTOM\nrules: [{}]",
                "`provider.name` must not be empty",
            ),
            (
                "provider: {name: x}\nrules: [{}]",
                "`provider` must not be with non CUSTOM action",
            ),
            ("rules: [{from: []}]", "`from` must not be empty"),
            (
                "rules: [{from: [{source: {}}]}]",
                "`from.source` must not be empty",
            ),
            (
                "rules: [{to: [{operation: {ports: ['99999']}}]}]",
                "invalid port",
            ),
            (
                "rules: [{when: [{key: source.foo, values: [a]}]}]",
                "unknown attribute",
            ),
            (
                "rules: [{from: [{source: {ipBlocks: [not-an-ip]}}]}]",
                "invalid IP",
            ),
        ] {
            let errs = check("AuthorizationPolicy", bad).unwrap_err();
            assert!(errs.iter().any(|e| e.contains(want)), "{bad}: {errs:?}");
        }
    }
}
