//! A scripted SotW ADS client for tests, the Istio nodes it presents, the small demo mesh the
//! scripted-client tests serve, and helpers for axon's debug endpoints.
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
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::Channel;

use crate::support::{Axon, ConfigDir};

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// The gateway pod the scripted clients usually are.
pub const GATEWAY_ID: &str = "router~10.0.0.1~gw-1.istio-system~istio-system.svc.cluster.local";

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

/// An ingress gateway node in istio-system (`istio: ingressgateway`).
pub fn gateway_node(id: &str) -> Node {
    istio_node(id, "istio-system", &[("istio", "ingressgateway")])
}

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// A SotW request for `names` of `type_url`, answering `nonce`, with `node` (the first).
pub fn discovery_request(
    type_url: &str,
    names: &[&str],
    nonce: &str,
    node: Option<Node>,
) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: type_url.to_string(),
        resource_names: strings(names),
        response_nonce: nonce.to_string(),
        node,
        ..Default::default()
    }
}

/// The ACK of `r`, keeping `names` subscribed.
pub fn ack_request(r: &DiscoveryResponse, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: r.type_url.clone(),
        version_info: r.version_info.clone(),
        response_nonce: r.nonce.clone(),
        resource_names: strings(names),
        ..Default::default()
    }
}

/// The `error_detail` of a scripted NACK (code 3, INVALID_ARGUMENT).
pub fn rejection(message: &str) -> RpcStatus {
    RpcStatus {
        code: 3,
        message: message.into(),
        details: vec![],
    }
}

/// The NACK of `r` (no `version_info`), keeping `names` subscribed.
pub fn nack_request(r: &DiscoveryResponse, names: &[&str], message: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: r.type_url.clone(),
        response_nonce: r.nonce.clone(),
        resource_names: strings(names),
        error_detail: Some(rejection(message)),
        ..Default::default()
    }
}

/// A gRPC client of axon's aggregated discovery service (SotW and Delta).
pub async fn ads_service(axon: &Axon) -> AggregatedDiscoveryServiceClient<Channel> {
    ads_service_at(axon.xds_addr()).await
}

/// An ADS client of the xDS server at `xds`.
pub async fn ads_service_at(xds: SocketAddr) -> AggregatedDiscoveryServiceClient<Channel> {
    AggregatedDiscoveryServiceClient::connect(format!("http://{xds}"))
        .await
        .expect("connecting to axon")
}

/// One scripted ADS stream.
pub struct Client {
    tx: mpsc::Sender<DiscoveryRequest>,
    pub rx: Streaming<DiscoveryResponse>,
    /// The `version_info` of the latest response [`Client::next`] returned.
    pub last_version: String,
}

impl Client {
    pub async fn connect(axon: &Axon) -> Client {
        Client::connect_to(axon.xds_addr()).await
    }

    /// A stream to the xDS server at `xds` (an axon started in process).
    pub async fn connect_to(xds: SocketAddr) -> Client {
        let mut client = ads_service_at(xds).await;
        let (tx, rx) = mpsc::channel(16);
        let rx = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .expect("opening the ADS stream")
            .into_inner();
        Client {
            tx,
            rx,
            last_version: String::new(),
        }
    }

    pub async fn send(&self, req: DiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    pub async fn request(&self, type_url: &str, names: &[&str], nonce: &str, node: Option<Node>) {
        self.send(discovery_request(type_url, names, nonce, node))
            .await
    }

    pub async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.send(ack_request(r, names)).await
    }

    pub async fn nack(&self, r: &DiscoveryResponse, names: &[&str], message: &str) {
        self.send(nack_request(r, names, message)).await
    }

    pub async fn next(&mut self) -> DiscoveryResponse {
        let r = tokio::time::timeout(Duration::from_secs(15), self.rx.message())
            .await
            .expect("a response within 15 s")
            .expect("no stream error")
            .expect("stream still open");
        self.last_version = r.version_info.clone();
        r
    }

    /// The next response if one comes within `wait`.
    pub async fn next_within(&mut self, wait: Duration) -> Option<DiscoveryResponse> {
        let r = tokio::time::timeout(wait, self.rx.message())
            .await
            .ok()?
            .expect("no stream error")
            .expect("stream still open");
        self.last_version = r.version_info.clone();
        Some(r)
    }

    /// The first request: CDS (wildcard) as `node`; returns the next response.
    pub async fn first_cds(&mut self, node: Node) -> DiscoveryResponse {
        self.request(CDS, &[], "", Some(node)).await;
        self.next().await
    }

    /// Subscribes CDS and LDS (wildcard) as `node` and ACKs both first responses.
    pub async fn subscribe_wildcards(&mut self, node: Node) {
        let cds = self.first_cds(node).await;
        self.ack(&cds, &[]).await;
        self.request(LDS, &[], "", None).await;
        let lds = self.next().await;
        self.ack(&lds, &[]).await;
    }
}

/// A config dir holding `yaml` as `mesh.yaml`, and an axon serving it.
pub fn serve_mesh(yaml: &str) -> (ConfigDir, Axon) {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", yaml);
    let axon = Axon::start(dir.path());
    (dir, axon)
}

/// A multi-thread runtime: a test may block a thread (an HTTP poll of axon) while the
/// client's stream keeps flowing on the other.
pub fn runtime() -> tokio::runtime::Runtime {
    runtime_with_threads(2)
}

/// A multi-thread runtime with `worker_threads` workers.
pub fn runtime_with_threads(worker_threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads)
        .enable_all()
        .build()
        .unwrap()
}

/// The debug address from axon's `axon listening` line.
pub fn debug_addr(axon: &Axon) -> SocketAddr {
    axon.debug_addr()
}

/// GETs a JSON document from axon's debug address.
pub fn debug_json(axon: &Axon, path: &str) -> serde_json::Value {
    axon.debug_json(path)
}

// ---------------------------------------------------------------------------
// The demo mesh: service `svc` (subsets v1, v2) behind gateway `gw` on port 18080
// ---------------------------------------------------------------------------

/// Cluster of subset v1 of `svc` in demo.
pub const V1: &str = "outbound|80|v1|svc.demo.svc.cluster.local";
/// Cluster of subset v2 of `svc` in demo.
pub const V2: &str = "outbound|80|v2|svc.demo.svc.cluster.local";
/// Cluster of all of `svc` in demo.
pub const SVC: &str = "outbound|80||svc.demo.svc.cluster.local";
/// The gateway's route configuration.
pub const ROUTE: &str = "http.18080";

/// Gateway `gw` in istio-system: HTTP on 18080 for every host, on `istio: ingressgateway`.
pub const GATEWAY_YAML: &str = r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 18080, name: http, protocol: HTTP}, hosts: ["*"]}]
"#;

/// ServiceEntry `svc` in `ns`: port 80, endpoints 10.0.0.9 (v1) and 10.0.0.10 (v2).
pub fn svc_service_entry(ns: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: svc, namespace: {ns}}}
spec:
  hosts: [svc.{ns}.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 10.0.0.9, labels: {{version: v1}}}}, {{address: 10.0.0.10, labels: {{version: v2}}}}]
"#
    )
}

/// DestinationRule `svc` in `ns`: subsets v1 and v2 by the `version` label.
pub fn svc_destination_rule(ns: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: svc, namespace: {ns}}}
spec:
  host: svc
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
"#
    )
}

/// VirtualService `svc` in `ns` splitting `weight_v1` / the rest between v1 and v2: for every
/// host on gateway `istio-system/gw` when `on_gateway`, else a mesh one for host `svc`.
pub fn svc_virtual_service(ns: &str, on_gateway: bool, weight_v1: u32) -> String {
    let hosts = if on_gateway {
        "hosts: [\"*\"]\n  gateways: [istio-system/gw]"
    } else {
        "hosts: [svc]"
    };
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc, namespace: {ns}}}
spec:
  {hosts}
  http:
  - route:
    - {{destination: {{host: svc, subset: v1}}, weight: {weight_v1}}}
    - {{destination: {{host: svc, subset: v2}}, weight: {}}}
"#,
        100 - weight_v1
    )
}

/// Sidecar `default` in `ns`, importing only its own namespace.
pub fn own_namespace_sidecar(ns: &str) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: {ns}}}
spec:
  egress: [{{hosts: ["./*"]}}]
"#
    )
}

/// YAML documents as one multi-document file.
pub fn documents<S: AsRef<str>>(docs: &[S]) -> String {
    docs.iter()
        .map(|d| d.as_ref())
        .collect::<Vec<_>>()
        .join("---\n")
}

/// The demo mesh: Gateway (optional), ServiceEntry (optional), DestinationRule and the gateway
/// VirtualService of `svc` in demo, `weight_v1` to v1 and the rest to v2.
pub fn mesh_with(gateway: bool, service_entry: bool, weight_v1: u32) -> String {
    let mut docs = Vec::new();
    if gateway {
        docs.push(GATEWAY_YAML.to_string());
    }
    if service_entry {
        docs.push(svc_service_entry("demo"));
    }
    docs.push(svc_destination_rule("demo"));
    docs.push(svc_virtual_service("demo", true, weight_v1));
    documents(&docs)
}

/// The whole demo mesh (see [`mesh_with`]).
pub fn mesh(weight_v1: u32) -> String {
    mesh_with(true, true, weight_v1)
}
