//! The merge of the rule's, the ports' and the subsets' policies, against istiod's
//! documented precedence (`destination_rule.proto`: "port-level settings will override the
//! destination-level settings ... not inherited"; subset settings override the rule's).

use super::*;
use axon_config::istio::traffic_policy::{SimpleLb, TlsMode};

fn rule(yaml: &str) -> DestinationRule {
    serde_norway::from_str(yaml).unwrap()
}

fn simple(p: &ClusterPolicy) -> Option<SimpleLb> {
    p.load_balancer.and_then(|lb| lb.simple)
}

fn max_connections(p: &ClusterPolicy) -> Option<i64> {
    p.connection_pool?.tcp.as_ref()?.max_connections
}

const RULE: &str = "
host: reviews
trafficPolicy:
  loadBalancer: {simple: ROUND_ROBIN}
  connectionPool: {tcp: {maxConnections: 100}}
  outlierDetection: {consecutive5xxErrors: 7}
  tls: {mode: SIMPLE}
  portLevelSettings:
  - port: {number: 9080}
    loadBalancer: {simple: RANDOM}
subsets:
- name: v1
  labels: {version: v1}
  trafficPolicy:
    connectionPool: {tcp: {maxConnections: 5}}
- name: v2
  labels: {version: v2}
  trafficPolicy:
    portLevelSettings:
    - port: {number: 8080}
      outlierDetection: {consecutive5xxErrors: 1}
- name: v3
  labels: {version: v3}
";

#[test]
fn the_rules_policy_applies_to_a_port_without_an_entry() {
    let dr = rule(RULE);
    let p = cluster_policy(&dr, "", 8080);
    assert_eq!(simple(&p), Some(SimpleLb::RoundRobin));
    assert_eq!(max_connections(&p), Some(100));
    assert_eq!(p.outlier_detection.unwrap().consecutive_5xx_errors, Some(7));
    assert_eq!(p.tls.unwrap().mode, TlsMode::Simple);
}

#[test]
fn a_port_entry_replaces_the_rules_policy_without_inheriting() {
    let dr = rule(RULE);
    let p = cluster_policy(&dr, "", 9080);
    assert_eq!(simple(&p), Some(SimpleLb::Random));
    assert_eq!(p.connection_pool, None, "not inherited from the rule");
    assert_eq!(p.outlier_detection, None);
    assert_eq!(p.tls, None);
}

#[test]
fn a_subset_overrides_the_parts_it_sets() {
    let dr = rule(RULE);
    let p = cluster_policy(&dr, "v1", 8080);
    assert_eq!(max_connections(&p), Some(5));
    assert_eq!(simple(&p), Some(SimpleLb::RoundRobin), "inherited");
    assert_eq!(p.tls.unwrap().mode, TlsMode::Simple);
    // On the port with an entry, the subset merges over the entry.
    let p = cluster_policy(&dr, "v1", 9080);
    assert_eq!(simple(&p), Some(SimpleLb::Random));
    assert_eq!(max_connections(&p), Some(5));
    assert_eq!(p.tls, None);
}

#[test]
fn a_subsets_port_entry_replaces_every_part() {
    let dr = rule(RULE);
    let p = cluster_policy(&dr, "v2", 8080);
    assert_eq!(p.outlier_detection.unwrap().consecutive_5xx_errors, Some(1));
    assert_eq!(p.load_balancer, None);
    assert_eq!(p.connection_pool, None);
    assert_eq!(p.tls, None);
    // On another port the subset sets nothing: the rule's policy.
    let p = cluster_policy(&dr, "v2", 7070);
    assert_eq!(simple(&p), Some(SimpleLb::RoundRobin));
    assert_eq!(p.outlier_detection.unwrap().consecutive_5xx_errors, Some(7));
}

#[test]
fn a_subset_without_a_policy_and_a_rule_without_one() {
    let dr = rule(RULE);
    assert_eq!(
        cluster_policy(&dr, "v3", 8080),
        cluster_policy(&dr, "", 8080)
    );
    assert_eq!(
        cluster_policy(&dr, "nope", 8080),
        cluster_policy(&dr, "", 8080)
    );
    let bare = rule(
        "host: a\nsubsets: [{name: s, trafficPolicy: {portLevelSettings: [{port: {number: 80}, loadBalancer: {simple: RANDOM}}], tls: {mode: SIMPLE}}}]",
    );
    assert_eq!(cluster_policy(&bare, "", 80), ClusterPolicy::default());
    let p = cluster_policy(&bare, "s", 80);
    assert_eq!(simple(&p), Some(SimpleLb::Random));
    assert_eq!(p.tls, None, "the port entry replaces the subset's policy");
    assert_eq!(
        cluster_policy(&bare, "s", 81).tls.unwrap().mode,
        TlsMode::Simple
    );
}

#[test]
fn the_route_hash_prefers_the_subset_then_the_port() {
    let dr = rule(
        "
host: a
trafficPolicy:
  loadBalancer: {consistentHash: {httpHeaderName: rule}}
  portLevelSettings:
  - port: {number: 80}
    loadBalancer: {consistentHash: {httpHeaderName: rule-port}}
  - port: {number: 81}
    connectionPool: {tcp: {maxConnections: 1}}
subsets:
- name: s
  trafficPolicy:
    loadBalancer: {consistentHash: {httpHeaderName: subset}}
    portLevelSettings:
    - port: {number: 80}
      loadBalancer: {consistentHash: {httpHeaderName: subset-port}}
- name: plain
",
    );
    let header = |subset: &str, port: Option<u32>| {
        route_hash(&dr, subset, port).and_then(|h| h.http_header_name.clone())
    };
    assert_eq!(header("s", Some(80)).as_deref(), Some("subset-port"));
    assert_eq!(header("s", Some(82)).as_deref(), Some("subset"));
    assert_eq!(header("s", None).as_deref(), Some("subset"));
    assert_eq!(header("plain", Some(80)).as_deref(), Some("rule-port"));
    assert_eq!(header("", Some(80)).as_deref(), Some("rule-port"));
    // An entry without a hash leaves the rule's: unlike the cluster, the route keeps it.
    assert_eq!(header("", Some(81)).as_deref(), Some("rule"));
    assert_eq!(header("", None).as_deref(), Some("rule"));
    assert_eq!(
        service_hash(&dr, 80).and_then(|h| h.http_header_name.as_deref()),
        Some("rule-port")
    );
}

#[test]
fn a_policy_of_the_wrong_type_is_typed_empty_and_kept_for_the_validator() {
    let dr = rule("host: a\ntrafficPolicy: {loadBalancer: {simple: BOGUS}}");
    let doc = dr.traffic_policy.as_ref().unwrap();
    assert_eq!(*doc.policy, TrafficPolicy::default());
    assert_eq!(doc.json["loadBalancer"]["simple"], "BOGUS");
}

#[test]
fn the_retry_budget_is_dropped_by_a_port_entry_and_overridden_only_when_set() {
    let dr = rule(
        "
host: a
trafficPolicy:
  retryBudget: {percent: 10}
  portLevelSettings: [{port: {number: 81}, tls: {mode: SIMPLE}}]
subsets:
- name: own
  trafficPolicy: {retryBudget: {percent: 30}}
- name: port
  trafficPolicy: {portLevelSettings: [{port: {number: 80}, tls: {mode: SIMPLE}}]}
",
    );
    let percent = |subset: &str, port: u32| {
        cluster_policy(&dr, subset, port)
            .retry_budget
            .and_then(|b| b.percent)
    };
    assert_eq!(percent("", 80), Some(10.0));
    assert_eq!(percent("", 81), None, "a port entry has no retry budget");
    assert_eq!(percent("own", 80), Some(30.0));
    assert_eq!(
        percent("port", 80),
        Some(10.0),
        "kept over the subset's port entry"
    );
}

/// istiod's `applyDefaultTrafficPolicy`: the mesh's pool and outlier detection below the
/// rule's port policy, each replaced whole by the rule's own; then the subset's merge.
#[test]
fn the_meshs_default_policy_fills_what_the_rule_leaves_out() {
    use axon_config::istio::traffic_policy::{OutlierDetection, TcpSettings};
    use axon_config::mesh::MeshConfig;
    let mesh = MeshConfig {
        default_connection_pool: Some(ConnectionPoolSettings {
            tcp: Some(TcpSettings {
                max_connections: Some(11),
                ..Default::default()
            }),
            ..Default::default()
        }),
        default_outlier_detection: Some(OutlierDetection {
            consecutive_5xx_errors: Some(4),
            ..Default::default()
        }),
        ..Default::default()
    };
    let outlier = |p: &ClusterPolicy| p.outlier_detection.and_then(|o| o.consecutive_5xx_errors);
    // No rule: both defaults.
    let none = cluster_policy_in(&mesh, None, "", 80);
    assert_eq!(
        (max_connections(&none), outlier(&none)),
        (Some(11), Some(4))
    );
    // The rule's own pool and outlier detection win; a rule without them takes the mesh's.
    let dr = rule(RULE);
    let top = cluster_policy_in(&mesh, Some(&dr), "", 80);
    assert_eq!((max_connections(&top), outlier(&top)), (Some(100), Some(7)));
    let plain = rule("host: reviews\ntrafficPolicy: {loadBalancer: {simple: RANDOM}}\n");
    let p = cluster_policy_in(&mesh, Some(&plain), "", 80);
    assert_eq!((max_connections(&p), outlier(&p)), (Some(11), Some(4)));
    assert_eq!(simple(&p), Some(SimpleLb::Random));
    // A port entry for the port: its policy, with the defaults where it sets nothing.
    let p = cluster_policy_in(&mesh, Some(&dr), "", 9080);
    assert_eq!((max_connections(&p), outlier(&p)), (Some(11), Some(4)));
    // A subset's port entry replaces every part: the defaults go too, as in istiod.
    let subset_port = rule(
        "host: reviews\nsubsets:\n- name: v1\n  labels: {version: v1}\n  trafficPolicy:\n    portLevelSettings:\n    - port: {number: 80}\n      loadBalancer: {simple: RANDOM}\n",
    );
    let p = cluster_policy_in(&mesh, Some(&subset_port), "v1", 80);
    assert_eq!((max_connections(&p), outlier(&p)), (None, None));
    // Without defaults it is `cluster_policy`.
    assert_eq!(
        cluster_policy_in(&MeshConfig::default(), Some(&dr), "v1", 80),
        cluster_policy(&dr, "v1", 80)
    );
}
