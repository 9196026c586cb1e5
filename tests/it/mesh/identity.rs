//! Workload identity through the test agent (`support::agent`), against the stub CA until
//! axon is the mesh's CA:
//!
//! - The CA is asked as pilot-agent asks it: a token or a bootstrap certificate proves the
//!   identity, and what is issued is the identity proved; a wrong token is refused.
//! - An agent serves its certificate to a real Envoy over SDS on its Unix socket: Envoy
//!   loads `default` (the chain and key) and `ROOTCA`, and presents the agent's leaf.
//! - A short-lived certificate is renewed at half its lifetime, with the current
//!   certificate as the credential, and the new one is pushed to Envoy.
//! - The SDS stream as Envoy speaks it (a scripted client): the first answer once the
//!   certificate is there, an ACK not answered, a NACK recorded, a renewal pushed.
//! - In the namespace mesh, a sidecar of a mesh with a CA (REDIRECT, and TPROXY with Envoy
//!   as root) runs an agent for its pod's service account, and its Envoy loads the pod's
//!   certificate; the agent's socket goes with the pod.

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio_stream::wrappers::ReceiverStream;

use crate::support::agent::{
    Agent, AgentOptions, CaAuth, Identity, SECRET_TYPE, StubCa, active_secrets, held_certs,
    presents, sds_client, sds_listener, secrets,
};
use crate::support::mesh::{Mesh, PodSpec, TRUST_DOMAIN};
use crate::support::{Axon, ConfigDir, Envoy, EnvoyOptions, free_port, wait_until};

/// How long a certificate may take to be issued and loaded.
const ISSUE: Duration = Duration::from_secs(20);

fn web() -> Identity {
    Identity::new(TRUST_DOMAIN, "shop", "web")
}

/// An Envoy beside the test whose only consumer of secrets is the agent's listener (its ADS
/// points at a closed port: no control plane is needed to load secrets).
fn envoy_of(agent: &Agent) -> (Envoy, u16) {
    let mut options = EnvoyOptions::sidecar(
        "sidecar~127.0.0.1~web-1.shop~shop.svc.cluster.local",
        &[("app", "web")],
        "shop",
    );
    options.initial_fetch_timeout = Some("1s".into());
    options.static_clusters.push(agent.sds_cluster());
    let port = free_port();
    options
        .static_listeners
        .push(sds_listener("agent_secrets", "127.0.0.1", port));
    let nowhere = SocketAddr::from(([127, 0, 0, 1], free_port()));
    (Envoy::start(nowhere, options), port)
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
    let (envoy, port) = envoy_of(&agent);

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

    // Envoy serves mutual TLS with them: the agent's leaf and key, its chain verifying to
    // the CA's root, and a client certificate of the mesh accepted through ROOTCA.
    // (The listener accepts once Envoy's workers start, after its ADS's initial fetch.)
    let client = ca.bootstrap_auth("shop", "client");
    let mut presented = String::new();
    let verified = wait_until(ISSUE, || {
        presented = handshake(port, &ca.root_pem(), &client);
        presented.contains("Verify return code: 0 (ok)")
    });
    assert!(verified, "{presented}");
    assert!(
        presented.contains(agent.leaf_pem().unwrap().trim()),
        "{presented}"
    );
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
    let (envoy, _) = envoy_of(&agent);
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
fn sds_stream_answers_once_records_a_nack_and_pushes_renewals() {
    let ca = StubCa::start(TRUST_DOMAIN);
    ca.add_token("web-token", "shop", "web");
    let options = AgentOptions {
        validity: Duration::from_secs(4),
        ..AgentOptions::default()
    };
    let agent = Agent::start(web(), ca.access(CaAuth::Token("web-token".into())), options);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let names = ["default", "ROOTCA"];
    let (first, second) = runtime.block_on(async {
        let mut client = sds_client(agent.socket_path()).await;
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let request = |version: &str, nonce: &str, error: Option<&str>| DiscoveryRequest {
            version_info: version.to_string(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            type_url: SECRET_TYPE.to_string(),
            response_nonce: nonce.to_string(),
            error_detail: error.map(|m| RpcStatus {
                code: 3,
                message: m.to_string(),
                details: vec![],
            }),
            ..Default::default()
        };
        tx.send(request("", "", None)).await.unwrap();
        let mut responses = client
            .stream_secrets(ReceiverStream::new(rx))
            .await
            .expect("StreamSecrets")
            .into_inner();
        let mut next = async || {
            tokio::time::timeout(ISSUE, responses.message())
                .await
                .expect("a response in time")
                .expect("the stream")
                .expect("a message")
        };
        let first = next().await;
        tx.send(request("", &first.nonce, Some("scripted rejection")))
            .await
            .unwrap();
        tx.send(request(&first.version_info, &first.nonce, None))
            .await
            .unwrap();
        // The next response is the renewal's, not an answer to the NACK or the ACK.
        let second = next().await;
        (first, second)
    });
    assert_eq!(first.type_url, SECRET_TYPE);
    let secrets_1 = secrets(&first);
    let names_1: Vec<&str> = secrets_1.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names_1, names);
    assert_ne!(second.version_info, first.version_info);
    assert_ne!(second.nonce, first.nonce);
    assert_ne!(secrets(&second)[0], secrets_1[0], "a new certificate");
    assert_eq!(secrets(&second)[1], secrets_1[1], "the same root");
    let status = agent.status();
    assert_eq!(status.nacks.len(), 1, "{status:#?}");
    assert!(
        status.nacks[0].contains("scripted rejection"),
        "{status:#?}"
    );
    assert!(status.acks >= 1, "{status:#?}");
}

#[test]
fn mesh_sidecars_load_their_pods_certificates_from_their_agents() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let ca = StubCa::start(TRUST_DOMAIN);
    let mesh = Mesh::with_ca(axon.xds_addr(), ca.mesh_ca());
    let spec = PodSpec {
        service_account: "web-sa",
        ..PodSpec::sidecar("web", "shop", &[("app", "web")])
    };
    // A REDIRECT pod (Envoy as 1337) and a TPROXY pod (Envoy as root without
    // CAP_DAC_OVERRIDE) both reach their agent's socket.
    let web = mesh.pod(spec);
    let batch = mesh.pod(PodSpec::sidecar("batch", "jobs", &[("app", "batch")]).tproxy());
    for (pod, uri) in [
        (&web, "spiffe://cluster.local/ns/shop/sa/web-sa"),
        (&batch, "spiffe://cluster.local/ns/jobs/sa/default"),
    ] {
        pod.wait_listener("virtualOutbound");
        let serial = wait_presents_current(pod.envoy(), pod.agent(), None);
        let certs = held_certs(pod.envoy());
        let leaf = certs.iter().find(|c| !c.ca && c.serial == serial).unwrap();
        assert_eq!(leaf.uris, [uri], "{}", pod.describe());
        assert_eq!(pod.agent().identity().spiffe_uri(), uri);
    }
    let issued: Vec<String> = ca.issued().into_iter().map(|i| i.spiffe_uri).collect();
    assert_eq!(issued.len(), 2, "{issued:?}");
    // Dropping a pod stops its agent and removes its socket.
    let socket = batch.agent().socket_path().to_path_buf();
    drop(batch);
    assert!(!socket.exists(), "{} left behind", socket.display());
}

/// `openssl s_client -showcerts` to 127.0.0.1:`port`, verifying with `root_pem` and showing
/// `client`'s certificate: what it printed.
fn handshake(port: u16, root_pem: &str, client: &CaAuth) -> String {
    let CaAuth::Certificate { cert_pem, key_pem } = client else {
        panic!("a client certificate");
    };
    let dir = ConfigDir::new();
    for (name, pem) in [
        ("root.pem", root_pem),
        ("client.pem", cert_pem),
        ("client.key", key_pem),
    ] {
        dir.write(name, pem);
    }
    let out = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-showcerts",
        ])
        .arg("-CAfile")
        .arg(dir.file("root.pem"))
        .arg("-cert")
        .arg(dir.file("client.pem"))
        .arg("-cert_chain")
        .arg(dir.file("client.pem"))
        .arg("-key")
        .arg(dir.file("client.key"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl s_client");
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
