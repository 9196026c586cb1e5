//! The monitoring HTTP server: `/metrics`, `/healthz`, `/ready` and `/debug/syncz`.
//!
//! `/ready` reads a [`Readiness`] gate: ready once the first PushContext is built and every
//! Kubernetes registry has finished its initial lists.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use actix::Addr;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::connection::ConnectionStatus;
use crate::actors::push_queue::{CollectStatus, PushQueue};
use crate::metrics::Metrics;

/// The `/ready` gate, shared by the SnapshotBuilder (which sets [`Readiness::snapshot`]) and
/// the registries that must finish their initial lists first.
#[derive(Clone, Debug)]
pub struct Readiness {
    /// Set by the SnapshotBuilder when a PushContext is built.
    snapshot: Arc<AtomicBool>,
    /// Registries that have not finished their initial lists yet.
    syncing: Arc<AtomicUsize>,
}

impl Readiness {
    /// A gate that waits for a first snapshot and for `registries` registries to sync.
    pub fn new(registries: usize) -> Self {
        Readiness {
            snapshot: Arc::new(AtomicBool::new(false)),
            syncing: Arc::new(AtomicUsize::new(registries)),
        }
    }

    /// The flag the SnapshotBuilder sets when it has built a context.
    pub fn snapshot(&self) -> Arc<AtomicBool> {
        self.snapshot.clone()
    }

    /// One registry has finished its initial lists (and has just sent them to the
    /// Debouncer): ready again only once a context with them is built.
    pub fn registry_synced(&self) {
        self.snapshot.store(false, Ordering::Release);
        let _ = self
            .syncing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        if self.syncing.load(Ordering::Acquire) > 0 {
            Err("not ready: waiting for the initial Kubernetes lists\n")
        } else if !self.snapshot.load(Ordering::Acquire) {
            Err("not ready: no config snapshot built yet\n")
        } else {
            Ok(())
        }
    }
}

#[derive(Clone)]
pub struct Monitoring {
    pub metrics: Metrics,
    /// Ready once the first PushContext is built and every registry has synced.
    pub ready: Readiness,
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
    match state.ready.check() {
        Ok(()) => (StatusCode::OK, "ready\n"),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_needs_a_snapshot_and_every_registry() {
        let gate = Readiness::new(2);
        let snapshot = gate.snapshot();
        snapshot.store(true, Ordering::Release);
        assert!(gate.check().is_err(), "two registries still syncing");
        gate.registry_synced();
        snapshot.store(true, Ordering::Release);
        assert!(gate.check().is_err(), "one registry still syncing");
        gate.registry_synced();
        assert!(gate.check().is_err(), "no snapshot since the last sync");
        snapshot.store(true, Ordering::Release);
        assert_eq!(gate.check(), Ok(()));
        assert_eq!(
            Readiness::new(0).check(),
            Err("not ready: no config snapshot built yet\n")
        );
    }
}
