//! An `HTTPMatchRequest` as an Envoy `RouteMatch`, as istiod's `TranslateRouteMatch` makes it:
//! the path (case-insensitive with `ignoreUriCase`), the header matchers (`headers`, then
//! `withoutHeaders` inverted, sorted by name), the `:method`, `:authority` and `:scheme`
//! pseudo-header matchers, the query parameter matchers, and JWT claim headers as dynamic
//! metadata matchers ([`claims`]); a Gateway API route's prefixes are path-separated. Which
//! match blocks apply to a proxy at all is [`super::route`]'s business.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher::HeaderMatchSpecifier,
    query_parameter_matcher::QueryParameterMatchSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::BoolValue;

use axon_config::istio::{HttpMatchRequest, StringMatch, routing_claim};

mod claims;

/// The RouteMatch of match block `m` (none: every path). Under Gateway API semantics
/// (`gateway_semantics`, istiod's `UseGatewaySemantics`) a `uri.prefix` other than `/` is a
/// path-separated prefix, its one trailing `/` trimmed: `/api/` matches `/api` and `/api/x`,
/// never `/apix` (as istiod's `translateRouteMatch`).
pub(super) fn route_match(m: Option<&HttpMatchRequest>, gateway_semantics: bool) -> RouteMatch {
    let mut out = RouteMatch {
        path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
        ..Default::default()
    };
    let Some(m) = m else { return out };
    let is_claim = |name: &String| routing_claim(name).is_some();
    let (claims, headers): (BTreeMap<_, _>, BTreeMap<_, _>) =
        m.headers.iter().partition(|(name, _)| is_claim(name));
    let (without_claims, without): (BTreeMap<_, _>, BTreeMap<_, _>) = m
        .without_headers
        .iter()
        .partition(|(name, _)| is_claim(name));
    out.headers = header_matchers(&headers, &without);
    out.dynamic_metadata = claims
        .iter()
        .filter_map(|(name, sm)| claims::claim_matcher(name, sm, false))
        .chain(
            without_claims
                .iter()
                .filter_map(|(name, sm)| claims::claim_matcher(name, sm, true)),
        )
        .collect();
    if let Some(uri) = &m.uri {
        out.path_specifier = Some(if let Some(exact) = &uri.exact {
            PathSpecifier::Path(exact.clone())
        } else if let Some(prefix) = &uri.prefix {
            if gateway_semantics && prefix != "/" {
                let path = prefix.strip_suffix('/').unwrap_or(prefix);
                PathSpecifier::PathSeparatedPrefix(path.to_string())
            } else {
                PathSpecifier::Prefix(prefix.clone())
            }
        } else if let Some(regex) = &uri.regex {
            PathSpecifier::SafeRegex(regex_matcher(regex))
        } else if let Some(suffix) = &uri.suffix {
            PathSpecifier::SafeRegex(regex_matcher(&format!(".*{}", regex::escape(suffix))))
        } else {
            PathSpecifier::Prefix("/".to_string())
        });
    }
    // istiod says it whatever the flag; Envoy applies it to `path` and `prefix` only.
    out.case_sensitive = Some(BoolValue {
        value: !m.ignore_uri_case,
    });
    for (name, sm) in [
        (":method", &m.method),
        (":authority", &m.authority),
        (":scheme", &m.scheme),
    ] {
        if let Some(sm) = sm {
            out.headers.push(header_matcher(name, sm));
        }
    }
    out.query_parameters = m
        .query_params
        .iter()
        .map(|(name, sm)| QueryParameterMatcher {
            name: name.clone(),
            query_parameter_match_specifier: Some(match string_matcher(sm) {
                Some(matcher) => QueryParameterMatchSpecifier::StringMatch(matcher),
                None => QueryParameterMatchSpecifier::PresentMatch(true),
            }),
        })
        .collect();
    out
}

/// `headers`, then `withoutHeaders` inverted, sorted by name (a stable sort: for a name in
/// both, the `headers` one first). An inverted matcher that is not a presence match treats a
/// missing header as empty, so that a request without the header is not excluded.
fn header_matchers(
    headers: &BTreeMap<&String, &StringMatch>,
    without: &BTreeMap<&String, &StringMatch>,
) -> Vec<HeaderMatcher> {
    let mut out: Vec<HeaderMatcher> = headers
        .iter()
        .map(|(name, sm)| header_matcher(name, sm))
        .collect();
    out.extend(without.iter().map(|(name, sm)| HeaderMatcher {
        invert_match: true,
        // Envoy refuses it beside `present_match`.
        treat_missing_header_as_empty: !is_presence(sm),
        ..header_matcher(name, sm)
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// A header matcher (names lower-cased), `present_match` for a presence match, as istiod's
/// `translateHeaderMatch`.
fn header_matcher(name: &str, sm: &StringMatch) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_ascii_lowercase(),
        header_match_specifier: Some(match string_matcher(sm) {
            Some(matcher) => HeaderMatchSpecifier::StringMatch(matcher),
            None => HeaderMatchSpecifier::PresentMatch(true),
        }),
        ..Default::default()
    }
}

fn is_presence(sm: &StringMatch) -> bool {
    string_matcher(sm).is_none()
}

/// Envoy's string matcher for `sm`; `None` for a presence match: no match type (`{}`), or
/// the regex `*`, which is no RE2 regex (istiod's `canBeConvertedToPresentMatch`).
pub(super) fn string_matcher(sm: &StringMatch) -> Option<StringMatcher> {
    let pattern = if let Some(v) = &sm.exact {
        MatchPattern::Exact(v.clone())
    } else if let Some(v) = &sm.prefix {
        MatchPattern::Prefix(v.clone())
    } else if let Some(v) = sm.regex.as_ref().filter(|r| *r != "*") {
        MatchPattern::SafeRegex(regex_matcher(v))
    } else if let Some(v) = &sm.suffix {
        MatchPattern::Suffix(v.clone())
    } else {
        return None;
    };
    Some(StringMatcher {
        match_pattern: Some(pattern),
        ..Default::default()
    })
}

fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher {
        regex: regex.to_string(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
