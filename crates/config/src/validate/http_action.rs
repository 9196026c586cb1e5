//! VirtualService HTTP route actions, as istiod's validation has them (istio
//! `pkg/config/validation/virtualservice.go` `validateHTTPRoute`, `validateHTTPRouteConflict`,
//! and `validation.go` `validateHTTPRedirect`, `validateHTTPDirectResponse`,
//! `validateHTTPRewrite`, `agent.ValidateHTTPRetry`, `validateHTTPFaultInjection`,
//! `validateCORSPolicy`, `validateHTTPMirrors`): which actions may go together, redirects,
//! direct responses, rewrites, retries, timeouts, header operations, faults, CORS and mirrors.

use std::collections::BTreeMap;

use super::fields::{Errors, duration, first_line, re, re2_compat};
use crate::istio::{
    CorsPolicy, GRPC_STATUS_CODES, HeaderOperations, Headers, HttpFault, HttpMatchRequest,
    HttpRoute, Percent,
};

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
    if let Some(fault) = &route.fault {
        http_fault(errs, &format!("{path}.fault"), fault);
    }
    if let Some(cors) = &route.cors_policy {
        cors_policy(errs, &format!("{path}.corsPolicy"), cors);
    }
    if let Some(p) = &route.mirror_percentage {
        percentage(errs, &format!("{path}.mirrorPercentage"), p);
    }
    if let Some(p) = route.mirror_percent.filter(|p| *p > 100) {
        errs.add(
            format!("{path}.mirrorPercent"),
            format!("mirror_percent must have a max value of 100 (it has {p})"),
        );
    }
    for (i, m) in route.mirrors.iter().enumerate() {
        let mp = format!("{path}.mirrors[{i}]");
        if m.destination.is_none() {
            errs.add(&mp, "destination is required for mirrors");
        }
        if let Some(p) = &m.percentage {
            percentage(errs, &format!("{mp}.percentage"), p);
        }
    }
}

/// istiod's `validatePercentage`: 0, or 0.0001 to 100.
fn percentage(errs: &mut Errors, path: &str, p: &Percent) {
    if p.value < 0.0 || p.value > 100.0 || (p.value > 0.0 && p.value < 0.0001) {
        errs.add(
            path,
            format!(
                "percentage {} is neither 0.0, nor in range [0.0001, 100.0]",
                p.value
            ),
        );
    }
}

fn http_fault(errs: &mut Errors, path: &str, fault: &HttpFault) {
    if fault.abort.is_none() && fault.delay.is_none() {
        errs.add(
            path,
            "HTTP fault injection must have an abort and/or a delay",
        );
    }
    if let Some(abort) = &fault.abort {
        let p = format!("{path}.abort");
        if let Some(pc) = &abort.percentage {
            percentage(errs, &format!("{p}.percentage"), pc);
        }
        match (&abort.http_status, &abort.grpc_status, &abort.http2_error) {
            (Some(status), _, _) if !(200..=599).contains(status) => errs.add(
                format!("{p}.httpStatus"),
                format!("HTTP status {status} is not in range 200-599"),
            ),
            (None, Some(name), _) if !GRPC_STATUS_CODES.contains(&name.as_str()) => errs.add(
                format!("{p}.grpcStatus"),
                format!("gRPC status {name:?} is not supported, for example 'NOT_FOUND'"),
            ),
            (None, None, Some(_)) => errs.add(
                format!("{p}.http2Error"),
                "HTTP/2 abort fault injection not supported yet",
            ),
            _ => {}
        }
    }
    if let Some(delay) = &fault.delay {
        let p = format!("{path}.delay");
        if let Some(pc) = &delay.percentage {
            percentage(errs, &format!("{p}.percentage"), pc);
        }
        if let Some(fixed) = &delay.fixed_delay {
            duration(errs, &format!("{p}.fixedDelay"), fixed, true);
        }
        if let Some(exponential) = &delay.exponential_delay {
            duration(errs, &format!("{p}.exponentialDelay"), exponential, true);
            errs.add(
                format!("{p}.exponentialDelay"),
                "exponentialDelay not supported yet",
            );
        }
    }
}

const CORS_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

fn cors_policy(errs: &mut Errors, path: &str, cors: &CorsPolicy) {
    for (i, origin) in cors.allow_origins.iter().enumerate() {
        let p = format!("{path}.allowOrigins[{i}]");
        let value = origin
            .exact
            .as_ref()
            .or(origin.prefix.as_ref())
            .or(origin.regex.as_ref());
        if value.is_none_or(|v| v.is_empty()) {
            errs.add(&p, "'' is not a valid match type for CORS allow origins");
        }
        if let Some(regex) = &origin.regex
            && let Err(e) = regex::Regex::new(&re2_compat(regex))
        {
            errs.add(
                format!("{p}.regex"),
                format!("invalid regex: {}", first_line(&e.to_string())),
            );
        }
    }
    for method in &cors.allow_methods {
        if !CORS_METHODS.contains(&method.as_str()) {
            errs.add(
                format!("{path}.allowMethods"),
                format!("{method:?} is not a supported HTTP method"),
            );
        }
    }
    static TOKEN: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| re(r"^([-!#$%&'*+.^_`|~0-9A-Za-z]+|\*)$"));
    for (field, names) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        for name in names.iter().filter(|n| !TOKEN.is_match(n)) {
            errs.add(
                format!("{path}.{field}"),
                format!("header name {name:?} is not valid"),
            );
        }
    }
    if let Some(max_age) = &cors.max_age {
        duration(errs, &format!("{path}.maxAge"), max_age, true);
        if super::fields::parse_duration(max_age).is_some_and(|ns| ns % 1_000_000_000 != 0) {
            errs.add(
                format!("{path}.maxAge"),
                "max_age duration is accurate only to seconds precision",
            );
        }
    }
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

#[cfg(test)]
mod more_tests {
    use super::super::fixtures::check;

    fn route(http: &str) -> Result<(), Vec<String>> {
        check(
            "VirtualService",
            &format!("hosts: [a.example.com]\nhttp:\n- {http}"),
        )
    }

    #[test]
    fn faults_cors_and_mirrors_are_checked() {
        let dest = "route: [{destination: {host: a}}]";
        let errs = route(&format!(
            "{{fault: {{abort: {{httpStatus: 700, percentage: {{value: 150}}}}}}, {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].fault.abort.percentage: percentage 150 is neither 0.0, nor in range [0.0001, 100.0]",
                "spec.http[0].fault.abort.httpStatus: HTTP status 700 is not in range 200-599",
            ]
        );
        let errs = route(&format!("{{fault: {{}}, {dest}}}")).unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0].fault: HTTP fault injection must have an abort and/or a delay"]
        );
        let errs = route(&format!(
            "{{fault: {{abort: {{grpcStatus: NOPE}}}}, {dest}}}"
        ))
        .unwrap_err();
        assert!(
            errs[0].starts_with("spec.http[0].fault.abort.grpcStatus: gRPC status \"NOPE\""),
            "{errs:?}"
        );
        let errs = route(&format!(
            "{{corsPolicy: {{allowMethods: [FETCH], maxAge: 1.5s}}, {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.http[0].corsPolicy.allowMethods: \"FETCH\" is not a supported HTTP method",
                "spec.http[0].corsPolicy.maxAge: max_age duration is accurate only to seconds precision",
            ]
        );
        let errs = route(&format!(
            "{{mirror: {{host: b}}, mirrors: [{{destination: {{host: c}}}}], {dest}}}"
        ))
        .unwrap_err();
        assert_eq!(
            errs,
            ["spec.http[0]: HTTP route cannot contain both mirror and mirrors"]
        );
        assert!(route(&format!("{{mirror: {{host: b}}, mirrorPercentage: {{value: 50}}, fault: {{delay: {{fixedDelay: 1s, percentage: {{value: 10}}}}}}, {dest}}}")).is_ok());
    }
}
