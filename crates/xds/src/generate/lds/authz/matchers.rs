//! The matchers of RBAC rules as istiod's `authz/matcher` writes them: strings with its
//! wildcards (`*` any, `*x` suffix, `x*` prefix), headers and hosts, metadata (a JWT claim,
//! a filter's key), and addresses as CIDR ranges.

use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::route::v3::{HeaderMatcher, header_matcher};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, OrMatcher, RegexMatcher, StringMatcher, ValueMatcher,
    list_matcher, metadata_matcher, string_matcher::MatchPattern, value_matcher,
};
use envoy_types::pb::google::protobuf::UInt32Value;

/// The JWT filter, whose `payload` metadata request principals and claims are read from.
pub(super) const JWT_FILTER: &str = "envoy.filters.http.jwt_authn";

pub(super) fn regex_quote(s: &str) -> String {
    regex::escape(s)
}

pub(super) fn exact(v: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::Exact(v.to_string())),
        ..Default::default()
    }
}

pub(super) fn prefix(v: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::Prefix(v.to_string())),
        ..Default::default()
    }
}

pub(super) fn suffix(v: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::Suffix(v.to_string())),
        ..Default::default()
    }
}

pub(super) fn regex(r: &str) -> StringMatcher {
    StringMatcher {
        match_pattern: Some(MatchPattern::SafeRegex(RegexMatcher {
            regex: r.to_string(),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// istiod's `StringMatcherWithPrefix`: `*` any, `*x` suffix, `x*` prefix, else exact.
pub(super) fn string_matcher(v: &str, with_prefix: &str) -> StringMatcher {
    if v == "*" {
        regex(".+")
    } else if let Some(rest) = v.strip_prefix('*') {
        if with_prefix.is_empty() {
            suffix(rest)
        } else {
            regex(&format!("{with_prefix}.*{}", regex_quote(rest)))
        }
    } else if let Some(rest) = v.strip_suffix('*') {
        prefix(&format!("{with_prefix}{rest}"))
    } else {
        exact(&format!("{with_prefix}{v}"))
    }
}

/// istiod's `HeaderMatcher`: `*` present, `*x` suffix, `x*` prefix, else exact.
pub(super) fn header_matcher(name: &str, v: &str) -> HeaderMatcher {
    header(name, v, false)
}

/// istiod's `HostMatcher`: as a header, case-insensitive.
pub(super) fn host_matcher(v: &str) -> HeaderMatcher {
    header(":authority", v, true)
}

pub(super) fn header(name: &str, v: &str, ignore_case: bool) -> HeaderMatcher {
    let specifier = if v == "*" {
        header_matcher::HeaderMatchSpecifier::PresentMatch(true)
    } else {
        let mut m = if let Some(rest) = v.strip_prefix('*') {
            suffix(rest)
        } else if let Some(rest) = v.strip_suffix('*') {
            prefix(rest)
        } else {
            exact(v)
        };
        m.ignore_case = ignore_case;
        header_matcher::HeaderMatchSpecifier::StringMatch(m)
    };
    HeaderMatcher {
        name: name.to_string(),
        header_match_specifier: Some(specifier),
        ..Default::default()
    }
}

pub(super) fn string_value(m: StringMatcher) -> ValueMatcher {
    ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::StringMatch(m)),
    }
}

pub(super) fn or_values(mut matchers: Vec<ValueMatcher>) -> ValueMatcher {
    if matchers.len() == 1 {
        return matchers.remove(0);
    }
    ValueMatcher {
        match_pattern: Some(value_matcher::MatchPattern::OrMatch(OrMatcher {
            value_matchers: matchers,
        })),
    }
}

/// istiod's metadata matchers: `list` as a list containing the value (for a JWT claim, a
/// list or the value itself: istiod's extended JWT matcher).
pub(super) fn metadata_matcher(
    filter: &str,
    path: &[&str],
    value: ValueMatcher,
    list: bool,
) -> MetadataMatcher {
    let value = if list {
        let in_list = ValueMatcher {
            match_pattern: Some(value_matcher::MatchPattern::ListMatch(Box::new(
                ListMatcher {
                    match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(value.clone()))),
                },
            ))),
        };
        if filter == JWT_FILTER {
            or_values(vec![in_list, value])
        } else {
            in_list
        }
    } else {
        value
    };
    MetadataMatcher {
        filter: filter.to_string(),
        path: path
            .iter()
            .map(|k| metadata_matcher::PathSegment {
                segment: Some(metadata_matcher::path_segment::Segment::Key(k.to_string())),
            })
            .collect(),
        value: Some(value),
        ..Default::default()
    }
}

/// An address or CIDR as Envoy's `CidrRange`.
pub(super) fn cidr(v: &str) -> Option<CidrRange> {
    let (ip, len) = match v.split_once('/') {
        Some((ip, len)) => (ip, Some(len.parse::<u32>().ok()?)),
        None => (v, None),
    };
    let addr: std::net::IpAddr = ip.parse().ok()?;
    let len = len.unwrap_or(if addr.is_ipv4() { 32 } else { 128 });
    Some(CidrRange {
        address_prefix: addr.to_string(),
        prefix_len: Some(UInt32Value { value: len }),
    })
}
