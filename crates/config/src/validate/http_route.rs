//! VirtualService HTTP routes: the matches (URI, scheme, method, authority, headers and
//! headers excluded, query parameters, port, source labels and namespace, gateways) and their
//! string matches, as istiod's `validateHTTPRouteMatchRequest`. Regexes are RE2 (Envoy's
//! `safe_regex`), compiled here with the `regex` crate after `fields::re2_compat`: close to
//! RE2, not the same engine.

use std::sync::LazyLock;

use regex::Regex;

use super::destination::{gateway_name, route_destinations};
use super::fields::{Errors, PORT_RANGE, first_line, port_in_range, re, re2_compat};
use super::names::{dns1123_label, labels};
use crate::istio::{Destination, HttpMatchRequest, HttpRoute, StringMatch, routing_claim};

pub(super) fn http_route(errs: &mut Errors, path: &str, route: &HttpRoute, bound_to_gateway: bool) {
    for (j, m) in route.matches.iter().enumerate() {
        http_match(errs, &format!("{path}.match[{j}]"), m, bound_to_gateway);
    }
    let destinations: Vec<(Option<&Destination>, i64)> = route
        .route
        .iter()
        .map(|d| (d.destination.as_ref(), i64::from(d.weight)))
        .collect();
    route_destinations(errs, &format!("{path}.route"), &destinations);
    super::http_action::http_actions(errs, path, route);
}

fn http_match(errs: &mut Errors, path: &str, m: &HttpMatchRequest, bound_to_gateway: bool) {
    if let Some(uri) = &m.uri {
        string_match(errs, &format!("{path}.uri"), uri, true);
    }
    // Unlike `uri`, these may not be an empty prefix: Envoy's StringMatcher refuses one.
    for (field, sm) in [
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ] {
        if let Some(sm) = sm {
            string_match(errs, &format!("{path}.{field}"), sm, false);
        }
    }
    for (name, sm) in &m.headers {
        let p = format!("{path}.headers[{name}]");
        header_name(errs, &p, name, bound_to_gateway);
        string_match(errs, &p, sm, false);
    }
    for (name, sm) in &m.without_headers {
        let p = format!("{path}.withoutHeaders[{name}]");
        header_name(errs, &p, name, bound_to_gateway);
        // `*` is no RE2 regex: Istio takes it for the header's presence.
        if sm.regex.as_deref() != Some("*") {
            string_match(errs, &p, sm, false);
        }
    }
    for (name, sm) in &m.query_params {
        string_match(errs, &format!("{path}.queryParams[{name}]"), sm, false);
    }
    if let Some(port) = m.port
        && port != 0
        && !port_in_range(port.into())
    {
        errs.add(format!("{path}.port"), PORT_RANGE);
    }
    labels(errs, &format!("{path}.sourceLabels"), &m.source_labels);
    for (k, g) in m.gateways.iter().enumerate() {
        gateway_name(errs, &format!("{path}.gateways[{k}]"), g);
    }
    if !m.source_namespace.is_empty() && !dns1123_label(&m.source_namespace) {
        errs.add(
            format!("{path}.sourceNamespace"),
            format!("sourceNamespace match {} is invalid", m.source_namespace),
        );
    }
}

/// A header name of `headers` or `withoutHeaders` (istiod's
/// `ValidateHTTPHeaderNameOrJwtClaimRoute`): an HTTP token, a pseudo-header, or a JWT claim
/// (on a VirtualService bound to gateways only).
fn header_name(errs: &mut Errors, path: &str, name: &str, bound_to_gateway: bool) {
    if name.is_empty() {
        errs.add(path, "header name cannot be empty");
    } else if routing_claim(name).is_some() {
        // istiod's `ValidateHTTPHeaderNameOrJwtClaimRoute`: `.a.b` or `[a][b]` after the prefix.
        if !bound_to_gateway {
            errs.add(
                path,
                "JWT claim based routing is only supported for virtual services bound to gateways (not mesh)",
            );
        }
    } else if !PSEUDO_HEADERS.contains(&name) && !HEADER_NAME.is_match(name) {
        errs.add(
            path,
            format!("header name {name:?} is not a valid header name"),
        );
    }
}

const PSEUDO_HEADERS: [&str; 5] = [":method", ":scheme", ":authority", ":path", ":status"];
static HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"^[!#$%&'*+\-.^_`|~A-Za-z0-9]+$"));

/// `exact`, `prefix`, `regex` and `suffix` are a oneof: at most one may be set. An empty
/// StringMatch is valid (Istio turns a header `{}` into a presence match).
fn string_match(errs: &mut Errors, path: &str, sm: &StringMatch, is_uri: bool) {
    let set = [&sm.exact, &sm.prefix, &sm.regex, &sm.suffix]
        .iter()
        .filter(|v| v.is_some())
        .count();
    if set > 1 {
        errs.add(
            path,
            "only one of exact, prefix, regex or suffix can be set",
        );
    }
    if !is_uri && sm.prefix.as_deref() == Some("") {
        errs.add(
            format!("{path}.prefix"),
            "prefix string match should not be empty",
        );
    }
    if let Some(regex) = &sm.regex {
        let p = format!("{path}.regex");
        if regex.is_empty() {
            errs.add(&p, "regex string match should not be empty");
        } else if regex.len() > 1024 {
            errs.add(&p, "regex is too large, max length allowed is 1024");
        } else if let Err(e) = Regex::new(&re2_compat(regex)) {
            errs.add(
                &p,
                format!(
                    "invalid regex {regex:?}: {}; Istio uses RE2 style regex-based match",
                    first_line(&e.to_string())
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    #[test]
    fn virtual_service_string_matches() {
        let vs = |m: &str| {
            format!(
                "hosts: [reviews]\nhttp: [{{match: [{m}], route: [{{destination: {{host: reviews}}}}]}}]"
            )
        };
        valid(
            "VirtualService",
            &vs("{uri: {prefix: /reviews}, headers: {end-user: {regex: jas.n}}}"),
        );
        valid(
            "VirtualService",
            &vs("{headers: {cookie: {regex: '^(.*?;)?(user=dev-123)(;.*)?'}}}"),
        );
        valid(
            "VirtualService",
            &vs("{headers: {referer: {suffix: .example.com}}}"),
        );
        // RE2 reads these as literals; Rust's regex needs them rewritten.
        valid(
            "VirtualService",
            &vs(r"{uri: {regex: '^/api/{version}/x{,3}[{]\Qa.b{\E$'}}"),
        );
        // `{}` is a presence match; an empty URI prefix matches everything.
        valid(
            "VirtualService",
            &vs("{headers: {x-present: {}}, uri: {prefix: ''}}"),
        );
        invalid(
            "VirtualService",
            &vs("{uri: {exact: /a, prefix: /b}}"),
            "spec.http[0].match[0].uri: only one of exact, prefix, regex or suffix can be set",
        );
        invalid(
            "VirtualService",
            &vs("{headers: {end-user: {regex: '(unclosed'}}}"),
            "spec.http[0].match[0].headers[end-user].regex: invalid regex \"(unclosed\"",
        );
        invalid(
            "VirtualService",
            &vs("{headers: {end-user: {prefix: ''}}}"),
            "spec.http[0].match[0].headers[end-user].prefix: prefix string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{uri: {regex: ''}}"),
            "spec.http[0].match[0].uri.regex: regex string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{headers: {'bad header': {exact: x}}}"),
            "spec.http[0].match[0].headers[bad header]: header name \"bad header\" is not a valid header name",
        );
        invalid(
            "VirtualService",
            &vs("{port: 70000}"),
            "spec.http[0].match[0].port: port must be between 1-65535",
        );
        invalid(
            "VirtualService",
            &vs("{headers: {'@request.auth.claims.group': {exact: admin}}}"),
            "JWT claim based routing is only supported for virtual services bound to gateways",
        );
        // On a gateway, both of istiod's claim forms; a prefix with no claim is no header.
        let on_gateway = |m: &str| {
            format!(
                "hosts: [reviews]\ngateways: [gw]\nhttp: [{{match: [{m}], route: [{{destination: {{host: reviews}}}}]}}]"
            )
        };
        valid(
            "VirtualService",
            &on_gateway(
                "{headers: {'@request.auth.claims.group': {exact: a}, '@request.auth.claims[x][y]': {}}}",
            ),
        );
        invalid(
            "VirtualService",
            &on_gateway("{headers: {'@request.auth.claims.': {exact: a}}}"),
            "is not a valid header name",
        );
    }

    fn vs(m: &str) -> String {
        format!(
            "hosts: [reviews]\nhttp: [{{match: [{m}], route: [{{destination: {{host: reviews}}}}]}}]"
        )
    }

    #[test]
    fn scheme_method_and_authority_are_string_matches() {
        valid(
            "VirtualService",
            &vs("{method: {exact: POST}, authority: {prefix: shop.}, scheme: {regex: '^https?$'}}"),
        );
        // `{}` asks for the pseudo-header's presence.
        valid("VirtualService", &vs("{method: {}}"));
        invalid(
            "VirtualService",
            &vs("{method: {prefix: ''}}"),
            "spec.http[0].match[0].method.prefix: prefix string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{authority: {regex: '(shop'}}"),
            "spec.http[0].match[0].authority.regex: invalid regex \"(shop\"",
        );
        invalid(
            "VirtualService",
            &vs("{scheme: {regex: ''}}"),
            "spec.http[0].match[0].scheme.regex: regex string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{method: {exact: GET, prefix: P}}"),
            "spec.http[0].match[0].method: only one of exact, prefix, regex or suffix can be set",
        );
    }

    #[test]
    fn query_params_are_string_matches() {
        valid(
            "VirtualService",
            &vs("{queryParams: {a: {exact: b}, flag: {}, id: {regex: '\\d+$'}, e: {exact: ''}}}"),
        );
        invalid(
            "VirtualService",
            &vs("{queryParams: {a: {prefix: ''}}}"),
            "spec.http[0].match[0].queryParams[a].prefix: prefix string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{queryParams: {a: {regex: '[b'}}}"),
            "spec.http[0].match[0].queryParams[a].regex: invalid regex \"[b\"",
        );
    }

    #[test]
    fn without_headers_are_checked_as_headers() {
        valid(
            "VirtualService",
            &vs("{withoutHeaders: {x-skip: {}, x-debug: {exact: '1'}}}"),
        );
        // `*` is no RE2 regex, but Istio takes it for presence here.
        valid(
            "VirtualService",
            &vs("{withoutHeaders: {x-skip: {regex: '*'}}}"),
        );
        invalid(
            "VirtualService",
            &vs("{headers: {x-skip: {regex: '*'}}}"),
            "spec.http[0].match[0].headers[x-skip].regex: invalid regex \"*\"",
        );
        invalid(
            "VirtualService",
            &vs("{withoutHeaders: {'bad header': {}}}"),
            "spec.http[0].match[0].withoutHeaders[bad header]: header name \"bad header\" is not a valid header name",
        );
        invalid(
            "VirtualService",
            &vs("{withoutHeaders: {'': {}}}"),
            "spec.http[0].match[0].withoutHeaders[]: header name cannot be empty",
        );
        invalid(
            "VirtualService",
            &vs("{withoutHeaders: {x-a: {prefix: ''}}}"),
            "spec.http[0].match[0].withoutHeaders[x-a].prefix: prefix string match should not be empty",
        );
        invalid(
            "VirtualService",
            &vs("{withoutHeaders: {x-a: {regex: 'a)'}}}"),
            "spec.http[0].match[0].withoutHeaders[x-a].regex: invalid regex \"a)\"",
        );
        invalid(
            "VirtualService",
            &vs("{withoutHeaders: {'@request.auth.claims.group': {exact: admin}}}"),
            "spec.http[0].match[0].withoutHeaders[@request.auth.claims.group]: JWT claim based routing is only supported",
        );
    }

    #[test]
    fn source_namespace_is_a_dns_label() {
        valid(
            "VirtualService",
            &vs(
                "{sourceNamespace: prod, sourceLabels: {app: web}, ignoreUriCase: true, statPrefix: reviews, name: m}",
            ),
        );
        invalid(
            "VirtualService",
            &vs("{sourceNamespace: prod.eu}"),
            "spec.http[0].match[0].sourceNamespace: sourceNamespace match prod.eu is invalid",
        );
        invalid(
            "VirtualService",
            &vs("{sourceNamespace: '-prod'}"),
            "spec.http[0].match[0].sourceNamespace: sourceNamespace match -prod is invalid",
        );
    }
}
