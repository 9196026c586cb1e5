//! VirtualService delegation, as istiod's `mergeVirtualServices` and `MergeHTTPRoutes`: a
//! root VirtualService (one with `hosts`) whose HTTP route names a `delegate` has that route
//! replaced by the routes of the child (a VirtualService without `hosts`), each merged with
//! the root route. A child route's match blocks must each fall inside one of the root
//! route's ([`merge_matches`], istiod's `mergeHTTPMatchRequests` and `hasConflict`): a child
//! route with one that does not is dropped, and reported. The child's own fields win; those
//! it leaves unset come from the root route ([`merge_route`]). Delegation is one level deep:
//! a child's own `delegate` is not followed (validation rejects it). A child must exist and
//! be exported to the root's namespace, else the root route is dropped, and reported.
//! Children are never served on their own. The child's short names (destinations, mirrors,
//! match gateways) are resolved in the child's namespace before the merge, as istiod's
//! `ResolveVirtualServiceShortnames`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::gateway_ref;
use crate::visibility::ExportTo;
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::host;
use axon_config::istio::{HttpMatchRequest, HttpRoute, StringMatch, VirtualService};

/// A root VirtualService with its delegates merged in.
#[derive(Debug)]
pub(super) struct Merged {
    /// The root's spec, with each delegating route replaced by the merged child routes.
    pub spec: VirtualService,
    /// Every child it names (found or not): a change to any of them changes the result.
    pub children: BTreeSet<ConfigKey>,
    /// What was dropped, and why (missing or hidden children, conflicting matches).
    pub problems: Vec<String>,
}

/// Whether any HTTP route of `vs` delegates (istiod's `isRootVs`).
pub(super) fn is_root(vs: &VirtualService) -> bool {
    vs.http.iter().any(|h| h.delegate.is_some())
}

/// Merges the delegates of the root `config` (a VirtualService with hosts). `children` finds
/// a VirtualService by `(namespace, name)`; `default_export_to` is the mesh's.
pub(super) fn merge_root<'a>(
    config: &Config,
    vs: &VirtualService,
    children: impl Fn(&str, &str) -> Option<&'a Arc<Config>>,
    default_export_to: &[String],
) -> Merged {
    let mut out = Merged {
        spec: VirtualService {
            http: Vec::new(),
            ..vs.clone()
        },
        children: BTreeSet::new(),
        problems: Vec::new(),
    };
    let root_ns = config.namespace();
    for http in &vs.http {
        let Some(delegate) = &http.delegate else {
            out.spec.http.push(http.clone());
            continue;
        };
        let ns = if delegate.namespace.is_empty() {
            root_ns
        } else {
            &delegate.namespace
        };
        let child_key = ConfigKey::new(ConfigKind::VirtualService, ns, &delegate.name);
        out.children.insert(child_key.clone());
        let child = children(ns, &delegate.name).and_then(|c| match &c.spec {
            // A VirtualService with hosts is a root, never a delegate.
            Spec::VirtualService(child) if child.hosts.is_empty() => Some((c, child)),
            _ => None,
        });
        let Some((child_config, child)) = child else {
            out.problems.push(format!(
                "{}: delegate {child_key} not found: route {:?} dropped",
                config.key, http.name
            ));
            continue;
        };
        if !ExportTo::resolve(&child.export_to, ns, default_export_to).visible_from(root_ns) {
            out.problems.push(format!(
                "{}: delegate {child_key} is not exported to {root_ns}: route {:?} dropped",
                config.key, http.name
            ));
            continue;
        }
        let root = resolve_route(http, root_ns);
        for child_route in &child.http {
            let name = child_route.name.clone();
            let child_route = resolve_route(child_route, child_config.namespace());
            match merge_route(&root, child_route) {
                Some(merged) => out.spec.http.push(merged),
                None => out.problems.push(format!(
                    "{}: route {name:?} of delegate {child_key} has a match outside every match of root route {:?}: dropped",
                    config.key, http.name
                )),
            }
        }
    }
    out
}

/// A route with its destinations, mirrors and match gateways resolved in `namespace`.
fn resolve_route(http: &HttpRoute, namespace: &str) -> HttpRoute {
    let mut out = http.clone();
    for d in out.route.iter_mut().filter_map(|r| r.destination.as_mut()) {
        d.host = host::resolve(&d.host, namespace);
    }
    if let Some(m) = &mut out.mirror {
        m.host = host::resolve(&m.host, namespace);
    }
    for d in out
        .mirrors
        .iter_mut()
        .filter_map(|m| m.destination.as_mut())
    {
        d.host = host::resolve(&d.host, namespace);
    }
    for m in &mut out.matches {
        for g in &mut m.gateways {
            *g = gateway_ref(g, namespace);
        }
    }
    out
}

/// istiod's `mergeHTTPRoute`: the child route with the root route's match blocks
/// intersected in, its name prefixed by the root's, and each field it leaves unset taken
/// from the root route; `None` when a child match block conflicts with every root one.
pub(super) fn merge_route(root: &HttpRoute, mut child: HttpRoute) -> Option<HttpRoute> {
    child.matches = merge_matches(&root.matches, &child.matches)?;
    child.name = joined(&root.name, &child.name);
    macro_rules! inherit {
        ($($field:ident),*) => {
            $(if child.$field.is_none() {
                child.$field = root.$field.clone();
            })*
        };
    }
    inherit!(
        rewrite,
        direct_response,
        timeout,
        retries,
        fault,
        mirror,
        mirror_percent,
        mirror_percentage,
        cors_policy,
        headers
    );
    if child.mirrors.is_empty() {
        child.mirrors = root.mirrors.clone();
    }
    Some(child)
}

/// `ROOT-CHILD`, or whichever is not empty.
fn joined(root: &str, child: &str) -> String {
    match (root.is_empty(), child.is_empty()) {
        (_, true) => root.to_string(),
        (true, false) => child.to_string(),
        (false, false) => format!("{root}-{child}"),
    }
}

/// istiod's `mergeHTTPMatchRequests`: with no match blocks on one side, the other's; else
/// every child block merged with each root block it does not conflict with. `None` (a
/// conflict) when some child block conflicts with every root block.
pub(super) fn merge_matches(
    root: &[HttpMatchRequest],
    child: &[HttpMatchRequest],
) -> Option<Vec<HttpMatchRequest>> {
    if root.is_empty() {
        return Some(child.to_vec());
    }
    if child.is_empty() {
        return Some(root.to_vec());
    }
    let mut out = Vec::new();
    for c in child {
        let merged: Vec<HttpMatchRequest> = root
            .iter()
            .filter(|r| !has_conflict(r, c))
            .map(|r| merge_match(r, c))
            .collect();
        if merged.is_empty() {
            return None;
        }
        out.extend(merged);
    }
    Some(out)
}

/// istiod's `mergeHTTPMatchRequest`: the child block, with what it leaves unset from the
/// root block, and the root's maps under the child's.
fn merge_match(root: &HttpMatchRequest, child: &HttpMatchRequest) -> HttpMatchRequest {
    let mut out = child.clone();
    out.name = joined(&root.name, &child.name);
    for (mine, theirs) in [
        (&mut out.uri, &root.uri),
        (&mut out.scheme, &root.scheme),
        (&mut out.method, &root.method),
        (&mut out.authority, &root.authority),
    ] {
        if mine.is_none() {
            mine.clone_from(theirs);
        }
    }
    fn under<V: Clone>(
        root: &BTreeMap<String, V>,
        child: &BTreeMap<String, V>,
    ) -> BTreeMap<String, V> {
        let mut out = root.clone();
        out.extend(child.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }
    out.headers = under(&root.headers, &child.headers);
    out.without_headers = under(&root.without_headers, &child.without_headers);
    out.query_params = under(&root.query_params, &child.query_params);
    out.source_labels = under(&root.source_labels, &child.source_labels);
    if out.port.is_none_or(|p| p == 0) {
        out.port = root.port;
    }
    if out.source_namespace.is_empty() {
        out.source_namespace.clone_from(&root.source_namespace);
    }
    if out.gateways.is_empty() {
        out.gateways.clone_from(&root.gateways);
    }
    if out.stat_prefix.is_empty() {
        out.stat_prefix.clone_from(&root.stat_prefix);
    }
    out
}

/// istiod's `hasConflict`: whether the child block asks for something the root block
/// excludes (or that istiod cannot prove is inside it).
fn has_conflict(root: &HttpMatchRequest, child: &HttpMatchRequest) -> bool {
    let pairs = [
        (&root.uri, &child.uri),
        (&root.scheme, &child.scheme),
        (&root.method, &child.method),
        (&root.authority, &child.authority),
    ];
    if pairs
        .iter()
        .any(|(r, c)| string_match_conflict(r.as_ref(), c.as_ref()))
    {
        return true;
    }
    let map_conflict = |r: &BTreeMap<String, StringMatch>, c: &BTreeMap<String, StringMatch>| {
        c.iter()
            .any(|(k, v)| string_match_conflict(r.get(k), Some(v)))
    };
    if map_conflict(&root.headers, &child.headers)
        || map_conflict(&root.without_headers, &child.without_headers)
        || map_conflict(&root.query_params, &child.query_params)
    {
        return true;
    }
    if root.ignore_uri_case != child.ignore_uri_case {
        return true;
    }
    if let (Some(r), Some(c)) = (root.port, child.port)
        && r > 0
        && c > 0
        && r != c
    {
        return true;
    }
    if !root.source_namespace.is_empty() && child.source_namespace != root.source_namespace {
        return true;
    }
    if child
        .source_labels
        .iter()
        .any(|(k, v)| root.source_labels.get(k).is_some_and(|r| r != v))
    {
        return true;
    }
    if !root.gateways.is_empty() && !child.gateways.is_empty() {
        let roots: BTreeSet<&String> = root.gateways.iter().collect();
        if root.gateways.len() < child.gateways.len()
            || child.gateways.iter().any(|g| !roots.contains(g))
        {
            return true;
        }
    }
    false
}

/// istiod's `stringMatchConflict`: no conflict when either side is unset; a regex on either
/// side conflicts with any match on the other; an exact root takes only the same exact; a
/// prefix root takes a prefix or exact under it; anything else conflicts. An empty string
/// counts as unset, as protobuf's getters.
fn string_match_conflict(root: Option<&StringMatch>, child: Option<&StringMatch>) -> bool {
    let (Some(root), Some(child)) = (root, child) else {
        return false;
    };
    let get = |v: &Option<String>| v.clone().unwrap_or_default();
    let (r_exact, r_prefix, r_regex) = (get(&root.exact), get(&root.prefix), get(&root.regex));
    let (c_exact, c_prefix, c_regex) = (get(&child.exact), get(&child.prefix), get(&child.regex));
    let any = |e: &str, p: &str, r: &str| !e.is_empty() || !p.is_empty() || !r.is_empty();
    if !r_regex.is_empty() && any(&c_exact, &c_prefix, &c_regex) {
        return true;
    }
    if !c_regex.is_empty() && any(&r_exact, &r_prefix, &r_regex) {
        return true;
    }
    if !r_exact.is_empty() {
        return !c_prefix.is_empty() || c_exact != r_exact;
    }
    if !r_prefix.is_empty() {
        if !c_prefix.is_empty() {
            return !c_prefix.starts_with(&r_prefix);
        }
        if !c_exact.is_empty() {
            return !c_exact.starts_with(&r_prefix);
        }
    }
    true
}

#[cfg(test)]
mod tests;
