//! End-to-end: axon serves a real proxyless gRPC client (Python `grpcio`, whose C core has
//! the xDS resolver) over ADS. The client's node has `GENERATOR: grpc`, so for the target
//! `xds:///echo.a.svc.cluster.local:7070` axon answers LDS with an API listener of that name,
//! RDS with the route configuration of that name, CDS with the EDS cluster
//! `outbound|7070|SUBSET|echo.a.svc.cluster.local` and EDS with its endpoints, which are
//! Python gRPC echo servers on 127.0.0.1 (`tests/grpc/echo.py`).
//!
//! The client and the servers run on the test venv's Python, with the pinned `grpcio`
//! (`GRPCIO_PIP_PACKAGE`, installed by `support/tools.rs` into `target/test-venv`); the tests
//! panic (never skip) if it cannot be had. When a call fails, the client is run once more with `GRPC_VERBOSITY=debug
//! GRPC_TRACE=xds_client` and what gRPC's xDS client said (NACKs, resource errors) is put in
//! the panic message.

use crate::support;
use crate::support::grpc_echo;
use crate::support::scenario;

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use grpc_echo::{EchoServer, echo_script, tail};
use scenario::*;
use support::*;

const ECHO_HOST: &str = "echo.a.svc.cluster.local";
const ECHO_PORT: u16 = 7070;
const CLIENT_NODE: &str = "sidecar~127.0.0.1~client-1.a~a.svc.cluster.local";
/// The client's own deadline for getting a reply (it retries UNAVAILABLE until then).
const CLIENT_DEADLINE_SECS: u64 = 20;

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

/// A temp dir with the client's xDS bootstrap.
struct Bootstrap {
    dir: tempfile::TempDir,
}

impl Bootstrap {
    fn new(axon: &Axon) -> Bootstrap {
        let dir = tempfile::Builder::new()
            .prefix("axon-grpc-client-")
            .tempdir()
            .expect("temp dir");
        let bootstrap = serde_json::json!({
            "xds_servers": [{
                "server_uri": axon.xds_addr().to_string(),
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"]
            }],
            "node": {
                "id": CLIENT_NODE,
                "metadata": {"GENERATOR": "grpc", "NAMESPACE": "a"}
            }
        });
        fs::write(
            dir.path().join("bootstrap.json"),
            serde_json::to_string_pretty(&bootstrap).unwrap(),
        )
        .expect("write bootstrap");
        Bootstrap { dir }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("bootstrap.json")
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        if thread::panicking() {
            let dir = std::mem::replace(
                &mut self.dir,
                tempfile::Builder::new()
                    .prefix("axon-grpc-client-")
                    .tempdir()
                    .expect("temp dir"),
            );
            eprintln!("[grpc] kept client dir: {}", dir.keep().display());
        }
    }
}

/// Kills a child on drop (the client, should the test panic while it runs).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct ClientRun {
    success: bool,
    /// Interleaved stdout and stderr.
    output: String,
}

impl ClientRun {
    fn reply(&self) -> Option<&str> {
        self.output
            .lines()
            .find_map(|l| l.strip_prefix("reply: "))
            .map(str::trim)
    }
}

/// Runs `echo.py client xds:///echo.a.svc.cluster.local:7070` with `GRPC_XDS_BOOTSTRAP`.
fn run_client(bootstrap: &Bootstrap, headers: &[(&str, &str)], trace: bool) -> ClientRun {
    run_client_saying(
        bootstrap,
        "hello",
        CLIENT_DEADLINE_SECS as f64,
        headers,
        trace,
    )
}

/// [`run_client`] with `message` and the client's overall deadline.
fn run_client_saying(
    bootstrap: &Bootstrap,
    message: &str,
    deadline_secs: f64,
    headers: &[(&str, &str)],
    trace: bool,
) -> ClientRun {
    let out_path = bootstrap.dir.path().join(if trace {
        "client-trace.log"
    } else {
        "client.log"
    });
    let out = fs::File::create(&out_path).expect("create client log");
    let python = grpc_python();
    let mut cmd = Command::new(&python);
    cmd.arg("-u")
        .arg(echo_script())
        .arg("client")
        .arg(format!("xds:///{ECHO_HOST}:{ECHO_PORT}"))
        .arg(message)
        .args(["--deadline", &deadline_secs.to_string()]);
    for (k, v) in headers {
        cmd.args(["--header", &format!("{k}={v}")]);
    }
    cmd.env("GRPC_XDS_BOOTSTRAP", bootstrap.path())
        .env_remove("GRPC_XDS_BOOTSTRAP_CONFIG")
        .env_remove("GRPC_VERBOSITY")
        .env_remove("GRPC_TRACE")
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    if trace {
        cmd.env("GRPC_VERBOSITY", "debug")
            .env("GRPC_TRACE", "xds_client");
    }
    let mut child = KillOnDrop(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("spawn {} echo.py client: {e}", python.display())),
    );
    let limit = Duration::from_secs(CLIENT_DEADLINE_SECS + 20);
    let start = Instant::now();
    let mut status = None;
    wait_until(limit, || {
        status = child.0.try_wait().ok().flatten();
        status.is_some()
    });
    let mut output = fs::read_to_string(&out_path).unwrap_or_default();
    if status.is_none() {
        output.push_str(&format!(
            "\n[test] client still running after {:?}; killed\n",
            start.elapsed()
        ));
    }
    ClientRun {
        success: status.is_some_and(|s| s.success()),
        output,
    }
}

/// The lines of a traced client run that tell what gRPC's xDS client made of axon's
/// resources: NACKs (`error=` other than OK), what it parsed, and resource errors.
fn xds_complaints(trace: &str) -> String {
    let needles = [
        "NACK",
        "nack",
        "parsed ",
        "invalid",
        "Invalid",
        "validation",
        "does not exist",
        "contains no",
        "ignoring",
        "rejected",
        "failed",
        "FAILED",
    ];
    let mut lines: Vec<&str> = Vec::new();
    for l in trace.lines() {
        let nack = l.contains(" error=") && !l.contains(" error=OK");
        if (nack || needles.iter().any(|n| l.contains(n))) && !lines.contains(&l) {
            lines.push(l);
        }
    }
    let start = lines.len().saturating_sub(60);
    lines[start..].join("\n")
}

/// A known way for axon's resources to be accepted (ACKed) yet unusable by gRPC, spelled
/// out for whoever reads the failure.
fn diagnosis(output: &str) -> &'static str {
    if output.contains("contains no localities") {
        "DIAGNOSIS: gRPC ACKed the ClusterLoadAssignment but parsed it as `{priorities=[]}`: \
         gRPC's LocalityParse (src/core/xds/grpc/xds_endpoint_parser.cc) drops every LocalityLbEndpoints whose `load_balancing_weight` is \
         unset or 0, and axon's EDS (src/xds/eds.rs) leaves it unset (istiod sets it to the \
         sum of the endpoints' weights). Envoy tolerates this; proxyless gRPC does not.\n"
    } else {
        ""
    }
}

/// Calls the echo service through xDS and returns the reply; on failure, reruns the client
/// with xDS client tracing and panics with what gRPC said.
fn call_echo(axon: &Axon, bootstrap: &Bootstrap, headers: &[(&str, &str)]) -> String {
    let run = run_client(bootstrap, headers, false);
    if run.success
        && let Some(r) = run.reply()
    {
        return r.to_string();
    }
    let traced = run_client(bootstrap, headers, true);
    panic!(
        "the proxyless gRPC client (headers {headers:?}) got no reply through axon \
         (xds {}).\n----- client output -----\n{}\n\
         ----- traced rerun (GRPC_VERBOSITY=debug GRPC_TRACE=xds_client): \
         success={} reply={:?}; what the xDS client said -----\n{}\n{}\
         (full trace: {})\n",
        axon.xds_addr(),
        tail(&run.output, 40),
        traced.success,
        traced.reply(),
        xds_complaints(&traced.output),
        diagnosis(&traced.output),
        bootstrap.dir.path().join("client-trace.log").display(),
    );
}

/// Waits until axon has built a config context newer than `after` (the first, for `None`):
/// a client started from then on is served it.
fn wait_config_built(axon: &Axon, after: Option<u64>, what: &str) {
    assert!(
        axon.wait_built_after(after, Duration::from_secs(10))
            .is_some(),
        "axon never built {what}: {}",
        axon.push_status()
    );
}

// ---------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------

/// ServiceEntry `echo` in `a`: one STATIC endpoint per `(port, version)`.
fn echo_se_yaml(endpoints: &[(u16, &str)]) -> String {
    let endpoints: Vec<(u16, Option<&str>)> = endpoints
        .iter()
        .map(|(port, version)| (*port, Some(*version)))
        .collect();
    let grpc = Port {
        number: ECHO_PORT,
        name: "grpc",
        protocol: "GRPC",
    };
    service_entry_yaml("echo", "a", ECHO_HOST, grpc, &endpoints)
}

/// DestinationRule `echo` in `a`: subsets v1 and v2.
fn echo_dr_yaml() -> String {
    destination_rule_yaml("echo", "a", ECHO_HOST)
}

/// Mesh VirtualService `echo` in `a`: header `x-version: v2` goes to subset v2,
/// everything else to `default_subset` (weight 100).
fn echo_vs_yaml(default_subset: &str) -> String {
    header_to_v2_yaml(
        "echo",
        "a",
        ECHO_HOST,
        ECHO_PORT,
        ("x-version", "v2"),
        default_subset,
    )
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// A ServiceEntry alone: the client reaches `outbound|7070||echo.a.svc.cluster.local`.
#[test]
fn proxyless_grpc_client_calls_service_entry_endpoint() {
    grpc_python();
    let echo = EchoServer::start("echo:");
    let config = ConfigDir::new();
    config.write("echo-se.yaml", &echo_se_yaml(&[(echo.port, "v1")]));
    let axon = Axon::start(config.path());
    wait_config_built(&axon, None, "the ServiceEntry");
    let bootstrap = Bootstrap::new(&axon);

    let reply = call_echo(&axon, &bootstrap, &[]);
    assert_eq!(
        reply, "echo:hello",
        "reply through xds:///{ECHO_HOST}:{ECHO_PORT}"
    );
}

/// A mesh VirtualService with a DestinationRule: header `x-version: v2` reaches subset v2,
/// other calls the default subset; then the default is switched to v2 (100%) live.
#[test]
fn proxyless_grpc_client_follows_virtual_service_subsets() {
    grpc_python();
    let v1 = EchoServer::start("v1:");
    let v2 = EchoServer::start("v2:");
    let config = ConfigDir::new();
    config.write(
        "echo-se.yaml",
        &echo_se_yaml(&[(v1.port, "v1"), (v2.port, "v2")]),
    );
    config.write("echo-dr.yaml", &echo_dr_yaml());
    config.write("echo-vs.yaml", &echo_vs_yaml("v1"));
    let axon = Axon::start(config.path());
    wait_config_built(&axon, None, "the first config");
    let bootstrap = Bootstrap::new(&axon);

    let by_header = call_echo(&axon, &bootstrap, &[("x-version", "v2")]);
    assert_eq!(
        by_header, "v2:hello",
        "header x-version: v2 must route to subset v2"
    );

    let default = call_echo(&axon, &bootstrap, &[]);
    assert_eq!(
        default, "v1:hello",
        "without the header the default subset is v1"
    );

    // Everything to v2 (100%); a fresh client, started once axon has built the change, must
    // see the new route.
    let before = axon.built_version();
    config.write("echo-vs.yaml", &echo_vs_yaml("v2"));
    wait_config_built(&axon, before, "the VirtualService change");
    let mut last = String::new();
    let switched = wait_until(Duration::from_secs(20), || {
        last = call_echo(&axon, &bootstrap, &[]);
        last == "v2:hello"
    });
    assert!(
        switched,
        "after the VirtualService sends 100% to v2 the client still gets {last:?}"
    );
}

/// A VirtualService `timeout` bounds the client's call as `max_stream_duration` (istiod's
/// `setTimeout` for proxyless clients): a reply within it arrives, a slower one ends in
/// DEADLINE_EXCEEDED although the client's own deadline would have waited for it.
#[test]
fn a_virtual_service_timeout_bounds_a_proxyless_call() {
    grpc_python();
    let echo = EchoServer::start("echo:");
    let config = ConfigDir::new();
    config.write("echo-se.yaml", &echo_se_yaml(&[(echo.port, "v1")]));
    config.write(
        "echo-vs.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: echo, namespace: a}}\nspec:\n  hosts: [{ECHO_HOST}]\n  http:\n  - timeout: 3s\n    route: [{{destination: {{host: {ECHO_HOST}}}}}]\n"
        ),
    );
    let axon = Axon::start(config.path());
    wait_config_built(&axon, None, "the VirtualService");
    let bootstrap = Bootstrap::new(&axon);

    // Within the timeout: answered (the client connects and retries UNAVAILABLE meanwhile).
    let fast = run_client_saying(
        &bootstrap,
        "sleep:0.1",
        CLIENT_DEADLINE_SECS as f64,
        &[],
        false,
    );
    assert_eq!(
        fast.reply(),
        Some("echo:sleep:0.1"),
        "{}",
        tail(&fast.output, 40)
    );
    // Slower than the timeout, within the client's deadline (5 s per attempt): cut short.
    // axon sends what istiod sends (`max_stream_duration` = the timeout), but grpcio 1.85
    // ends the call 1 to 2 s before it: it measures `max_stream_duration` from a start
    // time that lags its clock by 1 s plus a fraction fixed per process (measured: 3 s cut
    // at 1.24 s and 1.69 s in two processes, 5 s at 3.32 s; below that lag, e.g. 1 s, 999ms
    // or 500ms, every call fails at once with DEADLINE_EXCEEDED, while 1500ms may pass).
    // So the timeout here is 3 s, above any lag, and the slow call is only asserted cut.
    let started = Instant::now();
    let slow = run_client_saying(&bootstrap, "sleep:4", 5.0, &[], false);
    assert!(!slow.success, "{}", tail(&slow.output, 40));
    assert!(
        slow.output
            .contains("attempt 1 failed: StatusCode.DEADLINE_EXCEEDED"),
        "{}",
        tail(&slow.output, 40)
    );
    assert!(started.elapsed() < Duration::from_secs(20));
}
