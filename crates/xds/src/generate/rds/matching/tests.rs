//! `route_match` field by field, against the Envoy protos istiod's `TranslateRouteMatch`
//! makes for the same match block.

use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, QueryParameterMatcher, RouteMatch, header_matcher::HeaderMatchSpecifier,
    query_parameter_matcher::QueryParameterMatchSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    RegexMatcher, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::BoolValue;

use super::route_match;
use axon_config::istio::HttpMatchRequest;

/// The RouteMatch of one match block written as YAML.
fn translate(yaml: &str) -> RouteMatch {
    let m: HttpMatchRequest = serde_norway::from_str(yaml).expect("a match block");
    route_match(Some(&m), false)
}

fn exact(v: &str) -> StringMatcher {
    pattern(MatchPattern::Exact(v.to_string()))
}

fn pattern(p: MatchPattern) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(p),
        ..Default::default()
    }
}

fn regex(r: &str) -> RegexMatcher {
    RegexMatcher {
        regex: r.to_string(),
        ..Default::default()
    }
}

fn header(name: &str, spec: HeaderMatchSpecifier) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(spec),
        ..Default::default()
    }
}

fn query(name: &str, spec: QueryParameterMatchSpecifier) -> QueryParameterMatcher {
    QueryParameterMatcher {
        name: name.to_string(),
        query_parameter_match_specifier: Some(spec),
    }
}

fn case_sensitive(value: bool) -> Option<BoolValue> {
    Some(BoolValue { value })
}

#[test]
fn no_match_block_is_prefix_slash_and_says_nothing_of_case() {
    assert_eq!(
        route_match(None, false),
        RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }
    );
    // An empty block: the same, with case_sensitive said, as istiod.
    assert_eq!(
        translate("{}"),
        RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            case_sensitive: case_sensitive(true),
            ..Default::default()
        }
    );
}

#[test]
fn uri_matches_are_path_specifiers() {
    let path = |yaml: &str| translate(yaml).path_specifier.unwrap();
    assert_eq!(path("{uri: {exact: /a}}"), PathSpecifier::Path("/a".into()));
    assert_eq!(
        path("{uri: {prefix: /a}}"),
        PathSpecifier::Prefix("/a".into())
    );
    assert_eq!(
        path("{uri: {regex: '/a/.*'}}"),
        PathSpecifier::SafeRegex(regex("/a/.*"))
    );
    assert_eq!(
        path("{uri: {suffix: .js}}"),
        PathSpecifier::SafeRegex(regex(r".*\.js"))
    );
}

#[test]
fn ignore_uri_case_makes_the_path_case_insensitive() {
    let m = translate("{uri: {exact: /api}, ignoreUriCase: true}");
    assert_eq!(m.path_specifier, Some(PathSpecifier::Path("/api".into())));
    assert_eq!(m.case_sensitive, case_sensitive(false));
    let m = translate("{uri: {prefix: /api}, ignoreUriCase: false}");
    assert_eq!(m.case_sensitive, case_sensitive(true));
}

#[test]
fn method_authority_and_scheme_are_pseudo_header_matchers_after_the_headers() {
    let m = translate(
        "{method: {exact: POST}, authority: {prefix: shop.}, scheme: {regex: '^https?$'}, \
         headers: {X-User: {exact: jason}}}",
    );
    assert_eq!(
        m.headers,
        [
            header("x-user", HeaderMatchSpecifier::StringMatch(exact("jason"))),
            header(":method", HeaderMatchSpecifier::StringMatch(exact("POST"))),
            header(
                ":authority",
                HeaderMatchSpecifier::StringMatch(pattern(MatchPattern::Prefix("shop.".into())))
            ),
            header(
                ":scheme",
                HeaderMatchSpecifier::StringMatch(pattern(MatchPattern::SafeRegex(regex(
                    "^https?$"
                ))))
            ),
        ]
    );
    // `{}` asks for presence, as for any header.
    assert_eq!(
        translate("{method: {}}").headers,
        [header(":method", HeaderMatchSpecifier::PresentMatch(true))]
    );
}

#[test]
fn query_params_are_query_parameter_matchers() {
    let m = translate(
        "{queryParams: {a: {exact: b}, b: {prefix: x}, c: {regex: '\\d+$'}, d: {}, e: {exact: ''}, \
         f: {regex: '*'}}}",
    );
    assert_eq!(
        m.query_parameters,
        [
            query("a", QueryParameterMatchSpecifier::StringMatch(exact("b"))),
            query(
                "b",
                QueryParameterMatchSpecifier::StringMatch(pattern(MatchPattern::Prefix(
                    "x".into()
                )))
            ),
            query(
                "c",
                QueryParameterMatchSpecifier::StringMatch(pattern(MatchPattern::SafeRegex(regex(
                    r"\d+$"
                ))))
            ),
            query("d", QueryParameterMatchSpecifier::PresentMatch(true)),
            query("e", QueryParameterMatchSpecifier::StringMatch(exact(""))),
            query("f", QueryParameterMatchSpecifier::PresentMatch(true)),
        ]
    );
    assert!(m.headers.is_empty());
}

#[test]
fn without_headers_are_inverted_header_matchers_sorted_with_the_headers() {
    let m = translate(
        "{headers: {b-present: {}, d-user: {exact: jason}}, \
         withoutHeaders: {a-debug: {exact: '1'}, c-skip: {}, e-any: {regex: '*'}}}",
    );
    let inverted = |name: &str, spec, missing_as_empty| HeaderMatcher {
        invert_match: true,
        treat_missing_header_as_empty: missing_as_empty,
        ..header(name, spec)
    };
    assert_eq!(
        m.headers,
        [
            // A request without the header is not excluded: it reads as empty, not "1".
            inverted(
                "a-debug",
                HeaderMatchSpecifier::StringMatch(exact("1")),
                true
            ),
            header("b-present", HeaderMatchSpecifier::PresentMatch(true)),
            // Presence inverted: the header must be absent (Envoy refuses
            // treat_missing_header_as_empty beside present_match).
            inverted("c-skip", HeaderMatchSpecifier::PresentMatch(true), false),
            header("d-user", HeaderMatchSpecifier::StringMatch(exact("jason"))),
            inverted("e-any", HeaderMatchSpecifier::PresentMatch(true), false),
        ]
    );
}

#[test]
fn a_header_in_headers_and_without_headers_keeps_that_order() {
    let m = translate("{headers: {x: {prefix: a}}, withoutHeaders: {x: {exact: ab}}}");
    let names: Vec<(&str, bool)> = m
        .headers
        .iter()
        .map(|h| (h.name.as_str(), h.invert_match))
        .collect();
    assert_eq!(names, [("x", false), ("x", true)]);
}

#[test]
fn jwt_claim_headers_are_metadata_matchers_on_the_jwt_payload() {
    use envoy_types::pb::envoy::r#type::matcher::v3::{
        metadata_matcher::path_segment::Segment, value_matcher::MatchPattern as Value,
    };
    let m = translate(
        "{headers: {'@request.auth.claims.group.id': {exact: admin}, x-a: {exact: b}}, withoutHeaders: {'@request.auth.claims[iss]': {}}}",
    );
    // The ordinary header stays a header matcher.
    assert_eq!(m.headers.len(), 1);
    assert_eq!(m.headers[0].name, "x-a");
    assert_eq!(m.dynamic_metadata.len(), 2);
    let keys = |i: usize| -> Vec<String> {
        m.dynamic_metadata[i]
            .path
            .iter()
            .filter_map(|p| p.segment.as_ref().map(|Segment::Key(k)| k.clone()))
            .collect()
    };
    let group = &m.dynamic_metadata[0];
    assert_eq!(group.filter, "envoy.filters.http.jwt_authn");
    assert_eq!(keys(0), ["payload", "group", "id"]);
    assert!(!group.invert);
    // A string claim, or a list holding one (istiod's extended JWT form).
    let Some(Value::OrMatch(or)) = group.value.as_ref().and_then(|v| v.match_pattern.clone())
    else {
        panic!("{group:?}")
    };
    assert_eq!(or.value_matchers.len(), 2);
    assert!(matches!(
        &or.value_matchers[1].match_pattern,
        Some(Value::StringMatch(s)) if *s == exact("admin")
    ));
    let iss = &m.dynamic_metadata[1];
    assert_eq!(keys(1), ["payload", "iss"]);
    assert!(iss.invert);
    assert_eq!(
        iss.value.as_ref().and_then(|v| v.match_pattern.clone()),
        Some(Value::PresentMatch(true))
    );
}
