//! Pieces of the real-Envoy scenarios: Istio config builders (block-style YAML), the gateway's
//! Envoy, traffic checks (answers counted, time for a change to settle) and Envoy state checks
//! (a summary for failure messages, no rejected update).
//! Include with `#[path = "support/scenario.rs"] mod scenario;` beside `mod support;`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::{
    Axon, ConfigDir, Envoy, EnvoyOptions, dump_section, dynamic_cluster_names,
    dynamic_listener_names, dynamic_route_config_names, http_get, start_envoy_listening,
    wait_gateway_route, wait_until,
};

/// The ingress gateway Envoy's node.
pub const GATEWAY_NODE_ID: &str =
    "router~127.0.0.1~ingress-1.istio-system~istio-system.svc.cluster.local";
/// The host of the `backend` ServiceEntry.
pub const BACKEND: &str = "backend.demo.svc.cluster.local";

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

/// YAML documents as one multi-document file.
pub fn documents<S: AsRef<str>>(docs: &[S]) -> String {
    docs.iter()
        .map(|d| d.as_ref())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Gateway `ingress` in istio-system, on `istio: ingressgateway`: HTTP on `gw_port` for every
/// host.
pub fn gateway_yaml(gw_port: u16) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: ingress
  namespace: istio-system
spec:
  selector:
    istio: ingressgateway
  servers:
  - port:
      number: {gw_port}
      name: http
      protocol: HTTP
    hosts:
    - "*"
"#
    )
}

/// A malformed VirtualService `backend` (unclosed flow mapping), to write over routes.yaml.
pub const MALFORMED_ROUTES: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: backend\n  spec: [\n";

/// A service port.
#[derive(Debug, Clone, Copy)]
pub struct Port<'a> {
    pub number: u16,
    pub name: &'a str,
    pub protocol: &'a str,
}

/// Port `number`, named `http`, protocol HTTP.
pub fn http_port(number: u16) -> Port<'static> {
    Port {
        number,
        name: "http",
        protocol: "HTTP",
    }
}

/// A STATIC, MESH_INTERNAL ServiceEntry `name` in `ns` for `host` with one `port`, up to
/// `resolution` (the endpoints, or a `workloadSelector`, are to follow).
pub fn service_entry_head(name: &str, ns: &str, host: &str, port: Port) -> String {
    let Port {
        number,
        name: port_name,
        protocol,
    } = port;
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: {name}
  namespace: {ns}
spec:
  hosts:
  - {host}
  ports:
  - number: {number}
    name: {port_name}
    protocol: {protocol}
  location: MESH_INTERNAL
  resolution: STATIC
"#
    )
}

/// A STATIC, MESH_INTERNAL ServiceEntry `name` in `ns` for `host` with one `port`, and one
/// endpoint on 127.0.0.1 per `(target port, version label)` (no label for `None`).
pub fn service_entry_yaml(
    name: &str,
    ns: &str,
    host: &str,
    port: Port,
    endpoints: &[(u16, Option<&str>)],
) -> String {
    let mut yaml = service_entry_head(name, ns, host, port);
    yaml.push_str("  endpoints:\n");
    for (target, version) in endpoints {
        yaml.push_str(&format!(
            "  - address: 127.0.0.1\n    ports:\n      {}: {target}\n",
            port.name
        ));
        if let Some(version) = version {
            yaml.push_str(&format!("    labels:\n      version: {version}\n"));
        }
    }
    yaml
}

/// DestinationRule `name` in `ns` for `host`: subsets v1 and v2 by the `version` label.
pub fn destination_rule_yaml(name: &str, ns: &str, host: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata:
  name: {name}
  namespace: {ns}
spec:
  host: {host}
  subsets:
  - name: v1
    labels:
      version: v1
  - name: v2
    labels:
      version: v2
"#
    )
}

/// ServiceEntry `backend` in demo (port 80, endpoints v1 and v2 on 127.0.0.1) and its
/// DestinationRule (subsets v1, v2).
pub fn backend_yaml(v1_port: u16, v2_port: u16) -> String {
    documents(&[
        service_entry_yaml(
            "backend",
            "demo",
            BACKEND,
            http_port(80),
            &[(v1_port, Some("v1")), (v2_port, Some("v2"))],
        ),
        destination_rule_yaml("backend", "demo", "backend"),
    ])
}

/// One `destination` of an http route: `host`, `subset` (if any), `port`, `weight` (if any).
pub fn destination(host: &str, subset: Option<&str>, port: u16, weight: Option<u32>) -> String {
    let mut yaml = format!("    - destination:\n        host: {host}\n");
    if let Some(subset) = subset {
        yaml.push_str(&format!("        subset: {subset}\n"));
    }
    yaml.push_str(&format!("        port:\n          number: {port}\n"));
    if let Some(weight) = weight {
        yaml.push_str(&format!("      weight: {weight}\n"));
    }
    yaml
}

/// A match on header `name` being exactly `value`.
pub fn header_match(name: &str, value: &str) -> String {
    format!("    - headers:\n        {name}:\n          exact: {value}\n")
}

/// A match on the path prefix `prefix`.
pub fn prefix_match(prefix: &str) -> String {
    format!("    - uri:\n        prefix: {prefix}\n")
}

/// An http rule: `matches` (from [`header_match`], [`prefix_match`]; empty for none), then
/// the route to `destinations` (from [`destination`]).
pub fn http_rule(matches: &str, destinations: &[String]) -> String {
    let mut yaml = if matches.is_empty() {
        "  - route:\n".to_string()
    } else {
        format!("  - match:\n{matches}    route:\n")
    };
    for d in destinations {
        yaml.push_str(d);
    }
    yaml
}

/// VirtualService `name` in `ns` (`networking.istio.io/API_VERSION`) for `hosts`, on
/// `gateways` (none: a mesh VirtualService), with the http `rules` (from [`http_rule`]).
pub fn virtual_service_yaml(
    api_version: &str,
    name: &str,
    ns: &str,
    hosts: &[&str],
    gateways: &[&str],
    rules: &[String],
) -> String {
    let mut yaml = format!(
        "apiVersion: networking.istio.io/{api_version}\nkind: VirtualService\nmetadata:\n  \
         name: {name}\n  namespace: {ns}\nspec:\n  hosts:\n"
    );
    for h in hosts {
        yaml.push_str(&format!("  - \"{h}\"\n"));
    }
    if !gateways.is_empty() {
        yaml.push_str("  gateways:\n");
        for g in gateways {
            yaml.push_str(&format!("  - {g}\n"));
        }
    }
    yaml.push_str("  http:\n");
    for r in rules {
        yaml.push_str(r);
    }
    yaml
}

/// A mesh VirtualService `name` in `ns` for `host` on `port`: requests with header `name: value`
/// (`header`) go to subset v2, the others to `default_subset` (weight 100).
pub fn header_to_v2_yaml(
    name: &str,
    ns: &str,
    host: &str,
    port: u16,
    header: (&str, &str),
    default_subset: &str,
) -> String {
    virtual_service_yaml(
        "v1",
        name,
        ns,
        &[host],
        &[],
        &[
            http_rule(
                &header_match(header.0, header.1),
                &[destination(host, Some("v2"), port, None)],
            ),
            http_rule(
                "",
                &[destination(host, Some(default_subset), port, Some(100))],
            ),
        ],
    )
}

/// The gateway VirtualService `backend` in demo (`networking.istio.io/API_VERSION`), for every
/// host on `istio-system/ingress`: with `v2_by_header`, `x-version: v2` goes to subset v2;
/// with `other`, prefix `/other` goes to `other.demo.svc.cluster.local`; the rest is split
/// over `split` (subset, weight; a single subset gets no weight).
pub fn backend_routes_yaml(
    api_version: &str,
    v2_by_header: bool,
    other: bool,
    split: &[(&str, u32)],
) -> String {
    let mut rules = Vec::new();
    if v2_by_header {
        rules.push(http_rule(
            &header_match("x-version", "v2"),
            &[destination(BACKEND, Some("v2"), 80, None)],
        ));
    }
    if other {
        rules.push(http_rule(
            &prefix_match("/other"),
            &[destination("other.demo.svc.cluster.local", None, 80, None)],
        ));
    }
    let weighted = split.len() > 1;
    let split: Vec<String> = split
        .iter()
        .map(|(subset, weight)| destination(BACKEND, Some(subset), 80, weighted.then_some(*weight)))
        .collect();
    rules.push(http_rule("", &split));
    virtual_service_yaml(
        api_version,
        "backend",
        "demo",
        &["*"],
        &["istio-system/ingress"],
        &rules,
    )
}

// ---------------------------------------------------------------------------
// Envoy
// ---------------------------------------------------------------------------

/// The ingress gateway Envoy's options ([`GATEWAY_NODE_ID`], `istio: ingressgateway`,
/// istio-system).
pub fn gateway_options() -> EnvoyOptions {
    EnvoyOptions::gateway(
        GATEWAY_NODE_ID,
        &[("istio", "ingressgateway")],
        "istio-system",
    )
}

/// Starts the gateway Envoy ([`gateway_options`]) on `axon`, whose `config` has
/// `gateway.yaml` ([`gateway_yaml`]) on `gw_port`; with another port if that one was taken
/// before Envoy could bind it ([`start_envoy_listening`]). Returns the Envoy and its port.
pub fn start_gateway_listening(
    axon: &Axon,
    config: &ConfigDir,
    gw_port: u16,
    timeout: Duration,
) -> (Envoy, u16) {
    start_gateway_listening_with(
        axon,
        config,
        gw_port,
        axon.xds_addr(),
        &gateway_options(),
        timeout,
    )
}

/// [`start_gateway_listening`] for a gateway Envoy of `options` (its metadata, say) that
/// asks for its config at `xds` (axon's TLS port, say).
pub fn start_gateway_listening_with(
    axon: &Axon,
    config: &ConfigDir,
    gw_port: u16,
    xds: std::net::SocketAddr,
    options: &EnvoyOptions,
    timeout: Duration,
) -> (Envoy, u16) {
    start_envoy_listening(
        axon,
        gw_port,
        |port| format!("0.0.0.0_{port}"),
        |port| config.write("gateway.yaml", &gateway_yaml(port)),
        || Envoy::start(xds, options.clone()),
        timeout,
    )
}

/// The `route_config` objects of the dynamic route configurations.
pub fn dynamic_route_configs(dump: &serde_json::Value) -> Vec<serde_json::Value> {
    dump_section(dump, "RoutesConfigDump")
        .and_then(|s| s.get("dynamic_route_configs"))
        .and_then(|l| l.as_array())
        .map(|rs| {
            rs.iter()
                .filter_map(|r| r.get("route_config").cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// A summary of Envoy's xDS state for failure messages: its dynamic listeners, route
/// configurations (names and contents), clusters, and xDS stats.
pub fn describe_envoy(envoy: &Envoy) -> String {
    let dump = envoy.config_dump();
    let stats = envoy.stats();
    let xds_stats: Vec<String> = stats
        .iter()
        .filter(|(k, _)| {
            k.contains("update_")
                || k.contains("control_plane")
                || k.starts_with("cluster.xds-grpc.upstream_cx")
        })
        .map(|(k, v)| format!("  {k}: {v}"))
        .collect();
    let routes: Vec<String> = dynamic_route_configs(&dump)
        .iter()
        .map(|r| serde_json::to_string(r).unwrap_or_default())
        .collect();
    format!(
        "envoy {} dynamic listeners: {:?}\nenvoy route configs: {:?}\nenvoy clusters: {:?}\n\
         envoy route config contents:\n{}\nenvoy xds stats:\n{}",
        envoy.options.node_id,
        dynamic_listener_names(&dump),
        dynamic_route_config_names(&dump),
        dynamic_cluster_names(&dump),
        routes.join("\n"),
        xds_stats.join("\n")
    )
}

/// One of Envoy's stats (0 when it has none of that name).
pub fn stat(envoy: &Envoy, name: &str) -> u64 {
    envoy.stats().get(name).copied().unwrap_or(0)
}

/// Asserts that Envoy rejected no update, and that it has `update_rejected` stats at all.
pub fn assert_no_rejected_updates(envoy: &Envoy) {
    let stats = envoy.stats();
    let rejected: Vec<(&String, &u64)> = stats
        .iter()
        .filter(|(k, v)| k.ends_with("update_rejected") && **v != 0)
        .collect();
    assert!(
        rejected.is_empty(),
        "Envoy {} rejected updates: {rejected:?}\nrejection lines in Envoy's log:\n{}",
        envoy.options.node_id,
        envoy
            .logs()
            .lines()
            .filter(|l| l.contains("rejected") || l.contains("gRPC config"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        stats.keys().any(|k| k.ends_with("update_rejected")),
        "no *update_rejected stats at all"
    );
}

// ---------------------------------------------------------------------------
// Traffic
// ---------------------------------------------------------------------------

/// Waits (up to `timeout`) until `get` answers `(200, want)`; panics otherwise with `what`,
/// the last answer and Envoy's state.
pub fn wait_for_answer(
    what: &str,
    timeout: Duration,
    want: &str,
    envoy: &Envoy,
    mut get: impl FnMut() -> (u16, String),
) {
    let mut last = (0, String::new());
    let ok = wait_until(timeout, || {
        last = get();
        last.0 == 200 && last.1 == want
    });
    assert!(
        ok,
        "{what} never answered 200 {want:?} within {timeout:?}; last answer: {last:?}\n{}",
        describe_envoy(envoy)
    );
}

/// Waits until the gateway `envoy` routes `gw_port` to backend v1 ([`wait_gateway_route`])
/// and a request through it is answered by `backend-v1`; returns the gateway's address.
pub fn wait_gateway_serves_v1(
    envoy: &Envoy,
    gw_port: u16,
    what: &str,
    timeout: Duration,
) -> std::net::SocketAddr {
    let v1_cluster = format!("outbound|80|v1|{BACKEND}");
    wait_gateway_route(envoy, gw_port, "*", &[&v1_cluster], timeout);
    let gw = Envoy::local(gw_port);
    wait_for_answer(what, timeout, "backend-v1", envoy, || {
        http_get(gw, "/", &[])
    });
    gw
}

/// Sends `n` requests with `get` and counts the answers: the body of a 200, else
/// `status STATUS: BODY`.
pub fn count_answers(n: usize, mut get: impl FnMut() -> (u16, String)) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let (status, body) = get();
        let key = if status == 200 {
            body
        } else {
            format!("status {status}: {body}")
        };
        *counts.entry(key).or_insert(0) += 1;
    }
    counts
}

/// Asserts that all `n` answers `counts` (from [`count_answers`]) are `backend-v1` or
/// `backend-v2`, with `backend-v2` getting `v2_share` of them, give or take `tolerance`;
/// `what` says what was sent.
pub fn assert_v2_share(
    counts: &BTreeMap<String, usize>,
    n: usize,
    v2_share: f64,
    tolerance: f64,
    what: &str,
) {
    let v1 = counts.get("backend-v1").copied().unwrap_or(0);
    let v2 = counts.get("backend-v2").copied().unwrap_or(0);
    assert_eq!(
        v1 + v2,
        n,
        "every {what} must reach backend-v1/v2: {counts:?}"
    );
    let share = v2 as f64 / n as f64;
    assert!(
        (share - v2_share).abs() <= tolerance,
        "v2 share {share:.3} not within {v2_share:.2} ± {tolerance:.2} (counts {counts:?})"
    );
}

/// After a config write at `written`: sends requests with `get` (for up to 15 s after the
/// write) until `streak` in a row answer `(200, want)`, and returns how long after the write
/// the first of them was sent; or, if they never do, the last answer.
pub fn settle_time(
    written: Instant,
    streak: usize,
    want: &str,
    mut get: impl FnMut() -> (u16, String),
) -> Result<Duration, (u16, String)> {
    let mut in_a_row = 0;
    let mut streak_start = written;
    let mut last = (0, String::new());
    while written.elapsed() < Duration::from_secs(15) {
        let sent = Instant::now();
        last = get();
        if last.0 == 200 && last.1 == want {
            if in_a_row == 0 {
                streak_start = sent;
            }
            in_a_row += 1;
            if in_a_row >= streak {
                return Ok(streak_start - written);
            }
        } else {
            in_a_row = 0;
        }
    }
    Err(last)
}
