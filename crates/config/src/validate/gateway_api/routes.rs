//! The CRD validation of the route kinds: HTTPRoute's path, header, filter, timeout and retry
//! rules, GRPCRoute's method matches and filter types, and the list sizes of TLSRoute and
//! TCPRoute.

use std::collections::BTreeSet;

use super::{Errors, hostname, max_items, name, parent_refs, port, re};
use crate::config::ConfigKind;
use crate::gateway_api::routes::{
    Cors, HttpPathModifier, L4RouteSpec, PathModifierType, RequestMirror,
};
use crate::gateway_api::{
    FilterType, GrpcRouteSpec, HeaderMatch, HeaderModifier, HttpBackendRef, HttpRouteFilter,
    HttpRouteSpec, PathMatchType,
};

fn hostnames(errs: &mut Errors, hosts: &[String], min: usize) {
    max_items(errs, "spec.hostnames", hosts.len(), min, 16);
    for (i, h) in hosts.iter().enumerate() {
        hostname(errs, &format!("spec.hostnames[{i}]"), h);
    }
}

/// `Duration` of the Gateway API: up to four `<number><unit>` parts, units `h`, `m`, `s`, `ms`.
fn duration(errs: &mut Errors, path: &str, value: &Option<String>) {
    if let Some(d) = value
        && !re(r"^([0-9]{1,5}(h|m|s|ms)){1,4}$").is_match(d)
    {
        errs.add(
            path,
            format!("{d:?}: should match '^([0-9]{{1,5}}(h|m|s|ms)){{1,4}}$'"),
        );
    }
}

fn header_name(errs: &mut Errors, path: &str, value: &str) {
    if value.is_empty()
        || value.len() > 256
        || !re(r"^[A-Za-z0-9!#$%&'*+\-.^_`|~]+$").is_match(value)
    {
        errs.add(path, format!("{value:?}: not a valid header name"));
    }
}

fn header_matches(errs: &mut Errors, path: &str, headers: &[HeaderMatch]) {
    max_items(errs, path, headers.len(), 0, 16);
    let mut seen = BTreeSet::new();
    for (i, h) in headers.iter().enumerate() {
        header_name(errs, &format!("{path}[{i}].name"), &h.name);
        if !seen.insert(h.name.to_ascii_lowercase()) {
            errs.add(path, format!("Duplicate value: {:?}", h.name));
        }
    }
}

fn header_modifier(errs: &mut Errors, path: &str, m: &HeaderModifier) {
    for (list, items) in [("set", &m.set), ("add", &m.add)] {
        let path = format!("{path}.{list}");
        max_items(errs, &path, items.len(), 0, 16);
        let mut seen = BTreeSet::new();
        for (i, h) in items.iter().enumerate() {
            header_name(errs, &format!("{path}[{i}].name"), &h.name);
            if !seen.insert(h.name.to_ascii_lowercase()) {
                errs.add(&path, format!("Duplicate value: {:?}", h.name));
            }
        }
    }
    max_items(errs, &format!("{path}.remove"), m.remove.len(), 0, 16);
}

fn path_modifier(errs: &mut Errors, path: &str, m: &HttpPathModifier) {
    let (full, prefix) = (&m.replace_full_path, &m.replace_prefix_match);
    match m.modifier_type {
        PathModifierType::ReplaceFullPath if full.is_none() => errs.add(
            path,
            "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
        ),
        PathModifierType::ReplacePrefixMatch if prefix.is_none() => errs.add(
            path,
            "replacePrefixMatch must be specified when type is set to 'ReplacePrefixMatch'",
        ),
        _ => {}
    }
    if full.is_some() && m.modifier_type != PathModifierType::ReplaceFullPath {
        errs.add(
            path,
            "type must be 'ReplaceFullPath' when replaceFullPath is set",
        );
    }
    if prefix.is_some() && m.modifier_type != PathModifierType::ReplacePrefixMatch {
        errs.add(
            path,
            "type must be 'ReplacePrefixMatch' when replacePrefixMatch is set",
        );
    }
}

fn mirror(errs: &mut Errors, path: &str, m: &RequestMirror) {
    backend_port(
        errs,
        &format!("{path}.backendRef"),
        &m.backend_ref.group,
        &m.backend_ref.kind,
        m.backend_ref.port,
    );
    if m.percent.is_some() && m.fraction.is_some() {
        errs.add(
            path,
            "Only one of percent or fraction may be specified in HTTPRequestMirrorFilter",
        );
    }
    if let Some(p) = m.percent
        && p > 100
    {
        errs.add(
            format!("{path}.percent"),
            format!("{p}: should be less than or equal to 100"),
        );
    }
    if let Some(f) = m.fraction {
        if f.numerator > f.denominator {
            errs.add(
                format!("{path}.fraction"),
                "numerator must be less than or equal to denominator",
            );
        }
        if f.denominator == 0 {
            errs.add(
                format!("{path}.fraction.denominator"),
                "should be greater than or equal to 1",
            );
        }
    }
}

fn cors(errs: &mut Errors, path: &str, c: &Cors) {
    max_items(
        errs,
        &format!("{path}.allowOrigins"),
        c.allow_origins.len(),
        0,
        64,
    );
    let wildcard = |v: &[String]| v.iter().any(|s| s == "*");
    if c.allow_credentials == Some(true) {
        for (field, values) in [
            ("allowOrigins", &c.allow_origins),
            ("allowMethods", &c.allow_methods),
            ("allowHeaders", &c.allow_headers),
            ("exposeHeaders", &c.expose_headers),
        ] {
            if wildcard(values) {
                errs.add(
                    format!("{path}.{field}"),
                    format!("{field} cannot contain '*' when allowCredentials is true"),
                );
            }
        }
    }
    for (field, values) in [
        ("allowOrigins", &c.allow_origins),
        ("allowMethods", &c.allow_methods),
        ("allowHeaders", &c.allow_headers),
    ] {
        if wildcard(values) && values.len() > 1 {
            errs.add(
                format!("{path}.{field}"),
                format!("{field} cannot contain '*' alongside other values"),
            );
        }
    }
    if c.max_age == 0 {
        errs.add(
            format!("{path}.maxAge"),
            "should be greater than or equal to 1",
        );
    }
}

/// The filters of a rule (`allowed`: the types of the kind) or of a backendRef.
fn filters(errs: &mut Errors, path: &str, list: &[HttpRouteFilter], allowed: &[FilterType]) {
    max_items(errs, path, list.len(), 0, 16);
    let mut seen = BTreeSet::new();
    for (i, f) in list.iter().enumerate() {
        let here = format!("{path}[{i}]");
        if !allowed.contains(&f.filter_type) {
            errs.add(
                format!("{here}.type"),
                format!("Unsupported value: \"{:?}\"", f.filter_type),
            );
            continue;
        }
        let set = [
            (
                FilterType::RequestHeaderModifier,
                f.request_header_modifier.is_some(),
            ),
            (
                FilterType::ResponseHeaderModifier,
                f.response_header_modifier.is_some(),
            ),
            (FilterType::RequestMirror, f.request_mirror.is_some()),
            (FilterType::RequestRedirect, f.request_redirect.is_some()),
            (FilterType::URLRewrite, f.url_rewrite.is_some()),
            (FilterType::ExtensionRef, f.extension_ref.is_some()),
            (FilterType::CORS, f.cors.is_some()),
            (FilterType::ExternalAuth, f.external_auth.is_some()),
        ];
        for (t, present) in set {
            let field = t.field();
            if t == f.filter_type && !present {
                errs.add(
                    &here,
                    format!("filter.{field} must be specified for {t:?} filter.type"),
                );
            } else if t != f.filter_type && present {
                errs.add(
                    &here,
                    format!("filter.{field} must be nil if the filter.type is not {t:?}"),
                );
            }
        }
        let repeatable = matches!(
            f.filter_type,
            FilterType::RequestMirror | FilterType::ExtensionRef
        );
        if !repeatable && !seen.insert(f.filter_type.field()) {
            errs.add(
                path,
                format!("{:?} filter cannot be repeated", f.filter_type),
            );
        }
        if let Some(m) = &f.request_header_modifier {
            header_modifier(errs, &format!("{here}.requestHeaderModifier"), m);
        }
        if let Some(m) = &f.response_header_modifier {
            header_modifier(errs, &format!("{here}.responseHeaderModifier"), m);
        }
        if let Some(m) = &f.request_mirror {
            mirror(errs, &format!("{here}.requestMirror"), m);
        }
        if let Some(r) = &f.request_redirect {
            let p = format!("{here}.requestRedirect");
            if ![301, 302, 303, 307, 308].contains(&r.status_code) {
                errs.add(
                    format!("{p}.statusCode"),
                    format!(
                        "Unsupported value: {}: supported values: 301, 302, 303, 307, 308",
                        r.status_code
                    ),
                );
            }
            if let Some(s) = &r.scheme
                && s != "http"
                && s != "https"
            {
                errs.add(
                    format!("{p}.scheme"),
                    format!("Unsupported value: {s:?}: supported values: \"http\", \"https\""),
                );
            }
            if let Some(h) = &r.hostname {
                hostname(errs, &format!("{p}.hostname"), h);
            }
            port(errs, &format!("{p}.port"), r.port);
            if let Some(m) = &r.path {
                path_modifier(errs, &format!("{p}.path"), m);
            }
        }
        if let Some(r) = &f.url_rewrite {
            let p = format!("{here}.urlRewrite");
            if let Some(h) = &r.hostname {
                hostname(errs, &format!("{p}.hostname"), h);
            }
            if let Some(m) = &r.path {
                path_modifier(errs, &format!("{p}.path"), m);
            }
        }
        if let Some(c) = &f.cors {
            cors(errs, &format!("{here}.cors"), c);
        }
    }
    if seen.contains("requestRedirect") && seen.contains("urlRewrite") {
        errs.add(
            path,
            "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
        );
    }
}

/// "Must have port for Service reference".
fn backend_port(errs: &mut Errors, path: &str, group: &str, kind: &str, port_value: Option<u32>) {
    if group.is_empty() && kind == "Service" && port_value.is_none() {
        errs.add(path, "Must have port for Service reference");
    }
    port(errs, &format!("{path}.port"), port_value);
}

fn backend_refs(errs: &mut Errors, path: &str, refs: &[HttpBackendRef], allowed: &[FilterType]) {
    max_items(errs, path, refs.len(), 0, 16);
    for (i, b) in refs.iter().enumerate() {
        let here = format!("{path}[{i}]");
        name(errs, &format!("{here}.name"), &b.name, 253);
        backend_port(errs, &here, &b.group, &b.kind, b.port);
        if b.weight > 1_000_000 {
            errs.add(
                format!("{here}.weight"),
                "should be less than or equal to 1000000",
            );
        }
        filters(errs, &format!("{here}.filters"), &b.filters, allowed);
    }
}

const HTTP_FILTERS: [FilterType; 8] = [
    FilterType::RequestHeaderModifier,
    FilterType::ResponseHeaderModifier,
    FilterType::RequestMirror,
    FilterType::RequestRedirect,
    FilterType::URLRewrite,
    FilterType::ExtensionRef,
    FilterType::CORS,
    FilterType::ExternalAuth,
];

const GRPC_FILTERS: [FilterType; 4] = [
    FilterType::RequestHeaderModifier,
    FilterType::ResponseHeaderModifier,
    FilterType::RequestMirror,
    FilterType::ExtensionRef,
];

pub(in crate::validate) fn http_route(errs: &mut Errors, route: &HttpRouteSpec) {
    parent_refs(errs, &route.parent_refs);
    hostnames(errs, &route.hostnames, 0);
    max_items(errs, "spec.rules", route.rules.len(), 0, 16);
    let methods = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    let mut names = BTreeSet::new();
    for (i, rule) in route.rules.iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        if let Some(n) = &rule.name {
            name(errs, &format!("{path}.name"), n, 253);
            if !names.insert(n) {
                errs.add("spec.rules", "Rule name must be unique within the route");
            }
        }
        max_items(errs, &format!("{path}.matches"), rule.matches.len(), 0, 64);
        for (j, m) in rule.matches.iter().enumerate() {
            let mp = format!("{path}.matches[{j}]");
            let v = &m.path.value;
            if m.path.match_type != PathMatchType::RegularExpression {
                if !v.starts_with('/') {
                    errs.add(format!("{mp}.path"), "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']");
                }
                if v.contains("//") {
                    errs.add(
                        format!("{mp}.path"),
                        "must not contain '//' when type one of ['Exact', 'PathPrefix']",
                    );
                }
                for bad in ["/./", "/../", "%2f", "%2F", "#"] {
                    if v.contains(bad) {
                        errs.add(
                            format!("{mp}.path"),
                            format!(
                                "must not contain '{bad}' when type one of ['Exact', 'PathPrefix']"
                            ),
                        );
                    }
                }
                if v.ends_with("/..") || v.ends_with("/.") {
                    errs.add(
                        format!("{mp}.path"),
                        "must not end with '/..' or '/.' when type one of ['Exact', 'PathPrefix']",
                    );
                }
            }
            if v.len() > 1024 {
                errs.add(format!("{mp}.path.value"), "may not be longer than 1024");
            }
            header_matches(errs, &format!("{mp}.headers"), &m.headers);
            header_matches(errs, &format!("{mp}.queryParams"), &m.query_params);
            if let Some(method) = &m.method
                && !methods.contains(&method.as_str())
            {
                errs.add(
                    format!("{mp}.method"),
                    format!("Unsupported value: {method:?}"),
                );
            }
        }
        filters(
            errs,
            &format!("{path}.filters"),
            &rule.filters,
            &HTTP_FILTERS,
        );
        let prefix_rewrite = rule.filters.iter().any(|f| {
            f.url_rewrite
                .as_ref()
                .and_then(|r| r.path.as_ref())
                .is_some_and(|p| p.modifier_type == PathModifierType::ReplacePrefixMatch)
                || f.request_redirect
                    .as_ref()
                    .and_then(|r| r.path.as_ref())
                    .is_some_and(|p| p.modifier_type == PathModifierType::ReplacePrefixMatch)
        });
        if prefix_rewrite
            && (rule.matches.len() != 1
                || rule.matches[0].path.match_type != PathMatchType::PathPrefix)
        {
            errs.add(
                &path,
                "When using URL Rewrite or Request Redirect filter with path.replacePrefixMatch, exactly one PathPrefix match must be specified",
            );
        }
        backend_refs(
            errs,
            &format!("{path}.backendRefs"),
            &rule.backend_refs,
            &HTTP_FILTERS,
        );
        let redirect = rule
            .filters
            .iter()
            .any(|f| f.filter_type == FilterType::RequestRedirect);
        if redirect && !rule.backend_refs.is_empty() {
            errs.add(
                &path,
                "RequestRedirect filter must not be used together with backendRefs",
            );
        }
        if let Some(t) = &rule.timeouts {
            duration(errs, &format!("{path}.timeouts.request"), &t.request);
            duration(
                errs,
                &format!("{path}.timeouts.backendRequest"),
                &t.backend_request,
            );
            if let (Some(req), Some(back)) = (&t.request, &t.backend_request)
                && let (Some(req), Some(back)) = (
                    super::super::parse_duration(req),
                    super::super::parse_duration(back),
                )
                && req != 0
                && back > req
            {
                errs.add(
                    format!("{path}.timeouts"),
                    "backendRequest timeout cannot be longer than request timeout",
                );
            }
        }
        if let Some(r) = &rule.retry {
            duration(errs, &format!("{path}.retry.backoff"), &r.backoff);
            for (k, c) in r.codes.iter().enumerate() {
                if !(400..=599).contains(c) {
                    errs.add(
                        format!("{path}.retry.codes[{k}]"),
                        format!("{c}: should be between 400 and 599"),
                    );
                }
            }
        }
    }
}

pub(in crate::validate) fn grpc_route(errs: &mut Errors, route: &GrpcRouteSpec) {
    parent_refs(errs, &route.parent_refs);
    hostnames(errs, &route.hostnames, 0);
    max_items(errs, "spec.rules", route.rules.len(), 0, 16);
    for (i, rule) in route.rules.iter().enumerate() {
        let path = format!("spec.rules[{i}]");
        max_items(errs, &format!("{path}.matches"), rule.matches.len(), 0, 64);
        for (j, m) in rule.matches.iter().enumerate() {
            let mp = format!("{path}.matches[{j}]");
            header_matches(errs, &format!("{mp}.headers"), &m.headers);
            let Some(method) = &m.method else { continue };
            if method.service.is_none() && method.method.is_none() {
                errs.add(
                    format!("{mp}.method"),
                    "One or both of 'service' or 'method' must be specified",
                );
            }
            if method.match_type == crate::gateway_api::MatchType::Exact {
                if let Some(s) = &method.service
                    && !re(r"^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$").is_match(s)
                {
                    errs.add(format!("{mp}.method.service"), "service must only contain valid characters (matching ^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)");
                }
                if let Some(m) = &method.method
                    && !re(r"^[A-Za-z_][A-Za-z_0-9]*$").is_match(m)
                {
                    errs.add(format!("{mp}.method.method"), "method must only contain valid characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)");
                }
            }
        }
        filters(
            errs,
            &format!("{path}.filters"),
            &rule.filters,
            &GRPC_FILTERS,
        );
        backend_refs(
            errs,
            &format!("{path}.backendRefs"),
            &rule.backend_refs,
            &GRPC_FILTERS,
        );
    }
}

pub(in crate::validate) fn l4_route(errs: &mut Errors, kind: ConfigKind, route: &L4RouteSpec) {
    parent_refs(errs, &route.parent_refs);
    if kind == ConfigKind::TcpRoute {
        if !route.hostnames.is_empty() {
            errs.add("spec.hostnames", "unknown field `hostnames` of TCPRoute");
        }
    } else {
        hostnames(errs, &route.hostnames, 0);
    }
    max_items(errs, "spec.rules", route.rules.len(), 1, 16);
    for (i, rule) in route.rules.iter().enumerate() {
        let path = format!("spec.rules[{i}].backendRefs");
        max_items(errs, &path, rule.backend_refs.len(), 1, 16);
        for (j, b) in rule.backend_refs.iter().enumerate() {
            let here = format!("{path}[{j}]");
            name(errs, &format!("{here}.name"), &b.name, 253);
            backend_port(errs, &here, &b.group, &b.kind, b.port);
        }
    }
}
