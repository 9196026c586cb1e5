//! TLSRoutes: `TLSRouteSimpleSameNamespace` (a Passthrough listener for `*.example.com`: the
//! connection for `abc.example.com` reaches the TLS backend with its SNI, another name
//! reaches nothing) and `TLSRouteTerminateSimpleSameNamespace` (a Terminate listener for
//! `tls.example.com`: the gateway ends TLS with the listener's certificate and proxies the
//! bytes to the backend's plaintext port).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use super::Conformance;
use super::https::tls_secret;
use crate::support::pki::{Pki, client_config};
use crate::support::tcp_echo::tcp_echo;
use crate::support::tls_upstream::TlsEchoUpstream;
use crate::support::wait_until;

/// Over TLS to 127.0.0.1:`port` with SNI `host` (the test CA trusted): sends `hi`, returns
/// what came back, or the error.
fn tls_call(pki: &Pki, host: &str, port: u16) -> String {
    let config = Arc::new(client_config(&pki.path("ca.crt"), b"http/1.1"));
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
    let Ok(conn) = rustls::ClientConnection::new(config, name) else {
        return "error: client".into();
    };
    let Ok(tcp) = TcpStream::connect(("127.0.0.1", port)) else {
        return "error: connect".into();
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    if let Err(e) = tls.write_all(b"hi") {
        return format!("error: {e}");
    }
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        Err(e) if !out.is_empty() => format!("{} (then {e})", String::from_utf8_lossy(&out)),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn tlsroute_passthrough_by_sni() {
    let pki = Pki::new();
    pki.issue("abc", "DNS:abc.example.com,DNS:xyz.example.com");
    let backend = TlsEchoUpstream::start(
        "tls-backend",
        &pki.path("abc.crt"),
        &pki.path("abc.key"),
        None,
    );
    let Some(world) = Conformance::start_full(
        "tlsroute-simple-same-namespace.yaml",
        "gateway-tlsroute",
        Vec::new(),
        &[("tcp-backend", "echo-tcp-tls", backend.port())],
    ) else {
        return;
    };
    let port = world.ports[&443];
    let url = |host: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "5", "--cacert"])
            .arg(pki.path("ca.crt"))
            .args(["--resolve", &format!("{host}:{port}:127.0.0.1")])
            .arg(format!("https://{host}:{port}/"))
            .output()
            .expect("curl must be installed");
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let mut last = String::new();
    assert!(
        wait_until(super::CONVERGE, || {
            last = url("abc.example.com");
            last.contains("tls-backend")
        }),
        "abc.example.com never reached the TLS backend: {last}\n{}",
        crate::support::scenario::describe_envoy(&world.envoy)
    );
    // The backend saw the client's SNI: the gateway passed TLS through.
    assert!(
        backend
            .handshakes()
            .iter()
            .any(|h| h.sni.as_deref() == Some("abc.example.com"))
    );
    // Another name of the listener's: no route, no connection.
    let other = url("xyz.example.com");
    assert!(!other.contains("tls-backend"), "{other}");
}

#[test]
fn tlsroute_terminated_at_the_gateway() {
    let pki = Pki::new();
    let secret = tls_secret(
        &pki,
        "gateway-conformance-infra",
        "tls-terminate-checks-certificate",
        "DNS:tls.example.com,DNS:other.example.com",
    );
    let plain = tcp_echo("tcp-plain");
    let Some(world) = Conformance::start_full(
        "tlsroute-terminate-simple-same-namespace.yaml",
        "gateway-tlsroute-terminate",
        vec![secret],
        &[("tcp-backend", "echo-tcp-plain", plain)],
    ) else {
        return;
    };
    let port = world.ports[&8443];
    let mut last = String::new();
    assert!(
        wait_until(super::CONVERGE, || {
            last = tls_call(&pki, "tls.example.com", port);
            last.starts_with("tcp-plain:hi")
        }),
        "tls.example.com never reached the plaintext backend: {last}\n{}",
        crate::support::scenario::describe_envoy(&world.envoy)
    );
    // Another SNI is not the listener's: no chain for it.
    let other = tls_call(&pki, "other.example.com", port);
    assert!(!other.starts_with("tcp-plain"), "{other}");
}
