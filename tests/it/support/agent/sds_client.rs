//! A scripted SDS client for the agent's protocol tests: a tonic
//! `SecretDiscoveryServiceClient` on the agent's Unix socket, as Envoy's `sds-grpc` cluster
//! reaches it, and the secrets of a response decoded.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_client::SecretDiscoveryServiceClient;
use prost::Message;
use tonic::transport::Channel;

/// A client of the SDS server at `socket`.
pub async fn sds_client(socket: &Path) -> SecretDiscoveryServiceClient<Channel> {
    let channel = tonic::transport::Endpoint::from_static("http://agent.invalid")
        .connect_with_connector(UdsConnect(socket.to_path_buf()))
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", socket.display()));
    SecretDiscoveryServiceClient::new(channel)
}

/// The secrets of an SDS response (panics on one that does not decode).
pub fn secrets(response: &DiscoveryResponse) -> Vec<Secret> {
    response
        .resources
        .iter()
        .map(|any| Secret::decode(any.value.as_slice()).expect("a Secret"))
        .collect()
}

#[derive(Clone)]
struct UdsConnect(PathBuf);

type UdsIo = hyper_util::rt::TokioIo<tokio::net::UnixStream>;

impl tonic::codegen::Service<http::Uri> for UdsConnect {
    type Response = UdsIo;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<UdsIo>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let path = self.0.clone();
        Box::pin(async move {
            let stream = tokio::net::UnixStream::connect(path).await?;
            Ok(hyper_util::rt::TokioIo::new(stream))
        })
    }
}
