//! The monitoring HTTP server: `/metrics`, `/healthz`, `/ready` and `/debug/syncz`.
//!
//! `/ready` asks the SnapshotBuilder ([`GetReady`]): ready once a PushContext is built that
//! holds every Kubernetes registry's initial lists. Every answer comes from an actor, by
//! message.

use actix::Addr;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::directory::{CollectStatus, ConnectionDirectory};
use crate::actors::snapshot_builder::{GetReady, SnapshotBuilder};
use crate::metrics::Metrics;
use crate::xds::stream::ConnectionStatus;

#[derive(Clone)]
pub struct Monitoring {
    pub metrics: Metrics,
    /// Answers `/ready`.
    pub builder: Addr<SnapshotBuilder>,
    /// Answers `/debug/syncz`.
    pub directory: Addr<ConnectionDirectory>,
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
        .directory
        .send(CollectStatus)
        .await
        .map(Json)
        .map_err(|e| {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("connection directory unreachable: {e}\n"),
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
    match state.builder.send(GetReady).await {
        Ok(Ok(())) => (StatusCode::OK, "ready\n"),
        Ok(Err(why)) => (StatusCode::SERVICE_UNAVAILABLE, why),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: snapshot builder unreachable\n",
        ),
    }
}
