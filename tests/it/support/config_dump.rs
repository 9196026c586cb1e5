//! Reading Envoy's own account of its configuration (`/config_dump`, `/stats` on its admin
//! API): the listeners, route configurations, clusters and endpoints it has, and
//! [`wait_for_route`], the condition a test waits on before it sends a request through a
//! route: the listener active, the virtual host and its clusters in force, nothing warming,
//! nothing rejected.

use std::time::Duration;

use serde_json::Value;

use super::envoy::Envoy;
use super::wait::wait_until;

/// The config_dump entry whose `@type`'s last segment is `type_suffix`
/// (e.g. `RoutesConfigDump`, which does not match `ScopedRoutesConfigDump`).
pub fn dump_section<'a>(
    dump: &'a serde_json::Value,
    type_suffix: &str,
) -> Option<&'a serde_json::Value> {
    dump.get("configs")?.as_array()?.iter().find(|c| {
        c.get("@type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t.rsplit(['.', '/']).next() == Some(type_suffix))
    })
}

/// Names of dynamic (active or warming) listeners.
pub fn dynamic_listener_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(ls) = dump_section(dump, "ListenersConfigDump")
        .and_then(|s| s.get("dynamic_listeners"))
        .and_then(|l| l.as_array())
    {
        for l in ls {
            if let Some(n) = l.get("name").and_then(|n| n.as_str()) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// Names of dynamic route configurations.
pub fn dynamic_route_config_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rs) = dump_section(dump, "RoutesConfigDump")
        .and_then(|s| s.get("dynamic_route_configs"))
        .and_then(|l| l.as_array())
    {
        for r in rs {
            if let Some(n) = r.pointer("/route_config/name").and_then(|n| n.as_str()) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// Names of dynamic active (and warming) clusters.
pub fn dynamic_cluster_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(sec) = dump_section(dump, "ClustersConfigDump") {
        for key in ["dynamic_active_clusters", "dynamic_warming_clusters"] {
            if let Some(cs) = sec.get(key).and_then(|l| l.as_array()) {
                for c in cs {
                    if let Some(n) = c.pointer("/cluster/name").and_then(|n| n.as_str()) {
                        out.push(n.to_string());
                    }
                }
            }
        }
    }
    out
}

/// The route configuration `name` (its `route_config` object).
pub fn route_config(dump: &Value, name: &str) -> Option<Value> {
    route_config_entry(dump, name).and_then(|r| r.get("route_config").cloned())
}

/// The virtual hosts of route configuration `name` (none when it is absent).
pub fn route_virtual_hosts(dump: &Value, name: &str) -> Vec<Value> {
    route_config(dump, name)
        .and_then(|rc| rc.get("virtual_hosts").and_then(|v| v.as_array()).cloned())
        .unwrap_or_default()
}

/// Whether route configuration `name` has istiod's REGISTRY_ONLY `block_all` virtual host,
/// answering 502.
pub fn blocks_all(dump: &Value, name: &str) -> bool {
    route_virtual_hosts(dump, name)
        .iter()
        .any(|vh| vh["name"] == "block_all" && vh["routes"][0]["direct_response"]["status"] == 502)
}

/// The `dynamic_route_configs` entry of `name` (`version_info`, `route_config`).
fn route_config_entry<'a>(dump: &'a Value, name: &str) -> Option<&'a Value> {
    dump_section(dump, "RoutesConfigDump")?
        .get("dynamic_route_configs")?
        .as_array()?
        .iter()
        .find(|r| r.pointer("/route_config/name").and_then(|n| n.as_str()) == Some(name))
}

/// The active dynamic cluster named `name` (its `cluster` object).
pub fn dynamic_cluster(dump: &Value, name: &str) -> Option<Value> {
    dump_section(dump, "ClustersConfigDump")?
        .get("dynamic_active_clusters")?
        .as_array()?
        .iter()
        .find(|c| c.pointer("/cluster/name").and_then(|n| n.as_str()) == Some(name))
        .and_then(|c| c.get("cluster").cloned())
}

/// The dynamic listener named `name` (`active_state` and/or `warming_state`).
pub fn dynamic_listener(dump: &Value, name: &str) -> Option<Value> {
    dump_section(dump, "ListenersConfigDump")?
        .get("dynamic_listeners")?
        .as_array()?
        .iter()
        .find(|l| l.get("name").and_then(|n| n.as_str()) == Some(name))
        .cloned()
}

/// The endpoint ports of `cluster`'s `ClusterLoadAssignment`, from a config_dump with EDS
/// ([`Envoy::config_dump_with_eds`]).
pub fn endpoint_ports(dump: &Value, cluster: &str) -> Vec<u64> {
    lb_endpoints(dump, cluster)
        .iter()
        .filter_map(|lb| {
            lb.pointer("/endpoint/address/socket_address/port_value")
                .and_then(|p| p.as_u64())
        })
        .collect()
}

/// The endpoint addresses of `cluster`'s `ClusterLoadAssignment` (`IP:PORT`), from a
/// config_dump with EDS ([`Envoy::config_dump_with_eds`]).
pub fn endpoint_addresses(dump: &Value, cluster: &str) -> Vec<String> {
    lb_endpoints(dump, cluster)
        .iter()
        .filter_map(|lb| {
            let socket = lb.pointer("/endpoint/address/socket_address")?;
            Some(format!(
                "{}:{}",
                socket.get("address")?.as_str()?,
                socket.get("port_value")?.as_u64()?
            ))
        })
        .collect()
}

/// The `lb_endpoints` of `cluster`'s `ClusterLoadAssignment`, every locality's.
fn lb_endpoints(dump: &Value, cluster: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let Some(sec) = dump_section(dump, "EndpointsConfigDump") else {
        return out;
    };
    for key in ["dynamic_endpoint_configs", "static_endpoint_configs"] {
        for c in sec
            .get(key)
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
        {
            let cfg = c.get("endpoint_config").unwrap_or(c);
            if cfg.get("cluster_name").and_then(|n| n.as_str()) != Some(cluster) {
                continue;
            }
            let localities = cfg.get("endpoints").and_then(|e| e.as_array());
            for le in localities.into_iter().flatten() {
                let lb_endpoints = le.get("lb_endpoints").and_then(|e| e.as_array());
                out.extend(lb_endpoints.into_iter().flatten().cloned());
            }
        }
    }
    out
}

/// A route that must be in force in Envoy before requests through it are worth sending.
#[derive(Debug, Clone)]
pub struct RouteInForce<'a> {
    /// The dynamic listener that takes the requests, e.g. `0.0.0.0_8080`, `127.0.0.1_15001`.
    pub listener: &'a str,
    /// The route configuration its connection manager uses, e.g. `http.8080`, `15001`.
    pub route_config: &'a str,
    /// A domain the virtual host lists (`*`, `reviews.a.svc.cluster.local`).
    pub domain: &'a str,
    /// Clusters the virtual host must route to; each must be active (warm) with endpoints.
    pub clusters: &'a [&'a str],
}

/// Waits (up to `timeout`) until Envoy has `want` in force, according to its admin API:
/// no listener or cluster warming (`listener_manager.total_listeners_warming`,
/// `cluster_manager.warming_clusters`), the listener active, the route configuration with a
/// virtual host for the domain that routes to every cluster of
/// `want`, those clusters active with endpoints. Panics at once if Envoy rejected an update
/// (e.g. a listener it could not bind), and with what is missing at the deadline.
pub fn wait_for_route(envoy: &Envoy, want: &RouteInForce, timeout: Duration) {
    let mut missing = String::new();
    let ok = wait_until(timeout, || {
        let stats = envoy.stats();
        let rejected: Vec<String> = stats
            .iter()
            .filter(|(k, v)| k.ends_with("update_rejected") && **v != 0)
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        assert!(
            rejected.is_empty(),
            "Envoy {} rejected an update while waiting for {want:?}: {rejected:?}\n\
             Envoy's log about it:\n{}",
            envoy.options.node_id,
            envoy
                .logs()
                .lines()
                .filter(|l| l.contains("rejected") || l.contains("gRPC config"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let warming = |k: &str| stats.get(k).copied().unwrap_or(0);
        let (listeners_warming, clusters_warming) = (
            warming("listener_manager.total_listeners_warming"),
            warming("cluster_manager.warming_clusters"),
        );
        if listeners_warming + clusters_warming != 0 {
            missing =
                format!("warming: {listeners_warming} listeners, {clusters_warming} clusters");
            return false;
        }
        let dump = envoy.config_dump_with_eds();
        match route_missing(&dump, want) {
            Some(m) => {
                missing = m;
                false
            }
            None => true,
        }
    });
    assert!(
        ok,
        "Envoy {} does not have {want:?} in force within {timeout:?}: {missing}\n\
         dynamic listeners {:?}, route configs {:?}, clusters {:?}",
        envoy.options.node_id,
        dynamic_listener_names(&envoy.config_dump()),
        dynamic_route_config_names(&envoy.config_dump()),
        dynamic_cluster_names(&envoy.config_dump()),
    );
}

/// Waits (up to `timeout`) until the gateway Envoy has, on `gw_port`, the listener
/// `0.0.0.0_PORT` active and its route configuration `http.PORT` with a virtual host for
/// `domain` routing to every cluster of `clusters`, warm with endpoints ([`wait_for_route`]).
pub fn wait_gateway_route(
    envoy: &Envoy,
    gw_port: u16,
    domain: &str,
    clusters: &[&str],
    timeout: Duration,
) {
    let listener = format!("0.0.0.0_{gw_port}");
    let route_config = format!("http.{gw_port}");
    let want = RouteInForce {
        listener: &listener,
        route_config: &route_config,
        domain,
        clusters,
    };
    wait_for_route(envoy, &want, timeout);
}

/// What of `want` the dump lacks, `None` when it is all there.
fn route_missing(dump: &Value, want: &RouteInForce) -> Option<String> {
    let listener = dynamic_listener(dump, want.listener);
    match &listener {
        None => return Some(format!("no listener {}", want.listener)),
        Some(l) if l.get("active_state").is_none() || l.get("warming_state").is_some() => {
            return Some(format!("listener {} not active: {l}", want.listener));
        }
        Some(_) => {}
    }
    let Some(entry) = route_config_entry(dump, want.route_config) else {
        return Some(format!("no route configuration {}", want.route_config));
    };
    let vhosts = entry.pointer("/route_config/virtual_hosts")?.as_array()?;
    let Some(vhost) = vhosts.iter().find(|v| {
        v["domains"]
            .as_array()
            .is_some_and(|d| d.iter().any(|d| d == want.domain))
    }) else {
        return Some(format!(
            "route configuration {} has no virtual host for {}: {}",
            want.route_config, entry["route_config"], want.domain
        ));
    };
    let routes = vhost["routes"].to_string();
    let active = dynamic_active_cluster_names(dump);
    for cluster in want.clusters {
        if !routes.contains(&format!("\"{cluster}\"")) {
            return Some(format!(
                "virtual host {} does not route to {cluster}: {vhost}",
                vhost["name"]
            ));
        }
        if !active.iter().any(|c| c == cluster) {
            return Some(format!("cluster {cluster} not active"));
        }
        if endpoint_ports(dump, cluster).is_empty() {
            return Some(format!("cluster {cluster} has no endpoints"));
        }
    }
    None
}

/// Names of the dynamic active (warm) clusters.
fn dynamic_active_cluster_names(dump: &Value) -> Vec<String> {
    dump_section(dump, "ClustersConfigDump")
        .and_then(|s| s.get("dynamic_active_clusters"))
        .and_then(|l| l.as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| c.pointer("/cluster/name").and_then(|n| n.as_str()))
        .map(str::to_string)
        .collect()
}
