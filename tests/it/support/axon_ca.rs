//! [`AxonCa`]: axon started as the mesh's CA for a test, as a platform team runs it in place
//! of istiod: xDS on its plaintext port, `CreateCertificate` on its TLS port (`--ca-dir`, a
//! self-signed root written there), callers proving their service account with a token that
//! the fake API server's TokenReview maps to it (`--token-auth kubernetes`).

use std::path::PathBuf;
use std::sync::Arc;

use crate::support::agent::{AgentOptions, CaAccess, CaAuth};
use crate::support::fake_kube::FakeKube;
use crate::support::mesh::MeshCa;
use crate::support::{Axon, ConfigDir};

pub struct AxonCa {
    pub axon: Axon,
    /// The CA's root certificate (PEM) and its file.
    pub root_pem: String,
    pub root_path: PathBuf,
    api: Arc<FakeKube>,
    _work: tempfile::TempDir,
}

impl AxonCa {
    /// axon serving `config` and its CA.
    pub fn start(config: &ConfigDir) -> AxonCa {
        AxonCa::start_with_mesh_config(config, None)
    }

    /// [`AxonCa::start`] with a MeshConfig (`--mesh-config`).
    pub fn start_with_mesh_config(config: &ConfigDir, mesh: Option<&str>) -> AxonCa {
        let api = Arc::new(FakeKube::start());
        let work = tempfile::tempdir().expect("a temp dir");
        let kubeconfig = api.write_kubeconfig(work.path());
        let ca_dir = work.path().join("ca");
        let mesh_path = work.path().join("mesh.yaml");
        let mut args = vec![
            "--xds-tls-addr".to_string(),
            "127.0.0.1:0".to_string(),
            "--ca-dir".to_string(),
            ca_dir.to_str().expect("a UTF-8 path").to_string(),
            "--token-auth".to_string(),
            "kubernetes".to_string(),
        ];
        if let Some(mesh) = mesh {
            std::fs::write(&mesh_path, mesh).expect("the mesh config");
            args.push("--mesh-config".to_string());
            args.push(mesh_path.to_str().expect("a UTF-8 path").to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let axon = Axon::start_with_env(
            Some(config.path()),
            &args,
            &[("KUBECONFIG", kubeconfig.to_str().expect("a UTF-8 path"))],
        );
        let root_path = ca_dir.join("root-cert.pem");
        let root_pem = std::fs::read_to_string(&root_path).expect("axon's root");
        AxonCa {
            axon,
            root_pem,
            root_path,
            api,
            _work: work,
        }
    }

    /// The service-account token of `namespace`/`service_account`, as the API server would
    /// review it (audience `istio-ca`).
    pub fn token(&self, namespace: &str, service_account: &str) -> String {
        token_for(&self.api, namespace, service_account)
    }

    /// How `namespace`/`service_account` reaches the CA: its TLS port, root and token.
    pub fn access(&self, namespace: &str, service_account: &str) -> CaAccess {
        let tls = self.axon.xds_tls_addr().expect("the TLS port");
        CaAccess::new(
            tls,
            &self.root_pem,
            CaAuth::Token(self.token(namespace, service_account)),
        )
    }

    /// The CA of a mesh whose every pod proves its service account with its token.
    pub fn mesh_ca(&self, options: AgentOptions) -> MeshCa {
        let api = self.api.clone();
        let tls = self.axon.xds_tls_addr().expect("the TLS port");
        MeshCa::new(CaAccess::new(
            tls,
            &self.root_pem,
            CaAuth::Token(String::new()),
        ))
        .with_credentials(move |identity| {
            CaAuth::Token(token_for(
                &api,
                &identity.namespace,
                &identity.service_account,
            ))
        })
        .with_options(options)
    }
}

fn token_for(api: &FakeKube, namespace: &str, service_account: &str) -> String {
    let token = format!("token-{namespace}-{service_account}");
    api.accept_token(&token, namespace, service_account, &["istio-ca"]);
    token
}
