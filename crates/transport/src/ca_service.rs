//! istiod's CA service on the TLS xDS port: `istio.v1.auth.IstioCertificateService/
//! CreateCertificate` (istio/api `security/v1alpha1/ca.proto`; istiod's
//! `security/pkg/server/ca/server.go`), one unary call routed by path as ADS is.
//!
//! The caller proves an identity as an ADS stream on this port does (its client
//! certificate's SPIFFE identity: one `--client-ca` signed, or one this CA issued, a renewal;
//! else its bearer token, `--token-auth`); the request (one length-prefixed message, at most
//! `max_csr_bytes`, whole within `message_timeout`) is decoded with prost, and
//! [`axon_ca::Authority`] signs its CSR for that identity alone. The answer is istiod's
//! `cert_chain` with `grpc-status` trailers; refusals are UNAUTHENTICATED (no identity),
//! PERMISSION_DENIED (an identity of another trust domain), INVALID_ARGUMENT (a bad CSR or
//! TTL, as istiod), counted with istiod's `citadel_server_*` families and logged at most once
//! a second. The plaintext port refuses the call (UNIMPLEMENTED), as istiod serves its CA
//! over TLS only.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use prost::Message;
use tonic::Status;
use tonic::body::Body;

use axon_ca::CaStore;
use axon_model::identity::Identity;

use super::auth::{Proof, bearer};
use super::{Inner, server};

/// The method's path.
pub const CA_PATH: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";

/// istio/api `IstioCertificateRequest`; `metadata` (4, a `google.protobuf.Struct` of
/// impersonation and cert-signer options axon does not serve) is skipped as unknown.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateRequest {
    /// PEM-encoded certificate request.
    #[prost(string, tag = "1")]
    pub csr: String,
    /// The requested lifetime, seconds.
    #[prost(int64, tag = "3")]
    pub validity_duration: i64,
}

/// istio/api `IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IstioCertificateResponse {
    /// The leaf, the intermediates, the root last; PEM each.
    #[prost(string, repeated, tag = "1")]
    pub cert_chain: Vec<String>,
}

/// The CA the TLS port serves: the store and the request bound.
pub(crate) struct CaServing {
    pub(crate) store: Arc<CaStore>,
    pub(crate) max_request_bytes: usize,
    log: LogLimiter,
}

impl CaServing {
    pub(crate) fn new(store: Arc<CaStore>, max_request_bytes: usize) -> CaServing {
        CaServing {
            store,
            max_request_bytes,
            log: LogLimiter::default(),
        }
    }
}

/// At most one warning a second; the ones left out are counted into the next.
#[derive(Default)]
struct LogLimiter(Mutex<Option<(Instant, u64)>>);

impl LogLimiter {
    /// `Some(n)`: log now, `n` warnings were left out since the last one.
    fn allow(&self) -> Option<u64> {
        let mut last = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *last {
            Some((at, skipped)) if at.elapsed() < Duration::from_secs(1) => {
                *skipped += 1;
                None
            }
            _ => {
                let skipped = last.map_or(0, |(_, s)| s);
                *last = Some((Instant::now(), 0));
                Some(skipped)
            }
        }
    }
}

impl Inner {
    /// `CreateCertificate`.
    pub(crate) async fn create_certificate(
        &self,
        request: http::Request<Body>,
    ) -> http::Response<Body> {
        let Some(authn) = request.extensions().get::<server::Authn>().cloned() else {
            return Status::unimplemented(
                "the CA (istio.v1.auth.IstioCertificateService) is served on the TLS xDS port \
                 only (--xds-tls-addr), as istiod's",
            )
            .into_http();
        };
        let Some(ca) = &self.ca else {
            return Status::unimplemented("this axon runs no CA: give it --ca-dir").into_http();
        };
        let metrics = &self.metrics.ca;
        metrics.csr.inc();
        let token = bearer(&request);
        let identity = match self.prove(server::Authn { token, ..authn }).await {
            Ok(identity) => identity,
            Err(refusal) => {
                metrics.authn_failures.inc();
                let status = match refusal {
                    Proof::Unauthenticated(why) => {
                        Status::unauthenticated(format!("request authenticate failure: {why}"))
                    }
                    Proof::Unavailable(why) => Status::unavailable(why),
                };
                self.ca_warn(ca, "CA: refused", &status);
                return status.into_http();
            }
        };
        if identity.trust_domain != self.trust_domain {
            metrics
                .permission_denied
                .with_label_values(&["trust_domain"])
                .inc();
            let status = Status::permission_denied(format!(
                "{identity} is of trust domain {}; this CA signs for {}",
                identity.trust_domain, self.trust_domain
            ));
            self.ca_warn(ca, "CA: refused", &status);
            return status.into_http();
        }
        let message = match read_one(
            request.into_body(),
            ca.max_request_bytes,
            self.limits.message_timeout,
        )
        .await
        {
            Ok(message) => message,
            Err(status) => {
                metrics.csr_parsing_errors.inc();
                self.ca_warn(ca, "CA: a request that does not read", &status);
                return status.into_http();
            }
        };
        let Ok(request) = IstioCertificateRequest::decode(message) else {
            metrics.csr_parsing_errors.inc();
            let status = Status::invalid_argument("the IstioCertificateRequest does not decode");
            self.ca_warn(ca, "CA: a request that does not read", &status);
            return status.into_http();
        };
        self.sign(ca, &identity, &request)
    }

    fn sign(
        &self,
        ca: &CaServing,
        identity: &Identity,
        request: &IstioCertificateRequest,
    ) -> http::Response<Body> {
        let metrics = &self.metrics.ca;
        let authority = ca.store.current();
        let root_expiry = authority
            .root_not_after()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        metrics
            .root_expiry
            .set(i64::try_from(root_expiry).unwrap_or(i64::MAX));
        let signed = authority.sign_csr(
            &request.csr,
            &identity.to_string(),
            request.validity_duration,
            ca.store.ttls(),
            SystemTime::now(),
        );
        match signed {
            Ok(cert_chain) => {
                metrics.success.inc();
                tracing::debug!(identity = %identity, "CA: certificate issued");
                grpc_ok(&IstioCertificateResponse { cert_chain })
            }
            Err(e) => {
                metrics
                    .sign_errors
                    .with_label_values(&[e.error_type()])
                    .inc();
                let message = format!("CSR signing error ({e})");
                let status = if e.is_invalid_argument() {
                    Status::invalid_argument(message)
                } else {
                    Status::internal(message)
                };
                self.ca_warn(ca, "CA: signing refused", &status);
                status.into_http()
            }
        }
    }

    fn ca_warn(&self, ca: &CaServing, what: &str, status: &Status) {
        if let Some(skipped) = ca.log.allow() {
            tracing::warn!(
                code = ?status.code(),
                reason = %axon_config::log_safe::Escaped(status.message()),
                left_out = skipped,
                "{what} (logged at most once a second)"
            );
        }
    }
}

/// The one length-prefixed message of a unary call, at most `max` bytes, whole within
/// `timeout`.
async fn read_one(body: Body, max: usize, timeout: Duration) -> Result<Bytes, Status> {
    let limited = http_body_util::Limited::new(body, max.saturating_add(5));
    let collected = match tokio::time::timeout(timeout, limited.collect()).await {
        Err(_) => {
            return Err(Status::deadline_exceeded(format!(
                "the request was not whole within {timeout:?} (message_timeout)"
            )));
        }
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(Status::resource_exhausted(format!(
                "the request is larger than {max} bytes (max_csr_bytes)"
            )));
        }
        Ok(Err(e)) => return Err(Status::cancelled(format!("reading the request: {e}"))),
        Ok(Ok(collected)) => collected.to_bytes(),
    };
    if collected.len() < 5 {
        return Err(Status::invalid_argument("no gRPC message in the request"));
    }
    if collected[0] != 0 {
        return Err(Status::unimplemented(
            "compressed requests are not accepted",
        ));
    }
    let len = u32::from_be_bytes([collected[1], collected[2], collected[3], collected[4]]) as usize;
    if len != collected.len() - 5 {
        return Err(Status::invalid_argument(
            "a unary call carries exactly one whole message",
        ));
    }
    Ok(collected.slice(5..))
}

/// A unary answer: the framed message, then `grpc-status: 0`.
fn grpc_ok(message: &impl Message) -> http::Response<Body> {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Encoding into a buffer of the encoded length cannot fail.
    let _ = message.encode(&mut buf);
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
    let frames: Vec<Result<http_body::Frame<Bytes>, Infallible>> = vec![
        Ok(http_body::Frame::data(buf.freeze())),
        Ok(http_body::Frame::trailers(trailers)),
    ];
    let body = http_body_util::StreamBody::new(futures::stream::iter(frames));
    let mut response = http::Response::new(Body::new(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_let_through_once_a_second() {
        let log = LogLimiter::default();
        assert_eq!(log.allow(), Some(0));
        assert_eq!(log.allow(), None);
        assert_eq!(log.allow(), None);
        log.0.lock().unwrap().as_mut().unwrap().0 = Instant::now() - Duration::from_secs(2);
        assert_eq!(log.allow(), Some(2));
    }
}
