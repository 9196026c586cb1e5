//! A cluster held in the config directory (`kubectl get -o yaml` shapes: Services,
//! EndpointSlices, Pods), through real sidecars under capture: two Postgres-like Services on
//! port 5432, each reached by its ClusterIP (and by name) at its own pod, never the other's;
//! and a Service whose port names no protocol (`web`), sniffed, so that a VirtualService's
//! `http` header match routes it; and a headless Service (`clusterIP: None`), each pod reached
//! through its own listener.

use std::net::Ipv4Addr;

use super::{APP_PORT, CONVERGE, answer, wait_answer};
use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::scenario::{destination_rule_yaml, documents, header_to_v2_yaml};
use crate::support::{Axon, ConfigDir, wait_until};

/// A Service `name` in `ns` at `cluster_ip` with one port (`port_name`, `port` to
/// `APP`-style `target`), its EndpointSlice at `pods` and the Pods themselves (labels
/// `app: NAME, version: VERSION`).
pub(super) fn cluster(
    name: &str,
    ns: &str,
    cluster_ip: Ipv4Addr,
    port_name: &str,
    port: u16,
    target: u16,
    pods: &[(&Pod, &str)],
) -> String {
    let mut docs = vec![format!(
        "apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  type: ClusterIP
  clusterIP: {cluster_ip}
  clusterIPs: [{cluster_ip}]
  selector: {{app: {name}}}
  ports: [{{name: {port_name}, port: {port}, targetPort: {target}, protocol: TCP}}]
"
    )];
    let endpoints: Vec<String> = pods
        .iter()
        .map(|(pod, _)| {
            format!(
                "- addresses: [{}]\n  conditions: {{ready: true}}\n  targetRef: {{kind: Pod, name: {}, namespace: {ns}}}\n",
                pod.ip(),
                pod.name()
            )
        })
        .collect();
    docs.push(format!(
        "apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-abcde
  namespace: {ns}
  labels: {{kubernetes.io/service-name: {name}}}
addressType: IPv4
ports: [{{name: {port_name}, port: {target}, protocol: TCP}}]
endpoints:
{}",
        endpoints.concat()
    ));
    for (pod, version) in pods {
        docs.push(format!(
            "apiVersion: v1
kind: Pod
metadata:
  name: {}
  namespace: {ns}
  labels: {{app: {name}, version: {version}}}
spec:
  serviceAccountName: {name}
  containers: [{{name: app, image: app}}]
status:
  podIP: {}
  podIPs: [{{ip: {}}}]
",
            pod.name(),
            pod.ip(),
            pod.ip()
        ));
    }
    documents(&docs)
}

#[test]
fn two_kubernetes_services_on_one_port_each_reach_their_pod_by_cluster_ip() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let (ip1, ip2) = (Ipv4Addr::new(10, 96, 3, 1), Ipv4Addr::new(10, 96, 3, 2));
    let (orders, users) = (
        mesh.service("orders-db", "db", ip1),
        mesh.service("users-db", "db", ip2),
    );
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let p1 = mesh.pod(PodSpec::sidecar(
        "orders-db-0",
        "db",
        &[("app", "orders-db")],
    ));
    let p2 = mesh.pod(PodSpec::sidecar("users-db-0", "db", &[("app", "users-db")]));
    let _apps = (p1.serve_tcp(5432, "orders"), p2.serve_tcp(5432, "users"));
    config.write(
        "orders.yaml",
        &cluster(
            "orders-db",
            "db",
            ip1,
            "tcp-postgres",
            5432,
            5432,
            &[(&p1, "v1")],
        ),
    );
    config.write(
        "users.yaml",
        &cluster(
            "users-db",
            "db",
            ip2,
            "tcp-postgres",
            5432,
            5432,
            &[(&p2, "v1")],
        ),
    );
    client.wait_listener(&format!("{ip1}_5432"));
    client.wait_listener(&format!("{ip2}_5432"));
    let banner = |host: &str| client.tcp_banner(host, 5432);
    assert!(
        wait_until(CONVERGE, || banner(&orders).starts_with("orders ")
            && banner(&users).starts_with("users ")),
        "{} / {}\n{}",
        banner(&orders),
        banner(&users),
        client.describe()
    );
    for _ in 0..10 {
        assert!(banner(&ip1.to_string()).starts_with("orders "));
        assert!(banner(&ip2.to_string()).starts_with("users "));
    }
}

#[test]
fn a_kubernetes_port_without_protocol_is_sniffed_and_routed_by_a_virtual_service() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let ip = Ipv4Addr::new(10, 96, 4, 1);
    let web = mesh.service("web", "b", ip);
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let v1 = mesh.pod(PodSpec::sidecar(
        "web-v1",
        "b",
        &[("app", "web"), ("version", "v1")],
    ));
    let v2 = mesh.pod(PodSpec::sidecar(
        "web-v2",
        "b",
        &[("app", "web"), ("version", "v2")],
    ));
    let (app1, app2) = (
        v1.serve_http(APP_PORT, "web-v1"),
        v2.serve_http(APP_PORT, "web-v2"),
    );
    config.write(
        "web.yaml",
        &cluster(
            "web",
            "b",
            ip,
            "web",
            80,
            APP_PORT,
            &[(&v1, "v1"), (&v2, "v2")],
        ),
    );
    config.write(
        "routes.yaml",
        &documents(&[
            destination_rule_yaml("web", "b", &web),
            header_to_v2_yaml("web", "b", &web, 80, ("end-user", "jason"), "v1"),
        ]),
    );
    // The sniffed port listens on the ClusterIP (a TCP-like port would too).
    client.wait_listener(&format!("{ip}_80"));
    wait_answer(&client, &web, 80, &[("end-user", "jason")], "web-v2", &v2);
    for _ in 0..5 {
        assert_eq!(answer(&client, &web, 80, &[("end-user", "bob")]), "web-v1");
        assert_eq!(
            answer(&client, "web.b", 80, &[("end-user", "jason")]),
            "web-v2"
        );
    }
    assert!(
        app1.requests()
            .iter()
            .all(|r| r.headers.get("end-user").map(String::as_str) != Some("jason"))
    );
    assert!(
        app2.requests()
            .iter()
            .all(|r| r.headers.get("end-user").map(String::as_str) == Some("jason"))
    );
}

#[test]
fn a_headless_kubernetes_service_reaches_each_pod() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let z0 = mesh.pod(PodSpec::sidecar("zk-0", "b", &[("app", "zk")]));
    let z1 = mesh.pod(PodSpec::sidecar("zk-1", "b", &[("app", "zk")]));
    let _apps = (z0.serve_tcp(2181, "zk-0"), z1.serve_tcp(2181, "zk-1"));
    let yaml = cluster(
        "zk",
        "b",
        Ipv4Addr::UNSPECIFIED,
        "tcp-client",
        2181,
        2181,
        &[(&z0, "v1"), (&z1, "v1")],
    )
    .replace(
        "  clusterIP: 0.0.0.0\n  clusterIPs: [0.0.0.0]\n",
        "  clusterIP: None\n",
    );
    config.write("zk.yaml", &yaml);
    client.wait_listener(&format!("{}_2181", z0.ip()));
    client.wait_listener(&format!("{}_2181", z1.ip()));
    super::vip::banner(&client, &z0.ip().to_string(), 2181);
    for _ in 0..10 {
        assert!(super::vip::banner(&client, &z0.ip().to_string(), 2181).starts_with("zk-0 "));
        assert!(super::vip::banner(&client, &z1.ip().to_string(), 2181).starts_with("zk-1 "));
    }
    // Through the service's cluster, not the passthrough.
    let through = client
        .envoy()
        .stats()
        .get("cluster.outbound|2181||zk.b.svc.cluster.local.upstream_cx_total")
        .copied()
        .unwrap_or(0);
    assert!(through >= 20, "{}", client.describe());
}
