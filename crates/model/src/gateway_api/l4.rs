//! TCPRoutes and TLSRoutes into VirtualServices of `tcp` and `tls` routes (istiod's
//! `TCPRouteCollection`, `TLSRouteCollection`, `convertTCPRoute`, `convertTLSRoute`): one
//! VirtualService per accepted listener (TLSRoutes: per hostname within the listener's),
//! named `NAME~tcp~N~…` and `NAME~tls~N~…`, not merged across routes. A rule without weighted
//! backends routes to a cluster that does not exist, so connections fail.

use std::collections::BTreeSet;

use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::gateway_api::routes::L4RouteRule;
use axon_config::istio::{RouteSemantics, VirtualService};
use serde_json::json;

use super::backends::{BackendError, destination};
use super::http::parent_name;
use super::listeners::Gateways;
use super::parents::subset_of;
use super::{DERIVED_MARK, Inputs, Problems, parents};

pub(crate) fn convert_route(
    inputs: &Inputs,
    gateways: &Gateways,
    route: &Config,
    problems: &mut Problems,
) -> Vec<Config> {
    let (Spec::TcpRoute(spec) | Spec::TlsRoute(spec)) = &route.spec else {
        return Vec::new();
    };
    let kind = route.kind();
    let tls = kind == ConfigKind::TlsRoute;
    let parents = parents::resolve(
        gateways,
        route,
        kind,
        &spec.parent_refs,
        &spec.hostnames,
        problems,
    );
    let mesh = super::http::mesh_parents(inputs, route, &spec.parent_refs, problems);
    // Mesh routes check no ReferenceGrant (istiod: `enforceRefGrant = !mesh`).
    let mut rules = Vec::new();
    let mut mesh_rules = Vec::new();
    for rule in &spec.rules {
        for (enforce, into) in [(true, &mut rules), (false, &mut mesh_rules)] {
            match rule_routes(inputs, route, rule, enforce) {
                Ok((dests, soft)) => {
                    if let (Some(e), true) = (soft, enforce) {
                        problems.add(&route.key, e);
                    }
                    into.push(dests);
                }
                Err(e) => {
                    problems.add(&route.key, format!("not served: {e}"));
                    return Vec::new();
                }
            }
        }
    }
    let route_hosts: Vec<String> = if spec.hostnames.is_empty() {
        vec!["*".into()]
    } else {
        spec.hostnames.clone()
    };
    let mut out = Vec::new();
    let mut count = 0;
    for parent in parents::accepted(&parents) {
        // A TLS route's hosts are its SNI names within the listener's.
        let (vs_hosts, sni) = if !tls {
            (vec!["*".to_string()], Vec::new())
        } else {
            let sni = intersection(&route_hosts, &parent.listener.original_hostname);
            (sni.clone(), sni)
        };
        for h in vs_hosts {
            let blocks = if tls {
                rules
                    .iter()
                    .filter(|_| !sni.is_empty())
                    .map(|dests| json!({"match": [{"sniHosts": sni}], "route": dests}))
                    .collect()
            } else {
                rules.iter().map(|dests| json!({"route": dests})).collect()
            };
            let gateway = parent.listener.internal_name.clone();
            out.push(l4_virtual_service(route, tls, count, h, gateway, blocks));
            count += 1;
        }
    }
    // Mesh routes (GAMMA): istiod's `augmentTLSPortMatch` (a route without hostnames takes
    // the parent's hosts for SNI; the parentRef's port on every match), then
    // `compatibleRoutesForHost` per host; TCP: `augmentTCPPortMatch`.
    for (hosts, port) in mesh {
        for h in &hosts {
            let blocks: Vec<serde_json::Value> = mesh_rules
                .iter()
                .map(|dests| {
                    let mut m = json!({});
                    if tls {
                        let mut sni = if spec.hostnames.is_empty() {
                            hosts.clone()
                        } else {
                            spec.hostnames.clone()
                        };
                        if sni.len() > 1 {
                            sni.retain(|s| parents::hosts_match(h, s));
                        }
                        m["sniHosts"] = json!(sni);
                    }
                    if let Some(p) = port {
                        m["port"] = json!(p);
                    }
                    if m.as_object().is_some_and(|o| o.is_empty()) {
                        json!({"route": dests})
                    } else {
                        json!({"match": [m], "route": dests})
                    }
                })
                .collect();
            out.push(l4_virtual_service(
                route,
                tls,
                count,
                h.clone(),
                "mesh".to_string(),
                blocks,
            ));
            count += 1;
        }
    }
    out
}

/// The `count`th VirtualService of `route`, `NAME~tls~N~…` or `NAME~tcp~N~…`: `blocks` as its
/// `tls` or `tcp` routes for `host` on `gateway` (a listener's internal Gateway, or `mesh`).
fn l4_virtual_service(
    route: &Config,
    tls: bool,
    count: usize,
    host: String,
    gateway: String,
    blocks: Vec<serde_json::Value>,
) -> Config {
    let name = format!(
        "{}~{}~{count}~{DERIVED_MARK}",
        route.name(),
        if tls { "tls" } else { "tcp" }
    );
    let mut vs = VirtualService {
        hosts: vec![host],
        gateways: vec![gateway],
        semantics: RouteSemantics::Gateway,
        parents: vec![parent_name(route)],
        ..Default::default()
    };
    if tls {
        vs.tls = blocks;
    } else {
        vs.tcp = blocks;
    }
    Config {
        key: ConfigKey::new(ConfigKind::VirtualService, route.namespace(), name),
        labels: Default::default(),
        created: route.created,
        spec: Spec::VirtualService(vs),
        not_applied: Vec::new(),
    }
}

/// The `route` of one rule, and the last soft backend error.
fn rule_routes(
    inputs: &Inputs,
    route: &Config,
    rule: &L4RouteRule,
    enforce_grants: bool,
) -> Result<(Vec<serde_json::Value>, Option<String>), String> {
    let kept: Vec<_> = rule.backend_refs.iter().filter(|b| b.weight != 0).collect();
    if kept.is_empty() {
        return Ok((
            vec![
                json!({"destination": {"host": "internal.cluster.local", "subset": "zero-weight", "port": {"number": 65535}}}),
            ],
            None,
        ));
    }
    let single = kept.len() == 1;
    let mut soft = None;
    let mut out = Vec::new();
    for b in kept {
        let (dest, error) = destination(inputs, route, route.kind(), &b.object(), enforce_grants);
        match error {
            Some(BackendError::Hard(e)) => return Err(e),
            Some(BackendError::Soft(e)) => soft = Some(e),
            None => {}
        }
        let mut d = json!({"destination": {"host": dest.host}});
        if let Some(p) = dest.port {
            d["destination"]["port"] = json!({"number": p.number});
        }
        if !single {
            d["weight"] = json!(b.weight);
        }
        out.push(d);
    }
    Ok((out, soft))
}

/// istio's `host.Names.Intersection` of the route's hostnames and a listener's: the more
/// specific of each overlapping pair, sorted, each once.
fn intersection(routes: &[String], listener: &str) -> Vec<String> {
    let mut out = BTreeSet::new();
    for r in routes {
        if subset_of(r, listener) {
            out.insert(r.clone());
        } else if subset_of(listener, r) {
            out.insert(listener.to_string());
        }
    }
    out.into_iter().collect()
}
