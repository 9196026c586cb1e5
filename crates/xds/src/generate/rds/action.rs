//! An `HTTPRoute`'s action, as istiod's `TranslateRoute` builds it (`pilot/pkg/networking/core/
//! route/route.go`, `route/retry/retry.go`): a `redirect` or a `directResponse` answered by
//! Envoy, or the destinations (one cluster, or weighted clusters) with the route's `timeout`
//! (none by default), `retries` (istiod's default policy when absent), `rewrite`, mirrors,
//! the header operations of the route and of each destination, the consistent hash of each
//! destination's DestinationRule ([`super::hash`]), and the route's fault and CORS configs
//! ([`super::filters`]).

use base64::Engine;
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, RetryPolicy, Route, RouteAction, WeightedCluster,
    redirect_action::{PathRewriteSpecifier, RedirectResponseCode, SchemeRewriteSpecifier},
    retry_policy::{RetryBackOff, RetryHostPredicate, RetryPriority},
    route::Action,
    route_action::{ClusterNotFoundResponseCode, ClusterSpecifier, HostRewriteSpecifier},
    route_match::PathSpecifier,
    weighted_cluster::{ClusterWeight, cluster_weight},
};
use envoy_types::pb::envoy::extensions::retry::host::previous_hosts::v3::PreviousHostsPredicate;
use envoy_types::pb::envoy::extensions::retry::priority::previous_priorities::v3::PreviousPrioritiesConfig;
use envoy_types::pb::envoy::r#type::matcher::v3::{RegexMatchAndSubstitute, RegexMatcher};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::hash;
use super::headers::{self, Operations};
pub(super) use super::hosts::Hosts;
use super::{duration, filters};
use crate::resource::any;
use axon_config::istio::{
    Destination, HttpDirectResponse, HttpRedirect, HttpRetry, HttpRoute, HttpRouteDestination,
};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::service::outbound_cluster_name;

/// istiod's `retry_on` when a route sets no `retries`.
pub(super) const DEFAULT_RETRY_ON: &str =
    "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes";

/// A route for `http` (of a VirtualService whose hosts read as `hosts` says) on a listener
/// of `port` of `proxy`, without its name and match (one per match block, set by the caller,
/// then [`strip_matched_prefix`]). `None`: nothing to serve (no destination, or a redirect
/// code Envoy has no name for). Under Gateway API semantics a destination that is no
/// cluster answers 500, not 404 (istiod's `applyHTTPRouteDestination`: the share of a
/// backend that is not found or not allowed).
pub(super) fn translate(
    ctx: &PushContext,
    proxy: &Proxy,
    hosts: Hosts,
    http: &HttpRoute,
    port: u32,
) -> Option<Route> {
    let ops = http
        .headers
        .as_ref()
        .map(headers::operations)
        .unwrap_or_default();
    let mut out = Route {
        request_headers_to_add: ops.request_add.clone(),
        request_headers_to_remove: ops.request_remove.clone(),
        response_headers_to_add: ops.response_add.clone(),
        response_headers_to_remove: ops.response_remove.clone(),
        ..Default::default()
    };
    out.action = Some(if let Some(redirect) = &http.redirect {
        Action::Redirect(redirect_action(redirect, port)?)
    } else if let Some(direct) = &http.direct_response {
        Action::DirectResponse(direct_response(direct))
    } else {
        let mut action = route_action(ctx, proxy, hosts, http, ops.authority, port, &mut out)?;
        if hosts.gateway_semantics {
            action.cluster_not_found_response_code =
                ClusterNotFoundResponseCode::InternalServerError as i32;
        }
        Action::Route(action)
    });
    out.typed_per_filter_config = crate::resource::sorted_map(filters::per_filter_configs(http));
    Some(out)
}

/// Under Gateway API semantics, a `rewrite.uri` of `/` (a URLRewrite's ReplacePrefixMatch
/// `/`) removes the matched prefix rather than replacing it: the regex
/// `^PREFIX(/?)(.*)` → `/\2`, PREFIX the route's path-separated prefix quoted (empty for
/// any other match, which then keeps the path as is), as istiod's
/// `applyHTTPRouteDestination`; Envoy's `prefix_rewrite` would turn `/api/x` into `//x`.
/// A `uriRegexRewrite` wins, as there.
pub(super) fn strip_matched_prefix(route: &mut Route, http: &HttpRoute) {
    let Some(rewrite) = &http.rewrite else { return };
    if rewrite.uri_regex_rewrite.is_some() || rewrite.uri != "/" {
        return;
    }
    let Some(Action::Route(action)) = &mut route.action else {
        return;
    };
    let prefix = match route
        .r#match
        .as_ref()
        .and_then(|m| m.path_specifier.as_ref())
    {
        Some(PathSpecifier::PathSeparatedPrefix(p)) => p.as_str(),
        _ => "",
    };
    action.prefix_rewrite.clear();
    action.regex_rewrite = Some(RegexMatchAndSubstitute {
        pattern: Some(RegexMatcher {
            regex: format!("^{}(/?)(.*)", quote_meta(prefix)),
            ..Default::default()
        }),
        // The `/` kept when the whole path was the prefix.
        substitution: r"/\2".to_string(),
    });
}

/// Go's `regexp.QuoteMeta`: a backslash before each of `\.+*?()|[]{}^$`.
fn quote_meta(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A route's destinations and their policies. Header operations of a single destination
/// are added to the route's (`out`); a weighted one's go on its cluster weight.
fn route_action(
    ctx: &PushContext,
    proxy: &Proxy,
    hosts: Hosts,
    http: &HttpRoute,
    mut authority: Option<String>,
    port: u32,
    out: &mut Route,
) -> Option<RouteAction> {
    let mut action = RouteAction {
        timeout: Some(duration(http.timeout.as_deref())),
        ..Default::default()
    };
    // gRPC requests time out as others do: istiod's `setTimeout` sets this deprecated field
    // on purpose (its replacement, `max_stream_duration`, regressed for them).
    #[allow(deprecated)]
    {
        action.max_grpc_timeout = action.timeout;
    }
    if let Some(rewrite) = &http.rewrite {
        if let Some(regex) = &rewrite.uri_regex_rewrite {
            action.regex_rewrite = Some(RegexMatchAndSubstitute {
                pattern: Some(RegexMatcher {
                    regex: regex.pattern.clone(),
                    ..Default::default()
                }),
                substitution: regex.rewrite.clone(),
            });
        } else if !rewrite.uri.is_empty() {
            action.prefix_rewrite = rewrite.uri.clone();
        }
        if !rewrite.authority.is_empty() {
            authority = Some(rewrite.authority.clone());
        }
    }
    let destinations: Vec<(&HttpRouteDestination, String)> = http
        .route
        .iter()
        .filter_map(|rd| Some((rd, cluster_of(ctx, hosts, rd, port)?)))
        .collect();
    match destinations.as_slice() {
        [] => return None,
        [(rd, cluster)] => {
            action.cluster_specifier = Some(ClusterSpecifier::Cluster(cluster.clone()));
            if let Some(ops) = rd.headers.as_ref().map(headers::operations) {
                add_operations(out, &ops);
                authority = authority.or(ops.authority);
            }
        }
        many => {
            let total: i64 = many.iter().map(|(rd, _)| i64::from(rd.weight.max(0))).sum();
            let clusters = many
                .iter()
                .filter(|(rd, _)| total == 0 || rd.weight > 0)
                .map(|(rd, cluster)| weighted(rd, cluster, total == 0))
                .collect();
            action.cluster_specifier = Some(ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters,
                ..Default::default()
            }));
        }
    }
    if let Some(authority) = authority {
        action.host_rewrite_specifier = Some(HostRewriteSpecifier::HostRewriteLiteral(authority));
    }
    action.hash_policy = destinations
        .iter()
        .filter_map(|(rd, _)| hash::for_destination(ctx, proxy, hosts, rd.destination.as_ref()?))
        .collect();
    action.retry_policy = retry_policy(http.retries.as_ref());
    action.request_mirror_policies =
        filters::mirror_policies(http, |d| cluster_name(ctx, hosts, d, port));
    Some(action)
}

fn cluster_of(
    ctx: &PushContext,
    hosts: Hosts,
    rd: &HttpRouteDestination,
    listener_port: u32,
) -> Option<String> {
    Some(cluster_name(
        ctx,
        hosts,
        rd.destination.as_ref()?,
        listener_port,
    ))
}

/// A destination's cluster, as istiod's `GetDestinationCluster`: its port, else the port of
/// a service with one port, else the listener's port (a multi-port service is reached on the
/// port it was called on). For a sidecar istiod looks the service up among those on the
/// listener's port only, so a one-port service on another port would get the listener's
/// port, a cluster that does not exist: axon keeps its port.
fn cluster_name(ctx: &PushContext, hosts: Hosts, d: &Destination, listener_port: u32) -> String {
    let hostname = hosts.resolve(&d.host);
    let port = d
        .port
        .as_ref()
        .map(|p| p.number)
        .filter(|p| *p != 0)
        .or_else(
            || match ctx.service(&hostname).map(|s| s.ports.as_slice()) {
                Some([only]) => Some(only.number),
                _ => None,
            },
        )
        .unwrap_or(listener_port);
    outbound_cluster_name(port, &d.subset, &hostname)
}

fn weighted(rd: &HttpRouteDestination, cluster: &str, equal: bool) -> ClusterWeight {
    let mut weight = ClusterWeight {
        name: cluster.to_string(),
        weight: Some(UInt32Value {
            value: if equal {
                1
            } else {
                u32::try_from(rd.weight).unwrap_or(0)
            },
        }),
        ..Default::default()
    };
    if let Some(ops) = rd.headers.as_ref().map(headers::operations) {
        weight.request_headers_to_add = ops.request_add;
        weight.request_headers_to_remove = ops.request_remove;
        weight.response_headers_to_add = ops.response_add;
        weight.response_headers_to_remove = ops.response_remove;
        weight.host_rewrite_specifier = ops
            .authority
            .map(cluster_weight::HostRewriteSpecifier::HostRewriteLiteral);
    }
    weight
}

fn add_operations(out: &mut Route, ops: &Operations) {
    out.request_headers_to_add
        .extend(ops.request_add.iter().cloned());
    out.request_headers_to_remove
        .extend(ops.request_remove.iter().cloned());
    out.response_headers_to_add
        .extend(ops.response_add.iter().cloned());
    out.response_headers_to_remove
        .extend(ops.response_remove.iter().cloned());
}

/// istiod's `retry.ConvertPolicy`: its default without `retries`, none with `attempts: 0`.
pub(super) fn retry_policy(retries: Option<&HttpRetry>) -> Option<RetryPolicy> {
    let previous_hosts = || {
        RetryHostPredicate {
        name: "envoy.retry_host_predicates.previous_hosts".to_string(),
        config_type: Some(
            envoy_types::pb::envoy::config::route::v3::retry_policy::retry_host_predicate::ConfigType::TypedConfig(
                any(&PreviousHostsPredicate::default()),
            ),
        ),
    }
    };
    let mut policy = RetryPolicy {
        num_retries: Some(UInt32Value { value: 2 }),
        retry_on: DEFAULT_RETRY_ON.to_string(),
        host_selection_retry_max_attempts: 5,
        retry_host_predicate: vec![previous_hosts()],
        ..Default::default()
    };
    let Some(retries) = retries else {
        return Some(policy);
    };
    if retries.attempts <= 0 {
        return None;
    }
    policy.num_retries = Some(UInt32Value {
        value: u32::try_from(retries.attempts).unwrap_or(u32::MAX),
    });
    if !retries.retry_on.is_empty() {
        let (mut on, mut codes) = (Vec::new(), Vec::new());
        for part in retries
            .retry_on
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
        {
            match part.parse::<u32>() {
                Ok(code) if (100..600).contains(&code) => codes.push(code),
                _ => on.push(part),
            }
        }
        let mut retry_on = on.join(",");
        if !codes.is_empty() && !retry_on.contains("retriable-status-codes") {
            if !retry_on.is_empty() {
                retry_on.push(',');
            }
            retry_on.push_str("retriable-status-codes");
        }
        policy.retry_on = retry_on;
        policy.retriable_status_codes = codes;
    }
    if let Some(per_try) = &retries.per_try_timeout {
        policy.per_try_timeout = Some(duration(Some(per_try)));
    }
    if let Some(ignore) = retries.retry_ignore_previous_hosts {
        policy.retry_host_predicate = if ignore {
            vec![previous_hosts()]
        } else {
            Vec::new()
        };
    }
    if retries.retry_remote_localities == Some(true) {
        policy.retry_priority = Some(RetryPriority {
            name: "envoy.retry_priorities.previous_priorities".to_string(),
            config_type: Some(
                envoy_types::pb::envoy::config::route::v3::retry_policy::retry_priority::ConfigType::TypedConfig(
                    any(&PreviousPrioritiesConfig { update_frequency: 2 }),
                ),
            ),
        });
    }
    if let Some(backoff) = &retries.backoff {
        policy.retry_back_off = Some(RetryBackOff {
            base_interval: Some(duration(Some(backoff))),
            ..Default::default()
        });
    }
    Some(policy)
}

/// istiod's `ApplyRedirect` for a plaintext listener on `port`. `None` for a 3xx Envoy has
/// no name for (istiod leaves such a route without an action).
fn redirect_action(redirect: &HttpRedirect, port: u32) -> Option<RedirectAction> {
    let mut out = RedirectAction {
        host_redirect: redirect.authority.clone(),
        path_rewrite_specifier: Some(if redirect.prefix_rewrite.is_empty() {
            PathRewriteSpecifier::PathRedirect(redirect.uri.clone())
        } else {
            PathRewriteSpecifier::PrefixRewrite(redirect.prefix_rewrite.clone())
        }),
        ..Default::default()
    };
    if !redirect.scheme.is_empty() {
        out.scheme_rewrite_specifier = Some(SchemeRewriteSpecifier::SchemeRedirect(
            redirect.scheme.clone(),
        ));
    }
    let port_given = redirect.port.is_some() || redirect.derive_port.is_some();
    if let Some(p) = redirect.port {
        out.port_redirect = p;
    } else if redirect.derive_port.as_deref() == Some("FROM_REQUEST_PORT") {
        // Envoy cannot take the port from the request; routes are per listener port.
        out.port_redirect = port;
    }
    if port_given {
        let scheme = if redirect.scheme.is_empty() {
            "http"
        } else {
            redirect.scheme.as_str()
        };
        if (out.port_redirect == 80 && scheme == "http")
            || (out.port_redirect == 443 && scheme == "https")
        {
            out.port_redirect = 0;
        }
    }
    out.response_code = match redirect.redirect_code.unwrap_or(0) {
        0 | 301 => RedirectResponseCode::MovedPermanently,
        302 => RedirectResponseCode::Found,
        303 => RedirectResponseCode::SeeOther,
        307 => RedirectResponseCode::TemporaryRedirect,
        308 => RedirectResponseCode::PermanentRedirect,
        _ => return None,
    } as i32;
    Some(out)
}

fn direct_response(direct: &HttpDirectResponse) -> DirectResponseAction {
    let body = direct.body.as_ref().and_then(|b| {
        let specifier = match (&b.string, &b.bytes) {
            (Some(s), _) => Specifier::InlineString(s.clone()),
            (None, Some(b64)) => Specifier::InlineBytes(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .unwrap_or_default(),
            ),
            (None, None) => return None,
        };
        Some(DataSource {
            specifier: Some(specifier),
            ..Default::default()
        })
    });
    DirectResponseAction {
        status: direct.status,
        body,
        ..Default::default()
    }
}
