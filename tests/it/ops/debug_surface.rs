//! The debug surface is closed: the monitoring address (open to the cluster) serves only
//! `/metrics`, `/healthz` and `/ready`; the debug address answers only requests whose `Host`
//! is a loopback name or its own address (DNS rebinding), a push needs POST, and with
//! `--debug-token-file` every request needs the token.

use crate::support;

use std::time::Duration;

use support::*;

const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc, namespace: demo}\nspec:\n  hosts: [svc.demo.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.9}]\n";

fn debug(axon: &Axon, method: &str, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    http_request(
        axon.debug_addr(),
        method,
        path,
        headers,
        Duration::from_secs(5),
    )
}

#[test]
fn per_proxy_data_and_state_changes_are_on_the_guarded_debug_address_only() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let axon = Axon::start(dir.path());
    assert_eq!(axon.monitoring_get("/debug/syncz").status, 404);
    assert_eq!(axon.monitoring_get("/metrics").status, 200);
    assert_eq!(axon.monitoring_get("/healthz").status, 200);

    let own = axon.debug_addr().to_string();
    for host in ["localhost", own.as_str(), "127.0.0.1"] {
        let r = debug(&axon, "GET", "/debug/syncz", &[("Host", host)]);
        assert_eq!(r.status, 200, "Host {host}: {}", r.body);
    }
    // A page on another site whose name resolves to 127.0.0.1.
    let r = debug(
        &axon,
        "GET",
        "/debug/syncz",
        &[("Host", "attacker.example.com")],
    );
    assert_eq!(r.status, 403, "{}", r.body);
    // A push needs POST.
    let r = debug(
        &axon,
        "GET",
        "/debug/adsz?push=true",
        &[("Host", "localhost")],
    );
    assert_eq!(r.status, 405, "{}", r.body);
    assert_eq!(
        axon.debug_post_json("/debug/adsz?push=true")["pushed"],
        true
    );
}

#[test]
fn with_a_token_file_every_debug_request_needs_the_token() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let secrets = ConfigDir::new();
    secrets.write("token", "s3cret-token\n");
    let token_file = secrets.file("token").display().to_string();
    let axon = Axon::start_with_args(dir.path(), &["--debug-token-file", &token_file]);
    let r = debug(&axon, "GET", "/debug/configz", &[("Host", "localhost")]);
    assert_eq!(r.status, 401, "{}", r.body);
    let r = debug(
        &axon,
        "GET",
        "/debug/configz",
        &[("Host", "localhost"), ("Authorization", "Bearer wrong")],
    );
    assert_eq!(r.status, 401, "{}", r.body);
    let r = debug(
        &axon,
        "GET",
        "/debug/configz",
        &[
            ("Host", "localhost"),
            ("Authorization", "Bearer s3cret-token"),
        ],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // The probes need no token.
    assert_eq!(axon.monitoring_get("/healthz").status, 200);
}

/// A root VirtualService delegating to one that does not exist: a problem only the push
/// context shows, listed by `/debug/configz` beside the configs.
#[test]
fn configz_lists_the_virtual_service_problems_of_the_push_context() {
    const ROOT: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: root, namespace: demo}\nspec:\n  hosts: [svc.demo.svc.cluster.local]\n  http:\n  - name: to-missing\n    delegate: {name: missing}\n";
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let axon = Axon::start(dir.path());
    assert!(
        axon.wait_built_after(None, Duration::from_secs(10))
            .is_some()
    );
    let configz = axon.debug_json("/debug/configz");
    assert_eq!(
        configz["virtual_service_problems"],
        serde_json::json!([]),
        "{configz}"
    );

    let before = axon.built_version();
    dir.write("root.yaml", ROOT);
    assert!(
        axon.wait_built_after(before, Duration::from_secs(10))
            .is_some()
    );
    let configz = axon.debug_json("/debug/configz");
    assert_eq!(
        configz["virtual_service_problems"],
        serde_json::json!([{
            "virtual_services": ["VirtualService/demo/root"],
            "problem": "VirtualService/demo/root: delegate VirtualService/demo/missing not found: route \"to-missing\" dropped",
        }]),
        "{configz}"
    );
}
