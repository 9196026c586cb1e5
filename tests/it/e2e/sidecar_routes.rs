//! End-to-end: routing through a real sidecar Envoy (`INTERCEPTION_MODE: NONE`, namespace
//! `a`, a Sidecar with two bound egress listeners on a loopback address of the test's own:
//! one declared GRPC on grpc-echo's port, one HTTP on reviews').
//!
//! - gRPC: a call through the GRPC egress listener to `grpc-echo` (a GRPC service port) gets
//!   HTTP/2 to a real gRPC server (Python `grpcio`, `tests/grpc/echo.py`) and is answered;
//!   the HTTP service's cluster stays HTTP/1.1.
//! - Two mesh VirtualServices for `reviews`: the sidecar takes the older by
//!   `metadata.creationTimestamp` (`zz-older`, to v2), not the first by name (`aa-newer`, to
//!   v1), whose own header rule is then not served either; swapping the timestamps swaps
//!   the winner; the conflict is in `/debug/push_status`.
//!
//! Still without capture (bound listeners): its gRPC server and client (Python `grpcio`)
//! run on the test's loopback, not yet in mesh pods. What it checks (protocol of the
//! upstream cluster, which VirtualService wins) does not depend on capture.

use crate::support;
use crate::support::grpc_echo;
use crate::support::scenario;
use crate::support::sidecar;

use grpc_echo::{EchoServer, client_call};
use scenario::*;
use sidecar::{CONVERGE, NODE_A, REVIEWS, SERVICE_PORT, reviews_se_yaml, sidecar_options};
use support::*;

const GRPC_HOST: &str = "grpc-echo.a.svc.cluster.local";

const GRPC_PORT: u16 = 7070;

/// Sidecar `default` in `a`: bound egress listeners on `bind`, on grpc-echo's port (GRPC)
/// and on reviews' (HTTP), importing namespace `a` (istiod serves on a declared listener
/// only the services with its port).
fn sidecar_yaml(bind: std::net::Ipv4Addr) -> String {
    let (grpc_port, http_port) = (GRPC_PORT, SERVICE_PORT);
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata:
  name: default
  namespace: a
spec:
  egress:
  - port: {{number: {grpc_port}, protocol: GRPC, name: grpc-egress}}
    bind: {bind}
    captureMode: NONE
    hosts: ["./*"]
  - port: {{number: {http_port}, protocol: HTTP, name: http-egress}}
    bind: {bind}
    captureMode: NONE
    hosts: ["./*"]
"#
    )
}

/// A mesh VirtualService for reviews created at `created`: requests with `x-new: 1` to v1
/// when `header_rule`, and everything else to `subset`.
fn reviews_vs(name: &str, created: &str, subset: &str, header_rule: bool) -> String {
    let rule = if header_rule {
        "  - match: [{headers: {x-new: {exact: \"1\"}}}]\n    route: [{destination: {host: reviews, subset: v1}}]\n"
    } else {
        ""
    };
    format!(
        "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: {name}\n  namespace: a\n  creationTimestamp: \"{created}\"\nspec:\n  hosts: [reviews]\n  http:\n{rule}  - route: [{{destination: {{host: reviews, subset: {subset}}}}}]\n"
    )
}

#[test]
fn grpc_and_several_virtual_services_for_one_host_through_a_sidecar() {
    let grpc = EchoServer::start("grpc:");
    let v1 = Upstream::start("reviews-v1");
    let v2 = Upstream::start("reviews-v2");
    let bind = own_loopback(&[GRPC_PORT, SERVICE_PORT]);
    let config = ConfigDir::new();
    config.write(
        "services.yaml",
        &documents(&[
            reviews_se_yaml(v1.port(), v2.port()),
            destination_rule_yaml("reviews", "a", "reviews"),
            service_entry_yaml(
                "grpc-echo",
                "a",
                GRPC_HOST,
                Port {
                    number: 7070,
                    name: "grpc",
                    protocol: "GRPC",
                },
                &[(grpc.port, None)],
            ),
        ]),
    );
    config.write("sidecar.yaml", &sidecar_yaml(bind));
    // By name, aa-newer would come first; by creation time, zz-older does.
    config.write(
        "routes.yaml",
        &documents(&[
            reviews_vs("aa-newer", "2024-06-01T00:00:00Z", "v1", true),
            reviews_vs("zz-older", "2024-01-01T00:00:00Z", "v2", false),
        ]),
    );
    let axon = Axon::start(config.path());
    let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
    for port in [GRPC_PORT, SERVICE_PORT] {
        let name = format!("{bind}_{port}");
        assert!(
            wait_until(CONVERGE, || dynamic_listener(&envoy.config_dump(), &name)
                .is_some_and(|l| l.get("active_state").is_some())),
            "no active listener {name}\n{}",
            describe_envoy(&envoy)
        );
    }
    let egress = std::net::SocketAddr::from((bind, SERVICE_PORT));
    let get = |headers: &[(&str, &str)]| {
        let mut all = vec![("Host", REVIEWS)];
        all.extend_from_slice(headers);
        http_get(egress, "/", &all)
    };

    // The older VirtualService routes reviews; the newer one's rules are not served.
    wait_for_answer(
        "the older VirtualService",
        CONVERGE,
        "reviews-v2",
        &envoy,
        || get(&[]),
    );
    assert_eq!(get(&[("x-new", "1")]), (200, "reviews-v2".to_string()));
    let status = axon.push_status();
    let problems = status["virtual_service_problems"].to_string();
    assert!(
        problems.contains(&format!(
            "host {REVIEWS} is routed by VirtualService/a/zz-older, VirtualService/a/aa-newer for sidecars"
        )),
        "{status}"
    );

    let metrics = axon.metrics();
    assert!(
        metrics.lines().any(|l| l == "pilot_vservice_dup_domain 1"),
        "{metrics}"
    );

    // gRPC through the GRPC egress listener: HTTP/2 upstream, answered.
    let (ok, output) = client_call(&format!("{bind}:{GRPC_PORT}"), &["--authority", GRPC_HOST]);
    assert!(
        ok && output.contains("reply: grpc:hello"),
        "{output}\n{}",
        describe_envoy(&envoy)
    );
    let dump = envoy.config_dump();
    let clusters = dump_section(&dump, "ClustersConfigDump").expect("a clusters dump");
    let cluster = |name: &str| {
        clusters["dynamic_active_clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["cluster"]["name"] == name)
            .map(|c| c["cluster"].to_string())
            .unwrap_or_default()
    };
    assert!(
        cluster(&format!("outbound|{GRPC_PORT}||{GRPC_HOST}")).contains("http2_protocol_options")
    );
    let reviews_cluster = cluster(&format!("outbound|{SERVICE_PORT}|v2|{REVIEWS}"));
    assert!(!reviews_cluster.is_empty() && !reviews_cluster.contains("http2_protocol_options"));

    // Swapped creation times: now aa-newer (no longer newer) wins, header rule and all.
    config.write(
        "routes.yaml",
        &documents(&[
            reviews_vs("aa-newer", "2023-01-01T00:00:00Z", "v1", true),
            reviews_vs("zz-older", "2024-01-01T00:00:00Z", "v2", false),
        ]),
    );
    wait_for_answer(
        "the VirtualService now older",
        CONVERGE,
        "reviews-v1",
        &envoy,
        || get(&[]),
    );
    assert_eq!(get(&[("x-new", "1")]), (200, "reviews-v1".to_string()));
    assert_no_rejected_updates(&envoy);
}
