//! The validating admission webhook (istiod's, on `--webhook-addr`, istiod's port 15017):
//! HTTPS, `POST /validate` (and `/validate/…`) with an AdmissionReview (`admission.k8s.io/v1`,
//! `application/json`), answered by [`review::review`] with the rules and messages of
//! `axon validate`. Its certificate is axon's CA's (issued for the webhook Service's names,
//! renewed at half its life) or `--webhook-cert`/`--webhook-key` (re-read when they change),
//! through the transport's [`TlsReloader`]; HTTP/2 or HTTP/1.1, as the client offers.
//!
//! Bounded as every input is: at most `max_webhook_connections` connections at once (more
//! are closed on accept), a TLS handshake within 10 s, a request's headers within
//! `webhook_request_timeout` and the whole request within it too (else 408), a body of at
//! most `max_webhook_request_bytes` (else 413). It holds no state: the decision is pure.

pub mod review;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use axon_metrics::Metrics;
use axon_transport::tls::TlsReloader;

/// The webhook's bounds (from the limits file).
#[derive(Debug, Clone, Copy)]
pub struct WebhookLimits {
    pub max_request_bytes: usize,
    pub request_timeout: Duration,
    pub max_connections: usize,
}

/// The webhook's routes: `/validate` and `/validate/…`, POST only; counted in istiod's
/// `galley_validation_passed`, `galley_validation_failed{reason}` and
/// `galley_validation_http_error{status}`.
pub fn router(limits: WebhookLimits, metrics: Metrics) -> Router {
    let timeout = limits.request_timeout;
    let errors = metrics.validation_http_error.clone();
    Router::new()
        .route("/validate", post(validate))
        .route("/validate/", post(validate))
        .route("/validate/{*rest}", post(validate))
        .with_state(metrics)
        .layer(DefaultBodyLimit::max(limits.max_request_bytes))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let errors = errors.clone();
                async move {
                    let response = match tokio::time::timeout(timeout, next.run(request)).await {
                        Ok(response) => response,
                        Err(_) => (
                            StatusCode::REQUEST_TIMEOUT,
                            format!(
                                "the request did not arrive and get an answer within {timeout:?}\n"
                            ),
                        )
                            .into_response(),
                    };
                    if !response.status().is_success() {
                        errors
                            .with_label_values(&[response.status().as_str()])
                            .inc();
                    }
                    response
                }
            },
        ))
}

async fn validate(State(metrics): State<Metrics>, headers: HeaderMap, body: Bytes) -> Response {
    let json = headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|t| t.trim() == "application/json")
        });
    if !json {
        return (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid Content-Type, want `application/json`\n",
        )
            .into_response();
    }
    if body.is_empty() {
        return (StatusCode::BAD_REQUEST, "no body found\n").into_response();
    }
    match review::review(&body) {
        Ok(reviewed) => {
            let [group, version, resource] = &reviewed.resource;
            let labels = [group.as_str(), version.as_str(), resource.as_str()];
            match reviewed.verdict {
                review::Verdict::Allowed => {
                    metrics.validation_passed.with_label_values(&labels).inc()
                }
                review::Verdict::Skipped => {}
                review::Verdict::Refused(reason) => {
                    let [g, v, r] = labels;
                    metrics
                        .validation_failed
                        .with_label_values(&[g, v, r, reason])
                        .inc();
                    let message = &reviewed.answer["response"]["status"]["message"];
                    tracing::info!(
                        message = %axon_config::log_safe::Escaped(message.as_str().unwrap_or_default()),
                        "webhook: refused"
                    );
                }
            }
            axum::Json(reviewed.answer).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}

/// Accepts HTTPS connections on `listener` and serves the webhook on each, until the task is
/// dropped.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<TlsReloader>,
    limits: WebhookLimits,
    metrics: Metrics,
) {
    let router = router(limits, metrics);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut refusing = false;
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "webhook: accept failed; retrying in 100 ms");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !std::mem::replace(&mut refusing, true) {
                tracing::warn!(
                    max_webhook_connections = limits.max_connections,
                    "webhook: connections at max_webhook_connections; new ones are closed at once"
                );
            }
            continue;
        };
        refusing = false;
        let acceptor = tls.acceptor();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let Ok(Ok(tls)) =
                tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await
            else {
                return;
            };
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.request_timeout);
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(16);
            let _ = builder.serve_connection(TokioIo::new(tls), service).await;
        });
    }
}
