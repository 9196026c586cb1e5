//! The command line as a user runs it: `axon validate` and `axon serve` start-up errors.

use std::path::Path;
use std::process::{Command, Output};

const AXON: &str = env!("CARGO_BIN_EXE_axon");

fn axon(args: &[&str]) -> Output {
    Command::new(AXON)
        .args(args)
        .output()
        .expect("running the axon binary")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const GOOD: &str = "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]
";

#[test]
fn validate_reports_path_position_and_reason_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("good.yaml"), GOOD).unwrap();
    let bad = format!(
        "{GOOD}---\napiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: se}}\nspec:\n  hosts: [a.example.com]\n  ports: [{{number: 70000, name: http}}]\n---\nkind: [unclosed\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\n"
    );
    std::fs::write(dir.path().join("bad.yaml"), bad).unwrap();
    let out = axon(&["validate", dir.path().to_str().unwrap()]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let bad_path = dir.path().join("bad.yaml");
    let bad_path = bad_path.display();
    assert!(
        report.contains(&format!("{bad_path}: document 2 (line 8)")),
        "{report}"
    );
    assert!(report.contains("65535"), "the reason is given: {report}");
    assert!(
        report.contains(&format!("{bad_path}: document 3 (line 15): invalid YAML"))
            && report.contains("at line 16"),
        "{report}"
    );
    assert!(
        report.contains("Deployment") && report.contains("not served"),
        "{report}"
    );
    assert!(report.contains("2 files"), "{report}");
    assert!(report.contains("2 errors"), "{report}");
}

#[test]
fn validate_accepts_the_demo_mesh() {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo");
    let out = axon(&["validate", demo.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("0 errors"));
}

#[test]
fn validate_on_a_missing_directory_fails() {
    let out = axon(&["validate", "/nonexistent/axon-config"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("/nonexistent/axon-config"),
        "{}",
        text(&out)
    );
}

#[test]
fn serve_refuses_a_bad_limits_file_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (content, key) in [
        ("debounce_aftr = \"100ms\"\n", "debounce_aftr"),
        ("push_concurrency = 0\n", "push_concurrency"),
        ("debounce_max = \"often\"\n", "debounce_max"),
    ] {
        let limits = dir.path().join("limits.toml");
        std::fs::write(&limits, content).unwrap();
        let out = axon(&[
            "serve",
            "--config-dir",
            dir.path().to_str().unwrap(),
            "--xds-addr",
            "127.0.0.1:0",
            "--monitoring-addr",
            "127.0.0.1:0",
            "--limits",
            limits.to_str().unwrap(),
        ]);
        assert!(!out.status.success(), "{content}");
        assert!(text(&out).contains(key), "{content}: {}", text(&out));
    }
}
