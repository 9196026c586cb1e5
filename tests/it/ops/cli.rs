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
    // The line of the offending field (`ports`), not the document's first.
    assert!(
        report.contains(&format!(
            "{bad_path}: document 2 (line 13): spec.ports[0].number"
        )),
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

/// A root VirtualService delegating to one that does not exist, and two mesh VirtualServices
/// for one host: problems only the built push context shows.
const VS_PROBLEMS: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/gw]
  http:
  - name: to-missing
    delegate: {name: missing, namespace: shop}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: first, namespace: shop, creationTimestamp: '2024-01-01T00:00:00Z'}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
";

const VS_SECOND: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: second, namespace: shop, creationTimestamp: '2024-06-01T00:00:00Z'}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
";

#[test]
fn validate_warns_of_virtual_service_problems_with_their_file_and_fails_them_with_strict() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.yaml"), VS_PROBLEMS).unwrap();
    std::fs::write(dir.path().join("b.yaml"), VS_SECOND).unwrap();
    let out = axon(&["validate", dir.path().to_str().unwrap()]);
    let report = text(&out);
    assert!(out.status.success(), "a warning, not an error: {report}");
    let a = dir.path().join("a.yaml");
    let b = dir.path().join("b.yaml");
    assert!(
        report.contains(&format!(
            "{}: document 1 (line 1): warning: VirtualService/shop/root: delegate VirtualService/shop/missing not found: route \"to-missing\" dropped",
            a.display()
        )),
        "{report}"
    );
    // The conflict points at the VirtualService a sidecar does not take (the newer).
    assert!(
        report.contains(&format!(
            "{}: document 1 (line 1): warning: host reviews.shop.svc.cluster.local is routed by VirtualService/shop/first, VirtualService/shop/second for sidecars",
            b.display()
        )),
        "{report}"
    );
    assert!(report.contains("2 VirtualService problems"), "{report}");
    let out = axon(&["validate", "--strict", dir.path().to_str().unwrap()]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "--strict fails: {report}");
    assert!(report.contains("(--strict: that fails)"), "{report}");

    // Without them, --strict passes.
    std::fs::remove_file(&b).unwrap();
    std::fs::write(&a, VS_PROBLEMS.split("---").nth(1).unwrap()).unwrap();
    let out = axon(&["validate", "--strict", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
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

#[test]
fn validate_names_unknown_fields_and_kinds_and_lists_what_is_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let typos = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: r, namespace: demo}
spec:
  hosts: [a.example.com]
  http:
  - match:
    - gateway: [gw]
    route:
    - destination: {host: a.example.com}
---
apiVersion: networking.istio.io/v1
kind: VirtualSevice
metadata: {name: s, namespace: demo}
spec: {}
";
    let not_applied = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: t, namespace: demo}
spec:
  hosts: [a.example.com]
  http:
  - route:
    - destination: {host: a.example.com}
  tcp:
  - match: [{sourceSubnet: 10.0.0.0/8}]
    route: [{destination: {host: a.example.com}}]
";
    std::fs::write(dir.path().join("typos.yaml"), typos).unwrap();
    let out = axon(&["validate", dir.path().join("typos.yaml").to_str().unwrap()]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("document 1 (line 8): spec.http[0].match[0].gateway: unknown field `gateway` of HTTPMatchRequest; did you mean `gateways`?"),
        "{report}"
    );
    assert!(
        report.contains("document 2 (line 12): kind VirtualSevice is not a kind of networking.istio.io; did you mean VirtualService?"),
        "{report}"
    );

    let file = dir.path().join("not-applied.yaml");
    std::fs::write(&file, not_applied).unwrap();
    let out = axon(&["validate", file.to_str().unwrap()]);
    let report = text(&out);
    assert!(
        out.status.success(),
        "not applied is not an error: {report}"
    );
    assert!(
        report.contains(
            "document 1 (line 10): spec.tcp[0].match[0].sourceSubnet: accepted but not applied by axon"
        ),
        "{report}"
    );
    assert!(
        report.contains("1 fields accepted but not applied"),
        "{report}"
    );
    let out = axon(&["validate", "--strict", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "--strict fails: {}", text(&out));
}

#[test]
fn validate_reads_kubernetes_objects_and_lists_and_strict_accepts_them() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = "apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: shop, labels: {mesh: 'on'}}
- apiVersion: v1
  kind: Service
  metadata: {name: web, namespace: shop}
  spec:
    clusterIP: 10.96.0.20
    ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: shop, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: [10.1.0.1], targetRef: {kind: Pod, name: web-1}}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, namespace: shop, labels: {app: web}}
spec: {serviceAccountName: web, containers: [{name: app, image: app}]}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: web, namespace: shop}
";
    std::fs::write(dir.path().join("cluster.yaml"), cluster).unwrap();
    let routes = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: shop}
spec:
  hosts: [web.shop.svc.cluster.local]
  http: [{route: [{destination: {host: web.shop.svc.cluster.local}}]}]
";
    std::fs::write(dir.path().join("routes.yaml"), routes).unwrap();
    let out = axon(&["validate", "--strict", dir.path().to_str().unwrap()]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("1 configs, 4 Kubernetes objects, 0 errors"),
        "{report}"
    );
    assert!(
        report.contains("ServiceAccount (v1) is not served by axon, skipped"),
        "{report}"
    );

    let bad = cluster.replace("port: 8080}]\nendpoints", "port: eighty}]\nendpoints");
    std::fs::write(dir.path().join("cluster.yaml"), bad).unwrap();
    let out = axon(&["validate", dir.path().to_str().unwrap()]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let path = dir.path().join("cluster.yaml");
    assert!(
        report.contains(&format!(
            "{}: document 2 (line 18): EndpointSlice: ports[0].port: invalid type",
            path.display()
        )),
        "{report}"
    );
}

#[test]
fn validate_warns_of_istio_and_gateway_api_kinds_not_applied_and_strict_fails_them() {
    let dir = tempfile::tempdir().unwrap();
    let skipped = "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: stats, namespace: foo}\nspec: {url: oci://example/stats:1}\n---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: UDPRoute\nmetadata: {name: r, namespace: foo}\nspec: {}\n---\napiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: f, namespace: foo}\nspec: {}\n";
    std::fs::write(dir.path().join("policy.yaml"), skipped).unwrap();
    let path = dir.path().to_str().unwrap();
    // Without --strict: warned of, and the file is still valid.
    let out = axon(&["validate", path]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    for kind in ["WasmPlugin", "UDPRoute", "EnvoyFilter"] {
        assert!(
            report.contains(&format!("warning: {kind} ("))
                && report.contains("not applied by axon"),
            "{kind}: {report}"
        );
    }
    assert!(
        report.contains("3 documents of kinds not applied"),
        "{report}"
    );
    // With --strict: a meaning dropped fails, as a field not applied does.
    let out = axon(&["validate", "--strict", path]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // A Kubernetes kind of no mesh meaning is only noted, even with --strict.
    std::fs::write(
        dir.path().join("policy.yaml"),
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n",
    )
    .unwrap();
    let out = axon(&["validate", "--strict", path]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn validate_applies_request_authentication_and_counts_its_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let docs = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: foo}\nspec:\n  hosts: [a.foo.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1, labels: {app: a}}, {address: 10.0.0.2, labels: {app: a}}, {address: 10.0.0.3, labels: {app: b}}]\n---\napiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: jwt, namespace: foo}\nspec:\n  selector: {matchLabels: {app: a}}\n  jwtRules: [{issuer: 'https://issuer.example', jwksUri: 'https://issuer.example/keys'}]\n";
    std::fs::write(dir.path().join("jwt.yaml"), docs).unwrap();
    let path = dir.path().to_str().unwrap();
    // Applied: nothing is reported as not applied, --strict passes.
    let out = axon(&["validate", "--strict", path]);
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    assert!(
        report.contains("note: RequestAuthentication/foo/jwt applies to 2 workloads"),
        "{report}"
    );
    // istiod's validation: an issuer or a jwksUri, a jwksUri of http or https.
    std::fs::write(
        dir.path().join("jwt.yaml"),
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: jwt, namespace: foo}\nspec:\n  jwtRules: [{jwksUri: 'ftp://issuer.example/keys'}]\n",
    )
    .unwrap();
    let out = axon(&["validate", path]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert!(
        report.contains("URI scheme \"ftp\" is not supported"),
        "{report}"
    );
}
