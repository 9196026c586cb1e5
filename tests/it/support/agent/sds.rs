//! The agent's SDS server on its Unix socket, as pilot-agent's
//! (`security/pkg/nodeagent/sds/sdsservice.go`): state-of-the-world `StreamSecrets` for
//! `default` (the chain without the root, and the key, inline) and `ROOTCA` (the root as
//! `trusted_ca`). A stream is answered once the first certificate is there, again when the
//! names it asks for change, and pushed a new version whenever the certificate is renewed.
//! ACKs are counted; a NACK is recorded (`AgentStatus::nacks`) and not answered. Delta and
//! `FetchSecrets` are not served (pilot-agent serves neither).

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::secret::v3::secret_discovery_service_server::{
    SecretDiscoveryService, SecretDiscoveryServiceServer,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use tokio::net::UnixListener;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, UnixListenerStream};
use tonic::{Request, Response, Status, Streaming};

use super::{Issued, ROOT_SECRET, Shared, WORKLOAD_SECRET};

/// The type URL of an SDS resource.
pub const SECRET_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// Serves SDS on `listener` until the agent's runtime stops.
pub(crate) async fn serve(listener: UnixListener, shared: Arc<Shared>) {
    let result = tonic::transport::Server::builder()
        .add_service(SecretDiscoveryServiceServer::new(Sds {
            shared: shared.clone(),
        }))
        .serve_with_incoming(UnixListenerStream::new(listener))
        .await;
    if let Err(e) = result {
        shared.update(|s| s.last_error = Some(format!("SDS server: {e}")));
    }
}

struct Sds {
    shared: Arc<Shared>,
}

type ResponseStream<T> = ReceiverStream<Result<T, Status>>;

#[tonic::async_trait]
impl SecretDiscoveryService for Sds {
    type DeltaSecretsStream = ResponseStream<DeltaDiscoveryResponse>;
    type StreamSecretsStream = ResponseStream<DiscoveryResponse>;

    async fn delta_secrets(
        &self,
        _: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaSecretsStream>, Status> {
        Err(Status::unimplemented("DeltaSecrets is not served"))
    }

    async fn stream_secrets(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamSecretsStream>, Status> {
        let (tx, rx) = mpsc::channel(4);
        self.shared.update(|s| s.streams += 1);
        tokio::spawn(stream(request.into_inner(), tx, self.shared.clone()));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn fetch_secrets(
        &self,
        _: Request<DiscoveryRequest>,
    ) -> Result<Response<DiscoveryResponse>, Status> {
        Err(Status::unimplemented("FetchSecrets is not served"))
    }
}

/// What one stream was last sent.
#[derive(Default)]
struct Sent {
    nonce: String,
    version: u64,
    names: Vec<String>,
}

/// One `StreamSecrets` stream: requests in, responses out, and a push on every renewal.
async fn stream(
    mut requests: Streaming<DiscoveryRequest>,
    tx: mpsc::Sender<Result<DiscoveryResponse, Status>>,
    shared: Arc<Shared>,
) {
    let mut certs = shared.current.subscribe();
    let mut wanted: Option<Vec<String>> = None;
    let mut sent: Option<Sent> = None;
    let mut nonces = 0u64;
    loop {
        tokio::select! {
            request = requests.message() => {
                let Ok(Some(request)) = request else { return };
                let last_nonce = sent.as_ref().map_or("", |s| s.nonce.as_str());
                if !request.response_nonce.is_empty() && request.response_nonce != last_nonce {
                    continue; // an answer to a response superseded since
                }
                if let Some(error) = &request.error_detail {
                    let note = format!(
                        "{:?} nonce {}: {}",
                        request.resource_names, request.response_nonce, error.message
                    );
                    shared.update(|s| s.nacks.push(note));
                    continue;
                }
                if !request.response_nonce.is_empty() {
                    shared.update(|s| s.acks += 1);
                }
                wanted = Some(request.resource_names);
            }
            changed = certs.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
        let current = certs.borrow_and_update().clone();
        let (Some(names), Some(issued)) = (&wanted, current) else {
            continue;
        };
        if sent
            .as_ref()
            .is_some_and(|s| s.version == issued.version && &s.names == names)
        {
            continue;
        }
        nonces += 1;
        let response = DiscoveryResponse {
            version_info: issued.version.to_string(),
            resources: names
                .iter()
                .filter_map(|n| secret(n, &issued))
                .map(|s| Any {
                    type_url: SECRET_TYPE.to_string(),
                    value: s.encode_to_vec(),
                })
                .collect(),
            type_url: SECRET_TYPE.to_string(),
            nonce: nonces.to_string(),
            ..Default::default()
        };
        if tx.send(Ok(response)).await.is_err() {
            return;
        }
        shared.update(|s| s.pushes += 1);
        sent = Some(Sent {
            nonce: nonces.to_string(),
            version: issued.version,
            names: names.clone(),
        });
    }
}

/// The secret `name` as pilot-agent's `toEnvoySecret` makes it; `None` for a name the
/// agent does not serve.
fn secret(name: &str, issued: &Issued) -> Option<Secret> {
    let inline = |pem: &str| DataSource {
        specifier: Some(Specifier::InlineBytes(pem.as_bytes().to_vec())),
        ..Default::default()
    };
    let r#type = match name {
        WORKLOAD_SECRET => secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&issued.chain_pem)),
            private_key: Some(inline(&issued.key_pem)),
            ..Default::default()
        }),
        ROOT_SECRET => secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(&issued.root_pem)),
            ..Default::default()
        }),
        _ => return None,
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(r#type),
    })
}
