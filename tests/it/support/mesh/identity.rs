//! [`MeshCa`]: the workload identity of a mesh's sidecars. A mesh made with it
//! ([`Mesh::with_ca`](super::Mesh::with_ca)) runs an [`Agent`] beside every sidecar, for
//! the pod's namespace and service account, and gives its Envoy the agent's `sds-grpc`
//! cluster and a listener that loads `default` and `ROOTCA` (`agent::bootstrap`).

use std::sync::Arc;

use crate::support::EnvoyOptions;
use crate::support::agent::{
    Agent, AgentOptions, CaAccess, CaAuth, Identity, sds_cluster, sds_listener,
};

/// The trust domain of the mesh's identities unless told otherwise (istiod's default).
pub const TRUST_DOMAIN: &str = "cluster.local";
/// The sidecar's listener that names the agent's secrets, on the pod's loopback.
pub const SECRETS_LISTENER: &str = "agent_secrets";
pub const SECRETS_LISTENER_PORT: u16 = 15091;

/// The pod's credential for its first certificate, from its identity.
type Credentials = Arc<dyn Fn(&Identity) -> CaAuth + Send + Sync>;

/// Where the mesh's CA is, how each pod proves itself to it, and how its agents ask.
#[derive(Clone)]
pub struct MeshCa {
    /// The CA; its `auth` is every pod's credential unless [`MeshCa::with_credentials`].
    pub access: CaAccess,
    pub trust_domain: String,
    pub options: AgentOptions,
    credentials: Option<Credentials>,
}

impl MeshCa {
    pub fn new(access: CaAccess) -> MeshCa {
        MeshCa {
            access,
            trust_domain: TRUST_DOMAIN.to_string(),
            options: AgentOptions::default(),
            credentials: None,
        }
    }

    /// Each pod's first credential made from its identity (e.g. its service account's token).
    pub fn with_credentials(
        mut self,
        credentials: impl Fn(&Identity) -> CaAuth + Send + Sync + 'static,
    ) -> MeshCa {
        self.credentials = Some(Arc::new(credentials));
        self
    }

    pub fn with_options(mut self, options: AgentOptions) -> MeshCa {
        self.options = options;
        self
    }

    /// Starts the agent of `namespace`/`service_account`, and adds what its Envoy needs
    /// to `options`.
    pub(super) fn start_agent(
        &self,
        namespace: &str,
        service_account: &str,
        options: &mut EnvoyOptions,
    ) -> Agent {
        let identity = Identity::new(&self.trust_domain, namespace, service_account);
        let mut access = self.access.clone();
        if let Some(credentials) = &self.credentials {
            access.auth = credentials(&identity);
        }
        let agent = Agent::start(identity, access, self.options.clone());
        options
            .static_clusters
            .push(sds_cluster(agent.socket_path()));
        options.static_listeners.push(sds_listener(
            SECRETS_LISTENER,
            "127.0.0.1",
            SECRETS_LISTENER_PORT,
        ));
        agent
    }
}
