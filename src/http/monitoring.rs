//! The monitoring HTTP server: `/metrics`, `/healthz` and `/ready`, and nothing per proxy
//! (that is on the debug server, which listens on localhost by default): this address is
//! open (`0.0.0.0`) for the kubelet's probes and Prometheus.
//!
//! Beside them, what peer replicas ask ([`super::fleet`]): `/fleet/replica` (a name and a
//! count) and, only with peers configured, `/fleet/syncz` and `/fleet/distribution`: the
//! one per-proxy exception, this replica's part of the fleet view, which needs the debug
//! token when there is one.
//!
//! `/ready` asks the SnapshotBuilder ([`GetReady`]): ready once a PushContext is built that
//! holds every registry's first update (the config directory's says why it waits, asked of
//! the FileRegistry by [`GetWaiting`]), and not while draining.

use actix::{Addr, Recipient};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::messages::GetWaiting;
use crate::actors::snapshot_builder::{GetReady, SnapshotBuilder};
use axon_metrics::Metrics;

#[derive(Clone)]
pub struct Monitoring {
    pub metrics: Metrics,
    /// Answers `/ready`.
    pub builder: Addr<SnapshotBuilder>,
    /// Says why the config directory is not served yet, when `/ready` is not.
    pub files: Option<Recipient<GetWaiting>>,
    /// What the peer replicas ask.
    pub peers: super::fleet::PeerSide,
}

pub fn router(state: Monitoring) -> Router {
    let peers = Router::new()
        .route("/fleet/replica", get(super::fleet::replica))
        .route("/fleet/syncz", get(super::fleet::syncz))
        .route("/fleet/distribution", get(super::fleet::distribution))
        .with_state(state.peers.clone());
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/ready", get(ready))
        .with_state(state)
        .merge(peers)
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
