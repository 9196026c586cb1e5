//! The monitoring HTTP server: `/metrics`, `/healthz`, `/ready` and `/debug/syncz`.
//!
//! `/ready` asks the SnapshotBuilder ([`GetReady`]): ready once a PushContext is built that
//! holds every Kubernetes registry's initial lists. Every answer comes from an actor, by
//! message.

use actix::{Addr, Recipient};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::directory::{CollectStatus, ConnectionDirectory};
use crate::actors::messages::GetWaiting;
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
    /// Says why the config directory is not served yet, when `/ready` is not.
    pub files: Option<Recipient<GetWaiting>>,
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

async fn ready(State(state): State<Monitoring>) -> (StatusCode, String) {
    let why = match state.builder.send(GetReady).await {
        Ok(Ok(())) => return (StatusCode::OK, "ready\n".to_string()),
        Ok(Err(why)) => why,
        Err(_) => "not ready: snapshot builder unreachable\n".to_string(),
    };
    // The config directory says why it has not been served yet, if that is the reason.
    let files = match &state.files {
        Some(files) => files.send(GetWaiting).await.ok().flatten(),
        None => None,
    };
    let body = match files {
        Some(detail) => format!("not ready: {detail}\n"),
        None => why,
    };
    (StatusCode::SERVICE_UNAVAILABLE, body)
}
