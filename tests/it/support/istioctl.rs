//! What `istioctl proxy-status` sends over xDS, as a test client: one ADS stream (SotW), the
//! first request carrying the node istioctl's `adsc` builds (`sidecar~IP~test-1.NS~NS.svc.cluster.local`,
//! metadata `GENERATOR: event`, `SERVICE_ACCOUNT`, `NAMESPACE`, `ISTIO_VERSION:
//! 65536.65536.65536`) and a `response_nonce` of the current time, type
//! `istio.io/debug/syncz` (or `config_dump` with the proxy's `POD.NAMESPACE`); it waits for
//! the first response (`adsc.WaitVersion`). Over raw HTTP/2, in plaintext or over TLS with a
//! bearer token (istioctl's `--xds-address` with a token of `NAMESPACE/default`).

#![allow(dead_code)] // each test file uses some of it

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use prost::Message;
use rustls::pki_types::ServerName;

pub const SYNCZ: &str = "istio.io/debug/syncz";
pub const CONFIG_DUMP: &str = "istio.io/debug/config_dump";
const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// The node istioctl's xDS client presents for namespace `ns` (service account `default`).
pub fn istioctl_node(ns: &str) -> Node {
    let s = |v: &str| Value {
        kind: Some(Kind::StringValue(v.to_string())),
    };
    Node {
        id: format!("sidecar~10.0.0.250~test-1.{ns}~{ns}.svc.cluster.local"),
        metadata: Some(Struct {
            fields: [
                ("GENERATOR".to_string(), s("event")),
                ("SERVICE_ACCOUNT".to_string(), s("default")),
                ("NAMESPACE".to_string(), s(ns)),
                ("ISTIO_VERSION".to_string(), s("65536.65536.65536")),
            ]
            .into(),
        }),
        ..Default::default()
    }
}

/// istioctl's request of `type_url` for `names`, as namespace `ns`.
pub fn istioctl_request(ns: &str, type_url: &str, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(istioctl_node(ns)),
        type_url: type_url.to_string(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        // adsc's `Send` sets it to `time.Now().String()`.
        response_nonce: "2026-12-06 15:00:00.000000000 +0000 UTC m=+0.1".to_string(),
        ..Default::default()
    }
}

/// How the client reaches axon.
pub enum Port {
    Plaintext,
    /// The TLS port: axon's root (PEM file) and the caller's bearer token.
    Tls {
        root: std::path::PathBuf,
        token: String,
    },
}

/// A refused stream: its `grpc-status` and message.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    pub code: String,
    pub message: String,
}

/// Sends `request` as istioctl does and returns the first response (within 20 s).
pub fn ask(
    addr: SocketAddr,
    port: &Port,
    request: DiscoveryRequest,
) -> Result<DiscoveryResponse, Refused> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async {
            let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
            let call = async {
                match port {
                    Port::Plaintext => call(tcp, "http", None, request).await,
                    Port::Tls { root, token } => {
                        let tls = tls_connect(tcp, root).await;
                        call(tls, "https", Some(token), request).await
                    }
                }
            };
            tokio::time::timeout(Duration::from_secs(20), call).await
        })
        .expect("axon answered within 20 s")
}

async fn tls_connect(
    tcp: tokio::net::TcpStream,
    root: &std::path::Path,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let config = super::pki::client_config(root, b"h2");
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from("istiod.istio-system.svc").unwrap();
    connector.connect(name, tcp).await.expect("TLS handshake")
}

async fn call<IO>(
    io: IO,
    scheme: &str,
    token: Option<&String>,
    request: DiscoveryRequest,
) -> Result<DiscoveryResponse, Refused>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, conn) = h2::client::handshake(io).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send = send.ready().await.expect("h2 ready");
    let mut builder = http::Request::builder()
        .method("POST")
        .uri(format!("{scheme}://istiod.istio-system.svc{ADS_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let (response, mut body) = send
        .send_request(builder.body(()).unwrap(), false)
        .expect("send request");
    let mut frame = BytesMut::new();
    frame.put_u8(0);
    frame.put_u32(request.encoded_len() as u32);
    request.encode(&mut frame).unwrap();
    // The stream stays open, as istioctl's does, until the answer is in.
    body.send_data(frame.freeze(), false)
        .expect("send the request");
    let response = response.await.expect("response headers");
    if let Some(code) = response.headers().get("grpc-status") {
        return Err(refused(Some(code), response.headers().get("grpc-message")));
    }
    let mut body = response.into_body();
    let mut data = BytesMut::new();
    loop {
        if data.len() >= 5 {
            let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
            if data.len() >= 5 + len {
                return Ok(DiscoveryResponse::decode(&data[5..5 + len]).expect("a response"));
            }
        }
        match body.data().await {
            Some(Ok(chunk)) => {
                let chunk: Bytes = chunk;
                let _ = body.flow_control().release_capacity(chunk.len());
                data.extend_from_slice(&chunk);
            }
            Some(Err(e)) => {
                return Err(Refused {
                    code: "reset".into(),
                    message: e.to_string(),
                });
            }
            None => break,
        }
    }
    let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
    Err(refused(
        trailers.get("grpc-status"),
        trailers.get("grpc-message"),
    ))
}

fn refused(code: Option<&http::HeaderValue>, message: Option<&http::HeaderValue>) -> Refused {
    Refused {
        code: code
            .map(|c| c.to_str().unwrap().to_string())
            .unwrap_or_default(),
        message: message
            .map(|m| m.to_str().unwrap().to_string())
            .unwrap_or_default(),
    }
}
