//! RequestAuthentication from the API server (`security.istio.io/v1`, watched beside
//! PeerAuthentication): a sidecar of the namespace gets the JWT filter first on its inbound
//! HTTP chain, and deleting the policy pushes the chain without it.

use std::time::Duration;

use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use prost::Message;

use crate::support::ads_client::{Client, LDS, istio_node, runtime};
use crate::support::fake_kube::*;
use crate::support::*;

const NODE_ID: &str = "sidecar~10.1.0.7~web-1.shop~shop.svc.cluster.local";
const JWT: &str = "envoy.filters.http.jwt_authn";

fn request_authentication() -> serde_json::Value {
    istio(
        "apiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {name: jwt, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  jwtRules: [{issuer: 'https://issuer.example', jwks: '{\"keys\":[]}'}]\n",
    )
}

/// The first HTTP filter of the inbound chain of the workload's port.
fn first_inbound_filter(lds: &DiscoveryResponse) -> Vec<String> {
    lds.resources
        .iter()
        .map(|any| Listener::decode(any.value.as_slice()).expect("a Listener"))
        .filter(|l| l.name == "virtualInbound")
        .flat_map(|l| l.filter_chains)
        .filter(|c| c.name == "0.0.0.0_8080")
        .flat_map(|c| c.filters)
        .filter_map(|f| match f.config_type {
            Some(filter::ConfigType::TypedConfig(any)) => {
                HttpConnectionManager::decode(any.value.as_slice()).ok()
            }
            _ => None,
        })
        .map(|hcm| hcm.http_filters[0].name.clone())
        .collect()
}

async fn next_lds(c: &mut Client) -> DiscoveryResponse {
    loop {
        let r = c.next().await;
        if r.type_url == LDS {
            break r;
        }
    }
}

#[test]
fn a_request_authentication_from_the_api_server_puts_the_jwt_filter_inbound() {
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
    api.apply(request_authentication());
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
        c.request(
            LDS,
            &[],
            "",
            Some(istio_node(NODE_ID, "shop", &[("app", "web")])),
        )
        .await;
        let lds = next_lds(&mut c).await;
        let firsts = first_inbound_filter(&lds);
        assert!(
            !firsts.is_empty() && firsts.iter().all(|f| f == JWT),
            "{firsts:?}"
        );
        c.ack(&lds, &[]).await;
        api.delete(
            "security.istio.io/v1",
            "RequestAuthentication",
            "shop",
            "jwt",
        );
        let lds = next_lds(&mut c).await;
        let firsts = first_inbound_filter(&lds);
        assert!(
            !firsts.is_empty() && firsts.iter().all(|f| f != JWT),
            "{firsts:?}"
        );
    });
}
