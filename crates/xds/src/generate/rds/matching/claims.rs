//! Header matches on JWT claims (`@request.auth.claims.group`), as istiod's
//! `translateMetadataMatch`: a dynamic-metadata matcher on the claim in the payload the
//! Envoy JWT filter (`envoy.filters.http.jwt_authn`) leaves, a string claim or one in a list
//! of strings; inverted for `withoutHeaders`. The payload is there when a RequestAuthentication
//! applies to the gateway and its JWT filter (`lds::authn`) verified the request's token; the
//! filter clears the route cache on gateways, as istiod's, so the route is chosen again on the
//! verified claims. Without a verified token (or without a RequestAuthentication), as under
//! istiod, a block with such a header matches no request and one with such a `withoutHeaders`
//! excludes none.

use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, OrMatcher, ValueMatcher,
    list_matcher::MatchPattern as ListPattern,
    metadata_matcher::{PathSegment, path_segment::Segment},
    value_matcher::MatchPattern as ValuePattern,
};

use super::string_matcher;
use axon_config::istio::{StringMatch, routing_claim};

/// The Envoy JWT filter, whose dynamic metadata holds the verified payload.
const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";
/// The metadata field the payload is under.
const JWT_PAYLOAD: &str = "payload";

/// The metadata matcher for a header match on `name`, when it names a JWT claim.
pub(super) fn claim_matcher(name: &str, sm: &StringMatch, invert: bool) -> Option<MetadataMatcher> {
    let claims = routing_claim(name)?;
    let path = std::iter::once(JWT_PAYLOAD.to_string())
        .chain(claims)
        .map(|key| PathSegment {
            segment: Some(Segment::Key(key)),
        })
        .collect();
    // The claim is a string, or a list with one such string (istiod's extended JWT form).
    let value = match string_matcher(sm) {
        Some(m) => {
            let one = ValueMatcher {
                match_pattern: Some(ValuePattern::StringMatch(m)),
            };
            let list = ValueMatcher {
                match_pattern: Some(ValuePattern::ListMatch(Box::new(ListMatcher {
                    match_pattern: Some(ListPattern::OneOf(Box::new(one.clone()))),
                }))),
            };
            ValueMatcher {
                match_pattern: Some(ValuePattern::OrMatch(OrMatcher {
                    value_matchers: vec![list, one],
                })),
            }
        }
        // `{}`: istiod would send an empty string matcher, which Envoy refuses; the claim's
        // presence is what it means.
        None => ValueMatcher {
            match_pattern: Some(ValuePattern::PresentMatch(true)),
        },
    };
    Some(MetadataMatcher {
        filter: JWT_FILTER.to_string(),
        path,
        value: Some(value),
        invert,
    })
}
