//! Listeners per service address under capture, each through real sidecars: two TCP
//! services on one port told apart by their VIPs; a port with no protocol, sniffed (HTTP
//! routed by a VirtualService's header match, raw TCP still passing); a ServiceEntry's
//! `addresses` (an IP and a CIDR) for TCP services outside the mesh under REGISTRY_ONLY; a
//! headless service's endpoints each reached by IP (a new one a new listener); a
//! VirtualService edit moving captured traffic; and TCP services without addresses on one
//! port, istiod's reported conflict.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::{APP_PORT, CONVERGE, answer, wait_answer};
use crate::support::mesh::{Mesh, Pod, PodSpec};
use crate::support::scenario::{destination_rule_yaml, documents, header_to_v2_yaml};
use crate::support::{Axon, ConfigDir, wait_until};

/// A ServiceEntry `name` in `ns` with `addresses`, port `port` (`protocol`, none if empty)
/// and a WorkloadEntry per `(pod IP, version)` (labels `app: NAME, version: VERSION`).
fn entry(
    name: &str,
    ns: &str,
    addresses: &[&str],
    port: u16,
    protocol: &str,
    resolution: &str,
    endpoints: &[(Ipv4Addr, &str)],
) -> String {
    let protocol = if protocol.is_empty() {
        String::new()
    } else {
        format!(", protocol: {protocol}")
    };
    let mut yaml = format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: {name}, namespace: {ns}}}
spec:
  hosts: [{name}.{ns}.svc.cluster.local]
{addresses}  ports: [{{number: {port}, name: p{port}{protocol}}}]
  location: MESH_INTERNAL
  resolution: {resolution}
  workloadSelector: {{labels: {{app: {name}}}}}
"#,
        addresses = if addresses.is_empty() {
            String::new()
        } else {
            format!("  addresses: [{}]\n", addresses.join(", "))
        }
    );
    for (ip, version) in endpoints {
        yaml.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}-{version}, namespace: {ns}}}\nspec: {{address: {ip}, labels: {{app: {name}, version: {version}}}}}\n"
        ));
    }
    yaml
}

/// Waits until the banner of `host:port` from `client` starts with `name `.
fn wait_banner(client: &Pod, host: &str, port: u16, name: &str) -> String {
    let mut last = String::new();
    let ok = wait_until(CONVERGE, || {
        last = client.tcp_banner(host, port);
        last.starts_with(&format!("{name} "))
    });
    assert!(
        ok,
        "{host}:{port} never answered by {name}; last {last:?}\n{}",
        client.describe()
    );
    last
}

#[test]
fn two_tcp_services_on_one_port_reach_their_own_backends_by_vip() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let (vip1, vip2) = (Ipv4Addr::new(10, 96, 1, 1), Ipv4Addr::new(10, 96, 1, 2));
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let pg1 = mesh.pod(PodSpec::sidecar("pg1", "db", &[("app", "pg1")]));
    let pg2 = mesh.pod(PodSpec::sidecar("pg2", "db", &[("app", "pg2")]));
    let _apps = (pg1.serve_tcp(5432, "pg1"), pg2.serve_tcp(5432, "pg2"));
    config.write(
        "db.yaml",
        &documents(&[
            entry(
                "pg1",
                "db",
                &[&vip1.to_string()],
                5432,
                "TCP",
                "STATIC",
                &[(pg1.ip(), "v1")],
            ),
            entry(
                "pg2",
                "db",
                &[&vip2.to_string()],
                5432,
                "TCP",
                "STATIC",
                &[(pg2.ip(), "v1")],
            ),
        ]),
    );
    client.wait_listener(&format!("{vip1}_5432"));
    client.wait_listener(&format!("{vip2}_5432"));
    for _ in 0..5 {
        wait_banner(&client, &vip1.to_string(), 5432, "pg1");
        wait_banner(&client, &vip2.to_string(), 5432, "pg2");
    }
    // Each VIP only ever reaches its own backend.
    for _ in 0..10 {
        assert!(
            client
                .tcp_banner(&vip1.to_string(), 5432)
                .starts_with("pg1 ")
        );
        assert!(
            client
                .tcp_banner(&vip2.to_string(), 5432)
                .starts_with("pg2 ")
        );
    }
    // Inbound, the backend's sidecar connects to the application from 127.0.0.6.
    let banner = client.tcp_banner(&vip2.to_string(), 5432);
    assert!(banner.starts_with("pg2 127.0.0.6:"), "{banner}");
}

/// The banner of `host:port` from `client`: the connection is made again while it gets no
/// banner (a busy machine), never after a banner from the wrong application.
pub(super) fn banner(client: &Pod, host: &str, port: u16) -> String {
    let mut last = String::new();
    let answered = wait_until(CONVERGE, || {
        last = client.tcp_banner(host, port);
        !last.is_empty()
    });
    assert!(
        answered,
        "{host}:{port} never answered\n{}",
        client.describe()
    );
    last
}

/// Sends the app's hello and `line` first, then reads the banner and the echo of a TCP app
/// at `addr`.
fn client_first(client: &Pod, addr: SocketAddr, line: &str) -> (String, String) {
    let Ok(mut conn) = client.connect(addr) else {
        return Default::default();
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    if conn
        .write_all(format!("hello\n{line}\n").as_bytes())
        .is_err()
    {
        return Default::default();
    }
    let mut reader = BufReader::new(conn);
    let (mut banner, mut echo) = (String::new(), String::new());
    let _ = reader.read_line(&mut banner);
    let _ = reader.read_line(&mut echo);
    (banner.trim_end().to_string(), echo.trim_end().to_string())
}

#[test]
fn a_port_without_protocol_is_sniffed_http_routed_and_raw_tcp_passes() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let (web_vip, raw_vip) = (Ipv4Addr::new(10, 96, 2, 1), Ipv4Addr::new(10, 96, 2, 2));
    let web = mesh.service("web", "b", web_vip);
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
    let raw = mesh.pod(PodSpec::sidecar("raw", "b", &[("app", "raw")]));
    let _apps = (
        v1.serve_http(APP_PORT, "web-v1"),
        v2.serve_http(APP_PORT, "web-v2"),
        raw.serve_tcp(APP_PORT, "raw"),
    );
    let route = |default: &str| {
        documents(&[
            destination_rule_yaml("web", "b", &web),
            header_to_v2_yaml("web", "b", &web, APP_PORT, ("end-user", "jason"), default),
        ])
    };
    let services = || {
        vec![
            entry(
                "web",
                "b",
                &[&web_vip.to_string()],
                APP_PORT,
                "",
                "STATIC",
                &[(v1.ip(), "v1"), (v2.ip(), "v2")],
            ),
            entry(
                "raw",
                "b",
                &[&raw_vip.to_string()],
                APP_PORT,
                "",
                "STATIC",
                &[(raw.ip(), "v1")],
            ),
        ]
    };
    let mut docs = services();
    docs.push(route("v1"));
    config.write("web.yaml", &documents(&docs));
    client.wait_listener(&format!("{web_vip}_{APP_PORT}"));
    client.wait_listener(&format!("{raw_vip}_{APP_PORT}"));

    // HTTP on the sniffed port is routed: the header match catches jason, not bob.
    wait_answer(
        &client,
        &web,
        APP_PORT,
        &[("end-user", "jason")],
        "web-v2",
        &v2,
    );
    for _ in 0..5 {
        let bob = answer(&client, &web, APP_PORT, &[("end-user", "bob")]);
        assert_eq!(bob, "web-v1", "bob went to v2");
        let jason = answer(&client, &web, APP_PORT, &[("end-user", "jason")]);
        assert_eq!(jason, "web-v2", "jason missed v2");
    }
    // Raw TCP to such a port still passes (the client speaks first).
    let addr = SocketAddr::from((raw_vip, APP_PORT));
    let mut last = Default::default();
    assert!(
        wait_until(CONVERGE, || {
            last = client_first(&client, addr, "hello");
            last.0.starts_with("raw ") && last.1 == "hello"
        }),
        "raw TCP through the sniffed port: {last:?}\n{}",
        client.describe()
    );

    // A VirtualService edit moves captured traffic: the default route to v2.
    let mut docs = services();
    docs.push(route("v2"));
    config.write("web.yaml", &documents(&docs));
    wait_answer(
        &client,
        &web,
        APP_PORT,
        &[("end-user", "bob")],
        "web-v2",
        &v2,
    );
}

#[test]
fn service_entry_addresses_apply_to_tcp_services_outside_the_mesh() {
    let config = ConfigDir::new();
    let axon = Axon::start_with_mesh_config(
        config.path(),
        "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
    );
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    // Outside the mesh: plain pods (no sidecar).
    let by_ip = mesh.pod(PodSpec::plain("ext-ip", "ext", &[]));
    let in_cidr = mesh.pod(PodSpec::plain("ext-cidr", "ext", &[]));
    let unknown = mesh.pod(PodSpec::plain("ext-none", "ext", &[]));
    let _apps = (
        by_ip.serve_tcp(6379, "ext-ip"),
        in_cidr.serve_tcp(6379, "ext-cidr"),
        unknown.serve_tcp(6379, "ext-none"),
    );
    let cidr = format!("{}/32", in_cidr.ip());
    config.write(
        "external.yaml",
        &format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: cache, namespace: a}}
spec:
  hosts: [cache.example.com]
  addresses: [{}, "{cidr}"]
  ports: [{{number: 6379, name: tcp, protocol: TCP}}]
  location: MESH_EXTERNAL
  resolution: NONE
"#,
            by_ip.ip()
        ),
    );
    client.wait_listener(&format!("{}_6379", by_ip.ip()));
    client.wait_listener("0.0.0.0_6379");
    wait_banner(&client, &by_ip.ip().to_string(), 6379, "ext-ip");
    wait_banner(&client, &in_cidr.ip().to_string(), 6379, "ext-cidr");
    // An address outside the entry is refused under REGISTRY_ONLY.
    for _ in 0..3 {
        assert_eq!(client.tcp_banner(&unknown.ip().to_string(), 6379), "");
    }
    // ...though it answers when not captured.
    assert!(
        by_ip
            .tcp_banner(&unknown.ip().to_string(), 6379)
            .starts_with("ext-none ")
    );
}

#[test]
fn a_headless_service_reaches_each_endpoint() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let k0 = mesh.pod(PodSpec::sidecar("kafka-0", "b", &[("app", "kafka")]));
    let k1 = mesh.pod(PodSpec::sidecar("kafka-1", "b", &[("app", "kafka")]));
    let _apps = (k0.serve_tcp(9092, "kafka-0"), k1.serve_tcp(9092, "kafka-1"));
    config.write(
        "kafka.yaml",
        &documents(&[entry(
            "kafka",
            "b",
            &[],
            9092,
            "TCP",
            "NONE",
            &[(k0.ip(), "k0"), (k1.ip(), "k1")],
        )]),
    );
    client.wait_listener(&format!("{}_9092", k0.ip()));
    client.wait_listener(&format!("{}_9092", k1.ip()));
    wait_banner(&client, &k0.ip().to_string(), 9092, "kafka-0");
    wait_banner(&client, &k1.ip().to_string(), 9092, "kafka-1");
    // Each endpoint's listener goes to that endpoint only (an original-destination cluster).
    for _ in 0..10 {
        assert!(banner(&client, &k0.ip().to_string(), 9092).starts_with("kafka-0 "));
        assert!(banner(&client, &k1.ip().to_string(), 9092).starts_with("kafka-1 "));
    }
    // Through the service's cluster (the original destination), not the passthrough.
    let stats = client.envoy().stats();
    let through = stats
        .get("cluster.outbound|9092||kafka.b.svc.cluster.local.upstream_cx_total")
        .copied()
        .unwrap_or(0);
    assert!(through >= 2, "{}", client.describe());

    // A new endpoint is a new listener (a full push, not the EDS fast path).
    let k2 = mesh.pod(PodSpec::sidecar("kafka-2", "b", &[("app", "kafka")]));
    let _app2 = k2.serve_tcp(9092, "kafka-2");
    config.write(
        "kafka.yaml",
        &documents(&[entry(
            "kafka",
            "b",
            &[],
            9092,
            "TCP",
            "NONE",
            &[(k0.ip(), "k0"), (k1.ip(), "k1"), (k2.ip(), "k2")],
        )]),
    );
    client.wait_listener(&format!("{}_9092", k2.ip()));
    wait_banner(&client, &k2.ip().to_string(), 9092, "kafka-2");
}

#[test]
fn tcp_services_without_addresses_on_one_port_are_a_reported_conflict() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let r1 = mesh.pod(PodSpec::sidecar("redis-a", "db", &[("app", "redis-a")]));
    let r2 = mesh.pod(PodSpec::sidecar("redis-b", "db", &[("app", "redis-b")]));
    let _apps = (r1.serve_tcp(6379, "redis-a"), r2.serve_tcp(6379, "redis-b"));
    config.write(
        "redis.yaml",
        &documents(&[
            entry(
                "redis-a",
                "db",
                &[],
                6379,
                "TCP",
                "STATIC",
                &[(r1.ip(), "v1")],
            ),
            entry(
                "redis-b",
                "db",
                &[],
                6379,
                "TCP",
                "STATIC",
                &[(r2.ip(), "v1")],
            ),
        ]),
    );
    client.wait_listener("0.0.0.0_6379");
    // As istiod: one wildcard listener, the first service in host order takes the port, even
    // for a connection to the other's pod; axon says so in its log and metrics.
    wait_banner(&client, &r2.ip().to_string(), 6379, "redis-a");
    assert!(
        axon.wait_for_log("outbound listener conflict", CONVERGE),
        "{}",
        axon.logs()
    );
    let metrics = crate::support::http_get(axon.monitoring_addr(), "/metrics", &[]).1;
    assert!(
        metrics
            .lines()
            .any(|l| l == "pilot_conflict_outbound_listener_tcp_over_current_tcp 1"),
        "{metrics}"
    );
}
