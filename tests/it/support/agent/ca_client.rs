//! The agent's side of Istio's CA protocol: where the CA is and how to prove who we are
//! ([`CaAccess`], [`CaAuth`]), a fresh key and CSR for an identity, and one
//! `IstioCertificateService/CreateCertificate` call over TLS (gRPC unary), as pilot-agent's
//! citadel client makes it (`security/pkg/nodeagent/caclient/providers/citadel/client.go`).
//! The messages are istio/api `security/v1alpha1/ca.proto`'s, written by hand.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rcgen::{CertificateParams, DistinguishedName, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

use super::Identity;

/// The gRPC method pilot-agent calls.
pub const CREATE_CERTIFICATE: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";
/// The name the CA's serving certificate is checked against (istiod's service name).
pub const ISTIOD_SERVER_NAME: &str = "istiod.istio-system.svc";

/// `istio.v1.auth.IstioCertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateRequest {
    /// PEM-encoded certificate request.
    #[prost(string, tag = "1")]
    pub csr: String,
    /// The requested lifetime, in seconds.
    #[prost(int64, tag = "3")]
    pub validity_duration: i64,
    #[prost(message, optional, tag = "4")]
    pub metadata: Option<envoy_types::pb::google::protobuf::Struct>,
}

/// `istio.v1.auth.IstioCertificateResponse`: the leaf, the intermediates, the root (PEM).
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateResponse {
    #[prost(string, repeated, tag = "1")]
    pub cert_chain: Vec<String>,
}

/// How the agent proves its identity to the CA.
#[derive(Debug, Clone)]
pub enum CaAuth {
    /// `authorization: Bearer TOKEN` (a service-account token).
    Token(String),
    /// A client certificate (a VM's bootstrap certificate, or a certificate the CA issued):
    /// its chain (leaf first) and key, PEM.
    Certificate { cert_pem: String, key_pem: String },
}

/// Where the CA is and how to reach it: enough to swap the stub CA for axon's.
#[derive(Debug, Clone)]
pub struct CaAccess {
    pub addr: SocketAddr,
    /// The root the CA's serving certificate must chain to (PEM).
    pub root_pem: String,
    /// The name checked in the CA's certificate ([`ISTIOD_SERVER_NAME`] by default).
    pub server_name: String,
    /// The first certificate's credential (renewals: [`super::RenewAuth`]).
    pub auth: CaAuth,
}

impl CaAccess {
    pub fn new(addr: SocketAddr, root_pem: &str, auth: CaAuth) -> CaAccess {
        CaAccess {
            addr,
            root_pem: root_pem.to_string(),
            server_name: ISTIOD_SERVER_NAME.to_string(),
            auth,
        }
    }
}

/// A new P-256 key (PKCS#8 PEM) and a CSR (PEM) asking for `identity`'s SPIFFE URI.
pub(crate) fn key_and_csr(identity: &Identity) -> Result<(String, String), String> {
    let key = KeyPair::generate().map_err(|e| format!("key: {e}"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    let uri = identity
        .spiffe_uri()
        .try_into()
        .map_err(|e| format!("SAN: {e}"))?;
    params.subject_alt_names = vec![SanType::URI(uri)];
    let csr = params
        .serialize_request(&key)
        .and_then(|c| c.pem())
        .map_err(|e| format!("CSR: {e}"))?;
    Ok((key.serialize_pem(), csr))
}

/// `CreateCertificate(csr, validity)` at `ca`, authenticated with `auth`: the response's
/// `cert_chain` (leaf first, root last).
pub(crate) async fn create_certificate(
    ca: &CaAccess,
    auth: &CaAuth,
    csr: String,
    validity_seconds: i64,
) -> Result<Vec<String>, String> {
    let connector = TlsConnect::new(ca, auth)?;
    let channel = tonic::transport::Endpoint::from_static("http://ca.invalid")
        .connect_timeout(std::time::Duration::from_secs(5))
        .connect_with_connector(connector)
        .await
        .map_err(|e| format!("connect to the CA at {}: {e:?}", ca.addr))?;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready()
        .await
        .map_err(|e| format!("CA channel not ready: {e}"))?;
    let mut request = tonic::Request::new(IstioCertificateRequest {
        csr,
        validity_duration: validity_seconds,
        metadata: None,
    });
    if let CaAuth::Token(token) = auth {
        let value = format!("Bearer {token}")
            .parse()
            .map_err(|e| format!("token: {e}"))?;
        request.metadata_mut().insert("authorization", value);
    }
    let response: tonic::Response<IstioCertificateResponse> = grpc
        .unary(
            request,
            http::uri::PathAndQuery::from_static(CREATE_CERTIFICATE),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .map_err(|s| {
            format!(
                "CreateCertificate: {:?}: {}{}",
                s.code(),
                s.message(),
                causes(&s)
            )
        })?;
    Ok(response.into_inner().cert_chain)
}

/// ": cause: cause..." of an error's sources (a transport error says little by itself).
fn causes(e: &dyn std::error::Error) -> String {
    let mut out = String::new();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

/// Connects the gRPC channel: TCP to the CA, then TLS (ALPN h2) trusting its root, with the
/// client certificate of a [`CaAuth::Certificate`].
#[derive(Clone)]
struct TlsConnect {
    addr: SocketAddr,
    server_name: ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
}

impl TlsConnect {
    fn new(ca: &CaAccess, auth: &CaAuth) -> Result<TlsConnect, String> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca.root_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("CA root: {e}"))?;
            roots.add(cert).map_err(|e| format!("CA root: {e}"))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = match auth {
            CaAuth::Token(_) => builder.with_no_client_auth(),
            CaAuth::Certificate { cert_pem, key_pem } => {
                let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("client certificate: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
                    .map_err(|e| format!("client key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("client certificate: {e}"))?
            }
        };
        config.alpn_protocols = vec![b"h2".to_vec()];
        let server_name = ServerName::try_from(ca.server_name.clone())
            .map_err(|e| format!("server name {:?}: {e}", ca.server_name))?;
        Ok(TlsConnect {
            addr: ca.addr,
            server_name,
            config: Arc::new(config),
        })
    }
}

type TlsIo = hyper_util::rt::TokioIo<tokio_rustls::client::TlsStream<TcpStream>>;

impl tonic::codegen::Service<http::Uri> for TlsConnect {
    type Response = TlsIo;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<TlsIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let tcp = TcpStream::connect(this.addr).await?;
            let tls = tokio_rustls::TlsConnector::from(this.config)
                .connect(this.server_name, tcp)
                .await?;
            Ok(hyper_util::rt::TokioIo::new(tls))
        })
    }
}
