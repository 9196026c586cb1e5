//! Start-up errors as a user meets them: one line naming the flag, its value and the
//! reason, exit status 2, and no panic or backtrace even with `RUST_BACKTRACE=1`; and
//! `axon validate` on a single file.

use std::net::TcpListener;
use std::process::{Command, Output};

use crate::support;

const AXON: &str = env!("CARGO_BIN_EXE_axon");

fn serve(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let config = tempfile::tempdir().expect("a temp dir");
    let mut cmd = Command::new(AXON);
    cmd.args(["serve", "--config-dir", config.path().to_str().unwrap()]);
    for flag in ["--xds-addr", "--monitoring-addr", "--debug-addr"] {
        if !args.contains(&flag) {
            cmd.args([flag, "127.0.0.1:0"]);
        }
    }
    cmd.args(args)
        .env("RUST_BACKTRACE", "1")
        .env_remove("RUST_LOG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("running axon")
}

/// The error line, after checking there is exactly one and nothing of a panic.
fn the_error(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "exit status 2:\n{stderr}");
    for sign in ["panicked", "backtrace", "stack backtrace", "RUST_BACKTRACE"] {
        assert!(!stderr.contains(sign), "no panic or backtrace:\n{stderr}");
    }
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("axon: ")).collect();
    assert_eq!(errors.len(), 1, "one error line:\n{stderr}");
    errors[0].to_string()
}

#[test]
fn a_port_in_use_names_the_flag_and_the_address() {
    let taken = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let addr = taken.local_addr().unwrap().to_string();
    for flag in ["--xds-addr", "--monitoring-addr", "--debug-addr"] {
        let line = the_error(&serve(&[flag, &addr], &[]));
        assert!(
            line.contains(&format!("{flag} {addr}")) && line.contains("in use"),
            "{flag}: {line}"
        );
    }
}

#[test]
fn an_unreadable_limits_file_names_the_flag_and_the_path() {
    let line = the_error(&serve(&["--limits", "/nonexistent/limits.toml"], &[]));
    assert!(
        line.contains("--limits /nonexistent/limits.toml") && line.contains("No such file"),
        "{line}"
    );
}

#[test]
fn kubernetes_without_a_reachable_cluster_names_the_flag() {
    let closed = TcpListener::bind("127.0.0.1:0").expect("a free port");
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("config");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'http://127.0.0.1:{port}'}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let line = the_error(&serve(
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    ));
    assert!(line.starts_with("axon: --kubernetes: "), "{line}");

    let missing = dir.path().join("missing");
    let line = the_error(&serve(
        &["--kubernetes"],
        &[
            ("KUBECONFIG", missing.to_str().unwrap()),
            ("KUBERNETES_SERVICE_HOST", ""),
        ],
    ));
    assert!(line.starts_with("axon: --kubernetes: "), "{line}");

    // Token auth needs the API server as much, and says so under its own flag.
    let (cert, key) = (dir.path().join("axon.crt"), dir.path().join("axon.key"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (the TLS tests need it)");
    assert!(made.status.success(), "openssl: {made:?}");
    let line = the_error(&serve(
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
            "--token-auth",
            "kubernetes",
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    ));
    assert!(
        line.starts_with("axon: --token-auth kubernetes: "),
        "{line}"
    );
}

#[test]
fn a_bad_mesh_config_names_the_flag_the_file_the_line_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mesh.yaml");
    std::fs::write(
        &path,
        "rootNamespace: istio-system\nh2UpgradePolicy: SOMETIMES\n",
    )
    .unwrap();
    let flag_value = format!("--mesh-config {}", path.display());
    let line = the_error(&serve(&["--mesh-config", path.to_str().unwrap()], &[]));
    assert!(
        line.contains(&flag_value) && line.contains("line 2") && line.contains("h2UpgradePolicy"),
        "{line}"
    );
    std::fs::write(&path, "defaultServiceExportTo: ['*']\nrootNamspace: x\n").unwrap();
    let line = the_error(&serve(&["--mesh-config", path.to_str().unwrap()], &[]));
    assert!(
        line.contains("line 2") && line.contains("did you mean \"rootNamespace\""),
        "{line}"
    );
}

#[test]
fn a_config_dir_that_is_not_a_directory_names_the_flag() {
    let out = Command::new(AXON)
        .args(["serve", "--config-dir", "/nonexistent/dir"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let line = the_error(&out);
    assert!(line.contains("--config-dir /nonexistent/dir"), "{line}");
}

#[test]
fn validate_takes_a_single_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.yaml");
    std::fs::write(
        &file,
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: istio-system}\nspec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]\n",
    )
    .unwrap();
    let out = Command::new(AXON)
        .args(["validate", file.to_str().unwrap()])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{report}");
    assert!(report.contains("1 files, 1 configs, 0 errors"), "{report}");
}

#[test]
fn validate_reports_invalid_utf8_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gw.yaml");
    std::fs::write(&file, b"kind: Gateway\n# caf\xe9\n").unwrap();
    let out = Command::new(AXON)
        .args(["validate", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains(&format!("{}: invalid UTF-8 at line 2", file.display())),
        "{report}"
    );
}

#[test]
fn tls_flags_are_checked_before_anything_starts() {
    let line = the_error(&serve(&["--xds-tls-addr", "127.0.0.1:0"], &[]));
    assert!(
        line.contains("--xds-tls-addr 127.0.0.1:0: needs --tls-cert and --tls-key"),
        "{line}"
    );
    let line = the_error(&serve(
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--tls-cert",
            "/nonexistent/axon.crt",
            "--tls-key",
            "/nonexistent/axon.key",
        ],
        &[],
    ));
    assert!(
        line.contains("--xds-tls-addr") && line.contains("/nonexistent/axon.crt"),
        "{line}"
    );
    let line = the_error(&serve(&["--xds-addr", "off"], &[]));
    assert!(line.contains("--xds-addr off: no xDS port left"), "{line}");
    let line = the_error(&serve(&["--debug-token-file", "/nonexistent/token"], &[]));
    assert!(
        line.contains("--debug-token-file /nonexistent/token"),
        "{line}"
    );
    let line = the_error(&serve(&["--token-auth", "kubernetes"], &[]));
    assert!(
        line.contains("--token-auth: bearer tokens are checked on the TLS port only"),
        "{line}"
    );
}

/// The `axon listening` line that operators read names the addresses the harness read from
/// `--listening-file`.
#[test]
fn the_listening_line_names_the_addresses_of_the_listening_file() {
    let dir = support::ConfigDir::new();
    let axon = support::Axon::start(dir.path());
    let logs = axon.logs();
    assert_eq!(
        support::parse_listening(&logs),
        Some((axon.xds_addr(), axon.monitoring_addr())),
        "{logs}"
    );
    assert_eq!(
        support::parse_debug_addr(&logs),
        Some(axon.debug_addr()),
        "{logs}"
    );
}
