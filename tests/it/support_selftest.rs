//! Checks of the end-to-end harness pieces that do not need axon.

use crate::support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

#[test]
fn ensure_envoy_finds_a_working_binary() {
    let envoy = ensure_envoy();
    let out = std::process::Command::new(&envoy)
        .arg("--version")
        .output()
        .expect("run envoy --version");
    assert!(out.status.success(), "{} --version failed", envoy.display());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("/{ENVOY_VERSION}/")),
        "not Envoy {ENVOY_VERSION}: {text}"
    );
    // The pinned release from the project's venv under the target directory, never one from
    // the user's Python or PATH.
    assert!(
        envoy.starts_with(target_dir().join("test-venv")),
        "{} is not in the test venv",
        envoy.display()
    );
    // Second call is cached and identical.
    assert_eq!(ensure_envoy(), envoy);
}

#[test]
fn the_test_venv_has_the_pinned_grpcio() {
    let python = grpc_python();
    assert!(python.starts_with(target_dir().join("test-venv")));
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import grpc, sys; print(grpc.__version__, sys.prefix)",
        ])
        .output()
        .expect("run the venv's python");
    let text = String::from_utf8_lossy(&out.stdout);
    let venv = std::fs::canonicalize(target_dir().join("test-venv")).unwrap();
    assert_eq!(
        text.trim(),
        format!("{GRPCIO_VERSION} {}", venv.display()),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(target_dir().join("test-venv").join(MARKER)).unwrap(),
        format!("{}\n", TEST_VENV_PACKAGES.join("\n"))
    );
}

#[test]
fn upstream_answers_http_get() {
    let up = Upstream::start("selftest-up");
    let addr = up.addr();
    let (status, body) = http_get(addr, "/anything?x=1", &[("x-test", "1")]);
    assert_eq!((status, body.as_str()), (200, "selftest-up"));
    let r = http_request(
        addr,
        "POST",
        "/",
        &[("Host", "foo.example.com")],
        Duration::from_secs(5),
    );
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-upstream"), Some("selftest-up"));
    assert_eq!(up.hits(), 2);
}

#[test]
fn upstream_supports_keep_alive() {
    let up = Upstream::start("ka");
    let mut s = TcpStream::connect(up.addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Two pipelined requests on one connection, then one with close.
    s.write_all(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n\
          GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert_eq!(all.matches("HTTP/1.1 200 OK").count(), 3, "{all}");
    assert_eq!(up.hits(), 3);
}

#[test]
fn http_get_reports_connection_failure_as_status_0() {
    let port = free_port();
    let (status, body) = http_get(std::net::SocketAddr::from(([127, 0, 0, 1], port)), "/", &[]);
    assert_eq!(status, 0, "{body}");
    assert!(!body.is_empty());
}

#[test]
fn upstream_stops_on_drop() {
    let up = Upstream::start("gone");
    let addr = up.addr();
    assert_eq!(http_get(addr, "/", &[]).0, 200);
    drop(up);
    assert!(wait_until(Duration::from_secs(5), || http_get(
        addr,
        "/",
        &[]
    )
    .0 == 0));
}

#[test]
fn config_dir_writes_atomically() {
    let dir = ConfigDir::new();
    dir.write("a.yaml", "kind: A\n");
    assert_eq!(
        std::fs::read_to_string(dir.file("a.yaml")).unwrap(),
        "kind: A\n"
    );
    dir.write("a.yaml", "kind: B\n");
    assert_eq!(
        std::fs::read_to_string(dir.file("a.yaml")).unwrap(),
        "kind: B\n"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["a.yaml".to_string()],
        "no temp files left behind"
    );
    dir.remove("a.yaml");
    assert!(!dir.file("a.yaml").exists());
}

#[test]
fn parses_the_listening_line() {
    let log = "2026-11-30T17:00:00Z  INFO axon::cli: starting\n\
               2026-11-30T17:00:00Z  INFO axon::cli: axon listening xds_addr=127.0.0.1:41231 monitoring_addr=127.0.0.1:40001\n";
    let (x, m) = parse_listening(log).expect("parse");
    assert_eq!(x.to_string(), "127.0.0.1:41231");
    assert_eq!(m.to_string(), "127.0.0.1:40001");
    let colored = "\x1b[32m INFO\x1b[0m axon listening \x1b[3mxds_addr\x1b[0m=127.0.0.1:1 \x1b[3mmonitoring_addr\x1b[0m=127.0.0.1:2";
    assert!(parse_listening(&strip_ansi(colored)).is_some());
    assert!(parse_listening("axon starting xds_addr=127.0.0.1:1").is_none());
}

/// Envoy starts from the harness bootstrap and its admin answers even when no
/// control plane is listening yet (it stays initializing).
#[test]
fn envoy_starts_without_control_plane() {
    let xds = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let envoy = Envoy::start_gateway(
        xds,
        "router~127.0.0.1~selftest.istio-system~istio-system.svc.cluster.local",
        &[("istio", "ingressgateway")],
        "istio-system",
    );
    let info = envoy.admin_get("/server_info");
    assert!(info.contains("selftest.istio-system"), "{info}");
    let dump = envoy.config_dump();
    assert!(dump_section(&dump, "BootstrapConfigDump").is_some());
    let stats = envoy.stats();
    assert!(
        stats.contains_key("cluster_manager.cds.update_rejected"),
        "stats: {:?}",
        stats.keys().take(20).collect::<Vec<_>>()
    );
    assert!(!envoy.logs().is_empty());

    // Delta mode and a sidecar node id produce a bootstrap Envoy accepts.
    let opts = EnvoyOptions::sidecar(
        "sidecar~127.0.0.2~app-1.demo~demo.svc.cluster.local",
        &[("app", "app")],
        "demo",
    )
    .delta();
    let e2 = Envoy::start(xds, opts);
    let info = e2.admin_get("/server_info");
    assert!(info.contains("sidecar~127.0.0.2"), "{info}");
}

/// The Upstream works behind a real Envoy (HTTP/1.1 connection pool,
/// keep-alive): a static listener routes to a static cluster.
#[test]
fn envoy_proxies_to_upstream_statically() {
    use serde_json::json;
    let up = Upstream::start("static-up");
    let listen_port = free_port();
    let xds = std::net::SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut opts = EnvoyOptions::gateway(
        "router~127.0.0.1~static.istio-system~istio-system.svc.cluster.local",
        &[],
        "istio-system",
    );
    opts.initial_fetch_timeout = Some("1s".to_string());
    opts.wait_live = true;
    opts.static_clusters.push(json!({
        "name": "up",
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {"cluster_name": "up", "endpoints": [{"lb_endpoints": [{"endpoint": {
            "address": {"socket_address": {"address": "127.0.0.1", "port_value": up.port()}}
        }}]}]}
    }));
    opts.static_listeners.push(json!({
        "name": "static",
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": listen_port}},
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "static",
                "route_config": {"virtual_hosts": [{
                    "name": "only", "domains": ["only.example.com"],
                    "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "up"}}]
                }]},
                "http_filters": [{
                    "name": "envoy.filters.http.router",
                    "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                }]
            }
        }]}]
    }));
    let envoy = Envoy::start(xds, opts);
    let addr = Envoy::local(listen_port);
    assert!(wait_until(Duration::from_secs(10), || http_get(
        addr,
        "/",
        &[("Host", "only.example.com")]
    )
    .0 == 200));
    for i in 0..50 {
        let (status, body) = http_get(addr, &format!("/{i}"), &[("Host", "only.example.com")]);
        assert_eq!((status, body.as_str()), (200, "static-up"), "request {i}");
    }
    assert_eq!(http_get(addr, "/", &[("Host", "nope.example.com")]).0, 404);
    let stats = envoy.stats();
    assert!(
        stats
            .get("cluster.up.upstream_rq_200")
            .copied()
            .unwrap_or(0)
            >= 50
    );
    // The pool reused connections rather than opening one per request.
    let cx = stats
        .get("cluster.up.upstream_cx_total")
        .copied()
        .unwrap_or(0);
    assert!(cx < 50, "upstream_cx_total = {cx}");
}
