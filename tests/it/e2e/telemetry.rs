//! End-to-end: access logs as istiod configures them (issue 38), written by real Envoys to
//! files and read back: an ingress gateway (the client side) and a sidecar without capture
//! (`INTERCEPTION_MODE: NONE`, its outbound HTTP listener bound on a loopback address of the
//! test's own: the client side too; a bound `ingress` listener: the server side).
//!
//! - MeshConfig `accessLogFile`: istiod's default TEXT format (`EnvoyTextLogFormat`), its
//!   JSON labels (`accessLogEncoding: JSON`), and an `accessLogFormat` of the mesh's own (a
//!   newline appended), each checked on a 200 (method, path, authority, upstream host and
//!   cluster, route name), a 404 that no route took (`NR`, `route_not_found`) and, on the
//!   sidecar, a connection through a bound TCP egress listener (its TCP proxy's log).
//! - A Telemetry's CEL `filter` (`response.code >= 500`) on a provider of `extensionProviders`
//!   (`envoyFileAccessLog` with a text `logFormat`): a 503 is logged, the 200 before it is not.
//! - A namespace Telemetry turning a file provider on, and a workload Telemetry (`selector`)
//!   turning it off for its workload's CLIENT side: the other workload's outbound request is
//!   logged, the selected one's outbound request is not, its inbound request is.
//!
//! Envoy writes its access logs every 10 s; the tests ask it to flush them now (`POST
//! /reopen_logs`) while they wait for a line. To show a request was not logged, a request the
//! same Envoy (one worker) logs is sent after it, and its line waited for.

use crate::support;
use crate::support::access_log::{
    Entry, LABELS, field, hcm_log_paths, lines, parse_json, wait_entry, wait_line,
};
use crate::support::scenario;
use crate::support::sidecar;
use crate::support::tcp_echo;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use scenario::*;
use sidecar::{CONVERGE, NODE_A, REVIEWS, SERVICE_PORT, sidecar_options};
use support::*;
use tcp_echo::{tcp_call, tcp_echo};

const APP_HOST: &str = "app.example.com";
/// The `User-Agent` of the requests ([`OK`] says it too).
const USER_AGENT: &str = "axon-e2e-telemetry";
const DOWN: &str = "down.demo.svc.cluster.local";
/// A TCP service, on a port of the test's ([`World::tcp_port`]).
const ECHO: &str = "echo.a.svc.cluster.local";
const BACKEND_CLUSTER: &str = "outbound|80||backend.demo.svc.cluster.local";
const DOWN_CLUSTER: &str = "outbound|80||down.demo.svc.cluster.local";
const REVIEWS_CLUSTER: &str = "outbound|9080||reviews.a.svc.cluster.local";

/// What every entry of a 200 (through route `hello`) says.
const OK: &str = "method=GET protocol=HTTP/1.1 response_code=200 response_flags=- \
    response_code_details=via_upstream route_name=hello user_agent=axon-e2e-telemetry";
/// What every entry of a 404 no route took says: Envoy's `NR`, no upstream, no route.
const NOT_FOUND: &str = "method=GET response_code=404 response_flags=NR \
    response_code_details=route_not_found upstream_cluster=- upstream_host=- route_name=-";

/// Asserts the fields `want` (`key=value` separated by spaces) of `e`, the entry of `what`.
fn check(e: &Entry, what: &str, want: &str) {
    for (key, value) in want.split_whitespace().filter_map(|kv| kv.split_once('=')) {
        assert_eq!(field(e, key), value, "{key} of {what}: {e:?}");
    }
}

/// A ServiceEntry `name` in `ns` for `host`, HTTP on `port`, its endpoint 127.0.0.1:`target`.
fn service(name: &str, ns: &str, host: &str, port: u16, target: u16) -> String {
    service_entry_yaml(name, ns, host, http_port(port), &[(target, None)])
}

/// Sidecar `name` in `a` for workload `app: name`: an HTTP egress listener for the namespace's
/// services bound on `egress`:9080; with `tcp`, a TCP one for [`ECHO`] bound on
/// 127.0.0.1:`tcp`; with `ingress` `(port, app port)`, an HTTP ingress listener bound on
/// 127.0.0.1:port to the app.
fn bound_sidecar_yaml(
    name: &str,
    egress: Ipv4Addr,
    ingress: Option<(u16, u16)>,
    tcp: Option<u16>,
) -> String {
    let tcp = tcp.map_or(String::new(), |port| {
        format!(
            "  - port: {{number: {port}, protocol: TCP, name: tcp}}\n    bind: 127.0.0.1\n    \
             captureMode: NONE\n    hosts: [\"./{ECHO}\"]\n"
        )
    });
    let ingress = ingress.map_or(String::new(), |(port, app)| {
        format!(
            "  ingress:\n  - port: {{number: {port}, protocol: HTTP, name: http-in}}\n    \
             defaultEndpoint: 127.0.0.1:{app}\n    captureMode: NONE\n    bind: 127.0.0.1\n"
        )
    });
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: {name}, namespace: a}}
spec:
  workloadSelector: {{labels: {{app: {name}}}}}
{ingress}  egress:
  - port: {{number: {SERVICE_PORT}, protocol: HTTP, name: http}}
    bind: {egress}
    captureMode: NONE
    hosts: ["./*"]
{tcp}"#
    )
}

/// The gateway's routes (`hello`: `/hello` to backend, `down`: `/down` to a service whose
/// endpoint does not listen) and the mesh's (`hello`: `/hello` to reviews); nothing else is
/// routed, so any other path is a 404.
const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: gateway-routes, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - name: hello
    match: [{uri: {prefix: /hello}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, port: {number: 80}}}]
  - name: down
    match: [{uri: {prefix: /down}}]
    route: [{destination: {host: down.demo.svc.cluster.local, port: {number: 80}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: a}
spec:
  hosts: [reviews.a.svc.cluster.local]
  http:
  - name: hello
    match: [{uri: {prefix: /hello}}]
    route: [{destination: {host: reviews.a.svc.cluster.local, port: {number: 9080}}}]
"#;

/// One test's world. Field order = drop order: the Envoys go before axon.
struct World {
    sidecar: Option<Envoy>,
    gateway: Envoy,
    _axon: Axon,
    _config: ConfigDir,
    logs: tempfile::TempDir,
    gw_port: u16,
    egress: SocketAddr,
    /// The sidecar's TCP egress listener's port (and [`ECHO`]'s), 127.0.0.1.
    tcp_port: u16,
    echo_port: u16,
    backend: Upstream,
    reviews: Upstream,
}

impl World {
    /// axon reading `mesh` (`{logs}` replaced by the log directory), with `telemetry` (if any)
    /// among its configs; the gateway, and with `with_sidecar` the bound sidecar `productpage`
    /// in `a`, each once it answers through its route.
    fn start(mesh: &str, telemetry: Option<&str>, with_sidecar: bool) -> World {
        let logs = tempfile::tempdir().unwrap();
        let mesh = mesh.replace("{logs}", &logs.path().display().to_string());
        let backend = Upstream::start("backend");
        let reviews = Upstream::start("reviews");
        let egress_ip = own_loopback(&[SERVICE_PORT]);
        let (tcp_port, echo_port) = (free_port(), tcp_echo("echo"));
        let tcp = Port {
            number: tcp_port,
            name: "tcp",
            protocol: "TCP",
        };
        let config = ConfigDir::new();
        let gw_port = free_port();
        config.write("gateway.yaml", &gateway_yaml(gw_port));
        let services = [
            service("backend", "demo", BACKEND, 80, backend.port()),
            service("down", "demo", DOWN, 80, free_port()),
            service("reviews", "a", REVIEWS, SERVICE_PORT, reviews.port()),
            service_entry_yaml("echo", "a", ECHO, tcp, &[(echo_port, None)]),
            bound_sidecar_yaml("productpage", egress_ip, None, Some(tcp_port)),
            ROUTES.to_string(),
        ];
        config.write("services.yaml", &documents(&services));
        if let Some(t) = telemetry {
            config.write("telemetry.yaml", t);
        }
        let axon = Axon::start_with_mesh_config(config.path(), &mesh);
        let (gateway, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
        wait_gateway_route(
            &gateway,
            gw_port,
            "*",
            &[BACKEND_CLUSTER, DOWN_CLUSTER],
            CONVERGE,
        );
        let gw = Envoy::local(gw_port);
        wait_for_answer("the gateway", CONVERGE, "backend", &gateway, || {
            http_get(gw, "/hello/warmup", &[("Host", APP_HOST)])
        });
        let egress = SocketAddr::from((egress_ip, SERVICE_PORT));
        let sidecar = with_sidecar.then(|| {
            let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
            wait_for_answer("the sidecar", CONVERGE, "reviews", &envoy, || {
                http_get(egress, "/hello/warmup", &[("Host", REVIEWS)])
            });
            let tcp_ok = wait_until(CONVERGE, || tcp_call(tcp_port) == "echo:hi");
            assert!(
                tcp_ok,
                "the TCP egress listener never answered\n{}",
                describe_envoy(&envoy)
            );
            envoy
        });
        World {
            sidecar,
            gateway,
            _axon: axon,
            _config: config,
            logs,
            gw_port,
            egress,
            tcp_port,
            echo_port,
            backend,
            reviews,
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.logs.path().join(name)
    }

    fn envoys(&self) -> Vec<&Envoy> {
        std::iter::once(&self.gateway)
            .chain(&self.sidecar)
            .collect()
    }

    /// `GET path` through the gateway (Host [`APP_HOST`]): its status.
    fn gateway_get(&self, path: &str) -> u16 {
        let headers = [("Host", APP_HOST), ("User-Agent", USER_AGENT)];
        http_get(Envoy::local(self.gw_port), path, &headers).0
    }

    /// `GET path` through the sidecar's egress listener (Host reviews): its status.
    fn sidecar_get(&self, path: &str) -> u16 {
        let headers = [("Host", REVIEWS), ("User-Agent", USER_AGENT)];
        http_get(self.egress, path, &headers).0
    }

    /// A 200 and a 404 through each proxy and a connection through the sidecar's TCP proxy,
    /// then their entries in `file` checked.
    fn check_200_and_404(&self, file: &Path, json: bool) -> Vec<Entry> {
        assert_eq!(self.gateway_get("/hello/gw"), 200);
        assert_eq!(self.gateway_get("/missing/gw"), 404);
        assert_eq!(self.sidecar_get("/hello/sidecar"), 200);
        assert_eq!(self.sidecar_get("/missing/sidecar"), 404);
        assert_eq!(tcp_call(self.tcp_port), "echo:hi");
        let envoys = self.envoys();
        let gw = format!(
            "authority={APP_HOST} upstream_host=127.0.0.1:{} upstream_cluster={BACKEND_CLUSTER} \
             downstream_local_address=127.0.0.1:{}",
            self.backend.port(),
            self.gw_port
        );
        let sidecar = format!(
            "authority={REVIEWS} upstream_host=127.0.0.1:{} upstream_cluster={REVIEWS_CLUSTER} \
             downstream_local_address={}",
            self.reviews.port(),
            self.egress
        );
        let cases = [
            ("/hello/gw", format!("{OK} {gw}")),
            ("/missing/gw", format!("authority={APP_HOST} {NOT_FOUND}")),
            ("/hello/sidecar", format!("{OK} {sidecar}")),
            (
                "/missing/sidecar",
                format!("authority={REVIEWS} {NOT_FOUND}"),
            ),
        ];
        let mut entries = Vec::new();
        for (path, want) in cases {
            let entry = wait_entry(file, &envoys, ("path", path), json);
            check(&entry, path, &format!("path={path} {want}"));
            let request_id = field(&entry, "request_id");
            assert!(request_id.len() >= 32, "request_id of {path}: {entry:?}");
            entries.push(entry);
        }
        // The TCP proxy's connection: 2 bytes in (`hi`), 7 out (`echo:hi`), no HTTP fields.
        let cluster = format!("outbound|{}||{ECHO}", self.tcp_port);
        let entry = wait_entry(file, &envoys, ("upstream_cluster", &cluster), json);
        let want = format!(
            "method=- path=- protocol=- response_code=0 response_flags=- bytes_received=2 \
             bytes_sent=7 upstream_host=127.0.0.1:{} downstream_local_address=127.0.0.1:{} \
             route_name=- request_id=-",
            self.echo_port, self.tcp_port
        );
        check(&entry, "the TCP connection", &want);
        entries.push(entry);
        for envoy in &envoys {
            assert_no_rejected_updates(envoy);
        }
        entries
    }
}

#[test]
fn mesh_access_log_file_writes_istiod_s_text_format_on_gateway_and_sidecar() {
    let w = World::start("accessLogFile: {logs}/access.log\n", None, true);
    let file = w.file("access.log");
    w.check_200_and_404(&file, false);
    // Both proxies' connection managers log to the file, as MeshConfig says.
    let dump = w.gateway.config_dump();
    let gw_listener = format!("0.0.0.0_{}", w.gw_port);
    let path = file.display().to_string();
    assert_eq!(
        hcm_log_paths(&dump, &gw_listener),
        std::slice::from_ref(&path),
        "{gw_listener}"
    );
    // The gateway's listener logs to it too, only what no filter chain took (istiod's `NR`).
    let listener = dynamic_listener(&dump, &gw_listener).unwrap_or_default();
    let own = &listener["active_state"]["listener"]["access_log"];
    assert_eq!(own[0]["typed_config"]["path"], path.as_str(), "{listener}");
    assert_eq!(
        own[0]["filter"]["response_flag_filter"]["flags"],
        serde_json::json!(["NR"])
    );
    let dump = w.sidecar.as_ref().unwrap().config_dump();
    let egress = w.egress.to_string().replace(':', "_");
    assert_eq!(hcm_log_paths(&dump, &egress), [path]);
}

#[test]
fn mesh_access_log_json_encoding_writes_istiod_s_labels() {
    let mesh = "accessLogFile: {logs}/access.json\naccessLogEncoding: JSON\n";
    let w = World::start(mesh, None, true);
    let file = w.file("access.json");
    w.check_200_and_404(&file, true);
    // Every line is one JSON object of exactly istiod's labels.
    let mut want: Vec<&str> = LABELS.split_whitespace().collect();
    want.sort_unstable();
    for line in lines(&file) {
        let entry = parse_json(&line).unwrap_or_else(|| panic!("not a JSON object: {line}"));
        let keys: Vec<&str> = entry.keys().map(String::as_str).collect();
        assert_eq!(keys, want, "{line}");
    }
}

#[test]
fn mesh_access_log_format_replaces_the_default_and_ends_each_line() {
    let mesh = "accessLogFile: {logs}/custom.log\n\
                accessLogFormat: \"%REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% custom\"\n";
    let w = World::start(mesh, None, false);
    let file = w.file("custom.log");
    assert_eq!(w.gateway_get("/hello/custom"), 200);
    assert_eq!(w.gateway_get("/missing/custom"), 404);
    let envoys = w.envoys();
    // Without the newline istiod appends, the two would run together on one line.
    wait_line(&file, &envoys, "the 404", |l| l.contains("/missing/custom"));
    let all = lines(&file);
    assert!(
        all.iter().any(|l| l == "GET /hello/custom 200 - custom"),
        "{all:#?}"
    );
    assert!(
        all.iter().any(|l| l == "GET /missing/custom 404 NR custom"),
        "{all:#?}"
    );
}

#[test]
fn a_telemetry_filter_logs_only_server_errors() {
    let mesh = r#"extensionProviders:
- name: errors
  envoyFileAccessLog:
    path: {logs}/errors.log
    logFormat:
      text: "%REQ(:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS%"
"#;
    let telemetry = r#"apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: istio-system}
spec:
  accessLogging:
  - providers: [{name: errors}]
    filter: {expression: "response.code >= 500"}
"#;
    let w = World::start(mesh, Some(telemetry), false);
    let file = w.file("errors.log");
    let gw_listener = format!("0.0.0.0_{}", w.gw_port);
    let dump = w.gateway.config_dump();
    assert_eq!(
        hcm_log_paths(&dump, &gw_listener),
        [file.display().to_string()]
    );
    assert!(
        dump.to_string().contains("response.code >= 500"),
        "{}",
        describe_envoy(&w.gateway)
    );

    assert_eq!(w.gateway_get("/hello/ok"), 200);
    let status = w.gateway_get("/down/broken");
    assert_eq!(status, 503, "{}", describe_envoy(&w.gateway));
    // The 503 is logged; the 200 before it, handled by the same worker, would be above it.
    let line = wait_line(&file, &w.envoys(), "the 503", |l| {
        l.starts_with("/down/broken ")
    });
    assert!(line.starts_with("/down/broken 503 "), "{line}");
    let all = lines(&file);
    assert!(
        !all.iter().any(|l| l.starts_with("/hello/")),
        "a 200 was logged: {all:#?}"
    );
    assert_no_rejected_updates(&w.gateway);
}

#[test]
fn a_workload_telemetry_turns_off_its_namespace_s_log_for_that_workload_only() {
    let logs = tempfile::tempdir().unwrap();
    let file = logs.path().join("ns.log");
    let mesh = format!(
        "extensionProviders:\n- name: ns-log\n  envoyFileAccessLog:\n    path: {}\n    \
         logFormat: {{text: \"%REQ(:PATH)% %RESPONSE_CODE%\\n\"}}\n",
        file.display()
    );
    let telemetries = r#"apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: logging, namespace: a}
spec:
  accessLogging:
  - providers: [{name: ns-log}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: details-quiet, namespace: a}
spec:
  selector: {matchLabels: {app: details}}
  accessLogging:
  - providers: [{name: ns-log}]
    match: {mode: CLIENT}
    disabled: true
"#;
    let reviews = Upstream::start("reviews");
    let details_app = Upstream::start("details-app");
    let (loud_ip, quiet_ip) = (own_loopback(&[SERVICE_PORT]), own_loopback(&[SERVICE_PORT]));
    let inbound = free_port();
    let config = ConfigDir::new();
    let services = [
        service("reviews", "a", REVIEWS, SERVICE_PORT, reviews.port()),
        bound_sidecar_yaml("productpage", loud_ip, None, None),
        bound_sidecar_yaml(
            "details",
            quiet_ip,
            Some((inbound, details_app.port())),
            None,
        ),
        telemetries.to_string(),
    ];
    config.write("config.yaml", &documents(&services));
    let axon = Axon::start_with_mesh_config(config.path(), &mesh);
    let loud = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
    let quiet_node = "sidecar~127.0.0.3~details-1.a~a.svc.cluster.local";
    let quiet = Envoy::start(axon.xds_addr(), sidecar_options(quiet_node, "details", "a"));
    let (loud_out, quiet_out) = (
        SocketAddr::from((loud_ip, SERVICE_PORT)),
        SocketAddr::from((quiet_ip, SERVICE_PORT)),
    );
    let quiet_in = Envoy::local(inbound);
    let reviews_get = |addr: SocketAddr, path: &str| http_get(addr, path, &[("Host", REVIEWS)]);
    let details_get = |path: &str| http_get(quiet_in, path, &[("Host", "details.a")]);
    wait_for_answer("productpage's egress", CONVERGE, "reviews", &loud, || {
        reviews_get(loud_out, "/warmup")
    });
    wait_for_answer("details' egress", CONVERGE, "reviews", &quiet, || {
        reviews_get(quiet_out, "/warmup")
    });
    wait_for_answer("details' ingress", CONVERGE, "details-app", &quiet, || {
        details_get("/warmup-in")
    });

    // The config: productpage's outbound logs to the provider's file, details' does not.
    let path = file.display().to_string();
    let loud_listener = loud_out.to_string().replace(':', "_");
    let quiet_listener = quiet_out.to_string().replace(':', "_");
    let in_listener = format!("127.0.0.1_{inbound}");
    assert_eq!(
        hcm_log_paths(&loud.config_dump(), &loud_listener),
        std::slice::from_ref(&path)
    );
    let quiet_dump = quiet.config_dump();
    assert_eq!(
        hcm_log_paths(&quiet_dump, &quiet_listener),
        Vec::<String>::new()
    );
    assert_eq!(hcm_log_paths(&quiet_dump, &in_listener), [path]);

    // The traffic: details' outbound request first, then its inbound one (logged: same
    // worker, so any line of the first would be above it).
    assert_eq!(reviews_get(loud_out, "/loud-out").0, 200);
    assert_eq!(reviews_get(quiet_out, "/quiet-out").0, 200);
    assert_eq!(details_get("/quiet-in").0, 200);
    let envoys = [&loud, &quiet];
    let line_of = |path: &str| wait_line(&file, &envoys, path, |l| l.starts_with(path));
    assert_eq!(line_of("/loud-out "), "/loud-out 200");
    assert_eq!(line_of("/quiet-in "), "/quiet-in 200");
    let all = lines(&file);
    assert!(
        !all.iter().any(|l| l.starts_with("/quiet-out")),
        "details' outbound request was logged: {all:#?}"
    );
    for envoy in envoys {
        assert_no_rejected_updates(envoy);
    }
}
