//! A client of axon's CA (`istio.v1.auth.IstioCertificateService/CreateCertificate`) as
//! pilot-agent calls it: raw HTTP/2 over TLS (rustls, ALPN h2), one gRPC message, with a
//! client certificate or a bearer token or neither; and the workload side: a key and a CSR
//! made with openssl ([`Csr::new`]), the answer checked with `openssl verify`.
//!
//! - [`CaCall`]: who calls and how (`trust`: the CA file the server's certificate must chain
//!   to, `server_name`, `client`: certificate and key files, `token`);
//!   [`CaCall::create_certificate`] returns the `cert_chain` or the gRPC code and message.
//! - [`served_certificate`]: the certificate chain axon presents on its TLS port.

#![allow(dead_code)] // each test file uses some of it

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use axon_transport::{CA_PATH, IstioCertificateRequest, IstioCertificateResponse};
use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// gRPC codes the tests look for.
pub const UNAUTHENTICATED: &str = "16";
pub const PERMISSION_DENIED: &str = "7";
pub const INVALID_ARGUMENT: &str = "3";
pub const UNIMPLEMENTED: &str = "12";
pub const RESOURCE_EXHAUSTED: &str = "8";
/// Not a gRPC code: the TLS handshake failed (e.g. the serving certificate does not chain to
/// [`CaCall::trust`]).
pub const HANDSHAKE: &str = "handshake";

/// One call's credentials.
#[derive(Clone, Debug)]
pub struct CaCall {
    /// The CA file (PEM) axon's serving certificate must chain to.
    pub trust: PathBuf,
    /// The name the serving certificate must carry (SNI).
    pub server_name: String,
    /// A client certificate (the chain) and its key.
    pub client: Option<(PathBuf, PathBuf)>,
    /// `authorization: Bearer TOKEN`.
    pub token: Option<String>,
}

/// A refused call: its `grpc-status` and `grpc-message`.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: String,
    pub message: String,
}

impl CaCall {
    pub fn new(trust: &Path, server_name: &str) -> CaCall {
        CaCall {
            trust: trust.to_path_buf(),
            server_name: server_name.to_string(),
            client: None,
            token: None,
        }
    }

    pub fn with_token(mut self, token: &str) -> CaCall {
        self.token = Some(token.to_string());
        self
    }

    pub fn with_client(mut self, cert: &Path, key: &Path) -> CaCall {
        self.client = Some((cert.to_path_buf(), key.to_path_buf()));
        self
    }

    /// `CreateCertificate` on `addr` (axon's TLS port) for `csr`, asking `validity` seconds;
    /// a failed handshake is refused with [`HANDSHAKE`].
    pub fn create_certificate(
        &self,
        addr: SocketAddr,
        csr: &str,
        validity: i64,
    ) -> Result<Vec<String>, Refused> {
        let request = IstioCertificateRequest {
            csr: csr.to_string(),
            validity_duration: validity,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(async {
                tokio::time::timeout(Duration::from_secs(20), self.call(addr, request)).await
            })
            .expect("the CA answered within 20 s")
    }

    fn tls_config(&self) -> rustls::ClientConfig {
        let roots = super::pki::roots(&self.trust);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match &self.client {
            Some((cert, key)) => {
                let certs: Vec<_> = CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let key = PrivateKeyDer::from_pem_file(key).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        config
    }

    async fn call(
        &self,
        addr: SocketAddr,
        request: IstioCertificateRequest,
    ) -> Result<Vec<String>, Refused> {
        let connector = tokio_rustls::TlsConnector::from(Arc::new(self.tls_config()));
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = ServerName::try_from(self.server_name.clone()).unwrap();
        let tls = match connector.connect(name, tcp).await {
            Ok(tls) => tls,
            Err(e) => {
                return Err(Refused {
                    code: HANDSHAKE.to_string(),
                    message: e.to_string(),
                });
            }
        };
        let (send, conn) = h2::client::handshake(tls).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut send = send.ready().await.expect("h2 ready");
        let mut builder = http::Request::builder()
            .method("POST")
            .uri(format!("https://{}{CA_PATH}", self.server_name))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        let (response, mut body) = send
            .send_request(builder.body(()).unwrap(), false)
            .expect("send request");
        let mut frame = BytesMut::new();
        frame.put_u8(0);
        frame.put_u32(request.encoded_len() as u32);
        request.encode(&mut frame).unwrap();
        body.send_data(frame.freeze(), true)
            .expect("send the request");
        let response = response.await.expect("response headers");
        if let Some(code) = response.headers().get("grpc-status") {
            return Err(refused(code, response.headers().get("grpc-message")));
        }
        let mut body = response.into_body();
        let mut data = BytesMut::new();
        while let Some(chunk) = body.data().await {
            let chunk: Bytes = chunk.expect("response body");
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
        let code = trailers.get("grpc-status").expect("grpc-status trailer");
        if code != "0" {
            return Err(refused(code, trailers.get("grpc-message")));
        }
        assert!(data.len() >= 5, "no message in the answer");
        let response = IstioCertificateResponse::decode(&data[5..]).expect("a response");
        Ok(response.cert_chain)
    }
}

fn refused(code: &http::HeaderValue, message: Option<&http::HeaderValue>) -> Refused {
    Refused {
        code: code.to_str().unwrap().to_string(),
        message: message
            .map(|m| percent_decode(m.to_str().unwrap()))
            .unwrap_or_default(),
    }
}

/// gRPC's percent-encoding of `grpc-message`, undone.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn openssl(args: &[&str], dir: &Path) -> String {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl must be installed");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A workload's key and CSR (`NAME.key`, `NAME.csr` in `dir`), made with openssl.
pub struct Csr {
    pub key: PathBuf,
    pub pem: String,
}

impl Csr {
    /// A P-256 key and a CSR asking for `sans` (openssl's `subjectAltName` syntax, e.g.
    /// `URI:spiffe://cluster.local/ns/other/sa/x,DNS:evil.example.com`) and a subject.
    pub fn new(dir: &Path, name: &str, sans: &str) -> Csr {
        let (key, csr) = (format!("{name}.key"), format!("{name}.csr"));
        openssl(
            &[
                "req",
                "-new",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                "/O=evil/CN=evil",
                "-addext",
                &format!("subjectAltName={sans}"),
            ],
            dir,
        );
        Csr {
            key: dir.join(key),
            pem: std::fs::read_to_string(dir.join(csr)).unwrap(),
        }
    }
}

/// Writes `chain` (a `cert_chain`) to `dir`: `NAME.crt` the leaf and the intermediates (what
/// a proxy presents), `NAME-leaf.crt`, `NAME-chain.crt` (all but the leaf and the root),
/// `NAME-root.crt` the last.
pub fn write_chain(dir: &Path, name: &str, chain: &[String]) -> PathBuf {
    let (leaf, rest) = chain.split_first().expect("a leaf");
    let (root, middle) = rest.split_last().expect("a root");
    std::fs::write(dir.join(format!("{name}-leaf.crt")), leaf).unwrap();
    std::fs::write(dir.join(format!("{name}-chain.crt")), middle.concat()).unwrap();
    std::fs::write(dir.join(format!("{name}-root.crt")), root).unwrap();
    let presented = format!("{leaf}{}", middle.concat());
    std::fs::write(dir.join(format!("{name}.crt")), presented).unwrap();
    dir.join(format!("{name}.crt"))
}

/// `openssl verify -CAfile ROOT -untrusted CHAIN LEAF` of a chain [`write_chain`] wrote, with
/// the root taken from `root` (the CA's file, not the answer's own).
pub fn openssl_verify(dir: &Path, name: &str, root: &Path) -> Result<(), String> {
    let chain = dir.join(format!("{name}-chain.crt"));
    let mut args = vec![
        "verify".to_string(),
        "-CAfile".to_string(),
        root.display().to_string(),
    ];
    if std::fs::metadata(&chain)
        .map(|m| m.len() > 0)
        .unwrap_or(false)
    {
        args.extend(["-untrusted".to_string(), chain.display().to_string()]);
    }
    args.push(dir.join(format!("{name}-leaf.crt")).display().to_string());
    let out = Command::new("openssl").args(&args).output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// `openssl x509 -noout -text` of the first certificate of `pem`.
pub fn x509_text(dir: &Path, pem: &str) -> String {
    let file = dir.join("inspect.crt");
    std::fs::write(&file, pem).unwrap();
    openssl(
        &["x509", "-noout", "-text", "-in", file.to_str().unwrap()],
        dir,
    )
}

/// The certificates axon presents on `addr` for `server_name`, PEM, as openssl s_client
/// shows them (`-showcerts`).
pub fn served_certificate(addr: SocketAddr, server_name: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl s_client -connect {addr} -servername {server_name} -alpn h2 -showcerts </dev/null 2>/dev/null"
        ))
        .output()
        .expect("openssl s_client");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut pems = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("-----BEGIN CERTIFICATE-----") {
            inside = true;
        }
        if inside {
            pems.push_str(line);
            pems.push('\n');
        }
        if line.starts_with("-----END CERTIFICATE-----") {
            inside = false;
        }
    }
    pems
}
