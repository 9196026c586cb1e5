//! The monitoring HTTP server: `/metrics`, `/healthz`, `/ready` and `/debug/syncz`.
//!
//! `/ready` reads a [`Readiness`] gate: ready once the first PushContext is built and every
//! Kubernetes registry has finished its initial lists.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use actix::Addr;
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use crate::actors::connection::ConnectionStatus;
use crate::actors::debouncer::SourceId;
use crate::actors::push_queue::{CollectStatus, PushQueue};
use crate::metrics::Metrics;

/// The `/ready` gate, shared by the SnapshotBuilder (which reports the sources of every
/// context it builds) and the registries that must finish their initial lists first.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    state: Arc<Mutex<ReadinessState>>,
}

#[derive(Debug, Default)]
struct ReadinessState {
    /// Registries that have not finished their initial lists.
    listing: BTreeSet<SourceId>,
    /// Registries that have, but are in no built context yet.
    unbuilt: BTreeSet<SourceId>,
    built: bool,
}

impl Readiness {
    /// A gate that waits for a first context and for `registries` to sync and be built.
    pub fn new(registries: &[SourceId]) -> Self {
        let state = ReadinessState {
            listing: registries.iter().copied().collect(),
            ..Default::default()
        };
        Readiness {
            state: Arc::new(Mutex::new(state)),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ReadinessState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `source` has finished its initial lists. Call it before sending them: ready again
    /// only once a context built from them is.
    pub fn registry_synced(&self, source: SourceId) {
        let mut state = self.state();
        if state.listing.remove(source) {
            state.unbuilt.insert(source);
        }
    }

    /// A context was built from the configs of `sources`.
    pub fn built(&self, sources: impl IntoIterator<Item = SourceId>) {
        let mut state = self.state();
        state.built = true;
        for source in sources {
            state.unbuilt.remove(source);
        }
    }

    /// `Ok` when ready, else why not.
    pub fn check(&self) -> Result<(), &'static str> {
        let state = self.state();
        if !state.listing.is_empty() {
            Err("not ready: waiting for the initial Kubernetes lists\n")
        } else if !state.built || !state.unbuilt.is_empty() {
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
    fn ready_needs_every_registry_in_a_built_snapshot() {
        let gate = Readiness::new(&["kubernetes", "kubernetes-istio"]);
        gate.built(["files"]);
        assert!(gate.check().is_err(), "two registries still listing");
        gate.registry_synced("kubernetes");
        gate.built(["files", "kubernetes"]);
        assert!(gate.check().is_err(), "one registry still listing");
        gate.registry_synced("kubernetes-istio");
        // A build in flight when the registry synced does not hold its configs.
        gate.built(["files", "kubernetes"]);
        assert!(
            gate.check().is_err(),
            "no snapshot with kubernetes-istio yet"
        );
        gate.built(["files", "kubernetes", "kubernetes-istio"]);
        assert_eq!(gate.check(), Ok(()));
        gate.registry_synced("kubernetes");
        assert_eq!(gate.check(), Ok(()), "a registry syncs once");

        let files_only = Readiness::new(&[]);
        assert!(files_only.check().is_err());
        files_only.built(["files"]);
        assert_eq!(files_only.check(), Ok(()));
    }
}
