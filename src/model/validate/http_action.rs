//! VirtualService HTTP route actions, as istiod's validation has them (istio
//! `pkg/config/validation/virtualservice.go` `validateHTTPRoute`, `validateHTTPRouteConflict`,
//! and `validation.go` `validateHTTPRedirect`, `validateHTTPDirectResponse`,
//! `validateHTTPRewrite`, `agent.ValidateHTTPRetry`): which actions may go together, redirects,
//! direct responses, rewrites, retries, timeouts and header operations.

use std::collections::BTreeMap;

use super::fields::{Errors, duration, first_line, re, re2_compat};
use crate::model::istio::{HeaderOperations, Headers, HttpMatchRequest, HttpRoute};

/// The `retryOn` policies Envoy knows (`x-envoy-retry-on` and `x-envoy-retry-grpc-on`).
const RETRY_ON: [&str; 16] = [
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// Checks the actions of `route` (at `path`, e.g. `spec.http[0]`).
pub(super) fn http_actions(errs: &mut Errors, path: &str, route: &HttpRoute) {
    conflicts(errs, path, route);
    if let Some(timeout) = &route.timeout {
        duration(errs, &format!("{path}.timeout"), timeout, true);
    }
    if let Some(redirect) = &route.redirect {
        let p = format!("{path}.redirect");
        if !redirect.uri.is_empty() && !redirect.prefix_rewrite.is_empty() {
            errs.add(&p, "redirect may only specify one of uri or prefixRewrite");
        }
        let not_prefix = |m: &HttpMatchRequest| m.uri.as_ref().is_some_and(|u| u.prefix.is_none());
        if !redirect.prefix_rewrite.is_empty() && route.matches.iter().any(not_prefix) {
            errs.add(
                format!("{p}.prefixRewrite"),
                "redirect prefixRewrite requires all URI matches to use prefix match type",
            );
        }
        if redirect.uri.is_empty()
            && redirect.prefix_rewrite.is_empty()
            && redirect.authority.is_empty()
            && redirect.port.is_none()
            && redirect.derive_port.is_none()
            && redirect.scheme.is_empty()
        {
            errs.add(&p, "redirect must specify URI, authority, scheme, or port");
        }
        if let Some(code) = redirect
            .redirect_code
            .filter(|c| *c != 0 && !(300..=399).contains(c))
        {
            errs.add(
                format!("{p}.redirectCode"),
                format!("{code} is not a valid redirect code, must be 3xx"),
            );
        }
        if !["", "http", "https"].contains(&redirect.scheme.as_str()) {
            errs.add(
                format!("{p}.scheme"),
                r#"invalid redirect scheme, must be "http" or "https""#,
            );
        }
        if let Some(port) = redirect.port.filter(|p| *p == 0 || *p > 65535) {
            errs.add(
                format!("{p}.port"),
                format!("port number {port} must be in the range 1..65535"),
            );
        }
        if let Some(derive) = &redirect.derive_port
            && !["FROM_PROTOCOL_DEFAULT", "FROM_REQUEST_PORT"].contains(&derive.as_str())
        {
            errs.add(
                format!("{p}.derivePort"),
                format!("Unsupported value: {derive:?}: supported values: \"FROM_PROTOCOL_DEFAULT\", \"FROM_REQUEST_PORT\""),
            );
        }
    }
    if let Some(direct) = &route.direct_response {
        let p = format!("{path}.directResponse");
        if !(200..=599).contains(&direct.status) {
            errs.add(
                format!("{p}.status"),
                format!("HTTP status {} is not in range 200-599", direct.status),
            );
        }
        let size = direct.body.as_ref().map_or(0, |b| {
            b.string
                .as_ref()
                .map(String::len)
                .or(b.bytes.as_ref().map(|b| b.len() / 4 * 3))
                .unwrap_or(0)
        });
        if size > 1 << 20 {
            errs.add(
                format!("{p}.body"),
                "large direct_responses may impact control plane performance, must be less than 1MB",
            );
        }
        if let Some(bytes) = direct.body.as_ref().and_then(|b| b.bytes.as_ref()) {
            use base64::Engine;
            if base64::engine::general_purpose::STANDARD
                .decode(bytes)
                .is_err()
            {
                errs.add(format!("{p}.body.bytes"), "not base64");
            }
        }
    }
    if let Some(rewrite) = &route.rewrite {
        let p = format!("{path}.rewrite");
        if !rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_some() {
            errs.add(&p, "rewrite may only contain one of URI or UriRegexRewrite");
        }
        if rewrite.uri.is_empty()
            && rewrite.uri_regex_rewrite.is_none()
            && rewrite.authority.is_empty()
        {
            errs.add(
                &p,
                "rewrite must specify at least one of URI, UriRegexRewrite, or authority",
            );
        }
        if let Some(regex) = &rewrite.uri_regex_rewrite {
            let rp = format!("{p}.uriRegexRewrite");
            if regex.pattern.is_empty() || regex.rewrite.is_empty() {
                errs.add(
                    &rp,
                    "UriRegexRewrite requires both Rewrite and Match fields to be specified",
                );
            } else if let Err(e) = regex::Regex::new(&re2_compat(&regex.pattern)) {
                errs.add(
                    format!("{rp}.match"),
                    format!("invalid regex: {}", first_line(&e.to_string())),
                );
            }
        }
    }
    if let Some(retries) = &route.retries {
        let p = format!("{path}.retries");
        if retries.attempts < 0 {
            errs.add(format!("{p}.attempts"), "attempts cannot be negative");
        }
        if retries.attempts == 0
            && (retries.per_try_timeout.is_some()
                || !retries.retry_on.is_empty()
                || retries.retry_remote_localities.is_some())
        {
            errs.add(
                &p,
                "http retry policy configured when attempts are set to 0 (disabled)",
            );
        }
        if let Some(per_try) = &retries.per_try_timeout {
            duration(errs, &format!("{p}.perTryTimeout"), per_try, true);
        }
        for policy in retries.retry_on.split(',').filter(|s| !s.is_empty()) {
            let status = policy.parse::<u16>().is_ok_and(|c| (100..600).contains(&c));
            if !status && !RETRY_ON.contains(&policy) {
                errs.add(
                    format!("{p}.retryOn"),
                    format!("{policy:?} is not a valid retryOn policy"),
                );
            }
        }
        if let Some(backoff) = &retries.backoff {
            duration(errs, &format!("{p}.backoff"), backoff, true);
        }
    }
    if let Some(headers) = &route.headers {
        header_operations(errs, &format!("{path}.headers"), headers);
    }
    for (k, rd) in route.route.iter().enumerate() {
        if let Some(headers) = &rd.headers {
            header_operations(errs, &format!("{path}.route[{k}].headers"), headers);
        }
    }
    authority_once(errs, path, route);
}

fn conflicts(errs: &mut Errors, path: &str, r: &HttpRoute) {
    let mut both = |what: &str| errs.add(path, format!("HTTP route cannot contain both {what}"));
    if r.redirect.is_some() {
        if !r.route.is_empty() {
            both("route and redirect");
        }
        if r.fault.is_some() {
            both("fault and redirect");
        }
        if r.rewrite.is_some() {
            both("rewrite and redirect");
        }
        if r.direct_response.is_some() {
            both("directResponse and redirect");
        }
    } else if r.direct_response.is_some() {
        if !r.route.is_empty() {
            both("route and directResponse");
        }
        if r.fault.is_some() {
            both("fault and directResponse");
        }
        if r.rewrite.is_some() {
            both("rewrite and directResponse");
        }
    } else if r.route.is_empty() && r.delegate.is_none() {
        errs.add(path, "HTTP route, redirect or directResponse is required");
    }
    if r.mirror.is_some() && !r.mirrors.is_empty() {
        errs.add(path, "HTTP route cannot contain both mirror and mirrors");
    }
}

fn header_operations(errs: &mut Errors, path: &str, headers: &Headers) {
    let ops = [
        ("request", headers.request.as_ref(), true),
        ("response", headers.response.as_ref(), false),
    ];
    for (side, ops, request) in ops {
        let Some(ops) = ops else { continue };
        let HeaderOperations { set, add, remove } = ops;
        for (verb, map) in [("set", set), ("add", add)] {
            for (name, value) in map {
                let p = format!("{path}.{side}.{verb}[{name}]");
                header_name(errs, &p, name, request);
                header_value(errs, &p, value);
            }
        }
        for (i, name) in remove.iter().enumerate() {
            header_name(errs, &format!("{path}.{side}.remove[{i}]"), name, false);
        }
    }
}

/// A header an operation names: never empty nor a pseudo-header; `:authority` and `host` are
/// allowed where the authority may be rewritten (a request's `set` and `add`).
fn header_name(errs: &mut Errors, path: &str, name: &str, authority_allowed: bool) {
    let authority = name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host");
    if name.is_empty() {
        errs.add(path, "header name cannot be empty");
    } else if authority && authority_allowed {
    } else if name.eq_ignore_ascii_case("host") {
        errs.add(
            path,
            format!("invalid header {name:?}: cannot set Host header"),
        );
    } else if name.starts_with(':') {
        errs.add(
            path,
            format!("invalid header {name:?}: header cannot have \":\" prefix"),
        );
    }
}

fn header_value(errs: &mut Errors, path: &str, value: &str) {
    static VALUE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| re("^[^\u{0}-\u{8}\u{A}-\u{1F}\u{7F}]*$"));
    if !VALUE.is_match(value) {
        errs.add(
            path,
            format!("header value configuration {value:?} is invalid"),
        );
    }
}

/// The authority may be rewritten in one place only (`rewrite.authority` or one header).
fn authority_once(errs: &mut Errors, path: &str, route: &HttpRoute) {
    let mut current = route
        .rewrite
        .as_ref()
        .map(|r| r.authority.clone())
        .filter(|a| !a.is_empty());
    let request = route.headers.as_ref().and_then(|h| h.request.as_ref());
    let empty = BTreeMap::new();
    let maps = [
        request.map_or(&empty, |r| &r.set),
        request.map_or(&empty, |r| &r.add),
    ];
    for (name, value) in maps.into_iter().flatten() {
        if !(name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")) {
            continue;
        }
        if let Some(have) = &current {
            errs.add(
                format!("{path}.headers"),
                format!("authority header cannot be set multiple times: have {have:?}, attempting to set {value:?}"),
            );
        }
        current = Some(value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::check;

    fn route(http: &str) -> Result<(), Vec<String>> {
        check(
            "VirtualService",
            &format!("hosts: [a.example.com]\nhttp:\n- {http}"),
        )
    }

    #[test]
    fn actions_that_cannot_go_together_are_rejected() {
        let errs = route("{redirect: {uri: /b}, route: [{destination: {host: a}}]}").unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0]: HTTP route cannot contain both route and redirect"]
        );
        let errs = route("{directResponse: {status: 200}, rewrite: {uri: /x}}").unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0]: HTTP route cannot contain both rewrite and directResponse"]
        );
        let errs = route("{match: [{uri: {prefix: /}}]}").unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0]: HTTP route, redirect or directResponse is required"]
        );
    }

    #[test]
    fn redirects_direct_responses_and_rewrites_are_checked() {
        assert!(route("{redirect: {uri: /b, redirectCode: 302}}").is_ok());
        let errs = route("{redirect: {redirectCode: 200, scheme: ftp}}").unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].redirect.redirectCode: 200 is not a valid redirect code, must be 3xx",
                "spec.http[0].redirect.scheme: invalid redirect scheme, must be \"http\" or \"https\"",
            ]
        );
        let errs = route("{redirect: {redirectCode: 301}}").unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0].redirect: redirect must specify URI, authority, scheme, or port"]
        );
        let errs =
            route("{match: [{uri: {exact: /a}}], redirect: {prefixRewrite: /b}}").unwrap_err();
        assert!(
            errs[0].contains("requires all URI matches to use prefix"),
            "{errs:?}"
        );
        let errs = route("{directResponse: {status: 700}}").unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0].directResponse.status: HTTP status 700 is not in range 200-599"]
        );
        let errs = route("{rewrite: {uriRegexRewrite: {match: '(', rewrite: x}}, route: [{destination: {host: a}}]}").unwrap_err();
        assert!(
            errs[0].starts_with("spec.http[0].rewrite.uriRegexRewrite.match: invalid regex"),
            "{errs:?}"
        );
    }

    #[test]
    fn timeouts_and_retries_are_checked() {
        let dest = "route: [{destination: {host: a}}]";
        let errs = route(&format!("{{timeout: banana, {dest}}}")).unwrap_err();
        assert_eq!(errs, ["spec.http[0].timeout: invalid duration \"banana\""]);
        let errs = route(&format!("{{retries: {{attempts: -5}}, {dest}}}")).unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0].retries.attempts: attempts cannot be negative"]
        );
        let errs = route(&format!(
            "{{retries: {{attempts: 0, retryOn: 5xx}}, {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].retries: http retry policy configured when attempts are set to 0 (disabled)"
            ]
        );
        let errs = route(&format!(
            "{{retries: {{attempts: 2, retryOn: '5xx,503,nope', perTryTimeout: 0.5ms}}, {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].retries.perTryTimeout: duration must be at least 1ms",
                "spec.http[0].retries.retryOn: \"nope\" is not a valid retryOn policy",
            ]
        );
    }

    #[test]
    fn header_operations_are_checked() {
        let dest = "route: [{destination: {host: a}}]";
        let errs = route(&format!(
            "{{headers: {{request: {{set: {{':path': x}}}}, response: {{set: {{host: h}}, remove: ['']}}}}, {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].headers.request.set[:path]: invalid header \":path\": header cannot have \":\" prefix",
                "spec.http[0].headers.response.set[host]: invalid header \"host\": cannot set Host header",
                "spec.http[0].headers.response.remove[0]: header name cannot be empty",
            ]
        );
        let errs = route(&format!(
            "{{rewrite: {{authority: a.example}}, headers: {{request: {{set: {{host: b.example}}}}}}, {dest}}}"
        ))
        .unwrap_err();
        assert!(
            errs[0].contains("authority header cannot be set multiple times"),
            "{errs:?}"
        );
        assert!(
            route(&format!(
                "{{headers: {{request: {{set: {{host: b.example}}}}}}, {dest}}}"
            ))
            .is_ok()
        );
    }
}
