//! The mesh's `outboundTrafficPolicy: REGISTRY_ONLY` (`--mesh-config`): a sidecar client
//! still reaches the ServiceEntry's pod, but a request to a pod IP no service names is
//! refused by its sidecar, whether on a port with no listener of its own (`virtualOutbound`
//! to the BlackHoleCluster: the connection is closed) or on the service's HTTP port (the
//! route's `block_all`: 502), and never reaches that pod.

use std::net::Ipv4Addr;

use super::{APP_PORT, service_yaml, stat, wait_answer};
use crate::support::mesh::{Mesh, PodSpec};
use crate::support::{Axon, ConfigDir};

#[test]
fn registry_only_refuses_an_ip_outside_every_service() {
    let config = ConfigDir::new();
    let axon = Axon::start_with_mesh_config(
        config.path(),
        "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
    );
    let mesh = Mesh::new(axon.xds_addr());
    let vip = Ipv4Addr::new(10, 96, 0, 20);
    let host = mesh.service("known", "b", vip);
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let known = mesh.pod(PodSpec::plain("known", "b", &[("app", "known")]));
    let outside = mesh.pod(PodSpec::plain("outside", "c", &[("app", "outside")]));
    let _known_app = known.serve_http(APP_PORT, "known");
    let outside_app = outside.serve_http(APP_PORT, "outside");
    let outside_80 = outside.serve_http(80, "outside-80");
    config.write(
        "known.yaml",
        &service_yaml("known", "b", vip, &[(known.ip(), "v1")]),
    );
    client.wait_listener("0.0.0.0_80");
    wait_answer(&client, &host, 80, &[], "known", &known);

    let outside_ip = outside.ip().to_string();
    let (status, body) = client.http_get(&outside_ip, APP_PORT, "/", &[]);
    assert_eq!(status, 0, "{body}\n{}", client.describe());
    assert!(stat(&client, "listener.0.0.0.0_15001.downstream_cx_total") >= 1);
    let (status, body) = client.http_get(&outside_ip, 80, "/", &[]);
    assert_eq!(status, 502, "{body}\n{}", client.describe());
    assert!(outside_app.requests().is_empty() && outside_80.requests().is_empty());
    // The same IP is reachable when not captured: from the plain pod.
    assert_eq!(known.http_get(&outside_ip, APP_PORT, "/", &[]).0, 200);
}
