//! End-to-end: axon's `/debug/config_dump?proxyID=…` is Envoy's own `/config_dump`, field
//! for field: a real gateway Envoy converges on axon, and every dynamic cluster, listener,
//! route configuration and load assignment axon's JSON dump shows is, by name, the one the
//! Envoy's admin API prints (proto3 JSON, `@type`s, proto field names), and the Envoy has no
//! other. `?resource=` and `?types=` answer as Envoy and istiod do.

use crate::support;
use crate::support::scenario;

use std::collections::BTreeMap;
use std::time::Duration;

use scenario::*;
use serde_json::Value;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);

/// The entries of `section`'s repeated `field`, each's `inner` object by its name (`key`).
fn by_name(
    dump: &Value,
    section: &str,
    field: &str,
    inner: &str,
    key: &str,
) -> BTreeMap<String, Value> {
    dump_section(dump, section)
        .and_then(|s| s.get(field))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| e.pointer(inner))
        .map(|r| (r[key].as_str().unwrap_or_default().to_string(), r.clone()))
        .collect()
}

/// Where `a` and `b` first differ (numbers compared as numbers: `1` and `1.0` are equal).
fn first_difference(path: &str, a: &Value, b: &Value) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| {
                let (l, r) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                first_difference(&format!("{path}.{k}"), l, r)
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (l, r))| first_difference(&format!("{path}[{i}]"), l, r)),
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        _ if a == b => None,
        _ => Some(format!("{path}: axon {a} / envoy {b}")),
    }
}

/// A load assignment as Envoy's dump shows one: Envoy prints its endpoints from its host set,
/// not as received, so each carries what Envoy fills in (the default overprovisioning factor
/// 140, an endpoint's weight 1 and health HEALTHY, an empty health-check config and
/// locality, a locality's weight the sum of its endpoints'). Nothing axon sends is changed.
fn as_envoy_reports_it(cla: &mut Value) {
    let policy = cla
        .as_object_mut()
        .unwrap()
        .entry("policy")
        .or_insert_with(|| serde_json::json!({}));
    policy
        .as_object_mut()
        .unwrap()
        .entry("overprovisioning_factor")
        .or_insert(140.into());
    for locality in cla["endpoints"].as_array_mut().into_iter().flatten() {
        let mut sum = 0;
        for lb in locality["lb_endpoints"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let lb = lb.as_object_mut().unwrap();
            lb.entry("health_status").or_insert("HEALTHY".into());
            let weight = lb.entry("load_balancing_weight").or_insert(1.into());
            sum += weight.as_u64().unwrap();
            let endpoint = lb.get_mut("endpoint").unwrap().as_object_mut().unwrap();
            endpoint
                .entry("health_check_config")
                .or_insert_with(|| serde_json::json!({}));
        }
        let locality = locality.as_object_mut().unwrap();
        locality
            .entry("load_balancing_weight")
            .or_insert(sum.into());
        locality
            .entry("locality")
            .or_insert_with(|| serde_json::json!({}));
    }
}

fn assert_same(what: &str, axon: &BTreeMap<String, Value>, envoy: &BTreeMap<String, Value>) {
    assert!(!envoy.is_empty(), "the Envoy has no {what}");
    assert_eq!(
        axon.keys().collect::<Vec<_>>(),
        envoy.keys().collect::<Vec<_>>(),
        "{what}: the same names"
    );
    for (name, ours) in axon {
        let theirs = &envoy[name];
        if let Some(diff) = first_difference(name, ours, theirs) {
            panic!("{what} {name} differs at {diff}\naxon: {ours}\nenvoy: {theirs}");
        }
    }
}

#[test]
fn the_json_config_dump_is_the_envoys_own_field_for_field() {
    let v1 = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write(
        "routes.yaml",
        &backend_routes_yaml("v1", false, false, &[("v1", 100)]),
    );
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    wait_gateway_serves_v1(&envoy, gw_port, "the gateway serves v1", CONVERGE);

    let theirs = envoy.config_dump_with_eds();
    let ours = axon.debug_json(&format!(
        "/debug/config_dump?proxyID={GATEWAY_NODE_ID}&include_eds"
    ));
    let sections = [
        (
            "clusters",
            "ClustersConfigDump",
            "dynamic_active_clusters",
            "/cluster",
            "name",
        ),
        (
            "listeners",
            "ListenersConfigDump",
            "dynamic_listeners",
            "/active_state/listener",
            "name",
        ),
        (
            "routes",
            "RoutesConfigDump",
            "dynamic_route_configs",
            "/route_config",
            "name",
        ),
        (
            "load assignments",
            "EndpointsConfigDump",
            "dynamic_endpoint_configs",
            "/endpoint_config",
            "cluster_name",
        ),
    ];
    for (what, section, field, inner, key) in sections {
        let mut mine = by_name(&ours, section, field, inner, key);
        if section == "EndpointsConfigDump" {
            mine.values_mut().for_each(as_envoy_reports_it);
        }
        assert_same(what, &mine, &by_name(&theirs, section, field, inner, key));
    }

    // Envoy's ?resource=: the items of one field, each with its type.
    let clusters = axon.debug_json(&format!(
        "/debug/config_dump?proxyID={GATEWAY_NODE_ID}&resource=dynamic_active_clusters"
    ));
    let envoy_clusters: Value = serde_json::from_str(
        &envoy
            .admin_request("/config_dump?resource=dynamic_active_clusters")
            .body,
    )
    .unwrap();
    let types = |v: &Value| -> Vec<String> {
        v["configs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["@type"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(types(&clusters).len(), types(&envoy_clusters).len());
    assert_eq!(types(&clusters)[0], types(&envoy_clusters)[0]);
    // istiod's ?types=: the resources themselves.
    let routes = axon.debug_json(&format!(
        "/debug/config_dump?proxyID={GATEWAY_NODE_ID}&types=rds"
    ));
    assert!(
        routes["configs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["@type"] == "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"),
        "{routes}"
    );
    // What a client gets wrong is named.
    let bad = axon.debug_get(&format!(
        "/debug/config_dump?proxyID={GATEWAY_NODE_ID}&resource=nonsense"
    ));
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("nonsense"), "{}", bad.body);
    let unknown = axon.debug_get("/debug/config_dump?proxyID=nobody");
    assert_eq!(unknown.status, 404, "{}", unknown.body);
}
