//! A cluster's outlier detection, as istiod's `applyOutlierDetection` sets it
//! (`cluster_traffic_policy.go`): success-rate ejection off, each consecutive-error counter
//! enforced at 100% when above 0, local-origin errors split on request, the panic
//! threshold at `minHealthPercent` (so 0, off, unless given), and
//! `outlierDetectionHttpErrorCodes` as the response codes that count.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::OutlierDetection as EnvoyOutlier;
use envoy_types::pb::envoy::r#type::v3::Percent;
use envoy_types::pb::google::protobuf::UInt32Value;

use envoy_types::pb::envoy::config::common::matcher::v3::{
    HttpHeadersMatch, MatchPredicate, match_predicate::MatchSet, match_predicate::Rule,
};
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, header_matcher::HeaderMatchSpecifier,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions, http_protocol_options,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};

use super::duration;
use axon_config::istio::traffic_policy::OutlierDetection;

/// Sets `cluster`'s outlier detection from `outlier` (none: no outlier detection).
pub(super) fn apply(cluster: &mut Cluster, outlier: Option<&OutlierDetection>) {
    let Some(outlier) = outlier else { return };
    let value = |v: u32| Some(UInt32Value { value: v });
    let enforcing = |v: u32| value(if v > 0 { 100 } else { 0 });
    let mut out = EnvoyOutlier {
        enforcing_success_rate: value(0),
        ..Default::default()
    };
    if let Some(n) = outlier.consecutive_5xx_errors {
        out.consecutive_5xx = value(n);
        out.enforcing_consecutive_5xx = enforcing(n);
    }
    if let Some(n) = outlier.consecutive_gateway_errors {
        out.consecutive_gateway_failure = value(n);
        out.enforcing_consecutive_gateway_failure = enforcing(n);
    }
    out.interval = outlier.interval.as_deref().and_then(duration);
    out.base_ejection_time = outlier.base_ejection_time.as_deref().and_then(duration);
    if outlier.max_ejection_percent > 0 {
        out.max_ejection_percent =
            value(u32::try_from(outlier.max_ejection_percent).unwrap_or(100));
    }
    if outlier.split_external_local_origin_errors {
        out.split_external_local_origin_errors = true;
        if let Some(n) = outlier.consecutive_local_origin_failures.filter(|n| *n > 0) {
            out.consecutive_local_origin_failure = value(n);
            out.enforcing_consecutive_local_origin_failure = value(100);
        }
        out.enforcing_local_origin_success_rate = value(0);
    }
    cluster.outlier_detection = Some(out);
    if outlier.min_health_percent >= 0 {
        cluster
            .common_lb_config
            .get_or_insert_with(Default::default)
            .healthy_panic_threshold = Some(Percent {
            value: outlier.min_health_percent as f64,
        });
    }
}

/// istiod's `applyOutlierDetectionErrorCodes`: only these response codes count as errors.
pub(super) fn apply_error_codes(
    http: &mut Option<HttpProtocolOptions>,
    outlier: Option<&OutlierDetection>,
) {
    let Some(codes) = outlier
        .and_then(|o| o.outlier_detection_http_error_codes.as_ref())
        .filter(|c| !c.is_empty())
    else {
        return;
    };
    let mut rules: Vec<MatchPredicate> = codes
        .iter()
        .map(|code| MatchPredicate {
            rule: Some(Rule::HttpResponseHeadersMatch(HttpHeadersMatch {
                headers: vec![HeaderMatcher {
                    name: ":status".to_string(),
                    header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(
                        StringMatcher {
                            match_pattern: Some(MatchPattern::Exact(code.to_string())),
                            ..Default::default()
                        },
                    )),
                    ..Default::default()
                }],
            })),
        })
        .collect();
    let predicate = if rules.len() == 1 {
        rules.remove(0)
    } else {
        MatchPredicate {
            rule: Some(Rule::OrMatch(MatchSet { rules })),
        }
    };
    http.get_or_insert_with(Default::default).outlier_detection =
        Some(http_protocol_options::OutlierDetection {
            error_matcher: Some(predicate),
        });
}
