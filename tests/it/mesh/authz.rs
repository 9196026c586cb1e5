//! AuthorizationPolicy through real sidecars under capture, their identities from axon's CA
//! (`mtls::axon_mesh`), each case with a request the policy must let through and one it must
//! refuse: ALLOW by principal and DENY by namespace (DENY first; a refused request is 403
//! `RBAC: access denied`); methods, paths with wildcards, ports, hosts, a `when` on a header
//! and on `source.ip`; an ALLOW that selects nothing denies all; a mesh-wide DENY in the root
//! namespace beside a namespace ALLOW; a TCP port (the connection is closed); dry-run (a
//! shadow decision, traffic passes), AUDIT, and CUSTOM without a provider (denied).

use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::mtls::{TLS_MODE, axon_mesh, axon_mesh_with, service, sidecar};
use super::{APP_PORT, CONVERGE, stat, wait_answer};
use crate::support::agent::AgentOptions;
use crate::support::mesh::{Pod, PodSpec};
use crate::support::scenario::documents;
use crate::support::{ConfigDir, HttpResponse, wait_until};

const HOST: &str = "server.b.svc.cluster.local";

fn policy(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
    )
}

/// Waits until `client`'s `method path` (with `headers`) is answered `want`; a 403 must say
/// `RBAC: access denied`.
fn expect(
    client: &Pod,
    server: &Pod,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    want: u16,
) {
    let mut last = HttpResponse {
        status: 0,
        headers: Vec::new(),
        body: String::new(),
    };
    let ok = wait_until(CONVERGE, || {
        last = client.http_method(HOST, APP_PORT, method, path, headers);
        last.status == want
    });
    assert!(
        ok,
        "{} {method} {path} {headers:?}: wanted {want}, got {} {}\n{}\n{}",
        client.name(),
        last.status,
        last.body,
        client.describe(),
        server.describe()
    );
    if want == 403 {
        assert_eq!(last.body, "RBAC: access denied", "{}", server.describe());
    }
}

/// The mesh: `server` in b (service `server`, HTTP on `APP_PORT`), and the rest of `pods`.
struct World {
    m: super::mtls::AxonMesh,
    config: ConfigDir,
    server: Pod,
    services: String,
}

fn world() -> World {
    world_with(None)
}

fn world_with(mesh_config: Option<&str>) -> World {
    let config = ConfigDir::new();
    let m = match mesh_config {
        None => axon_mesh(&config, AgentOptions::default()),
        Some(mesh) => axon_mesh_with(&config, AgentOptions::default(), Some(mesh)),
    };
    let vip = Ipv4Addr::new(10, 96, 8, 1);
    m.mesh.service("server", "b", vip);
    let server = m.mesh.pod(sidecar(
        "server",
        "b",
        &[("app", "server"), TLS_MODE],
        "server",
    ));
    let services = service(
        "server",
        "b",
        vip,
        &[APP_PORT],
        &server,
        "app: server, security.istio.io/tlsMode: istio",
    );
    World {
        m,
        config,
        server,
        services,
    }
}

impl World {
    fn client(&self, name: &str, ns: &str, sa: &str) -> Pod {
        self.m.mesh.pod(sidecar(name, ns, &[("app", name)], sa))
    }

    fn write(&self, policies: &[String]) {
        let mut docs = vec![self.services.clone()];
        docs.extend_from_slice(policies);
        self.config.write("mesh.yaml", &documents(&docs));
    }
}

#[test]
fn allow_by_principal_and_deny_by_namespace() {
    let w = world();
    let _app = w.server.serve_http(APP_PORT, "server");
    let client = w.client("client", "a", "client");
    let other = w.client("other", "a", "other");
    let evil = w.client("evil", "evil", "client");
    w.write(&[]);
    wait_answer(&client, HOST, APP_PORT, &[], "server", &w.server);
    w.write(&[
        policy(
            "b",
            "allow-client",
            "{rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/client, cluster.local/ns/evil/sa/client]}}]}]}",
        ),
        policy("b", "deny-evil", "{action: DENY, rules: [{from: [{source: {namespaces: [evil]}}]}]}"),
    ]);
    expect(&other, &w.server, "GET", "/", &[], 403);
    expect(&evil, &w.server, "GET", "/", &[], 403);
    expect(&client, &w.server, "GET", "/", &[], 200);
    // What applies to the server, in evaluation order (istiod's /debug/authorizationz).
    let id = w.server.node_id();
    let answer =
        w.m.ca
            .axon
            .debug_json(&format!("/debug/authorizationz?proxyID={id}"));
    let listed: Vec<String> = answer["policies"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            format!(
                "{} {}",
                p["action"].as_str().unwrap_or(""),
                p["policy"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        listed,
        ["DENY b/deny-evil", "ALLOW b/allow-client"],
        "{answer}"
    );
}

#[test]
fn operations_and_conditions() {
    let w = world();
    let _app = w.server.serve_http(APP_PORT, "server");
    let client = w.client("client", "a", "client");
    let blocked = w.client("blocked", "a", "client");
    w.write(&[]);
    wait_answer(&client, HOST, APP_PORT, &[], "server", &w.server);
    let allow = format!(
        "{{rules: [{{to: [{{operation: {{methods: [GET], paths: ['/api/*'], ports: ['{APP_PORT}'], hosts: ['server.b.svc*']}}}}], when: [{{key: 'request.headers[x-token]', values: [secret]}}]}}]}}"
    );
    let deny_ip = format!(
        "{{action: DENY, rules: [{{when: [{{key: source.ip, values: [{}]}}]}}]}}",
        blocked.ip()
    );
    w.write(&[policy("b", "api", &allow), policy("b", "by-ip", &deny_ip)]);
    let token = [("x-token", "secret")];
    expect(&client, &w.server, "GET", "/api/items", &[], 403);
    expect(&client, &w.server, "GET", "/api/items", &token, 200);
    expect(&client, &w.server, "POST", "/api/items", &token, 403);
    expect(&client, &w.server, "GET", "/other", &token, 403);
    expect(&blocked, &w.server, "GET", "/api/items", &token, 403);
}

#[test]
fn an_allow_of_nothing_denies_all_and_a_mesh_deny_beside_a_namespace_allow() {
    let w = world();
    let _app = w.server.serve_http(APP_PORT, "server");
    let client = w.client("client", "a", "client");
    w.write(&[]);
    wait_answer(&client, HOST, APP_PORT, &[], "server", &w.server);
    w.write(&[policy("b", "nothing", "{}")]);
    expect(&client, &w.server, "GET", "/", &[], 403);
    w.write(&[
        policy(
            "istio-system",
            "no-admin",
            "{action: DENY, rules: [{to: [{operation: {paths: [/admin]}}]}]}",
        ),
        policy("b", "all", "{rules: [{}]}"),
    ]);
    expect(&client, &w.server, "GET", "/", &[], 200);
    expect(&client, &w.server, "GET", "/admin", &[], 403);
}

#[test]
fn a_tcp_port_closes_what_its_policy_refuses() {
    let w = world();
    let client = w.client("client", "a", "client");
    let _tcp = w.server.serve_tcp(9000, "server-tcp");
    let vip = Ipv4Addr::new(10, 96, 8, 2);
    w.m.mesh.service("db", "b", vip);
    let db = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: db, namespace: b}}\nspec:\n  hosts: [db.b.svc.cluster.local]\n  addresses: [{vip}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 9000, name: tcp, protocol: TCP}}]\n  endpoints: [{{address: {}, labels: {{app: server, security.istio.io/tlsMode: istio}}, serviceAccount: server}}]\n",
        w.server.ip()
    );
    let allow = |principal: &str| {
        policy(
            "b",
            "tcp",
            &format!(
                "{{rules: [{{from: [{{source: {{principals: [{principal}]}}}}], to: [{{operation: {{ports: ['9000']}}}}]}}]}}"
            ),
        )
    };
    w.write(&[db.clone(), allow("cluster.local/ns/a/sa/client")]);
    let host = "db.b.svc.cluster.local";
    assert!(
        wait_until(CONVERGE, || client
            .tcp_banner(host, 9000)
            .starts_with("server-tcp")),
        "the allowed client never got through\n{}\n{}",
        client.describe(),
        w.server.describe()
    );
    w.write(&[db, allow("cluster.local/ns/a/sa/someone-else")]);
    let closed = wait_until(CONVERGE, || client.tcp_banner(host, 9000).is_empty());
    assert!(closed, "still served\n{}", w.server.describe());
    assert!(
        stat(&w.server, "tcp.rbac.denied") >= 1,
        "{}",
        w.server.describe()
    );
}

#[test]
fn dry_run_and_audit_let_traffic_pass_and_custom_without_a_provider_denies() {
    let w = world();
    let _app = w.server.serve_http(APP_PORT, "server");
    let client = w.client("client", "a", "client");
    w.write(&[]);
    wait_answer(&client, HOST, APP_PORT, &[], "server", &w.server);
    let dry = "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: try-deny, namespace: b, annotations: {istio.io/dry-run: \"true\"}}\nspec: {action: DENY, rules: [{}]}\n".to_string();
    w.write(&[
        dry,
        policy("b", "audit", "{action: AUDIT, rules: [{}]}"),
        policy(
            "b",
            "ext",
            "{action: CUSTOM, provider: {name: my-ext-authz}, rules: [{to: [{operation: {paths: [/admin]}}]}]}",
        ),
    ]);
    expect(&client, &w.server, "GET", "/admin", &[], 403);
    expect(&client, &w.server, "GET", "/", &[], 200);
    let shadow = wait_until(CONVERGE, || {
        w.server
            .envoy()
            .stats()
            .iter()
            .any(|(k, v)| k.ends_with("rbac.istio_dry_run_deny_.shadow_denied") && *v >= 1)
    });
    let rbac: Vec<String> = w
        .server
        .envoy()
        .stats()
        .into_iter()
        .filter(|(k, _)| k.contains("rbac"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    assert!(shadow, "no shadow decision: {rbac:?}");
    // AUDIT: a LOG filter that lets every request through (it only marks it for the access
    // log), as istiod's; the request above passed it.
    let dump = w.server.envoy().config_dump().to_string();
    assert!(
        dump.contains("ns[b]-policy[audit]-rule[0]"),
        "no AUDIT filter: {dump}"
    );
}

/// An external authorizer's HTTP check service: 200 when the request it is asked about has
/// `x-ext-authz: allow`, else 403; counts the checks.
fn authorizer(pod: &Pod, port: u16) -> (crate::support::accept::Acceptor, Arc<AtomicU64>) {
    let checks = Arc::new(AtomicU64::new(0));
    let counted = checks.clone();
    let acceptor = pod.serve_with(port, "ext-authz", move |mut conn| {
        let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(10)));
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match conn.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                _ => return,
            }
        }
        counted.fetch_add(1, Ordering::SeqCst);
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let status = if text.contains("\r\nx-ext-authz: allow\r\n") {
            "200 OK"
        } else {
            "403 Forbidden"
        };
        let _ = conn.write_all(
            format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .as_bytes(),
        );
    });
    (acceptor, checks)
}

#[test]
fn custom_asks_the_external_authorizer_only_for_what_it_selects() {
    let mesh_config = "extensionProviders:\n- name: ext-authz\n  envoyExtAuthzHttp:\n    service: ext-authz.ext.svc.cluster.local\n    port: 8000\n    includeRequestHeadersInCheck: [x-ext-authz]\n";
    let w = world_with(Some(mesh_config));
    let _app = w.server.serve_http(APP_PORT, "server");
    let client = w.client("client", "a", "client");
    let ext =
        w.m.mesh
            .pod(PodSpec::plain("ext-authz", "ext", &[("app", "ext-authz")]));
    let (_authorizer, checks) = authorizer(&ext, 8000);
    let ext_service = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: ext-authz, namespace: ext}}\nspec:\n  hosts: [ext-authz.ext.svc.cluster.local]\n  addresses: [10.96.8.3]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{{number: 8000, name: http, protocol: HTTP}}]\n  endpoints: [{{address: {}}}]\n",
        ext.ip()
    );
    w.write(std::slice::from_ref(&ext_service));
    wait_answer(&client, HOST, APP_PORT, &[], "server", &w.server);
    w.write(&[
        ext_service,
        policy(
            "b",
            "ext",
            "{action: CUSTOM, provider: {name: ext-authz}, rules: [{to: [{operation: {paths: [/admin]}}]}]}",
        ),
    ]);
    let allow = [("x-ext-authz", "allow")];
    let mut last = (0, String::new());
    let denied = wait_until(CONVERGE, || {
        last = client.http_get(HOST, APP_PORT, "/admin", &[]);
        last.0 == 403
    });
    assert!(
        denied,
        "/admin without the header: {last:?}\n{}",
        w.server.describe()
    );
    assert!(
        checks.load(Ordering::SeqCst) >= 1,
        "the authorizer was not asked"
    );
    expect(&client, &w.server, "GET", "/admin", &allow, 200);
    // A path the policy does not select is not checked.
    let before = checks.load(Ordering::SeqCst);
    expect(&client, &w.server, "GET", "/", &[], 200);
    assert_eq!(
        checks.load(Ordering::SeqCst),
        before,
        "the authorizer was asked about /"
    );
}
