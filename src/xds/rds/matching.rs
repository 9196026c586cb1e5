//! An `HTTPMatchRequest` as an Envoy `RouteMatch`: the path, the headers.

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, RouteMatch, header_matcher::HeaderMatchSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};

use crate::model::istio::{HttpMatchRequest, StringMatch};

pub(super) fn route_match(m: Option<&HttpMatchRequest>) -> RouteMatch {
    let mut out = RouteMatch {
        path_specifier: Some(PathSpecifier::Prefix("/".to_string())),
        ..Default::default()
    };
    let Some(m) = m else { return out };
    if let Some(uri) = &m.uri {
        out.path_specifier = Some(if let Some(exact) = &uri.exact {
            PathSpecifier::Path(exact.clone())
        } else if let Some(prefix) = &uri.prefix {
            PathSpecifier::Prefix(prefix.clone())
        } else if let Some(regex) = &uri.regex {
            PathSpecifier::SafeRegex(regex_matcher(regex))
        } else if let Some(suffix) = &uri.suffix {
            PathSpecifier::SafeRegex(regex_matcher(&format!(".*{}", regex::escape(suffix))))
        } else {
            PathSpecifier::Prefix("/".to_string())
        });
    }
    // A header with no match type (`{}`) must be present, as istiod has it.
    out.headers = m
        .headers
        .iter()
        .map(|(name, sm)| HeaderMatcher {
            name: name.to_ascii_lowercase(),
            header_match_specifier: Some(match string_matcher(sm) {
                Some(matcher) => HeaderMatchSpecifier::StringMatch(matcher),
                None => HeaderMatchSpecifier::PresentMatch(true),
            }),
            ..Default::default()
        })
        .collect();
    out
}

fn regex_matcher(regex: &str) -> RegexMatcher {
    RegexMatcher {
        regex: regex.to_string(),
        ..Default::default()
    }
}

pub(super) fn string_matcher(sm: &StringMatch) -> Option<StringMatcher> {
    let pattern = if let Some(v) = &sm.exact {
        MatchPattern::Exact(v.clone())
    } else if let Some(v) = &sm.prefix {
        MatchPattern::Prefix(v.clone())
    } else if let Some(v) = &sm.regex {
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
