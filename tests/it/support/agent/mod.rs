//! A test-side node agent doing for one pod what Istio's pilot-agent does for its sidecar:
//! it makes a key (ECDSA P-256) and a CSR for the pod's SPIFFE identity, has the mesh's CA
//! sign it over `IstioCertificateService/CreateCertificate`, renews it before it expires,
//! and serves it to the pod's Envoy over SDS on a Unix socket (`default`: the chain and the
//! key; `ROOTCA`: the root), as pilot-agent's `sds-grpc` bootstrap cluster expects.
//!
//! ```text
//!   test process (tokio runtime of the Agent)                     the pod's Envoy
//!   rotation loop ── CreateCertificate (TLS) ──► CA (stub, or axon's)
//!        │ new Issued (watch)
//!        ▼
//!   SDS server on DIR/socket  ◄── StreamSecrets `default`, `ROOTCA` ── cluster sds-grpc
//! ```
//!
//! The agent runs in the test process (the host's network namespace: the CA is on the
//! test's loopback); its socket directory is on the shared filesystem and open to the
//! proxy's user (1337, or root without `CAP_DAC_OVERRIDE` under TPROXY), so a pod's Envoy
//! reaches it. It stops, and its directory is removed, on drop.
//!
//! | file | owns |
//! |---|---|
//! | `ca_client.rs` | the CSR and the `CreateCertificate` call over TLS (token or client certificate) |
//! | `rotation.rs` | the loop: first certificate, renewal at a fraction of the lifetime, retries |
//! | `sds.rs` | the SDS server: SotW `StreamSecrets`, pushes on renewal, ACK/NACK |
//! | `envoy_view.rs` | what an Envoy holds: its active secrets, the certificates of `/certs` |
//! | `bootstrap.rs` | the Envoy bootstrap pieces: cluster `sds-grpc`, a listener that loads the secrets |
//! | `sds_client.rs` | a scripted SDS client on the socket, for the protocol tests |
//! | `stub_ca.rs` | [`StubCa`]: a small CA for the tests until axon is one |

mod bootstrap;
mod ca_client;
mod envoy_view;
mod rotation;
mod sds;
mod sds_client;
mod stub_ca;

#[allow(unused_imports)]
pub use bootstrap::{SDS_CLUSTER, sds_cluster, sds_listener};
#[allow(unused_imports)]
pub use ca_client::{CaAccess, CaAuth, ISTIOD_SERVER_NAME};
#[allow(unused_imports)]
pub use envoy_view::{HeldCert, active_secrets, held_certs, presents};
#[allow(unused_imports)]
pub use rotation::{leaf_serial, normalize_serial};
#[allow(unused_imports)]
pub use sds::SECRET_TYPE;
#[allow(unused_imports)]
pub use sds_client::{sds_client, secrets};
#[allow(unused_imports)]
pub use stub_ca::{Issuance, StubCa};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::support::process::new_temp_dir;
use crate::support::wait_until;

/// The Unix socket's file name in the agent's directory (pilot-agent's is `socket` under
/// `./var/run/secrets/workload-spiffe-uds/`).
pub const SOCKET_FILE: &str = "socket";
/// The SDS name of the workload certificate (pilot-agent's `WorkloadKeyCertResourceName`).
pub const WORKLOAD_SECRET: &str = "default";
/// The SDS name of the root (pilot-agent's `RootCertReqResourceName`).
pub const ROOT_SECRET: &str = "ROOTCA";

/// Who the pod is: `spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
}

impl Identity {
    pub fn new(trust_domain: &str, namespace: &str, service_account: &str) -> Identity {
        Identity {
            trust_domain: trust_domain.to_string(),
            namespace: namespace.to_string(),
            service_account: service_account.to_string(),
        }
    }

    /// The SPIFFE URI the CSR asks for.
    pub fn spiffe_uri(&self) -> String {
        format!(
            "spiffe://{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }
}

/// How renewals authenticate to the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RenewAuth {
    /// With the agent's current certificate (as pilot-agent does), falling back to the
    /// initial credential once it has expired.
    #[default]
    Certificate,
    /// With the initial credential ([`CaAccess::auth`]) every time.
    Initial,
}

/// How the agent asks for certificates.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// The `validity_duration` asked for (pilot-agent's `SECRET_TTL`, 24 h).
    pub validity: Duration,
    /// Renew when this fraction of the lifetime is left (pilot-agent's
    /// `SECRET_GRACE_PERIOD_RATIO`, 0.5).
    pub grace_ratio: f64,
    pub renew_auth: RenewAuth,
    /// The first wait after a failed request (doubled up to 5 s).
    pub retry: Duration,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            validity: Duration::from_secs(24 * 3600),
            grace_ratio: 0.5,
            renew_auth: RenewAuth::Certificate,
            retry: Duration::from_millis(200),
        }
    }
}

/// What the agent has done so far, for the tests to read.
#[derive(Debug, Clone, Default)]
pub struct AgentStatus {
    /// Certificates the CA issued to this agent.
    pub issued: u64,
    /// The current leaf's serial number (lowercase hex, no leading zeros).
    pub serial: Option<String>,
    /// The current leaf's `notAfter`.
    pub not_after: Option<SystemTime>,
    /// Failed `CreateCertificate` calls, and the last one's error.
    pub errors: u64,
    pub last_error: Option<String>,
    /// SDS streams opened, responses sent on them, and the ACKs and NACKs they got back.
    pub streams: u64,
    pub pushes: u64,
    pub acks: u64,
    pub nacks: Vec<String>,
}

/// A certificate the CA issued, as the SDS server hands it out.
#[derive(Debug)]
pub(crate) struct Issued {
    /// The leaf and the intermediates (PEM), without the root.
    pub(crate) chain_pem: String,
    pub(crate) leaf_pem: String,
    pub(crate) key_pem: String,
    pub(crate) root_pem: String,
    pub(crate) serial: String,
    pub(crate) not_after: SystemTime,
    /// The SDS version: 1 for the first certificate, then one more per renewal.
    pub(crate) version: u64,
}

/// What the rotation loop, the SDS streams and the test share.
pub(crate) struct Shared {
    pub(crate) status: Mutex<AgentStatus>,
    pub(crate) current: watch::Sender<Option<Arc<Issued>>>,
}

impl Shared {
    pub(crate) fn update(&self, f: impl FnOnce(&mut AgentStatus)) {
        f(&mut self.status.lock().expect("agent status"));
    }
}

/// A running agent: its rotation loop and SDS server on their own tokio runtime.
pub struct Agent {
    identity: Identity,
    socket: PathBuf,
    shared: Arc<Shared>,
    runtime: Option<tokio::runtime::Runtime>,
    dir: Option<tempfile::TempDir>,
}

impl Agent {
    /// Starts the agent of `identity`: its SDS socket is listening when this returns; the
    /// first certificate is asked for at once (in the background: see
    /// [`Agent::wait_issued`]).
    pub fn start(identity: Identity, ca: CaAccess, options: AgentOptions) -> Agent {
        let dir = new_temp_dir("axon-agent-");
        let socket = dir.path().join(SOCKET_FILE);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agent")
            .enable_all()
            .build()
            .expect("the agent's runtime");
        let shared = Arc::new(Shared {
            status: Mutex::default(),
            current: watch::channel(None).0,
        });
        let listener = {
            let _guard = runtime.enter();
            tokio::net::UnixListener::bind(&socket)
                .unwrap_or_else(|e| panic!("bind {}: {e}", socket.display()))
        };
        open_to_proxy(dir.path(), &socket);
        runtime.spawn(sds::serve(listener, shared.clone()));
        runtime.spawn(rotation::run(identity.clone(), ca, options, shared.clone()));
        Agent {
            identity,
            socket,
            shared,
            runtime: Some(runtime),
            dir: Some(dir),
        }
    }

    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The SDS socket (the `pipe` of cluster `sds-grpc`).
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The `sds-grpc` cluster for this agent's Envoy ([`sds_cluster`]).
    pub fn sds_cluster(&self) -> serde_json::Value {
        sds_cluster(&self.socket)
    }

    pub fn status(&self) -> AgentStatus {
        self.shared.status.lock().expect("agent status").clone()
    }

    /// The current leaf certificate (PEM), once one was issued.
    pub fn leaf_pem(&self) -> Option<String> {
        self.current().map(|c| c.leaf_pem.clone())
    }

    /// The chain served as `default` (leaf and intermediates, PEM).
    pub fn chain_pem(&self) -> Option<String> {
        self.current().map(|c| c.chain_pem.clone())
    }

    /// The root served as `ROOTCA` (PEM).
    pub fn root_pem(&self) -> Option<String> {
        self.current().map(|c| c.root_pem.clone())
    }

    fn current(&self) -> Option<Arc<Issued>> {
        self.shared.current.borrow().clone()
    }

    /// Waits until the CA has issued `n` certificates to this agent; false on timeout.
    pub fn wait_issued(&self, n: u64, timeout: Duration) -> bool {
        wait_until(timeout, || self.status().issued >= n)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "===== agent {} ({}) =====\n{:#?}",
                self.identity.spiffe_uri(),
                self.socket.display(),
                self.status()
            );
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        drop(self.dir.take());
    }
}

/// Lets the proxy's user (uid/gid 1337, or root in a TPROXY pod) reach the socket: the
/// directory searchable, the socket writable by all (it holds nothing but the socket).
fn open_to_proxy(dir: &Path, socket: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(dir, 0o755), (socket, 0o777)] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .unwrap_or_else(|e| panic!("chmod {}: {e}", path.display()));
    }
}
