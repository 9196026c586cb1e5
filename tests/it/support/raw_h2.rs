//! Raw HTTP/2 to axon's xDS port (the `h2` crate), for clients that misbehave where a
//! well-behaved client library would not: streams opened and left silent, partial gRPC
//! messages, malformed ones.

#![allow(dead_code)] // each test file uses some of it

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::Message;

use super::ads_client::{CDS, gateway_node};
use crate::support::{Axon, ConfigDir};

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// A raw HTTP/2 connection to axon's xDS port.
pub async fn h2_connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Opens a SotW stream; returns its request body and response.
pub async fn open(
    send: &mut h2::client::SendRequest<Bytes>,
) -> (h2::SendStream<Bytes>, h2::client::ResponseFuture) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://axon{SOTW_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = send.clone().ready().await.expect("h2 ready");
    let (response, body) = ready.send_request(request, false).expect("send request");
    *send = ready;
    (body, response)
}

/// The `grpc-status` a stream ends with (from its trailers or trailers-only headers).
pub async fn grpc_status(
    response: h2::client::ResponseFuture,
    within: Duration,
) -> (String, String) {
    tokio::time::timeout(within, async {
        let response = response.await.expect("response headers");
        let header = |h: &http::HeaderMap| {
            (
                h.get("grpc-status")
                    .map(|v| v.to_str().unwrap().to_string()),
                h.get("grpc-message")
                    .map(|v| v.to_str().unwrap().to_string()),
            )
        };
        if let (Some(code), message) = header(response.headers()) {
            return (code, message.unwrap_or_default());
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            if chunk.is_err() {
                break;
            }
        }
        let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
        let (code, message) = header(&trailers);
        (
            code.unwrap_or_else(|| "none".into()),
            message.unwrap_or_default(),
        )
    })
    .await
    .expect("the stream ended in time")
}

pub fn framed(message: &[u8]) -> Bytes {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    Bytes::from(out)
}

pub fn cds_request(pod: &str) -> Bytes {
    let node = gateway_node(&format!(
        "router~10.0.0.1~{pod}.istio-system~istio-system.svc.cluster.local"
    ));
    let req = DiscoveryRequest {
        type_url: CDS.to_string(),
        node: Some(node),
        ..Default::default()
    };
    framed(&req.encode_to_vec())
}

/// One ServiceEntry.
pub const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc, namespace: demo}\nspec:\n  hosts: [svc.demo.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.9}]\n";

/// axon on [`MESH`] with the limits file `limits`; the directories live as long as it.
pub fn start(limits: &str) -> (ConfigDir, ConfigDir, Axon) {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let limits_dir = ConfigDir::new();
    limits_dir.write("limits.toml", limits);
    let path = limits_dir.file("limits.toml").display().to_string();
    let axon = Axon::start_with_args(dir.path(), &["--limits", &path]);
    (dir, limits_dir, axon)
}

/// A metric's value (-1 when absent).
pub fn metric(axon: &Axon, name: &str) -> f64 {
    axon.metric(&format!("{name} ")).unwrap_or(-1.0)
}

/// The responses of a stream, decoded from its body's gRPC messages.
pub struct Responses {
    body: h2::RecvStream,
    buf: bytes::BytesMut,
}

impl Responses {
    pub fn new(body: h2::RecvStream) -> Responses {
        Responses {
            body,
            buf: bytes::BytesMut::new(),
        }
    }

    /// The next response, or `None` when the stream ends.
    pub async fn next(
        &mut self,
    ) -> Option<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse> {
        use bytes::Buf;
        loop {
            if self.buf.len() >= 5 {
                let len = u32::from_be_bytes(self.buf[1..5].try_into().unwrap()) as usize;
                if self.buf.len() >= 5 + len {
                    self.buf.advance(5);
                    let message = self.buf.split_to(len);
                    return Some(
                        prost::Message::decode(message.freeze()).expect("a DiscoveryResponse"),
                    );
                }
            }
            let chunk = self.body.data().await?.ok()?;
            let _ = self.body.flow_control().release_capacity(chunk.len());
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// The `grpc-status` and `grpc-message` the stream ends with, read from its trailers
    /// within `within` (the responses before them are skipped).
    pub async fn status(mut self, within: Duration) -> (String, String) {
        tokio::time::timeout(within, async {
            while self.next().await.is_some() {}
            let trailers = self
                .body
                .trailers()
                .await
                .ok()
                .flatten()
                .unwrap_or_default();
            let field = |name: &str| {
                trailers
                    .get(name)
                    .map(|v| v.to_str().unwrap_or_default().to_string())
                    .unwrap_or_default()
            };
            (field("grpc-status"), field("grpc-message"))
        })
        .await
        .expect("the stream ended in time")
    }

    /// The next response of type `type_url` within `within` (others are skipped).
    pub async fn next_of(
        &mut self,
        type_url: &str,
        within: Duration,
    ) -> Option<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse> {
        tokio::time::timeout(within, async {
            while let Some(r) = self.next().await {
                if r.type_url == type_url {
                    return Some(r);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
    }
}

/// A framed request of `type_url` for the gateway `pod` (with its node).
pub fn request(pod: &str, type_url: &str, f: impl FnOnce(&mut DiscoveryRequest)) -> Bytes {
    let node = gateway_node(&format!(
        "router~10.0.0.1~{pod}.istio-system~istio-system.svc.cluster.local"
    ));
    let mut req = DiscoveryRequest {
        type_url: type_url.to_string(),
        node: Some(node),
        ..Default::default()
    };
    f(&mut req);
    framed(&req.encode_to_vec())
}

/// Starts a partial request: a gRPC header announcing `announce` bytes and `send` of them.
pub fn partial(announce: u32, send: usize) -> Bytes {
    let mut head = vec![0u8];
    head.extend_from_slice(&announce.to_be_bytes());
    head.extend(std::iter::repeat_n(0x0a, send));
    Bytes::from(head)
}

/// A real proxy's stream on a new connection: its first CDS request sent and answered
/// within 10 s (asserted). Returns the stream's request body and its responses.
pub async fn real_proxy(addr: SocketAddr, pod: &str) -> (h2::SendStream<Bytes>, Responses) {
    let mut send = h2_connect(addr).await;
    let (mut body, response) = open(&mut send).await;
    body.send_data(cds_request(pod), false).unwrap();
    let response = response.await.expect("response headers");
    let mut responses = Responses::new(response.into_body());
    assert!(
        responses
            .next_of(CDS, Duration::from_secs(10))
            .await
            .is_some(),
        "the proxy {pod} got no CDS answer"
    );
    (body, responses)
}
