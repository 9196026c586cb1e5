//! Which listeners a route attaches to (istiod's `extractParentReferenceInfo`,
//! `referenceAllowed`, `hostnameAllowedByIsolation`, `filteredReferences`): each parentRef
//! to a Gateway expands to the Gateway's listeners, and each listener accepts the route or
//! says why not (port, section, hostname, namespace or kind).

use std::collections::BTreeSet;

use axon_config::config::{Config, ConfigKind};
use axon_config::gateway_api::ParentReference;

use super::Problems;
use super::listeners::{Gateways, ListenerInfo};

/// A listener a route's parentRef names, and whether it accepts the route.
#[derive(Debug, Clone)]
pub(crate) struct RouteParent<'a> {
    pub listener: &'a ListenerInfo,
    /// Why the listener does not accept the route (`NotAllowedByListeners`, ...).
    pub denied: Option<String>,
    /// The hostnames of the other listeners of the Gateway on the same port and protocol.
    pub banned: BTreeSet<String>,
}

/// istio's `host.Name.Matches`: either side may be a wildcard.
pub(crate) fn hosts_match(a: &str, b: &str) -> bool {
    axon_config::host::intersects(a, b)
}

/// istio's `host.Name.SubsetOf`: every host `a` matches is matched by `b`.
pub(crate) fn subset_of(a: &str, b: &str) -> bool {
    if let Some(suffix) = b.strip_prefix('*') {
        if let Some(rest) = a.strip_prefix('*') {
            return a.len() >= b.len() && rest.ends_with(suffix);
        }
        return a.ends_with(suffix);
    }
    !a.starts_with('*') && a == b
}

/// The listeners `route`'s parentRefs to Gateways name, with their verdicts; parentRefs to
/// other kinds are left to their converters (Services: mesh routes) or ignored (another
/// controller's kinds).
pub(crate) fn resolve<'a>(
    gateways: &'a Gateways,
    route: &Config,
    kind: ConfigKind,
    refs: &[ParentReference],
    hostnames: &[String],
    problems: &mut Problems,
) -> Vec<RouteParent<'a>> {
    let mut out = Vec::new();
    for r in refs.iter().filter(|r| r.is_gateway()) {
        let ns = r
            .namespace
            .clone()
            .unwrap_or_else(|| route.namespace().to_string());
        let Some(listeners) = gateways.listeners.get(&(ns.clone(), r.name.clone())) else {
            // A Gateway that does not exist or is another controller's: no parent.
            problems.add(
                &route.key,
                format!(
                    "parent Gateway {ns}/{} is not a Gateway of a class axon serves",
                    r.name
                ),
            );
            continue;
        };
        let first = out.len();
        for l in listeners {
            let banned = listeners
                .iter()
                .filter(|o| !std::ptr::eq(*o, l) && o.port == l.port && o.protocol == l.protocol)
                .map(|o| o.original_hostname.clone())
                .filter(|h| *h != l.original_hostname)
                .collect();
            let denied = allowed(l, kind, r, hostnames, route.namespace()).err();
            out.push(RouteParent {
                listener: l,
                denied,
                banned,
            });
        }
        let mine: Vec<&RouteParent> = out[first..].iter().collect();
        for p in mine.iter().filter(|p| p.denied.is_none()) {
            *problems
                .2
                .entry(p.listener.internal_name.clone())
                .or_default() += 1;
        }
        let verdict = if mine.iter().any(|p| p.denied.is_none()) {
            Ok(())
        } else {
            // istiod's `rankParentError`: the lowest rank wins, equal ones are joined.
            let rank = |reason: &str| match reason {
                "NotAllowedByListeners" => 0,
                "NoMatchingListenerHostname" => 1,
                "ParentRefConflict" => 2,
                _ => 3,
            };
            let denied: Vec<(&str, &str)> = mine
                .iter()
                .filter_map(|p| p.denied.as_deref())
                .map(|m| (super::status::reason_of(m).unwrap_or("NoMatchingParent"), m))
                .collect();
            let best = denied.iter().map(|(r, _)| rank(r)).min().unwrap_or(3);
            let reason = denied
                .iter()
                .find(|(r, _)| rank(r) == best)
                .map_or("NoMatchingParent", |(r, _)| *r);
            let mut messages: Vec<&str> = denied
                .iter()
                .filter(|(r, _)| rank(r) == best)
                .map(|(_, m)| super::status::without_reason(m))
                .collect();
            messages.dedup();
            problems.add(
                &route.key,
                format!(
                    "not accepted by Gateway {ns}/{}: {} ({reason})",
                    r.name,
                    messages.join("; ")
                ),
            );
            Err((reason.to_string(), messages.join("; ")))
        };
        problems
            .1
            .entry(route.key.clone())
            .or_default()
            .push(super::status::Verdict {
                parent_ref: r.clone(),
                accepted: verdict,
            });
    }
    out
}

/// `referenceAllowed` for a Gateway listener.
fn allowed(
    l: &ListenerInfo,
    kind: ConfigKind,
    r: &ParentReference,
    hostnames: &[String],
    route_ns: &str,
) -> Result<(), String> {
    if let Some(port) = r.port
        && port != l.port
    {
        return Err(format!("port {port} not found (NoMatchingParent)"));
    }
    if let Some(section) = &r.section_name
        && *section != l.section_name
    {
        return Err(format!(
            "sectionName {section:?} not found (NoMatchingParent)"
        ));
    }
    let star = ["*".to_string()];
    let hostnames = if hostnames.is_empty() {
        &star[..]
    } else {
        hostnames
    };
    let mut matched = false;
    let mut host_matched = false;
    'out: for h in hostnames {
        for parent in &l.hostnames {
            let (pns, phost) = axon_config::host::split_namespaced(parent);
            let host_match = hosts_match(phost, h);
            host_matched |= host_match;
            if host_match && (pns == "*" || pns == route_ns) {
                matched = true;
                break 'out;
            }
        }
    }
    if !matched {
        return Err(if host_matched {
            format!(
                "hostnames matched parent hostname {:?}, but namespace {route_ns:?} is not allowed by the parent (NotAllowedByListeners)",
                l.original_hostname
            )
        } else {
            format!(
                "no hostnames matched parent hostname {:?} (NoMatchingListenerHostname)",
                l.original_hostname
            )
        });
    }
    if !l.allowed_kinds.contains(&kind) {
        return Err(format!(
            "kind {}/{} is not allowed (NotAllowedByListeners)",
            axon_config::gateway_api::GROUP,
            kind.api_kind()
        ));
    }
    Ok(())
}

impl RouteParent<'_> {
    /// `hostnameAllowedByIsolation`: a wildcard listener does not take a route host that a
    /// more specific sibling listener matches.
    pub(crate) fn allows_host(&self, route_host: &str) -> bool {
        let ours = self.listener.original_hostname.as_str();
        if !ours.starts_with('*') {
            return true;
        }
        if !hosts_match(route_host, ours) {
            return false;
        }
        !self
            .banned
            .iter()
            .any(|other| ours.len() <= other.len() && subset_of(route_host, other))
    }
}

/// `filteredReferences`: the accepted listeners, each once, by internal name.
pub(crate) fn accepted<'a, 'b>(parents: &'b [RouteParent<'a>]) -> Vec<&'b RouteParent<'a>> {
    let mut out: Vec<&RouteParent> = parents.iter().filter(|p| p.denied.is_none()).collect();
    out.sort_by(|a, b| a.listener.internal_name.cmp(&b.listener.internal_name));
    out.dedup_by(|a, b| a.listener.internal_name == b.listener.internal_name);
    out
}
