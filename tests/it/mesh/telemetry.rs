//! Access logs of sidecars under capture, as Telemetries scope them: a client's sidecar logs
//! its outbound side (CLIENT) to one file, a server's its inbound side (SERVER) to another in
//! JSON labels of the test's, each by a Telemetry that selects its workload; a third
//! workload, selected by neither, logs nothing; and the server's Telemetry, for SERVER only,
//! leaves its outbound side silent.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use super::{APP_PORT, CONVERGE, wait_answer};
use crate::support::mesh::{Mesh, PodSpec};
use crate::support::{Axon, ConfigDir, wait_until};

const TELEMETRIES: &str = "apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: client-logs, namespace: a}
spec:
  selector: {matchLabels: {app: client}}
  accessLogging: [{providers: [{name: client-log}]}]
---
apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: server-logs, namespace: b}
spec:
  selector: {matchLabels: {app: server}}
  accessLogging: [{providers: [{name: server-log}], match: {mode: SERVER}}]
";

fn mesh_config(dir: &Path) -> String {
    format!(
        "extensionProviders:
- name: client-log
  envoyFileAccessLog: {{path: {client}}}
- name: server-log
  envoyFileAccessLog:
    path: {server}
    logFormat: {{labels: {{code: '%RESPONSE_CODE%', side: server, cluster: '%UPSTREAM_CLUSTER_RAW%', authority: '%REQ(:AUTHORITY)%'}}}}
",
        client = dir.join("client.log").display(),
        server = dir.join("server.log").display(),
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn telemetries_scope_each_sidecars_access_logs_by_workload_and_side() {
    let logs = tempfile::tempdir().unwrap();
    // Envoy runs as uid 1337 in the pods: the files' directory is everyone's.
    std::fs::set_permissions(logs.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let config = ConfigDir::new();
    config.write("telemetry.yaml", TELEMETRIES);
    let axon = Axon::start_with_mesh_config(config.path(), &mesh_config(logs.path()));
    let mesh = Mesh::new(axon.xds_addr());
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let other = mesh.pod(PodSpec::sidecar("other", "a", &[("app", "other")]));
    let server = mesh.pod(PodSpec::sidecar("server", "b", &[("app", "server")]));
    let _app = server.serve_http(APP_PORT, "server");
    client.wait_listener("virtualOutbound");
    other.wait_listener("virtualOutbound");
    server.wait_listener("virtualInbound");

    let target = server.ip().to_string();
    wait_answer(&client, &target, APP_PORT, &[], "server", &server);
    wait_answer(&other, &target, APP_PORT, &[], "server", &server);

    // The server's inbound side: a JSON line per request, with its labels, for both callers.
    let server_log = logs.path().join("server.log");
    let lines = || -> Vec<serde_json::Value> {
        read(&server_log)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    assert!(
        wait_until(CONVERGE, || lines().len() >= 2),
        "server log: {:?}\n{}",
        read(&server_log),
        server.describe()
    );
    for line in lines() {
        assert_eq!(line["side"], "server", "{line}");
        assert_eq!(line["code"], 200, "{line}");
        assert_eq!(line["cluster"], "InboundPassthroughCluster", "{line}");
        assert_eq!(line["authority"], format!("{target}:{APP_PORT}"), "{line}");
    }

    // The client's outbound side: its passthrough TCP connection(s), in istiod's TEXT format
    // (no HTTP fields on a TCP proxy: `"- - -"`), through the PassthroughCluster.
    let client_log = logs.path().join("client.log");
    assert!(
        wait_until(CONVERGE, || read(&client_log)
            .contains("PassthroughCluster")),
        "client log: {:?}\n{}",
        read(&client_log),
        client.describe()
    );
    let text = read(&client_log);
    assert!(
        text.lines()
            .all(|l| l.starts_with('[') && l.contains(&format!("{target}:{APP_PORT}"))),
        "{text}"
    );
    // `other` is selected by no Telemetry: no file names it, and the files hold only the
    // client's and the server's lines (the client log the client's connections alone).
    assert!(
        !text.contains(&other.ip().to_string()),
        "other's connection logged by the client's file?\n{text}"
    );
    // The server's outbound side is silent (its Telemetry is SERVER only): it sent nothing
    // out, and its file has no CLIENT line either.
    assert_eq!(lines().iter().filter(|l| l["side"] != "server").count(), 0);
}
