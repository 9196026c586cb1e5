//! The debug HTTP server (istiod's debug endpoints, JSON), on `--debug-addr` (localhost by
//! default): `/debug/syncz`, `/debug/config_dump?proxyID=…&types=…`, `/debug/configz`,
//! `/debug/push_status`, `/debug/connections`, `/debug/adsz[?push=true]`,
//! `/debug/distribution[?key=Kind/namespace/name]`, `/version`.
//!
//! Every answer comes from the actor that owns the state, by message.

use std::collections::HashMap;

use actix::{Addr, Recipient};
use axum::Json;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use crate::actors::debouncer::Debouncer;
use crate::actors::directory::{CollectStatus, ConnectionDirectory, Dump, DumpFor};
use crate::actors::distribution::{DistributionTracker, GetDistribution};
use crate::actors::messages::ForcePush;
use crate::actors::messages::GetConfigz;
use crate::actors::snapshot_builder::{GetPushStatus, SnapshotBuilder};
use crate::xds::ResourceType;

#[derive(Clone)]
pub struct Debug {
    pub directory: Addr<ConnectionDirectory>,
    pub builder: Addr<SnapshotBuilder>,
    /// The config directory's registry, when there is one.
    pub registry: Option<Recipient<GetConfigz>>,
    /// The Kubernetes registries (`--kubernetes`).
    pub kubernetes: Vec<Recipient<GetConfigz>>,
    pub debouncer: Addr<Debouncer>,
    pub distribution: Addr<DistributionTracker>,
}

type Answer = Result<Json<Value>, (StatusCode, String)>;

fn unavailable(e: impl std::fmt::Display) -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("actor unreachable: {e}\n"),
    )
}

pub fn router(state: Debug) -> Router {
    Router::new()
        .route("/debug/syncz", get(syncz))
        .route("/debug/config_dump", get(config_dump))
        .route("/debug/configz", get(configz))
        .route("/debug/push_status", get(push_status))
        .route("/debug/connections", get(connections))
        .route("/debug/adsz", get(adsz))
        .route("/debug/distribution", get(distribution))
        .route("/version", get(version))
        .with_state(state)
}

async fn syncz(State(s): State<Debug>) -> Answer {
    let all = s.directory.send(CollectStatus).await.map_err(unavailable)?;
    Ok(Json(json!(all)))
}

/// `types` takes istiod's short names or type URLs, comma-separated.
async fn config_dump(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let proxy = q.get("proxyID").ok_or((
        StatusCode::BAD_REQUEST,
        "proxyID is required (a connected proxy's node id)\n".to_string(),
    ))?;
    let mut types = Vec::new();
    for t in q
        .get("types")
        .into_iter()
        .flat_map(|t| t.split(','))
        .filter(|t| !t.is_empty())
    {
        let parsed = ResourceType::PUSH_ORDER
            .into_iter()
            .find(|x| x.short() == t || x.url() == t)
            .ok_or((
                StatusCode::BAD_REQUEST,
                format!("unknown type {t:?}: use cds, eds, lds, rds\n"),
            ))?;
        types.push(parsed);
    }
    let dump = s
        .directory
        .send(DumpFor {
            proxy: proxy.clone(),
            dump: Dump { types },
        })
        .await
        .map_err(unavailable)?;
    dump.map(Json).ok_or((
        StatusCode::NOT_FOUND,
        format!("proxy {proxy:?} is not connected\n"),
    ))
}

/// The config directory's configs and errors; with `--kubernetes`, each Kubernetes
/// registry's under `kubernetes`.
async fn configz(State(s): State<Debug>) -> Answer {
    let mut out = match &s.registry {
        Some(registry) => registry.send(GetConfigz).await.map_err(unavailable)?,
        None => json!({"source": null, "configs": [], "errors": []}),
    };
    if !s.kubernetes.is_empty() {
        let mut registries = Vec::new();
        for registry in &s.kubernetes {
            registries.push(registry.send(GetConfigz).await.map_err(unavailable)?);
        }
        out["kubernetes"] = Value::Array(registries);
    }
    Ok(Json(out))
}

async fn push_status(State(s): State<Debug>) -> Answer {
    s.builder
        .send(GetPushStatus)
        .await
        .map(Json)
        .map_err(unavailable)
}

async fn connections(State(s): State<Debug>) -> Answer {
    let all = s.directory.send(CollectStatus).await.map_err(unavailable)?;
    let brief: Vec<Value> = all
        .iter()
        .map(|c| {
            json!({
                "proxy": c.proxy,
                "connection_id": c.connection_id,
                "protocol": c.protocol,
                "connected_seconds": c.connected_seconds,
                "context_version": c.context_version,
                "synced": c.synced,
            })
        })
        .collect();
    Ok(Json(json!({"total": brief.len(), "connections": brief})))
}

async fn adsz(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    if q.get("push").is_some_and(|v| v == "true") {
        s.debouncer.send(ForcePush).await.map_err(unavailable)?;
        return Ok(Json(json!({"pushed": true})));
    }
    syncz(State(s)).await
}

async fn distribution(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let report = s
        .distribution
        .send(GetDistribution {
            key: q.get("key").cloned(),
        })
        .await
        .map_err(unavailable)?;
    Ok(Json(json!(report)))
}

async fn version() -> Json<Value> {
    Json(json!({"name": "axon", "version": env!("CARGO_PKG_VERSION")}))
}
