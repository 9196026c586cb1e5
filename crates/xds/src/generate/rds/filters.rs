//! What an `HTTPRoute` asks of the HTTP filters and of mirroring, as istiod's `TranslateRoute`
//! builds it: `fault` (`TranslateFault`) and `corsPolicy` (`TranslateCORSPolicy`) as the
//! route's per-filter configs of `envoy.filters.http.fault` and `envoy.filters.http.cors`
//! (the connection managers carry both filters), and `mirror`/`mirrors` with their
//! percentages (`MirrorPercent`, `MirrorPercentByPolicy`) as request mirror policies.

use envoy_types::pb::envoy::config::core::v3::RuntimeFractionalPercent;
use envoy_types::pb::envoy::config::route::v3::route_action::RequestMirrorPolicy;
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{
    FaultDelay, fault_delay::FaultDelaySecifier,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::CorsPolicy as EnvoyCors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    FaultAbort, HttpFault as EnvoyFault, fault_abort::ErrorType,
};
use envoy_types::pb::envoy::r#type::v3::{FractionalPercent, fractional_percent::DenominatorType};
use envoy_types::pb::google::protobuf::{Any, BoolValue};

use super::matching::string_matcher;
use crate::resource::any;
use axon_config::istio::{CorsPolicy, GRPC_STATUS_CODES, HttpFault, HttpRoute, Percent};

/// The filter names the per-route configs are keyed by.
pub(super) const FAULT: &str = "envoy.filters.http.fault";
pub(super) const CORS: &str = "envoy.filters.http.cors";

/// The route's per-filter configs (fault, CORS), as `(filter name, config)`.
pub(super) fn per_filter_configs(http: &HttpRoute) -> Vec<(String, Any)> {
    let mut out = Vec::new();
    if let Some(fault) = http.fault.as_ref().and_then(fault) {
        out.push((FAULT.to_string(), any(&fault)));
    }
    if let Some(policy) = &http.cors_policy {
        out.push((CORS.to_string(), any(&cors(policy))));
    }
    out
}

/// `Percent` (`0.0`–`100.0`) as a fraction of a million, as istiod writes it.
fn of_million(p: &Percent) -> FractionalPercent {
    FractionalPercent {
        numerator: (p.value * 10_000.0) as u32,
        denominator: DenominatorType::Million as i32,
    }
}

fn of_hundred(p: u32) -> FractionalPercent {
    FractionalPercent {
        numerator: p,
        denominator: DenominatorType::Hundred as i32,
    }
}

fn fault(f: &HttpFault) -> Option<EnvoyFault> {
    let delay = f.delay.as_ref().and_then(|d| {
        // Only fixed delays (exponential ones are refused by validation, as by istiod).
        let fixed = super::duration(Some(d.fixed_delay.as_deref()?));
        Some(FaultDelay {
            percentage: Some(match &d.percentage {
                Some(p) => of_million(p),
                None => of_hundred(u32::try_from(d.percent.unwrap_or(0)).unwrap_or(0)),
            }),
            fault_delay_secifier: Some(FaultDelaySecifier::FixedDelay(fixed)),
        })
    });
    let abort = f.abort.as_ref().and_then(|a| {
        let error = match (&a.http_status, &a.grpc_status) {
            (Some(status), _) => ErrorType::HttpStatus(u32::try_from(*status).ok()?),
            (None, Some(name)) => ErrorType::GrpcStatus(grpc_code(name)?),
            (None, None) => return None,
        };
        Some(FaultAbort {
            percentage: a.percentage.as_ref().map(of_million),
            error_type: Some(error),
            ..Default::default()
        })
    });
    (delay.is_some() || abort.is_some()).then(|| EnvoyFault {
        delay,
        abort,
        ..Default::default()
    })
}

fn grpc_code(name: &str) -> Option<u32> {
    GRPC_STATUS_CODES
        .iter()
        .position(|c| *c == name)
        .and_then(|i| u32::try_from(i).ok())
}

fn cors(policy: &CorsPolicy) -> EnvoyCors {
    let origins = if policy.allow_origins.is_empty() {
        policy
            .allow_origin
            .iter()
            .map(|exact| axon_config::istio::StringMatch {
                exact: Some(exact.clone()),
                ..Default::default()
            })
            .collect()
    } else {
        policy.allow_origins.clone()
    };
    EnvoyCors {
        allow_origin_string_match: origins.iter().filter_map(string_matcher).collect(),
        allow_methods: policy.allow_methods.join(","),
        allow_headers: policy.allow_headers.join(","),
        expose_headers: policy.expose_headers.join(","),
        max_age: policy
            .max_age
            .as_deref()
            .and_then(axon_config::validate::parse_duration)
            .map(|ns| (ns / 1_000_000_000).to_string())
            .unwrap_or_default(),
        allow_credentials: policy.allow_credentials.map(|value| BoolValue { value }),
        filter_enabled: Some(RuntimeFractionalPercent {
            default_value: Some(of_hundred(100)),
            ..Default::default()
        }),
        // Forwarded unless `IGNORE` (Envoy's behaviour before 1.30, which istiod keeps).
        forward_not_matching_preflights: Some(BoolValue {
            value: policy.unmatched_preflights.as_deref() != Some("IGNORE"),
        }),
        ..Default::default()
    }
}

/// The route's request mirror policies: `mirror` at `mirrorPercentage` (or the deprecated
/// `mirrorPercent`; 100 % when neither is given, none at 0), and each of `mirrors`.
/// `cluster_of` names a destination's cluster.
pub(super) fn mirror_policies(
    http: &HttpRoute,
    cluster_of: impl Fn(&axon_config::istio::Destination) -> String,
) -> Vec<RequestMirrorPolicy> {
    let policy = |cluster: String, fraction: FractionalPercent| RequestMirrorPolicy {
        cluster,
        runtime_fraction: Some(RuntimeFractionalPercent {
            default_value: Some(fraction),
            ..Default::default()
        }),
        trace_sampled: Some(BoolValue { value: false }),
        ..Default::default()
    };
    let mut out = Vec::new();
    if let Some(mirror) = &http.mirror {
        let fraction = match (&http.mirror_percentage, http.mirror_percent) {
            (Some(p), _) => (p.value > 0.0).then(|| of_million(p)),
            (None, Some(p)) => (p > 0).then(|| of_hundred(p)),
            (None, None) => Some(of_hundred(100)),
        };
        if let Some(fraction) = fraction {
            out.push(policy(cluster_of(mirror), fraction));
        }
    }
    for m in &http.mirrors {
        let Some(destination) = &m.destination else {
            continue;
        };
        let fraction = match &m.percentage {
            Some(p) => (p.value > 0.0).then(|| of_million(p)),
            None => Some(of_hundred(100)),
        };
        if let Some(fraction) = fraction {
            out.push(policy(cluster_of(destination), fraction));
        }
    }
    out
}
