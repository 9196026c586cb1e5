//! HTTPRoutes and GRPCRoutes into VirtualServices (istiod's `HTTPRouteCollection`,
//! `GRPCRouteCollection`, `convertHTTPRoute`, `convertGRPCRoute`, `sortHTTPRoutes`,
//! `mergeHTTPRoutes`): a rule with N matches becomes N Istio routes of one match each; per
//! accepted listener and route hostname a VirtualService piece; the pieces of one listener
//! and hostname, from every route, merge into one VirtualService, oldest route first, its
//! routes then ordered as the spec orders matches.

use std::collections::BTreeMap;

use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::gateway_api::routes::{
    Cors, GrpcMethodMatch, HttpRouteRetry, HttpRouteTimeouts, PathModifierType, RequestMirror,
    RequestRedirect, UrlRewrite,
};
use axon_config::gateway_api::{
    FilterType, HeaderMatch, HeaderModifier, HttpBackendRef, HttpRouteFilter, HttpRouteMatch,
    MatchType, PathMatchType,
};
use axon_config::istio::{
    CorsPolicy, HeaderOperations, Headers, HttpDirectResponse, HttpMatchRequest, HttpMirrorPolicy,
    HttpRedirect, HttpRetry, HttpRewrite, HttpRoute, HttpRouteDestination, Percent, RegexRewrite,
    RouteSemantics, StringMatch, VirtualService,
};

use super::backends::{BackendError, destination};
use super::listeners::Gateways;
use super::{Inputs, Problems, parents};

/// One route's VirtualService for one listener and hostname, before merging.
#[derive(Debug)]
pub(crate) struct Piece {
    /// `NS/GATEWAY~MARK~LISTENER/HOST`: what merges.
    key: String,
    route: Config,
    vs: VirtualService,
}

/// The pieces of an HTTPRoute or GRPCRoute.
pub(crate) fn convert_route(
    inputs: &Inputs,
    gateways: &Gateways,
    route: &Config,
    problems: &mut Problems,
) -> Vec<Piece> {
    let (refs, hostnames) = match &route.spec {
        Spec::HttpRoute(r) => (&r.parent_refs, &r.hostnames),
        Spec::GrpcRoute(r) => (&r.parent_refs, &r.hostnames),
        _ => return Vec::new(),
    };
    let kind = route.kind();
    let parents = parents::resolve(gateways, route, kind, refs, hostnames, problems);
    let accepted = parents::accepted(&parents);
    let mesh = mesh_parents(inputs, route, refs, problems);
    if accepted.is_empty() && mesh.is_empty() {
        return Vec::new();
    }
    // An error that is no backend's (an unsupported filter) drops the route for every parent.
    let mut convert = |enforce_grants| match convert_rules(inputs, route, enforce_grants, problems)
    {
        Ok(routes) => Some(routes),
        Err(e) => {
            problems.add(&route.key, format!("not served: {e}"));
            None
        }
    };
    let gateway_routes = if accepted.is_empty() {
        Some(Vec::new())
    } else {
        convert(true)
    };
    // Mesh routes check no ReferenceGrant (istiod: `enforceRefGrant = !mesh`).
    let mesh_routes = if mesh.is_empty() {
        Some(Vec::new())
    } else {
        convert(false)
    };
    let (Some(routes), Some(mesh_routes)) = (gateway_routes, mesh_routes) else {
        return Vec::new();
    };
    let star = vec!["*".to_string()];
    let hosts = if hostnames.is_empty() {
        &star
    } else {
        hostnames
    };
    let mut out = Vec::new();
    for parent in accepted {
        for h in hosts.iter().filter(|h| parent.allows_host(h)) {
            out.push(Piece {
                key: format!("{}/{h}", parent.listener.internal_name),
                route: route.clone(),
                vs: VirtualService {
                    hosts: vec![h.clone()],
                    gateways: vec![parent.listener.internal_name.clone()],
                    http: routes.clone(),
                    semantics: RouteSemantics::Gateway,
                    parents: vec![parent_name(route)],
                    ..Default::default()
                },
            });
        }
    }
    for (hosts, port) in mesh {
        let mut http = mesh_routes.clone();
        if let Some(port) = port {
            for r in &mut http {
                if r.matches.is_empty() {
                    r.matches.push(HttpMatchRequest::default());
                }
                for m in &mut r.matches {
                    m.port = Some(port);
                }
            }
        }
        let prefix = match port {
            Some(p) => format!("{}/{p}", route.namespace()),
            None => route.namespace().to_string(),
        };
        for h in hosts {
            out.push(Piece {
                key: format!("{prefix}/{h}"),
                route: route.clone(),
                vs: VirtualService {
                    hosts: vec![h],
                    gateways: vec!["mesh".to_string()],
                    http: http.clone(),
                    semantics: RouteSemantics::Gateway,
                    parents: vec![parent_name(route)],
                    ..Default::default()
                },
            });
        }
    }
    out
}

/// The mesh parents of a route (GAMMA: a parentRef to a Service, or a ServiceEntry): the
/// hosts its VirtualService is for, and the parentRef's port (istiod's `meshParentKey`,
/// `referenceAllowed` for Services: the Service must exist).
pub(crate) fn mesh_parents(
    inputs: &Inputs,
    route: &Config,
    refs: &[axon_config::gateway_api::ParentReference],
    problems: &mut Problems,
) -> Vec<(Vec<String>, Option<u32>)> {
    let mut out = Vec::new();
    for r in refs {
        let ns = r
            .namespace
            .clone()
            .unwrap_or_else(|| route.namespace().to_string());
        let hosts = if r.is_service() {
            let host = axon_config::host::resolve(&r.name, &ns);
            if !inputs.services.contains_key(&host) {
                problems.add(
                    &route.key,
                    format!("parent service: {:?} not found (NoMatchingParent)", r.name),
                );
                continue;
            }
            vec![host]
        } else if r.group == "networking.istio.io" && r.kind == "ServiceEntry" {
            let key = ConfigKey::new(ConfigKind::ServiceEntry, ns.as_str(), r.name.as_str());
            match inputs.configs.get(&key).map(|c| &c.spec) {
                Some(Spec::ServiceEntry(se)) => se.hosts.clone(),
                _ => {
                    problems.add(
                        &route.key,
                        format!(
                            "parent service entry: {:?} not found (NoMatchingParent)",
                            r.name
                        ),
                    );
                    continue;
                }
            }
        } else {
            continue;
        };
        problems
            .1
            .entry(route.key.clone())
            .or_default()
            .push(super::status::Verdict {
                parent_ref: r.clone(),
                accepted: Ok(()),
            });
        out.push((hosts, r.port));
    }
    out
}

/// istiod's `internal.istio.io/parents` entry of a route: `KIND/NAME.NAMESPACE`.
pub(crate) fn parent_name(route: &Config) -> String {
    format!(
        "{}/{}.{}",
        route.kind().api_kind(),
        route.name(),
        route.namespace()
    )
}

/// `mergeHTTPRoutes`: one VirtualService per key, routes appended oldest route first, then
/// ordered; named after the key.
pub(crate) fn merge(mut pieces: Vec<Piece>) -> Vec<Config> {
    pieces.sort_by(|a, b| a.route.creation_order(&b.route));
    let mut by_key: BTreeMap<String, (Config, VirtualService)> = BTreeMap::new();
    for p in pieces {
        match by_key.get_mut(&p.key) {
            Some((_, vs)) => {
                vs.http.extend(p.vs.http);
                for parent in p.vs.parents {
                    if !vs.parents.contains(&parent) {
                        vs.parents.push(parent);
                    }
                }
            }
            None => {
                by_key.insert(p.key.clone(), (p.route, p.vs));
            }
        }
    }
    by_key
        .into_iter()
        .map(|(key, (route, mut vs))| {
            sort_routes(&mut vs.http);
            Config {
                key: ConfigKey::new(
                    ConfigKind::VirtualService,
                    route.namespace(),
                    key.replace('/', "~"),
                ),
                labels: Default::default(),
                created: route.created,
                spec: Spec::VirtualService(vs),
                not_applied: Vec::new(),
            }
        })
        .collect()
}

/// `sortHTTPRoutes`: routes without a match last; then Exact, Prefix, Regex; longer paths;
/// with a method; more headers; more query parameters. Stable.
pub(crate) fn sort_routes(routes: &mut [HttpRoute]) {
    fn rank(m: &HttpMatchRequest) -> (i32, usize) {
        match &m.uri {
            Some(StringMatch { exact: Some(v), .. }) => (3, v.len()),
            Some(StringMatch {
                prefix: Some(v), ..
            }) => (2, v.len()),
            Some(StringMatch { regex: Some(v), .. }) => (1, v.len()),
            _ => (-1, 0),
        }
    }
    routes.sort_by(|a, b| {
        use std::cmp::Ordering;
        let (Some(m1), Some(m2)) = (a.matches.first(), b.matches.first()) else {
            return match (a.matches.is_empty(), b.matches.is_empty()) {
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                _ => Ordering::Equal,
            };
        };
        let ((r1, l1), (r2, l2)) = (rank(m1), rank(m2));
        r2.cmp(&r1)
            .then(l2.cmp(&l1))
            .then(m2.method.is_some().cmp(&m1.method.is_some()))
            .then(m2.headers.len().cmp(&m1.headers.len()))
            .then(m2.query_params.len().cmp(&m1.query_params.len()))
    });
}

/// The Istio routes of a route's rules; `Err` when the route cannot be served at all.
pub(crate) fn convert_rules(
    inputs: &Inputs,
    route: &Config,
    enforce_grants: bool,
    problems: &mut Problems,
) -> Result<Vec<HttpRoute>, String> {
    let mut out = Vec::new();
    match &route.spec {
        Spec::HttpRoute(r) => {
            for (n, rule) in r.rules.iter().enumerate() {
                let name = rule
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{}.{}.{n}", route.namespace(), route.name()));
                let matches: Vec<Option<&HttpRouteMatch>> = if rule.matches.is_empty() {
                    vec![None]
                } else {
                    rule.matches.iter().map(Some).collect()
                };
                for m in matches {
                    let mut istio = HttpRoute {
                        name: name.clone(),
                        matches: m.map(http_match).into_iter().collect(),
                        ..Default::default()
                    };
                    filters(
                        inputs,
                        route,
                        &rule.filters,
                        &mut istio,
                        enforce_grants,
                        problems,
                    )?;
                    if let Some(retry) = &rule.retry {
                        istio.retries = Some(retries(retry));
                    }
                    if let Some(t) = &rule.timeouts {
                        timeouts(t, &mut istio);
                    }
                    if rule.session_persistence.is_some() {
                        problems.add(
                            &route.key,
                            format!("rule {n}: sessionPersistence is not applied by axon"),
                        );
                    }
                    destinations(
                        inputs,
                        route,
                        &rule.backend_refs,
                        &mut istio,
                        enforce_grants,
                        problems,
                    )?;
                    out.push(istio);
                }
            }
        }
        Spec::GrpcRoute(r) => {
            for (n, rule) in r.rules.iter().enumerate() {
                let name = rule
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{}.{}.{n}", route.namespace(), route.name()));
                let matches: Vec<Option<_>> = if rule.matches.is_empty() {
                    vec![None]
                } else {
                    rule.matches.iter().map(Some).collect()
                };
                for m in matches {
                    let mut istio = HttpRoute {
                        name: name.clone(),
                        ..Default::default()
                    };
                    if let Some(m) = m {
                        istio.matches.push(HttpMatchRequest {
                            uri: m.method.as_ref().map(grpc_uri),
                            headers: header_matches(&m.headers),
                            ..Default::default()
                        });
                    }
                    filters(
                        inputs,
                        route,
                        &rule.filters,
                        &mut istio,
                        enforce_grants,
                        problems,
                    )?;
                    destinations(
                        inputs,
                        route,
                        &rule.backend_refs,
                        &mut istio,
                        enforce_grants,
                        problems,
                    )?;
                    out.push(istio);
                }
            }
        }
        _ => {}
    }
    Ok(out)
}

fn string_match(t: MatchType, value: &str) -> StringMatch {
    match t {
        MatchType::Exact => StringMatch {
            exact: Some(value.to_string()),
            ..Default::default()
        },
        MatchType::RegularExpression => StringMatch {
            regex: Some(value.to_string()),
            ..Default::default()
        },
    }
}

fn header_matches(headers: &[HeaderMatch]) -> BTreeMap<String, StringMatch> {
    headers
        .iter()
        .map(|h| (h.name.clone(), string_match(h.match_type, &h.value)))
        .collect()
}

/// `createURIMatch` and friends.
fn http_match(m: &HttpRouteMatch) -> HttpMatchRequest {
    let v = &m.path.value;
    let uri = match m.path.match_type {
        PathMatchType::PathPrefix => StringMatch {
            prefix: Some(if v == "/" {
                v.clone()
            } else {
                v.trim_end_matches('/').to_string()
            }),
            ..Default::default()
        },
        PathMatchType::Exact => string_match(MatchType::Exact, v),
        PathMatchType::RegularExpression => string_match(MatchType::RegularExpression, v),
    };
    HttpMatchRequest {
        uri: Some(uri),
        headers: header_matches(&m.headers),
        query_params: header_matches(&m.query_params),
        method: m
            .method
            .as_deref()
            .map(|x| string_match(MatchType::Exact, x)),
        ..Default::default()
    }
}

/// `createGRPCURIMatch`.
fn grpc_uri(m: &GrpcMethodMatch) -> StringMatch {
    let (s, meth) = (m.service.as_deref(), m.method.as_deref());
    let regex = |r: String| StringMatch {
        regex: Some(r),
        ..Default::default()
    };
    match (m.match_type, s, meth) {
        (MatchType::Exact, Some(s), None) => StringMatch {
            prefix: Some(format!("/{s}/")),
            ..Default::default()
        },
        (MatchType::Exact, Some(s), Some(meth)) => {
            string_match(MatchType::Exact, &format!("/{s}/{meth}"))
        }
        (MatchType::RegularExpression, Some(s), None) => regex(format!("/{s}/.+")),
        (MatchType::RegularExpression, Some(s), Some(meth)) => regex(format!("/{s}/{meth}")),
        (_, None, Some(meth)) => regex(format!("/[^/]+/{meth}")),
        // Rejected by validation ("One or both of 'service' or 'method' must be specified").
        (_, None, None) => regex(".*".to_string()),
    }
}

/// `headerListToMap`: names lower-cased, the first of equal names wins.
fn header_map(list: &[axon_config::gateway_api::HttpHeader]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for h in list {
        out.entry(h.name.to_ascii_lowercase())
            .or_insert_with(|| h.value.clone());
    }
    out
}

/// `createHeadersFilter`.
fn header_operations(m: &HeaderModifier) -> Result<HeaderOperations, String> {
    for h in m.set.iter().chain(&m.add) {
        if h.value
            .bytes()
            .any(|c| !(c == 0x09 || (c >= 0x20 && c != 0x7f)))
        {
            return Err(format!(
                "header {:?} value contains invalid characters (InvalidFilter)",
                h.name
            ));
        }
    }
    Ok(HeaderOperations {
        set: header_map(&m.set),
        add: header_map(&m.add),
        remove: m.remove.clone(),
    })
}

/// A RequestHeaderModifier or ResponseHeaderModifier filter into `headers` (of a route or
/// of one of its destinations).
fn header_filter(f: &HttpRouteFilter, headers: &mut Option<Headers>) -> Result<(), String> {
    if let Some(m) = &f.request_header_modifier {
        headers.get_or_insert_with(Headers::default).request = Some(header_operations(m)?);
    }
    if let Some(m) = &f.response_header_modifier {
        headers.get_or_insert_with(Headers::default).response = Some(header_operations(m)?);
    }
    Ok(())
}

fn filters(
    inputs: &Inputs,
    route: &Config,
    list: &[HttpRouteFilter],
    istio: &mut HttpRoute,
    enforce_grants: bool,
    problems: &mut Problems,
) -> Result<(), String> {
    let grpc = route.kind() == ConfigKind::GrpcRoute;
    for f in list {
        match f.filter_type {
            FilterType::RequestHeaderModifier | FilterType::ResponseHeaderModifier => {
                header_filter(f, &mut istio.headers)?;
            }
            FilterType::RequestRedirect if !grpc => {
                istio.redirect = f.request_redirect.as_ref().map(redirect)
            }
            FilterType::URLRewrite if !grpc => {
                istio.rewrite = f.url_rewrite.as_ref().and_then(rewrite)
            }
            FilterType::CORS if !grpc => istio.cors_policy = f.cors.as_ref().map(cors),
            FilterType::RequestMirror => {
                let Some(m) = &f.request_mirror else { continue };
                match mirror(inputs, route, m, enforce_grants) {
                    Ok(mirror) => istio.mirrors.push(mirror),
                    // A mirror that cannot be resolved is dropped (an HTTPRoute's) or drops the
                    // route (a GRPCRoute's), as in istiod.
                    Err(e) if !grpc => problems.add(&route.key, format!("mirror not applied: {e}")),
                    Err(e) => return Err(e),
                }
            }
            other => {
                return Err(format!(
                    "unsupported filter type {:?} (InvalidFilter)",
                    other
                ));
            }
        }
    }
    Ok(())
}

fn mirror(
    inputs: &Inputs,
    route: &Config,
    m: &RequestMirror,
    enforce_grants: bool,
) -> Result<HttpMirrorPolicy, String> {
    let (dest, error) = destination(inputs, route, route.kind(), &m.backend_ref, enforce_grants);
    if let Some(BackendError::Soft(e) | BackendError::Hard(e)) = error {
        return Err(e);
    }
    let percentage = match (m.fraction, m.percent) {
        (Some(f), _) => Some(Percent {
            value: 100.0 * f64::from(f.numerator) / f64::from(f.denominator),
        }),
        (None, Some(p)) => Some(Percent {
            value: f64::from(p),
        }),
        (None, None) => None,
    };
    Ok(HttpMirrorPolicy {
        destination: Some(dest),
        percentage,
    })
}

/// `createRedirectFilter`.
fn redirect(r: &RequestRedirect) -> HttpRedirect {
    let mut out = HttpRedirect {
        redirect_code: Some(r.status_code),
        authority: r.hostname.clone().unwrap_or_default(),
        scheme: r.scheme.clone().unwrap_or_default(),
        ..Default::default()
    };
    match r.port {
        Some(p) => out.port = Some(p),
        None if r.scheme.is_some() => out.derive_port = Some("FROM_PROTOCOL_DEFAULT".into()),
        None => out.derive_port = Some("FROM_REQUEST_PORT".into()),
    }
    if let Some(p) = &r.path {
        match p.modifier_type {
            PathModifierType::ReplaceFullPath => {
                out.uri = p.replace_full_path.clone().unwrap_or_default()
            }
            PathModifierType::ReplacePrefixMatch => {
                out.prefix_rewrite = p.replace_prefix_match.clone().unwrap_or_default()
            }
        }
    }
    out
}

/// `createRewriteFilter`.
fn rewrite(r: &UrlRewrite) -> Option<HttpRewrite> {
    let mut out = HttpRewrite::default();
    if let Some(p) = &r.path {
        match p.modifier_type {
            PathModifierType::ReplacePrefixMatch => {
                let v = p.replace_prefix_match.clone().unwrap_or_default();
                out.uri = v.trim_end_matches('/').to_string();
                if out.uri.is_empty() {
                    out.uri = "/".into();
                }
            }
            PathModifierType::ReplaceFullPath => {
                out.uri_regex_rewrite = Some(RegexRewrite {
                    pattern: "/.*".into(),
                    rewrite: p.replace_full_path.clone().unwrap_or_default(),
                })
            }
        }
    }
    if let Some(h) = &r.hostname {
        out.authority = h.clone();
    }
    (!out.uri.is_empty() || out.uri_regex_rewrite.is_some() || !out.authority.is_empty())
        .then_some(out)
}

/// `createCorsFilter`.
fn cors(c: &Cors) -> CorsPolicy {
    let mut out = CorsPolicy::default();
    for o in c.allow_origins.iter().filter(|o| !o.is_empty()) {
        let m = if o == "*" {
            StringMatch {
                regex: Some(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s?#]+$".into()),
                ..Default::default()
            }
        } else if !o.contains('*') {
            string_match(MatchType::Exact, o)
        } else if o.matches('*').count() == 1 && o.ends_with('*') {
            StringMatch {
                prefix: Some(o.trim_end_matches('*').to_string()),
                ..Default::default()
            }
        } else {
            let pattern = regex_syntax_escape(o).replace(r"\*", ".*");
            StringMatch {
                regex: Some(format!("^{pattern}$")),
                ..Default::default()
            }
        };
        out.allow_origins.push(m);
    }
    if c.allow_credentials == Some(true) {
        out.allow_credentials = Some(true);
    }
    out.allow_methods = c.allow_methods.clone();
    out.allow_headers = c.allow_headers.clone();
    out.expose_headers = c.expose_headers.clone();
    if c.max_age > 0 {
        out.max_age = Some(format!("{}s", c.max_age));
    }
    out.unmatched_preflights = Some("IGNORE".into());
    out
}

/// Go's `regexp.QuoteMeta`.
fn regex_syntax_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn retries(r: &HttpRouteRetry) -> HttpRetry {
    let mut retry_on = vec![
        "connect-failure",
        "refused-stream",
        "unavailable",
        "cancelled",
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    retry_on.extend(r.codes.iter().map(|c| c.to_string()));
    let attempts = r.attempts.unwrap_or(2);
    HttpRetry {
        attempts: i64::from(attempts),
        retry_on: if attempts == 0 {
            String::new()
        } else {
            retry_on.join(",")
        },
        backoff: r.backoff.clone(),
        ..Default::default()
    }
}

/// A Gateway API duration as Istio writes one, or `None` for zero (no timeout).
fn duration(d: &Option<String>) -> Option<String> {
    let d = d.as_deref()?;
    let nanos = axon_config::validate::parse_duration(d)?;
    (nanos != 0).then(|| d.to_string())
}

/// istiod: `backendRequest` is the per-try timeout with retries, else the route's timeout
/// (replacing `request`).
fn timeouts(t: &HttpRouteTimeouts, istio: &mut HttpRoute) {
    if let Some(request) = duration(&t.request) {
        istio.timeout = Some(request);
    }
    if let Some(backend) = duration(&t.backend_request) {
        match &mut istio.retries {
            Some(r) => r.per_try_timeout = Some(backend),
            None => istio.timeout = Some(backend),
        }
    }
}

/// `buildHTTPDestination`: weight-0 backends dropped, a single one gets weight 0 (all);
/// none left and no redirect: a direct 500.
fn destinations(
    inputs: &Inputs,
    route: &Config,
    refs: &[HttpBackendRef],
    istio: &mut HttpRoute,
    enforce_grants: bool,
    problems: &mut Problems,
) -> Result<(), String> {
    let kept: Vec<&HttpBackendRef> = refs.iter().filter(|b| b.weight != 0).collect();
    if kept.is_empty() {
        if istio.redirect.is_none() {
            istio.direct_response = Some(HttpDirectResponse {
                status: 500,
                body: None,
            });
        }
        return Ok(());
    }
    let single = kept.len() == 1;
    for b in kept {
        let (dest, error) = destination(inputs, route, route.kind(), &b.object(), enforce_grants);
        match error {
            Some(BackendError::Hard(e)) => return Err(e),
            Some(BackendError::Soft(e)) => problems.add(&route.key, e),
            None => {}
        }
        let mut d = HttpRouteDestination {
            destination: Some(dest),
            weight: if single { 0 } else { b.weight as i32 },
            headers: None,
        };
        for f in &b.filters {
            match f.filter_type {
                FilterType::RequestHeaderModifier | FilterType::ResponseHeaderModifier => {
                    header_filter(f, &mut d.headers)?;
                }
                other => return Err(format!("unsupported filter type {other:?} (InvalidFilter)")),
            }
        }
        istio.route.push(d);
    }
    Ok(())
}
