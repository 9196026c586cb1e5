//! PeerAuthentication from the API server (`security.istio.io/v1`, watched as the
//! networking kinds are): a sidecar of the namespace gets STRICT's mutual-TLS-only inbound
//! chains, and an edit to DISABLE is pushed as plaintext chains.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::google::protobuf::{Value, value::Kind};
use prost::Message;

use crate::support::ads_client::{Client, LDS, istio_node, runtime};
use crate::support::fake_kube::*;
use crate::support::*;

const NODE_ID: &str = "sidecar~10.1.0.7~web-1.shop~shop.svc.cluster.local";

fn peer_authentication(mode: &str) -> serde_json::Value {
    istio(&format!(
        "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: default, namespace: shop}}\nspec: {{mtls: {{mode: {mode}}}}}\n"
    ))
}

/// A sidecar of `web-1` run by istio's agent.
fn node() -> Node {
    let mut node = istio_node(NODE_ID, "shop", &[("app", "web")]);
    node.metadata.as_mut().unwrap().fields.insert(
        "ISTIO_VERSION".to_string(),
        Value {
            kind: Some(Kind::StringValue("1.24.0".to_string())),
        },
    );
    node
}

/// The transport protocols the chains of `virtualInbound` for the workload's port match.
fn port_transports(
    lds: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse,
) -> Vec<String> {
    lds.resources
        .iter()
        .map(|any| Listener::decode(any.value.as_slice()).expect("a Listener"))
        .filter(|l| l.name == "virtualInbound")
        .flat_map(|l| l.filter_chains)
        .filter(|c| c.name == "0.0.0.0_8080")
        .map(|c| c.filter_chain_match.unwrap_or_default().transport_protocol)
        .collect()
}

#[test]
fn a_peer_authentication_from_the_api_server_shapes_the_inbound_chains() {
    let api = FakeKube::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.apply(namespace("shop", &[]));
    api.apply(service("shop", "web", &[("http", 8080)]));
    api.apply(pod("shop", "web-1", &[("app", "web")]));
    api.apply(endpoint_slice(
        "shop",
        "web-1",
        "web",
        ("http", 8080),
        &[("10.1.0.7", "web-1")],
    ));
    api.apply(peer_authentication("STRICT"));
    let kubeconfig = kubeconfig.display().to_string();
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    assert!(
        wait_until(Duration::from_secs(30), || axon
            .monitoring_get("/ready")
            .status
            == 200),
        "never ready:\n{}",
        axon.logs()
    );
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        c.request(LDS, &[], "", Some(node())).await;
        let lds = loop {
            let r = c.next().await;
            if r.type_url == LDS {
                break r;
            }
        };
        assert_eq!(port_transports(&lds), ["tls"], "STRICT: mutual TLS only");
        c.ack(&lds, &[]).await;
        api.apply(peer_authentication("DISABLE"));
        let lds = loop {
            let r = c.next().await;
            if r.type_url == LDS {
                break r;
            }
        };
        assert_eq!(
            port_transports(&lds),
            ["raw_buffer"],
            "DISABLE: plaintext only"
        );
    });
}
