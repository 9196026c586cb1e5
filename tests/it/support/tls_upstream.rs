//! Upstream TLS for tests: [`TlsEchoUpstream`], an HTTPS/1.1 server (rustls) on 127.0.0.1,
//! or on a listener of the caller's (a mesh pod's, `Pod::serve_tls`), that records each
//! handshake it completes (the SNI the client sent, whether it showed a certificate) and
//! answers 200 with its name. With a client CA it requires a client certificate signed by
//! it. Its certificates come from `support/pki.rs`. It stops serving on drop.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use crate::support::accept::{Acceptor, poke_at};

/// One completed handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handshake {
    pub sni: Option<String>,
    pub client_certificate: bool,
}

pub struct TlsEchoUpstream {
    port: u16,
    seen: Arc<Mutex<Vec<Handshake>>>,
    _acceptor: Acceptor,
}

impl TlsEchoUpstream {
    /// Serves `cert`/`key` on a free port of 127.0.0.1; with `client_ca`, only clients with
    /// a certificate it signed.
    pub fn start(name: &str, cert: &Path, key: &Path, client_ca: Option<&Path>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let poke = poke_at(listener.local_addr().unwrap());
        Self::serve(listener, name, cert, key, client_ca, poke)
    }

    /// Like [`TlsEchoUpstream::start`], on `listener`; `poke` connects to it to end the
    /// accept loop on drop.
    pub fn serve(
        listener: TcpListener,
        name: &str,
        cert: &Path,
        key: &Path,
        client_ca: Option<&Path>,
        poke: impl Fn() + Send + Sync + 'static,
    ) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let key = PrivateKeyDer::from_pem_file(key).unwrap();
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let config = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let roots = super::pki::roots(ca);
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .unwrap();
                builder.with_client_cert_verifier(verifier)
            }
        }
        .with_single_cert(certs, key)
        .unwrap();
        let config = Arc::new(config);
        let port = listener.local_addr().unwrap().port();
        let seen: Arc<Mutex<Vec<Handshake>>> = Arc::default();
        let (seen2, name2) = (seen.clone(), name.to_string());
        let acceptor = Acceptor::spawn(&format!("tls-{name}"), listener, poke, move |conn| {
            serve(conn, config.clone(), &seen2, &name2)
        });
        TlsEchoUpstream {
            port,
            seen,
            _acceptor: acceptor,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every handshake completed so far.
    pub fn handshakes(&self) -> Vec<Handshake> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    seen: &Mutex<Vec<Handshake>>,
    name: &str,
) {
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return;
        }
    }
    seen.lock().unwrap().push(Handshake {
        sni: tls.conn.server_name().map(str::to_string),
        client_certificate: tls.conn.peer_certificates().is_some_and(|c| !c.is_empty()),
    });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = tls.read(&mut chunk) {
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nx-upstream: {name}\r\ncontent-length: {}\r\n\r\n{name}",
                name.len()
            );
            if tls.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }
}
