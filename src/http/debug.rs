//! The debug HTTP server (istiod's debug endpoints, JSON), on `--debug-addr` (localhost by
//! default): `/debug/syncz`, `/debug/config_dump?proxyID=…[&types=…|&resource=…][&include_eds]`
//! (Envoy's admin `ConfigDump` in proto3 JSON),
//! `/debug/authorizationz?proxyID=…`, `/debug/configz`, `/debug/push_status`, `/debug/connections`, `/debug/adsz[?push=true]`,
//! `/debug/distribution[?key=Kind/namespace/name]`, `/debug/fleet`, `/debug/nodes` (each
//! connected proxy's Envoy `Node`, JSON lines, for `axon impact`), `/version`.
//!
//! Every answer comes from the actor that owns the state, by message. `/debug/syncz`,
//! `/debug/connections` and `/debug/distribution` answer for the whole fleet with
//! `?fleet=true`: each peer's part is asked of its monitoring address and merged
//! ([`super::fleet`]), every entry naming its replica; `/debug/connections` names this
//! replica on every entry.

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
use crate::actors::fleet::{Fleet, PeerClient};
use crate::actors::messages::ForcePush;
use crate::actors::messages::GetConfigz;
use crate::actors::snapshot_builder::{
    GetGatewayApiStatus, GetPushStatus, GetRequestAuthnSelection, GetVirtualServiceProblems,
    SnapshotBuilder,
};
use axon_xds::debug::dump::DumpFilter;

use super::fleet;

#[derive(Clone)]
pub struct Debug {
    /// The address the debug server is bound to: a `Host` naming it (or a loopback name) is
    /// served, any other is refused (DNS rebinding).
    pub addr: std::net::SocketAddr,
    /// With `--debug-token-file`: every request must carry `Authorization: Bearer TOKEN`.
    pub token: Option<std::sync::Arc<str>>,
    pub directory: Addr<ConnectionDirectory>,
    pub builder: Addr<SnapshotBuilder>,
    /// The config directory's registry, when there is one.
    pub registry: Option<Recipient<GetConfigz>>,
    /// The Kubernetes registries (`--kubernetes`).
    pub kubernetes: Vec<Recipient<GetConfigz>>,
    pub debouncer: Addr<Debouncer>,
    pub distribution: Addr<DistributionTracker>,
    /// This replica's name (`--replica-name`, `POD_NAME` or the host name).
    pub replica: String,
    /// Knows the peers (the fleet view asks them).
    pub fleet: Addr<Fleet>,
    pub peers: std::sync::Arc<dyn PeerClient>,
    /// How long a peer's part of a fleet-wide answer may take.
    pub peer_timeout: std::time::Duration,
}

fn fleet_wide(q: &HashMap<String, String>) -> bool {
    q.get("fleet").is_some_and(|v| v == "true")
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
        .route("/debug/nodes", get(nodes))
        .route("/debug/configz", get(configz))
        .route("/debug/authorizationz", get(authorizationz))
        .route("/debug/push_status", get(push_status))
        .route("/debug/connections", get(connections))
        .route("/debug/adsz", get(adsz).post(adsz_push))
        .route("/debug/distribution", get(distribution))
        .route("/debug/fleet", get(fleet_peers))
        .route("/version", get(version))
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Whether `host` (a `Host` header) names the debug server: a loopback name or its own
/// address, with or without the port.
fn allowed_host(host: &str, addr: std::net::SocketAddr) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:15014`, `127.0.0.1:15014`, `localhost:15014`; a bare IPv6 has no brackets.
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback() || ip == addr.ip(),
        Err(_) => false,
    }
}

/// Refuses a request whose `Host` is not the debug server's (a page on another site that
/// resolves its name to 127.0.0.1 cannot read it), and one without the token when there is
/// one.
async fn guard(
    State(s): State<Debug>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let headers = request.headers();
    let host = headers
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !allowed_host(host, s.addr) {
        return (
            StatusCode::FORBIDDEN,
            "the debug server answers only requests for its own address or a loopback name\n",
        )
            .into_response();
    }
    if let Some(token) = &s.token {
        let given = headers
            .get(http::header::AUTHORIZATION)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| h.strip_prefix("Bearer "));
        if given != Some(token) {
            return (
                StatusCode::UNAUTHORIZED,
                "the debug server needs Authorization: Bearer TOKEN (--debug-token-file)\n",
            )
                .into_response();
        }
    }
    next.run(request).await
}

async fn syncz(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let all = s
        .directory
        .send(CollectStatus::default())
        .await
        .map_err(unavailable)?;
    if !fleet_wide(&q) {
        return Ok(Json(json!(all)));
    }
    let gathered = fleet::gather(
        &s.fleet,
        &*s.peers,
        &s.replica,
        "/fleet/syncz",
        s.peer_timeout,
    )
    .await?;
    Ok(Json(fleet::merge_syncz(&s.replica, json!(all), gathered)))
}

/// What axon would send a connected proxy now (`?proxyID=`), as Envoy's admin
/// `ConfigDump` in proto3 JSON, the dynamic sections as Envoy's own `/config_dump` has them
/// (secrets' keys redacted), so that `istioctl proxy-config ... -f`, jq and diff read it:
/// `?include_eds` adds the endpoints; `?types=cds,lds` (istiod's short names or type URLs)
/// answers those types' resources as the configs; `?resource=dynamic_active_clusters` (Envoy's)
/// the items of that field.
async fn config_dump(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let proxy = q.get("proxyID").ok_or((
        StatusCode::BAD_REQUEST,
        "proxyID is required (a connected proxy's node id)\n".to_string(),
    ))?;
    let types = DumpFilter::parse_types(q.get("types").map_or("", String::as_str))
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("types: {e}\n")))?;
    let resource = q.get("resource").filter(|r| !r.is_empty()).cloned();
    if resource.is_some() && !types.is_empty() {
        return Err((
            StatusCode::BAD_REQUEST,
            "types and resource do not go together: types answers resources, resource a section's field\n".to_string(),
        ));
    }
    let filter = DumpFilter {
        types,
        include_eds: q.contains_key("include_eds"),
        resource,
    };
    let dump = s
        .directory
        .send(DumpFor {
            proxy: proxy.clone(),
            namespace: None,
            dump: Dump {
                filter,
                authorization: false,
            },
        })
        .await
        .map_err(unavailable)?
        .ok_or((
            StatusCode::NOT_FOUND,
            format!("proxy {proxy:?} is not connected\n"),
        ))?;
    dump.map(Json)
        .map_err(|e| (StatusCode::BAD_REQUEST, format!("{e}\n")))
}

/// Every connected proxy's Envoy `Node` (what axon reads of it), one proto3 JSON object a
/// line, for `axon impact --proxies http://…`; debug clients (streams that subscribe to
/// nothing) are left out.
async fn nodes(State(s): State<Debug>) -> Result<String, (StatusCode, String)> {
    let all = s
        .directory
        .send(CollectStatus::default())
        .await
        .map_err(unavailable)?;
    let mut lines = String::new();
    for status in all.iter().filter(|s| !s.types.is_empty()) {
        let Some(node) = &status.node else { continue };
        let json = axon_xds::debug::json::to_json(&axon_xds::node::to_node(node))
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")))?;
        lines.push_str(&json.to_string());
        lines.push('\n');
    }
    Ok(lines)
}

/// The AuthorizationPolicies that apply to a connected proxy (`?proxyID=`), in the order
/// its filters evaluate them, as istiod's `/debug/authorizationz`.
async fn authorizationz(
    State(s): State<Debug>,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let proxy = q.get("proxyID").ok_or((
        StatusCode::BAD_REQUEST,
        "proxyID is required (a connected proxy's node id)\n".to_string(),
    ))?;
    let answer = s
        .directory
        .send(DumpFor {
            proxy: proxy.clone(),
            namespace: None,
            dump: Dump {
                authorization: true,
                ..Default::default()
            },
        })
        .await
        .map_err(unavailable)?;
    let answer = answer.ok_or((
        StatusCode::NOT_FOUND,
        format!("proxy {proxy:?} is not connected\n"),
    ))?;
    answer
        .map(Json)
        .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")))
}

/// The config directory's configs and errors; with `--kubernetes`, each Kubernetes
/// registry's under `kubernetes`; and what the current push context found wrong with the
/// VirtualServices (delegates, hosts several mesh VirtualServices name), from the
/// SnapshotBuilder, under `virtual_service_problems`; and how many workloads each
/// RequestAuthentication and AuthorizationPolicy applies to, under
/// `request_authentication_workloads` and `authorization_policy_workloads`; and the Gateway
/// API objects' status and problems under `gateway_api`.
async fn configz(State(s): State<Debug>) -> Answer {
    let mut out = match &s.registry {
        Some(registry) => registry.send(GetConfigz).await.map_err(unavailable)?,
        None => json!({"source": null, "configs": [], "errors": []}),
    };
    out["virtual_service_problems"] = s
        .builder
        .send(GetVirtualServiceProblems)
        .await
        .map_err(unavailable)?;
    let selected = s
        .builder
        .send(GetRequestAuthnSelection)
        .await
        .map_err(unavailable)?;
    let of_kind = |kind: &str| -> serde_json::Value {
        selected
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| k.starts_with(&format!("{kind}/")))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    out["gateway_api"] = s
        .builder
        .send(GetGatewayApiStatus)
        .await
        .map_err(unavailable)?;
    out["request_authentication_workloads"] = of_kind("RequestAuthentication");
    out["authorization_policy_workloads"] = of_kind("AuthorizationPolicy");
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

/// Every connection, naming the replica that holds it; with `?fleet=true`, every
/// replica's (and the peers that did not answer, under `unreachable`).
async fn connections(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let all = s
        .directory
        .send(CollectStatus::default())
        .await
        .map_err(unavailable)?;
    let brief = |c: &Value, replica: &str| {
        json!({
            "proxy": c["proxy"],
            "replica": replica,
            "connection_id": c["connection_id"],
            "protocol": c["protocol"],
            "connected_seconds": c["connected_seconds"],
            "context_version": c["context_version"],
            "synced": c["synced"],
        })
    };
    let mut out: Vec<Value> = all.iter().map(|c| brief(&json!(c), &s.replica)).collect();
    let mut answer = json!({"replica": s.replica});
    if fleet_wide(&q) {
        let gathered = fleet::gather(
            &s.fleet,
            &*s.peers,
            &s.replica,
            "/fleet/syncz",
            s.peer_timeout,
        )
        .await?;
        for (replica, _, part) in &gathered.parts {
            for c in part["proxies"].as_array().into_iter().flatten() {
                out.push(brief(c, replica));
            }
        }
        answer["unreachable"] = json!(gathered.unreachable);
    }
    answer["total"] = json!(out.len());
    answer["connections"] = json!(out);
    Ok(Json(answer))
}

async fn adsz(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    if q.contains_key("push") {
        return Err((
            StatusCode::METHOD_NOT_ALLOWED,
            "a push changes state: POST /debug/adsz?push=true\n".to_string(),
        ));
    }
    syncz(State(s), Query(HashMap::new())).await
}

/// `POST /debug/adsz?push=true`: a full push to every proxy.
async fn adsz_push(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    if q.get("push").is_none_or(|v| v != "true") {
        return Err((
            StatusCode::BAD_REQUEST,
            "POST /debug/adsz?push=true\n".to_string(),
        ));
    }
    s.debouncer.send(ForcePush).await.map_err(unavailable)?;
    Ok(Json(json!({"pushed": true})))
}

/// With `?fleet=true`: each config's latest change across the fleet (see
/// [`fleet::merge_distribution`]), and the peers that did not answer.
async fn distribution(State(s): State<Debug>, Query(q): Query<HashMap<String, String>>) -> Answer {
    let key = q.get("key").cloned();
    let report = s
        .distribution
        .send(GetDistribution { key: key.clone() })
        .await
        .map_err(unavailable)?;
    if !fleet_wide(&q) {
        return Ok(Json(json!(report)));
    }
    let path = match &key {
        Some(key) => format!("/fleet/distribution?key={}", escape_query(key)),
        None => "/fleet/distribution".to_string(),
    };
    let gathered = fleet::gather(&s.fleet, &*s.peers, &s.replica, &path, s.peer_timeout).await?;
    let mut parts = vec![(s.replica.clone(), json!(report))];
    let mut replicas = vec![json!({"replica": s.replica, "address": null})];
    for (replica, address, mut part) in gathered.parts {
        replicas.push(json!({"replica": replica, "address": address}));
        parts.push((replica, part["distribution"].take()));
    }
    Ok(Json(json!({
        "replicas": replicas,
        "unreachable": gathered.unreachable,
        "distribution": fleet::merge_distribution(parts),
    })))
}

/// This replica's name and its peers, each with its last answer (`/fleet/replica`: name,
/// streams, draining) or why it has none.
async fn fleet_peers(State(s): State<Debug>) -> Answer {
    let peers = s
        .fleet
        .send(crate::actors::fleet::GetPeers)
        .await
        .map_err(unavailable)?;
    Ok(Json(json!({"replica": s.replica, "peers": peers})))
}

/// `key` as a query value: everything but unreserved characters and `/` percent-encoded.
fn escape_query(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

async fn version() -> Json<Value> {
    Json(json!({"name": "axon", "version": env!("CARGO_PKG_VERSION")}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_and_the_own_address_are_allowed_hosts() {
        let addr: std::net::SocketAddr = "10.1.2.3:15014".parse().unwrap();
        for ok in [
            "localhost",
            "localhost:15014",
            "127.0.0.1:15014",
            "127.0.0.1",
            "[::1]:15014",
            "::1",
            "10.1.2.3:15014",
            "LOCALHOST",
        ] {
            assert!(allowed_host(ok, addr), "{ok}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:15014",
            "10.9.9.9:15014",
            "",
            "127.0.0.1.nip.io",
        ] {
            assert!(!allowed_host(bad, addr), "{bad}");
        }
    }
}
