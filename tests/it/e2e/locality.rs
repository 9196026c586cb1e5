//! End-to-end: locality load balancing as istiod sets it, through a real gateway Envoy in
//! locality `r1/z1/s1` (its bootstrap's `node.locality`) to two endpoints, one in its own
//! locality and one in `r2/z1`. With outlier detection (istiod's default mesh config enables
//! locality failover) every request goes to the near endpoint, and when it starts failing and
//! is ejected, traffic fails over to the far one; without outlier detection both localities
//! share the traffic. A `distribute` rule sends everything to the locality it names, even
//! away from the proxy's own. No update is rejected.

use crate::support;
use crate::support::scenario;

use std::collections::BTreeSet;
use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const ECHO: &str = "echo.demo.svc.cluster.local";
const CLUSTER: &str = "outbound|80||echo.demo.svc.cluster.local";

/// The mesh: ServiceEntry `echo` with an endpoint in `r1/z1/s1` on `near` and one in
/// `r2/z1` on `far`, its DestinationRule with `policy` (under `trafficPolicy:`, indented by
/// four), and a gateway route to it without retries.
fn mesh_yaml(near: u16, far: u16, policy: &str) -> String {
    documents(&[
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: echo, namespace: demo}}\nspec:\n  hosts: [{ECHO}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 80, name: http, protocol: HTTP}}]\n  endpoints:\n  - {{address: 127.0.0.1, ports: {{http: {near}}}, locality: r1/z1/s1}}\n  - {{address: 127.0.0.1, ports: {{http: {far}}}, locality: r2/z1}}\n"
        ),
        format!(
            "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: echo, namespace: demo}}\nspec:\n  host: {ECHO}\n  trafficPolicy:\n{policy}"
        ),
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: echo, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - retries: {attempts: 0}
    route: [{destination: {host: echo, port: {number: 80}}}]
"#
        .to_string(),
    ])
}

/// Starts axon and a gateway Envoy in locality `r1/z1/s1` on `mesh`.
fn start(mesh: &str) -> (ConfigDir, Axon, Envoy, u16) {
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("mesh.yaml", mesh);
    let axon = Axon::start(config.path());
    let mut options = gateway_options();
    options.locality = Some(("r1".into(), "z1".into(), "s1".into()));
    let (envoy, gw_port) =
        start_gateway_listening_with(&axon, &config, gw_port, axon.xds_addr(), &options, CONVERGE);
    (config, axon, envoy, gw_port)
}

fn upstream_of(gw: u16) -> (u16, String) {
    let r = http_request(Envoy::local(gw), "GET", "/", &[], Duration::from_secs(10));
    let name = r.header("x-upstream").unwrap_or_default().to_string();
    (r.status, name)
}

/// Waits until Envoy's endpoints (EDS) contain each of `needles`.
fn wait_for_endpoints(envoy: &Envoy, needles: &[&str]) {
    let ok = wait_until(CONVERGE, || {
        let dump = envoy.config_dump_with_eds().to_string();
        needles.iter().all(|n| dump.contains(n))
    });
    assert!(
        ok,
        "the endpoints never arrived:\n{}",
        describe_envoy(envoy)
    );
}

const BOTH: [&str; 2] = ["\"region\":\"r2\"", "\"sub_zone\":\"s1\""];

#[test]
fn with_outlier_detection_traffic_stays_near_and_fails_over_when_it_is_ejected() {
    let (near, far) = (
        StatusUpstream::start("near", 200),
        StatusUpstream::start("far", 200),
    );
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        near.port(),
        far.port(),
        "    outlierDetection: {consecutive5xxErrors: 1, interval: 1s, baseEjectionTime: 5m, maxEjectionPercent: 100}\n",
    ));
    wait_for_endpoints(&envoy, &BOTH);
    // The far endpoint is on priority 1: it gets nothing while the near one is healthy.
    for _ in 0..30 {
        assert_eq!(upstream_of(gw), (200, "near".to_string()));
    }
    // The near endpoint fails: after its ejection, the far one takes the traffic.
    near.set_status(503);
    let ok = wait_until(CONVERGE, || upstream_of(gw) == (200, "far".to_string()));
    assert!(ok, "never failed over:\n{}", describe_envoy(&envoy));
    for _ in 0..20 {
        assert_eq!(upstream_of(gw), (200, "far".to_string()));
    }
    assert_no_rejected_updates(&envoy);
}

#[test]
fn without_outlier_detection_both_localities_share_the_traffic() {
    let (near, far) = (
        StatusUpstream::start("near", 200),
        StatusUpstream::start("far", 200),
    );
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        near.port(),
        far.port(),
        "    loadBalancer: {simple: ROUND_ROBIN}\n",
    ));
    wait_for_endpoints(&envoy, &BOTH);
    let seen: BTreeSet<String> = (0..20).map(|_| upstream_of(gw).1).collect();
    assert_eq!(
        seen,
        BTreeSet::from(["far".to_string(), "near".to_string()])
    );
    assert_no_rejected_updates(&envoy);
}

#[test]
fn a_distribute_rule_sends_everything_to_the_locality_it_names() {
    let (near, far) = (
        StatusUpstream::start("near", 200),
        StatusUpstream::start("far", 200),
    );
    let (_config, _axon, envoy, gw) = start(&mesh_yaml(
        near.port(),
        far.port(),
        "    loadBalancer:\n      simple: ROUND_ROBIN\n      localityLbSetting:\n        distribute:\n        - from: r1/z1/*\n          to: {\"r2/*\": 100}\n",
    ));
    wait_for_endpoints(&envoy, &["\"region\":\"r2\""]);
    // The near locality, which the rule does not name, has no endpoints left.
    let ok = wait_until(CONVERGE, || {
        dynamic_cluster(&envoy.config_dump(), CLUSTER).is_some_and(|c| {
            c["common_lb_config"]
                .get("locality_weighted_lb_config")
                .is_some()
        })
    });
    assert!(
        ok,
        "no locality-weighted config:\n{}",
        describe_envoy(&envoy)
    );
    for _ in 0..30 {
        assert_eq!(upstream_of(gw), (200, "far".to_string()));
    }
    assert_no_rejected_updates(&envoy);
}
