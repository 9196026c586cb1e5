//! The JWKS resolver: axon fetches the keys of RequestAuthentication rules that name a
//! `jwksUri` (or only an issuer: its OpenID discovery document's `jwks_uri`) and inlines them
//! in the proxies' JWT filters, as istiod's `JwksResolver` (`pilot/pkg/model/jwks_resolver.go`).
//!
//! ```text
//!  SnapshotBuilder ─watch: the sources the built context's rules read─▶ resolver task
//!  resolver task ─GET (fetch::Fetcher, bounded in time and size)─▶ JWKS endpoints
//!  resolver task ─Outbox (source "jwks"): one ConfigKind::Jwks config per source─▶ Debouncer
//! ```
//!
//! A tokio task over a plain `state::JwksState`: a source is fetched as soon as a built
//! context wants it, then every `jwks_refresh_interval`, sooner after failures
//! (`jwks_refresh_interval_on_failure`, doubling); the fetched set goes to the pipeline as a
//! registry's configs do, so a rotation pushes to the proxies whose policies read it (their
//! scopes depend on the source's config key). A fetch that fails is counted
//! (`pilot_jwks_resolver_network_fetch_fail_total`) and logged at most once a minute per
//! source; the keys last fetched stay, and a source never fetched has none: its rules get a
//! key set that verifies no token (`xds` `FAIL_CLOSED_JWKS`), as istiod serves its public-only
//! JWKS. Until a source's first fetch ends, its rules fail closed too (istiod fetches within
//! its first push instead).

pub mod fetch;
mod state;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use axon_config::config_set::SourceId;
use axon_config::istio::JwksSource;

use super::outbox::Outbox;
use fetch::{FetchError, Fetcher, check_jwks, discovered_jwks_uri};
use state::JwksState;
pub use state::Schedule;

/// The resolver's source id.
pub const SOURCE: SourceId = "jwks";

/// What the resolver fetches: each source with its rule's timeout in nanoseconds.
pub use crate::actors::snapshot_builder::JwksWanted as Wanted;

/// How often one source's failures are logged.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Starts the resolver on the tokio runtime; the returned sender takes the sources every
/// built context wants (the SnapshotBuilder sends them).
pub fn start(schedule: Schedule, max_bytes: usize, outbox: Outbox) -> watch::Sender<Wanted> {
    let (tx, rx) = watch::channel(Wanted::new());
    tokio::spawn(run(
        JwksState::new(schedule),
        Fetcher::new(max_bytes),
        outbox,
        rx,
    ));
    tx
}

async fn run(
    mut state: JwksState,
    fetcher: Fetcher,
    mut outbox: Outbox,
    mut wanted: watch::Receiver<Wanted>,
) {
    // Nothing is published before a built context wants a source: an empty first update would
    // make the pipeline build a context before the registries' first configs, and proxies
    // connecting then would be sent an empty mesh.
    let mut logged: BTreeMap<JwksSource, Instant> = BTreeMap::new();
    loop {
        let next = state.next_due().map(tokio::time::Instant::from_std);
        tokio::select! {
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
                let sources = wanted.borrow_and_update().clone();
                if state.set_wanted(&sources, Instant::now()) {
                    outbox.publish(Arc::new(state.configs()), Instant::now());
                }
                for skipped in &state.skipped {
                    if should_log(&mut logged, skipped) {
                        tracing::warn!(
                            source = %skipped.url(),
                            "JWKS not fetched: more sources than max_jwks_sources; its rules fail closed"
                        );
                    }
                }
            }
            _ = sleep_until(next) => {}
        }
        let due = state.due(Instant::now());
        if due.is_empty() {
            continue;
        }
        let started = Instant::now();
        let results = futures::future::join_all(
            due.iter()
                .map(|(source, timeout)| fetch_source(&fetcher, &outbox, source, *timeout)),
        )
        .await;
        let mut changed = false;
        for ((source, _), result) in due.iter().zip(results) {
            let keys = match result {
                Ok(keys) => {
                    logged.remove(source);
                    Some(keys)
                }
                Err(e) => {
                    if should_log(&mut logged, source) {
                        tracing::warn!(
                            source = %source.url(),
                            error = %e,
                            "JWKS fetch failed; the keys last fetched stay, or its rules fail closed"
                        );
                    }
                    None
                }
            };
            if state.record(source, keys, Instant::now()) {
                tracing::info!(source = %source.url(), "JWKS fetched (new keys)");
                changed = true;
            }
        }
        if changed {
            outbox.publish(Arc::new(state.configs()), started);
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn should_log(logged: &mut BTreeMap<JwksSource, Instant>, source: &JwksSource) -> bool {
    let now = Instant::now();
    match logged.get(source) {
        Some(at) if now.duration_since(*at) < LOG_EVERY => false,
        _ => {
            logged.insert(source.clone(), now);
            true
        }
    }
}

/// The key set of `source`: its JWKS, or through its issuer's discovery document. Each GET
/// is counted a success or a failure, as istiod counts its network fetches.
async fn fetch_source(
    fetcher: &Fetcher,
    outbox: &Outbox,
    source: &JwksSource,
    timeout: Duration,
) -> Result<String, FetchError> {
    let counted = |result: Result<String, FetchError>| {
        let metrics = outbox.metrics();
        match &result {
            Ok(_) => metrics.jwks_fetch_success.inc(),
            Err(_) => metrics.jwks_fetch_fail.inc(),
        }
        result
    };
    let uri = match source {
        JwksSource::Uri(uri) => uri.clone(),
        JwksSource::Discovery(_) => {
            let document = counted(fetcher.get(&source.url(), timeout).await)?;
            discovered_jwks_uri(&document)?
        }
    };
    let keys = counted(fetcher.get(&uri, timeout).await)?;
    check_jwks(&keys)?;
    Ok(keys)
}
