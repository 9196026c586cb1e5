//! A scripted SotW ADS client for tests, and helpers for axon's debug endpoints.
//! Include with `#[path = "support/ads_client.rs"] mod ads_client;` beside `mod support;`.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::support::Axon;

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

fn string(v: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(v.to_string())),
    }
}

/// An Istio node: `id` as `TYPE~IP~POD.NS~NS.svc.cluster.local`, metadata NAMESPACE and LABELS.
pub fn istio_node(id: &str, namespace: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        id: id.to_string(),
        metadata: Some(Struct {
            fields: [
                ("NAMESPACE".to_string(), string(namespace)),
                (
                    "LABELS".to_string(),
                    Value {
                        kind: Some(Kind::StructValue(Struct {
                            fields: labels
                                .iter()
                                .map(|(k, v)| (k.to_string(), string(v)))
                                .collect(),
                        })),
                    },
                ),
            ]
            .into(),
        }),
        ..Default::default()
    }
}

/// One scripted ADS stream.
pub struct Client {
    tx: mpsc::Sender<DiscoveryRequest>,
    pub rx: Streaming<DiscoveryResponse>,
}

impl Client {
    pub async fn connect(axon: &Axon) -> Client {
        let mut client =
            AggregatedDiscoveryServiceClient::connect(format!("http://{}", axon.xds_addr()))
                .await
                .expect("connecting to axon");
        let (tx, rx) = mpsc::channel(16);
        let rx = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .expect("opening the ADS stream")
            .into_inner();
        Client { tx, rx }
    }

    pub async fn send(&self, req: DiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    pub async fn request(&self, type_url: &str, names: &[&str], nonce: &str, node: Option<Node>) {
        self.send(DiscoveryRequest {
            type_url: type_url.to_string(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            response_nonce: nonce.to_string(),
            node,
            ..Default::default()
        })
        .await
    }

    pub async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.send(DiscoveryRequest {
            type_url: r.type_url.clone(),
            version_info: r.version_info.clone(),
            response_nonce: r.nonce.clone(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
        .await
    }

    pub async fn next(&mut self) -> DiscoveryResponse {
        tokio::time::timeout(Duration::from_secs(15), self.rx.message())
            .await
            .expect("a response within 15 s")
            .expect("no stream error")
            .expect("stream still open")
    }

    /// Subscribes CDS and LDS (wildcard) as `node` and ACKs both first responses.
    pub async fn subscribe_wildcards(&mut self, node: Node) {
        self.request(CDS, &[], "", Some(node)).await;
        let cds = self.next().await;
        self.ack(&cds, &[]).await;
        self.request(LDS, &[], "", None).await;
        let lds = self.next().await;
        self.ack(&lds, &[]).await;
    }
}

/// A multi-thread runtime: a test may block a thread (an HTTP poll of axon) while the
/// client's stream keeps flowing on the other.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The debug address from axon's `axon listening` line.
pub fn debug_addr(axon: &Axon) -> SocketAddr {
    let logs = axon.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("axon listening"))
        .expect("the listening line");
    line.split("debug_addr=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.trim_matches('"').parse().ok())
        .expect("debug_addr= in the listening line")
}

/// GETs a JSON document from axon's debug address.
pub fn debug_json(axon: &Axon, path: &str) -> serde_json::Value {
    let r = crate::support::http_request(
        debug_addr(axon),
        "GET",
        path,
        &[("Host", "localhost")],
        Duration::from_secs(5),
    );
    assert_eq!(r.status, 200, "GET {path}: {}", r.body);
    serde_json::from_str(&r.body)
        .unwrap_or_else(|e| panic!("GET {path}: not JSON ({e}): {}", r.body))
}
