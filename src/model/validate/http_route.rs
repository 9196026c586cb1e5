//! VirtualService HTTP routes: the matches (URI, headers, port, source labels, gateways) and
//! their string matches, whose regexes are RE2 (read through `fields::re2_compat`).

use std::sync::LazyLock;

use regex::Regex;

use super::destination::{gateway_name, route_destinations};
use super::fields::{Errors, PORT_RANGE, first_line, port_in_range, re, re2_compat};
use super::names::labels;
use crate::model::istio::{Destination, HttpMatchRequest, HttpRoute, StringMatch};

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
    for (name, sm) in &m.headers {
        let p = format!("{path}.headers[{name}]");
        if name.is_empty() {
            errs.add(&p, "header name cannot be empty");
        } else if let Some(claim) = name.strip_prefix(JWT_CLAIM_PREFIX) {
            if claim.is_empty() {
                errs.add(&p, "JWT claim name cannot be empty");
            }
            if !bound_to_gateway {
                errs.add(
                    &p,
                    "JWT claim based routing is only supported for virtual services bound to gateways (not mesh)",
                );
            }
        } else if !PSEUDO_HEADERS.contains(&name.as_str()) && !HEADER_NAME.is_match(name) {
            errs.add(
                &p,
                format!("header name {name:?} is not a valid header name"),
            );
        }
        string_match(errs, &p, sm, false);
    }
    if let Some(port) = m.port {
        if port != 0 && !port_in_range(port.into()) {
            errs.add(format!("{path}.port"), PORT_RANGE);
        }
    }
    labels(errs, &format!("{path}.sourceLabels"), &m.source_labels);
    for (k, g) in m.gateways.iter().enumerate() {
        gateway_name(errs, &format!("{path}.gateways[{k}]"), g);
    }
}

const JWT_CLAIM_PREFIX: &str = "@request.auth.claims.";
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
    use crate::model::validate::fixtures::{invalid, valid};

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
    }
}
