//! Workload identity through the test agent (`support::agent`), against the stub CA until
//! axon is the mesh's CA:
//!
//! - The CA is asked as pilot-agent asks it: a token or a bootstrap certificate proves the
//!   identity, and what is issued is the identity proved; a wrong token is refused.
//! - An agent serves its certificate to a real Envoy over SDS on its Unix socket: Envoy
//!   loads `default` (the chain and key) and `ROOTCA`, and presents the agent's leaf.
//! - A short-lived certificate is renewed at half its lifetime, with the current
//!   certificate as the credential, and the new one is pushed to Envoy.
//! - In the namespace mesh, a sidecar of a mesh with a CA runs an agent for its pod's
//!   service account, and its Envoy loads the pod's certificate.

use std::net::SocketAddr;
use std::time::Duration;

use crate::support::agent::{
    Agent, AgentOptions, CaAuth, Identity, StubCa, active_secrets, held_certs, presents,
    sds_listener,
};
use crate::support::mesh::{Mesh, MeshCa, PodSpec, TRUST_DOMAIN};
use crate::support::{Axon, ConfigDir, Envoy, EnvoyOptions, free_port, wait_until};

/// How long a certificate may take to be issued and loaded.
const ISSUE: Duration = Duration::from_secs(20);

fn web() -> Identity {
    Identity::new(TRUST_DOMAIN, "shop", "web")
}

/// An Envoy beside the test whose only consumer of secrets is the agent's listener (its ADS
/// points at a closed port: no control plane is needed to load secrets).
fn envoy_of(agent: &Agent) -> Envoy {
    let mut options = EnvoyOptions::sidecar(
        "sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local",
        &[("app", "web")],
        "shop",
    );
    options.initial_fetch_timeout = Some("1s".into());
    options.static_clusters.push(agent.sds_cluster());
    options
        .static_listeners
        .push(sds_listener("agent_secrets", "127.0.0.1", free_port()));
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port()));
    Envoy::start(nowhere, options)
}

/// Waits until `envoy` has `default` and `ROOTCA` active and presents the agent's current
/// leaf; panics, saying what it holds, otherwise.
fn wait_presents_current(envoy: &Envoy, agent: &Agent, not: Option<&str>) -> String {
    let mut serial = String::new();
    let loaded = wait_until(ISSUE, || {
        serial = agent.status().serial.unwrap_or_default();
        let secrets = active_secrets(envoy);
        !serial.is_empty()
            && Some(serial.as_str()) != not
            && secrets.contains_key("default")
            && secrets.contains_key("ROOTCA")
            && presents(envoy, &serial)
    });
    assert!(
        loaded,
        "envoy never presented the agent's leaf {serial}: secrets {:?}, certs {:?}\n{:#?}",
        active_secrets(envoy),
        held_certs(envoy),
        agent.status()
    );
    serial
}

#[test]
fn agent_proves_its_identity_with_a_token_or_a_bootstrap_certificate() {
    let ca = StubCa::start(TRUST_DOMAIN);
    ca.add_token("web-token", "shop", "web");

    // A token: the identity the token proves.
    let agent = Agent::start(
        web(),
        ca.access(CaAuth::Token("web-token".into())),
        AgentOptions::default(),
    );
    assert!(agent.wait_issued(1, ISSUE), "{:#?}", agent.status());
    let issued = ca.issued();
    assert_eq!(
        issued[0].spiffe_uri,
        "spiffe://cluster.local/ns/shop/sa/web"
    );
    assert!(!issued[0].by_certificate);
    assert!(
        agent
            .chain_pem()
            .unwrap()
            .contains(agent.leaf_pem().unwrap().trim())
    );
    assert!(
        !agent
            .chain_pem()
            .unwrap()
            .contains(agent.root_pem().unwrap().trim())
    );
    assert_eq!(agent.root_pem().unwrap().trim(), ca.root_pem().trim());

    // A bootstrap certificate, for an identity other than the one the CSR asks: the CA
    // issues what was proved.
    let bootstrap = ca.bootstrap_auth("shop", "batch");
    let other = Agent::start(web(), ca.access(bootstrap), AgentOptions::default());
    assert!(other.wait_issued(1, ISSUE), "{:#?}", other.status());
    let last = ca.issued().last().cloned().unwrap();
    assert_eq!(last.spiffe_uri, "spiffe://cluster.local/ns/shop/sa/batch");
    assert!(last.by_certificate);

    // A wrong token is refused, and the agent says why.
    let refused = Agent::start(
        web(),
        ca.access(CaAuth::Token("stolen".into())),
        AgentOptions::default(),
    );
    assert!(
        wait_until(ISSUE, || refused.status().errors >= 1),
        "{:#?}",
        refused.status()
    );
    let status = refused.status();
    assert_eq!(status.issued, 0);
    assert!(status.last_error.unwrap().contains("Unauthenticated"));
    assert!(
        ca.refused()
            .iter()
            .any(|r| r.contains("unknown bearer token"))
    );
}

#[test]
fn agent_serves_default_and_rootca_to_envoy_over_sds() {
    let ca = StubCa::start(TRUST_DOMAIN);
    ca.add_token("web-token", "shop", "web");
    let agent = Agent::start(
        web(),
        ca.access(CaAuth::Token("web-token".into())),
        AgentOptions::default(),
    );
    let envoy = envoy_of(&agent);

    let serial = wait_presents_current(&envoy, &agent, None);
    let certs = held_certs(&envoy);
    let leaf = certs.iter().find(|c| !c.ca && c.serial == serial).unwrap();
    assert_eq!(leaf.uris, ["spiffe://cluster.local/ns/shop/sa/web"]);
    // ROOTCA is the root, not the intermediate that signed the leaf.
    let root = crate::support::agent::leaf_serial(&ca.root_pem());
    assert!(certs.iter().any(|c| c.ca && c.serial == root), "{certs:?}");
    let status = agent.status();
    assert!(status.nacks.is_empty(), "{status:#?}");
    assert!(status.acks >= 2, "{status:#?}");
}

#[test]
fn a_short_lived_certificate_is_renewed_and_pushed_to_envoy() {
    let ca = StubCa::start(TRUST_DOMAIN);
    ca.add_token("web-token", "shop", "web");
    let options = AgentOptions {
        validity: Duration::from_secs(6),
        ..AgentOptions::default()
    };
    let agent = Agent::start(web(), ca.access(CaAuth::Token("web-token".into())), options);
    let envoy = envoy_of(&agent);
    let first = wait_presents_current(&envoy, &agent, None);
    let first_version = active_secrets(&envoy)["default"].clone();

    // Renewed at half of its 6 s: a new leaf, pushed on the open stream.
    let second = wait_presents_current(&envoy, &agent, Some(&first));
    assert_ne!(first, second);
    assert_ne!(active_secrets(&envoy)["default"], first_version);
    let issued = ca.issued();
    assert!(issued.len() >= 2, "{issued:?}");
    assert!(
        !issued[0].by_certificate,
        "the first is asked with the token"
    );
    assert!(
        issued[1].by_certificate,
        "renewals prove the current certificate"
    );
    assert_eq!(issued[1].validity, Duration::from_secs(6));
    let status = agent.status();
    assert!(status.nacks.is_empty(), "{status:#?}");
    assert_eq!(status.errors, 0, "{status:#?}");
}

#[test]
fn mesh_sidecar_loads_its_pods_certificate_from_its_agent() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let ca = StubCa::start(TRUST_DOMAIN);
    let mesh_ca = MeshCa::new(ca.access(CaAuth::Token(String::new())))
        .with_credentials(ca.token_credentials());
    let mesh = Mesh::with_ca(axon.xds_addr(), mesh_ca);
    let spec = PodSpec {
        service_account: "web-sa",
        ..PodSpec::sidecar("web", "shop", &[("app", "web")])
    };
    let pod = mesh.pod(spec);
    pod.wait_listener("virtualOutbound");

    let serial = wait_presents_current(pod.envoy(), pod.agent(), None);
    let certs = held_certs(pod.envoy());
    let leaf = certs.iter().find(|c| !c.ca && c.serial == serial).unwrap();
    assert_eq!(
        leaf.uris,
        ["spiffe://cluster.local/ns/shop/sa/web-sa"],
        "{}",
        pod.describe()
    );
    assert_eq!(ca.issued().len(), 1);
}
