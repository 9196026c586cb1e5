use super::*;
use crate::fixtures::{context, proxy};

const GW_HEAD: &str = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: NAME, namespace: istio-system}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n";

fn gateway(name: &str, servers: &[&str]) -> String {
    let mut yaml = GW_HEAD.replace("NAME", name);
    for s in servers {
        yaml.push_str(&format!("  - {s}\n"));
    }
    yaml
}

/// Per server port `BIND_PORT:PROTOCOL` and its servers' port names; the route names; the
/// skipped servers.
type Merged = (Vec<(String, Vec<String>)>, Vec<String>, Vec<String>);

fn merged_names(yaml: &str) -> Merged {
    let ctx = context(yaml);
    let gw = proxy(
        "router",
        "10.0.0.9",
        "istio-system",
        &[("istio", "ingressgateway")],
    );
    let merged = merge(&ctx, &gw);
    let ports = merged
        .ports
        .iter()
        .map(|m| {
            (
                format!(
                    "{}_{}:{}",
                    m.port.bind_address(),
                    m.port.number,
                    m.port.protocol
                ),
                m.servers
                    .iter()
                    .map(|s| s.server.port.as_ref().unwrap().name.clone())
                    .collect(),
            )
        })
        .collect();
    let routes = merged.by_route_name.keys().cloned().collect();
    (ports, routes, merged.skipped.clone())
}

const HTTPS_A: &str = "{port: {number: 443, name: https-a, protocol: HTTPS}, hosts: [a.example.com], tls: {mode: SIMPLE, credentialName: a}}";
const HTTPS_B: &str = "{port: {number: 443, name: https-b, protocol: HTTPS}, hosts: [b.example.com], tls: {mode: SIMPLE, credentialName: b}}";

#[test]
fn https_servers_share_a_port_by_sni_with_a_route_name_each() {
    let (ports, routes, skipped) = merged_names(&gateway("gw", &[HTTPS_A, HTTPS_B]));
    assert_eq!(
        ports,
        [(
            "0.0.0.0_443:HTTPS".to_string(),
            vec!["https-a".to_string(), "https-b".to_string()]
        )]
    );
    assert_eq!(
        routes,
        [
            "https.443.https-a.gw.istio-system",
            "https.443.https-b.gw.istio-system"
        ]
    );
    assert!(skipped.is_empty(), "{skipped:?}");
}

#[test]
fn http_servers_merge_and_plaintext_conflicts_with_tls_on_one_port() {
    let yaml = gateway(
        "gw",
        &[
            "{port: {number: 80, name: http, protocol: HTTP}, hosts: [a.example.com]}",
            "{port: {number: 80, name: http2, protocol: HTTP2}, hosts: [b.example.com]}",
            "{port: {number: 80, name: tcp, protocol: TCP}, hosts: ['*']}",
            "{port: {number: 8443, name: tls, protocol: TLS}, hosts: [c.example.com], tls: {mode: PASSTHROUGH}}",
            "{port: {number: 8443, name: http-8443, protocol: HTTP}, hosts: [c.example.com]}",
        ],
    );
    let (ports, routes, skipped) = merged_names(&yaml);
    assert_eq!(
        ports,
        [
            (
                "0.0.0.0_80:HTTP".to_string(),
                vec!["http".to_string(), "http2".to_string()]
            ),
            ("0.0.0.0_8443:TLS".to_string(), vec!["tls".to_string()]),
            (
                "0.0.0.0_8443:HTTP".to_string(),
                vec!["http-8443".to_string()]
            ),
        ]
    );
    assert_eq!(routes, ["http.80", "http.8443"]);
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].contains("\"tcp\""), "{skipped:?}");
}

#[test]
fn a_host_on_two_tls_servers_of_one_port_is_served_once() {
    let other = HTTPS_B.replace("b.example.com", "a.example.com");
    let (ports, _, skipped) = merged_names(&gateway("gw", &[HTTPS_A, &other]));
    assert_eq!(ports[0].1, ["https-a"]);
    assert!(skipped[0].contains("duplicate host names"), "{skipped:?}");
}

#[test]
fn kinds_and_sni_hosts() {
    let yaml = gateway(
        "gw",
        &[
            "{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*'], tls: {httpsRedirect: true}}",
            HTTPS_A,
            "{port: {number: 444, name: pass, protocol: TLS}, hosts: [ns/z.example.com, y.example.com], tls: {mode: PASSTHROUGH}}",
            "{port: {number: 445, name: auto, protocol: TLS}, hosts: ['*.local'], tls: {mode: AUTO_PASSTHROUGH}}",
            "{port: {number: 446, name: tls-term, protocol: TLS}, hosts: [t.example.com], tls: {mode: SIMPLE, credentialName: t}}",
            "{port: {number: 447, name: tcp, protocol: TCP}, hosts: ['*']}",
            "{port: {number: 448, name: mongo, protocol: MONGO}, hosts: ['*']}",
        ],
    );
    let ctx = context(&yaml);
    let gw = proxy(
        "router",
        "10.0.0.9",
        "istio-system",
        &[("istio", "ingressgateway")],
    );
    let merged = merge(&ctx, &gw);
    let kinds: Vec<ServerKind> = merged.servers().map(GatewayServer::kind).collect();
    use ServerKind::*;
    assert_eq!(
        kinds,
        [
            Http,
            HttpsTerminated,
            Passthrough,
            AutoPassthrough,
            TlsTerminated,
            Tcp,
            Tcp
        ]
    );
    let first = merged.servers().next().unwrap();
    assert!(first.https_redirect());
    let pass = merged.servers().nth(2).unwrap();
    assert_eq!(pass.sni_hosts, ["y.example.com", "z.example.com"]);
    assert!(pass.route_name.is_empty());
}

#[test]
fn a_server_port_maps_to_the_gateway_workloads_port() {
    // The gateway's own Service (a ServiceEntry with an endpoint at the gateway's address)
    // maps 80 to 8080: the listener is on 8080 and its routes `http.8080`; an HTTPS route name
    // keeps the server's port.
    let service = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: ingress, namespace: istio-system}\nspec:\n  hosts: [ingress.istio-system.svc.cluster.local]\n  ports: [{number: 80, name: http, protocol: HTTP}, {number: 443, name: https, protocol: HTTPS}]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  endpoints: [{address: 10.0.0.9, ports: {http: 8080, https: 8443}}]\n";
    let yaml = format!(
        "{service}---\n{}",
        gateway(
            "gw",
            &[
                "{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}",
                HTTPS_A
            ]
        )
    );
    let (ports, routes, _) = merged_names(&yaml);
    assert_eq!(ports[0].0, "0.0.0.0_8080:HTTP");
    assert_eq!(ports[1].0, "0.0.0.0_8443:HTTPS");
    assert_eq!(routes, ["http.8080", "https.443.https-a.gw.istio-system"]);
}

#[test]
fn a_bind_names_its_own_listener_and_route() {
    let yaml = gateway(
        "gw",
        &[
            "{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}",
            "{port: {number: 80, name: http-local, protocol: HTTP}, bind: 127.0.0.2, hosts: ['*']}",
        ],
    );
    let (ports, routes, skipped) = merged_names(&yaml);
    assert_eq!(ports[1].0, "127.0.0.2_80:HTTP");
    assert_eq!(routes, ["http.80", "http.80.127.0.0.2"]);
    assert!(skipped.is_empty());
}
