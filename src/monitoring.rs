//! The monitoring HTTP server: `/metrics`, `/healthz`, `/ready` and `/debug/syncz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix::Addr;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::connection::ConnectionStatus;
use crate::actors::push_queue::{CollectStatus, PushQueue};
use crate::metrics::Metrics;

#[derive(Clone)]
pub struct Monitoring {
    pub metrics: Metrics,
    /// True once the first PushContext is built.
    pub ready: Arc<AtomicBool>,
    pub push_queue: Addr<PushQueue>,
}

pub fn router(state: Monitoring) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .route("/debug/syncz", get(syncz))
        .with_state(state)
}

/// Per connected proxy and type: nonce sent and acked, versions, last NACK.
async fn syncz(
    State(state): State<Monitoring>,
) -> Result<Json<Vec<ConnectionStatus>>, (StatusCode, String)> {
    state
        .push_queue
        .send(CollectStatus)
        .await
        .map(Json)
        .map_err(|e| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("push queue unreachable: {e}\n"),
            )
        })
}

async fn metrics(State(state): State<Monitoring>) -> ([(&'static str, &'static str); 1], String) {
    (
        [("content-type", "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

async fn ready(State(state): State<Monitoring>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no config snapshot built yet\n",
        )
    }
}
