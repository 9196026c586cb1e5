//! [`StubCa`]: a small stand-in for the mesh's CA until axon is one. It serves
//! `IstioCertificateService/CreateCertificate` over TLS on the test's loopback (its serving
//! certificate names [`ISTIOD_SERVER_NAME`]), signs with an intermediate under its own root
//! (so a chain is leaf, intermediate, root, as istiod's plug-in CA returns it) and, as istiod
//! does, issues the identity the caller proved, never what the CSR asks: a bearer token it
//! was told about ([`StubCa::add_token`]) or a client certificate chaining to its root (a
//! bootstrap certificate, [`StubCa::bootstrap_auth`], or one it issued). It records what it
//! issued and refused, and stops on drop. Everything is made in memory with rcgen.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};
use x509_parser::prelude::{FromDer, GeneralName, X509CertificationRequest};

use super::Identity;
use super::ca_client::{
    CREATE_CERTIFICATE, CaAccess, CaAuth, ISTIOD_SERVER_NAME, IstioCertificateRequest,
    IstioCertificateResponse,
};
use crate::support::mesh::MeshCa;

/// One certificate the stub issued: to whom, proven how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuance {
    pub spiffe_uri: String,
    pub by_certificate: bool,
    pub validity: Duration,
}

pub struct StubCa {
    addr: SocketAddr,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

struct State {
    trust_domain: String,
    root: CertifiedIssuer<'static, KeyPair>,
    intermediate: CertifiedIssuer<'static, KeyPair>,
    tokens: Mutex<HashMap<String, Identity>>,
    issued: Mutex<Vec<Issuance>>,
    refused: Mutex<Vec<String>>,
}

impl StubCa {
    /// A CA for `trust_domain`, serving on a free port of 127.0.0.1.
    pub fn start(trust_domain: &str) -> StubCa {
        let root =
            CertifiedIssuer::self_signed(ca_params("axon stub root CA"), key()).expect("stub root");
        let intermediate =
            CertifiedIssuer::signed_by(ca_params("axon stub intermediate CA"), key(), &root)
                .expect("stub intermediate");
        let state = Arc::new(State {
            trust_domain: trust_domain.to_string(),
            root,
            intermediate,
            tokens: Mutex::default(),
            issued: Mutex::default(),
            refused: Mutex::default(),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("stub-ca")
            .enable_all()
            .build()
            .expect("the stub CA's runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind the stub CA");
        let addr = listener.local_addr().expect("its address");
        listener.set_nonblocking(true).expect("nonblocking");
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(listener).expect("tokio listener")
        };
        runtime.spawn(serve(listener, state.clone()));
        StubCa {
            addr,
            state,
            runtime: Some(runtime),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The root every chain ends with (PEM).
    pub fn root_pem(&self) -> String {
        self.state.root.pem()
    }

    /// Where an agent reaches this CA, proving itself with `auth`.
    pub fn access(&self, auth: CaAuth) -> CaAccess {
        CaAccess::new(self.addr, &self.root_pem(), auth)
    }

    /// `token` proves the service account `namespace`/`service_account`.
    pub fn add_token(&self, token: &str, namespace: &str, service_account: &str) {
        let identity = Identity::new(&self.state.trust_domain, namespace, service_account);
        let mut tokens = self.state.tokens.lock().unwrap();
        tokens.insert(token.to_string(), identity);
    }

    /// Every identity's credential: a token this CA maps to it (made on first use), as the
    /// fake API server's TokenReview maps a pod's token to its service account.
    pub fn token_credentials(&self) -> impl Fn(&Identity) -> CaAuth + Send + Sync + 'static {
        let state = self.state.clone();
        move |identity| {
            let token = format!("token-{}-{}", identity.namespace, identity.service_account);
            let mut tokens = state.tokens.lock().unwrap();
            tokens.insert(token.clone(), identity.clone());
            CaAuth::Token(token)
        }
    }

    /// The mesh's CA for [`Mesh::with_ca`](crate::support::mesh::Mesh::with_ca): this CA,
    /// every pod proving its service account with its token ([`StubCa::token_credentials`]).
    pub fn mesh_ca(&self) -> MeshCa {
        let unused = CaAuth::Token(String::new()); // each pod's comes from the credentials
        MeshCa::new(self.access(unused)).with_credentials(self.token_credentials())
    }

    /// A bootstrap client certificate for `namespace`/`service_account`, issued directly
    /// (as a VM's provisioned certificate is), as the credential of a first request.
    pub fn bootstrap_auth(&self, namespace: &str, service_account: &str) -> CaAuth {
        let identity = Identity::new(&self.state.trust_domain, namespace, service_account);
        let key = key();
        let leaf = self.state.leaf(&identity, &key, Duration::from_secs(3600));
        CaAuth::Certificate {
            cert_pem: format!("{}{}", leaf.pem(), self.state.intermediate.pem()),
            key_pem: key.serialize_pem(),
        }
    }

    pub fn issued(&self) -> Vec<Issuance> {
        self.state.issued.lock().unwrap().clone()
    }

    /// The reasons of the requests refused so far.
    pub fn refused(&self) -> Vec<String> {
        self.state.refused.lock().unwrap().clone()
    }
}

impl Drop for StubCa {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

fn key() -> KeyPair {
    KeyPair::generate().expect("a P-256 key")
}

/// Parameters valid from 5 s ago (clock skew) for `lifetime` (rcgen's times are `time`'s,
/// which rcgen does not re-export: counted here from its 1970-01-01).
fn validity(lifetime: Duration) -> CertificateParams {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let epoch = rcgen::date_time_ymd(1970, 1, 1);
    let mut p = CertificateParams::default();
    p.not_before = epoch + now.saturating_sub(Duration::from_secs(5));
    p.not_after = epoch + (now + lifetime);
    p
}

fn ca_params(name: &str) -> CertificateParams {
    let mut p = validity(Duration::from_secs(24 * 3600));
    p.distinguished_name = DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    p
}

impl State {
    /// A workload certificate for `identity` and `key`, signed by the intermediate.
    fn leaf(
        &self,
        identity: &Identity,
        key: &impl rcgen::PublicKeyData,
        lifetime: Duration,
    ) -> rcgen::Certificate {
        let mut p = validity(lifetime);
        p.distinguished_name = DistinguishedName::new();
        let uri = identity.spiffe_uri().try_into().expect("an IA5 URI");
        p.subject_alt_names = vec![SanType::URI(uri)];
        p.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.signed_by(key, &self.intermediate).expect("sign a leaf")
    }

    /// Authenticates the caller, then signs its CSR's key for the caller's identity.
    fn create(
        &self,
        request: Request<IstioCertificateRequest>,
    ) -> Result<IstioCertificateResponse, Status> {
        let (identity, by_certificate) = self.authenticate(&request).inspect_err(|s| {
            self.refused.lock().unwrap().push(s.message().to_string());
        })?;
        let request = request.into_inner();
        let key = csr_key(&request.csr).map_err(Status::invalid_argument)?;
        let validity = Duration::from_secs(request.validity_duration.clamp(1, 24 * 3600) as u64);
        let leaf = self.leaf(&identity, &key, validity);
        self.issued.lock().unwrap().push(Issuance {
            spiffe_uri: identity.spiffe_uri(),
            by_certificate,
            validity,
        });
        Ok(IstioCertificateResponse {
            cert_chain: vec![leaf.pem(), self.intermediate.pem(), self.root.pem()],
        })
    }

    /// The identity a bearer token or a client certificate proves, and which it was.
    fn authenticate(
        &self,
        request: &Request<IstioCertificateRequest>,
    ) -> Result<(Identity, bool), Status> {
        if let Some(value) = request.metadata().get("authorization") {
            let token = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer "));
            let tokens = self.tokens.lock().unwrap();
            return match token.and_then(|t| tokens.get(t)) {
                Some(identity) => Ok((identity.clone(), false)),
                None => Err(Status::unauthenticated("unknown bearer token")),
            };
        }
        let Some(PeerCerts(Some(chain))) = request.extensions().get::<PeerCerts>() else {
            return Err(Status::unauthenticated(
                "no token and no client certificate",
            ));
        };
        spiffe_identity(&chain[0])
            .map(|id| (id, true))
            .ok_or_else(|| Status::unauthenticated("client certificate without a SPIFFE URI"))
    }
}

/// The `spiffe://TD/ns/NS/sa/SA` identity in a certificate's URI SAN.
fn spiffe_identity(cert: &CertificateDer<'_>) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(cert).ok()?;
    let san = cert.subject_alternative_name().ok()??;
    san.value.general_names.iter().find_map(|n| match n {
        GeneralName::URI(uri) => {
            let rest = uri.strip_prefix("spiffe://")?;
            match rest.split('/').collect::<Vec<_>>()[..] {
                [td, "ns", ns, "sa", sa] => Some(Identity::new(td, ns, sa)),
                _ => None,
            }
        }
        _ => None,
    })
}

/// The P-256 public key of a PEM CSR (the stub signs nothing else).
fn csr_key(csr: &str) -> Result<CsrKey, String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr.as_bytes()).map_err(|e| e.to_string())?;
    let (_, csr) = X509CertificationRequest::from_der(&pem.contents).map_err(|e| e.to_string())?;
    let spki = &csr.certification_request_info.subject_pki;
    if spki.algorithm.algorithm != x509_parser::oid_registry::OID_KEY_TYPE_EC_PUBLIC_KEY {
        return Err("the stub CA signs EC P-256 keys only".into());
    }
    Ok(CsrKey(spki.subject_public_key.data.to_vec()))
}

struct CsrKey(Vec<u8>);

impl rcgen::PublicKeyData for CsrKey {
    fn der_bytes(&self) -> &[u8] {
        &self.0
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

/// Accepts TLS connections (a client certificate optional, verified against the root) and
/// serves the CA service on them.
async fn serve(listener: tokio::net::TcpListener, state: Arc<State>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(state.root.der().clone()).expect("the root");
    let verifier =
        rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider.clone())
            .allow_unauthenticated()
            .build()
            .expect("client verifier");
    let key = key();
    let mut p = validity(Duration::from_secs(24 * 3600));
    p.subject_alt_names = vec![
        SanType::DnsName(ISTIOD_SERVER_NAME.try_into().expect("a DNS name")),
        SanType::IpAddress([127, 0, 0, 1].into()),
    ];
    let serving = p
        .signed_by(&key, &state.intermediate)
        .expect("serving cert");
    let chain = vec![serving.der().clone(), state.intermediate.der().clone()];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .expect("serving certificate");
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let _ = tx.send(Ok::<_, std::io::Error>(CaConn(tls))).await;
                }
            });
        }
    });
    let _ = tonic::transport::Server::builder()
        .add_service(CaService(state))
        .serve_with_incoming(ReceiverStream::new(rx))
        .await;
}

/// The client certificates of a connection (verified by the handshake).
#[derive(Clone)]
struct PeerCerts(Option<Vec<CertificateDer<'static>>>);

struct CaConn(tokio_rustls::server::TlsStream<TcpStream>);

impl Connected for CaConn {
    type ConnectInfo = PeerCerts;

    fn connect_info(&self) -> PeerCerts {
        PeerCerts(self.0.get_ref().1.peer_certificates().map(|c| c.to_vec()))
    }
}

impl AsyncRead for CaConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl AsyncWrite for CaConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    /// Vectored, as the stream it wraps: the h2 vendored here (`vendor/h2`, 1 KiB initial
    /// write buffer) trips its `has_capacity` assertion on an IO without vectored writes.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}

/// The gRPC service (hand-written: the one method of `IstioCertificateService`).
#[derive(Clone)]
struct CaService(Arc<State>);

impl tonic::server::NamedService for CaService {
    const NAME: &'static str = "istio.v1.auth.IstioCertificateService";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for CaService {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if request.uri().path() != CREATE_CERTIFICATE {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let method = Create(self.0.clone());
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(method, request).await)
        })
    }
}

struct Create(Arc<State>);

impl tonic::server::UnaryService<IstioCertificateRequest> for Create {
    type Response = IstioCertificateResponse;
    type Future = BoxFuture<Result<Response<IstioCertificateResponse>, Status>>;

    fn call(&mut self, request: Request<IstioCertificateRequest>) -> Self::Future {
        let result = self.0.create(request).map(Response::new);
        Box::pin(async move { result })
    }
}
