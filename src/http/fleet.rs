//! One fleet-wide view: what a replica answers its peers on its monitoring address, and how
//! the replica asked `?fleet=true` on its debug server merges their answers with its own.
//!
//! On the monitoring address: `GET /fleet/replica` (name, stream count, draining: what the
//! peers poll; nothing per proxy) and, with peers configured, `GET /fleet/syncz` and
//! `GET /fleet/distribution[?key=…]`: this replica's part of the fleet view, per proxy, so
//! they need the debug token when there is one (`--debug-token-file`: every replica is given
//! the same). Each replica answers for its own proxies only; the one asked merges, names the
//! replica of every entry, and names the peers that did not answer.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::Addr;
use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use crate::actors::directory::{CollectStatus, ConnectionDirectory};
use crate::actors::distribution::{DistributionTracker, GetDistribution};
use crate::actors::fleet::{Fleet, GetPeers, GetReplica, PeerClient};

type Answer = Result<Json<Value>, (StatusCode, String)>;

fn unavailable(e: impl std::fmt::Display) -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("actor unreachable: {e}\n"),
    )
}

/// What the monitoring server needs to answer its peers.
#[derive(Clone)]
pub struct PeerSide {
    pub fleet: Addr<Fleet>,
    pub directory: Addr<ConnectionDirectory>,
    pub distribution: Addr<DistributionTracker>,
    /// The per-proxy answers are served only with peers configured.
    pub per_proxy: bool,
    /// `--debug-token-file`: the per-proxy answers need it.
    pub token: Option<std::sync::Arc<str>>,
}

impl PeerSide {
    fn allowed(&self, headers: &HeaderMap) -> Result<(), (StatusCode, String)> {
        if !self.per_proxy {
            return Err((
                StatusCode::NOT_FOUND,
                "no peers configured (--peers, --peer-service): no fleet view\n".to_string(),
            ));
        }
        if let Some(token) = &self.token {
            let given = headers
                .get(http::header::AUTHORIZATION)
                .and_then(|h| h.to_str().ok())
                .and_then(|h| h.strip_prefix("Bearer "));
            if given != Some(&**token) {
                return Err((
                    StatusCode::UNAUTHORIZED,
                    "needs Authorization: Bearer TOKEN (--debug-token-file)\n".to_string(),
                ));
            }
        }
        Ok(())
    }
}

/// `GET /fleet/replica`.
pub async fn replica(State(s): State<PeerSide>) -> Answer {
    let report = s.fleet.send(GetReplica).await.map_err(unavailable)?;
    Ok(Json(json!(report)))
}

/// `GET /fleet/syncz`: this replica's proxies.
pub async fn syncz(State(s): State<PeerSide>, headers: HeaderMap) -> Answer {
    s.allowed(&headers)?;
    let me = s.fleet.send(GetReplica).await.map_err(unavailable)?;
    let all = s
        .directory
        .send(CollectStatus::default())
        .await
        .map_err(unavailable)?;
    Ok(Json(json!({"replica": me.replica, "proxies": all})))
}

/// `GET /fleet/distribution[?key=…]`: this replica's part.
pub async fn distribution(
    State(s): State<PeerSide>,
    headers: HeaderMap,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Answer {
    s.allowed(&headers)?;
    let me = s.fleet.send(GetReplica).await.map_err(unavailable)?;
    let report = s
        .distribution
        .send(GetDistribution {
            key: q.get("key").cloned(),
        })
        .await
        .map_err(unavailable)?;
    Ok(Json(json!({"replica": me.replica, "distribution": report})))
}

/// The peers' parts of a fleet-wide answer.
pub struct Gathered {
    /// `(replica, address, its answer)` of each peer that answered.
    pub parts: Vec<(String, String, Value)>,
    /// `{address, error}` of each that did not.
    pub unreachable: Vec<Value>,
}

/// Asks every known peer `path`, at once, each within `timeout`; skips this replica itself.
pub async fn gather(
    fleet: &Addr<Fleet>,
    client: &dyn PeerClient,
    own: &str,
    path: &str,
    timeout: Duration,
) -> Result<Gathered, (StatusCode, String)> {
    let peers = fleet.send(GetPeers).await.map_err(unavailable)?;
    let asks = peers.iter().map(|p| {
        let answer = client.get(&p.address, path);
        async move {
            match tokio::time::timeout(timeout, answer).await {
                Ok(answer) => answer,
                Err(_) => Err(format!("no answer within {timeout:?}")),
            }
        }
    });
    let answers = futures::future::join_all(asks).await;
    let mut gathered = Gathered {
        parts: Vec::new(),
        unreachable: Vec::new(),
    };
    for (peer, answer) in peers.into_iter().zip(answers) {
        let named = answer.and_then(|v| match v["replica"].as_str() {
            Some(name) => Ok((name.to_string(), v)),
            None => Err("an answer without a replica name".to_string()),
        });
        match named {
            Ok((name, _)) if name == own => {}
            Ok((name, v)) => gathered.parts.push((name, peer.address, v)),
            Err(error) => gathered
                .unreachable
                .push(json!({"address": peer.address, "error": error})),
        }
    }
    Ok(gathered)
}

/// Every proxy's sync status across the fleet, each naming its replica.
pub fn merge_syncz(own: &str, mine: Value, gathered: Gathered) -> Value {
    let mut replicas = Vec::new();
    let mut proxies = Vec::new();
    let mut add = |replica: &str, address: Option<&str>, list: Value| {
        let list = match list {
            Value::Array(list) => list,
            _ => Vec::new(),
        };
        replicas.push(json!({"replica": replica, "address": address, "proxies": list.len()}));
        for mut p in list {
            if let Value::Object(o) = &mut p {
                o.insert("replica".into(), json!(replica));
            }
            proxies.push(p);
        }
    };
    add(own, None, mine);
    for (replica, address, mut part) in gathered.parts {
        add(&replica, Some(&address), part["proxies"].take());
    }
    json!({"replicas": replicas, "unreachable": gathered.unreachable, "proxies": proxies})
}

/// Each config's latest change across the fleet: counts summed, complete when every
/// replica's part is, pending and NACKing proxies named with their replica, and each
/// replica's own figures under `replicas`.
pub fn merge_distribution(parts: Vec<(String, Value)>) -> Vec<Value> {
    let mut keys: BTreeMap<String, Vec<(String, Value)>> = BTreeMap::new();
    for (replica, list) in parts {
        let Value::Array(list) = list else { continue };
        for entry in list {
            let Some(key) = entry["key"].as_str() else {
                continue;
            };
            keys.entry(key.to_string())
                .or_default()
                .push((replica.clone(), entry));
        }
    }
    keys.into_iter()
        .map(|(key, entries)| {
            let (mut affected, mut acked, mut complete) = (0, 0, true);
            let (mut pending, mut nacked, mut replicas) = (Vec::new(), Vec::new(), Vec::new());
            let mut last_ack: Option<f64> = Some(0.0);
            for (replica, e) in &entries {
                affected += e["affected"].as_u64().unwrap_or(0);
                acked += e["acked"].as_u64().unwrap_or(0);
                complete &= e["complete"].as_bool().unwrap_or(false);
                last_ack = match (last_ack, e["seconds_to_last_ack"].as_f64()) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                for p in e["pending"].as_array().into_iter().flatten() {
                    pending.push(json!({"proxy": p, "replica": replica}));
                }
                for n in e["nacked"].as_array().into_iter().flatten() {
                    nacked.push(json!({"proxy": n[0], "error": n[1], "replica": replica}));
                }
                replicas.push(json!({
                    "replica": replica,
                    "generation": e["generation"],
                    "version": e["version"],
                    "changed_at_unix_ms": e["changed_at_unix_ms"],
                    "affected": e["affected"],
                    "acked": e["acked"],
                    "complete": e["complete"],
                }));
            }
            json!({
                "key": key,
                "affected": affected,
                "acked": acked,
                "complete": complete,
                "seconds_to_last_ack": if complete { last_ack } else { None },
                "pending": pending,
                "nacked": nacked,
                "replicas": replicas,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(key: &str, affected: u64, acked: u64, pending: &[&str]) -> Value {
        json!([{
            "key": key, "generation": 1, "version": 7, "changed_at_unix_ms": 1,
            "affected": affected, "acked": acked, "complete": affected == acked,
            "seconds_to_last_ack": if affected == acked { Some(0.5) } else { None },
            "pending": pending, "nacked": [],
        }])
    }

    #[test]
    fn a_change_is_complete_across_the_fleet_only_when_every_replica_says_so() {
        let vs = "VirtualService/default/reviews";
        let merged = merge_distribution(vec![
            ("a".into(), part(vs, 2, 2, &[])),
            ("b".into(), part(vs, 3, 2, &["p9"])),
            ("c".into(), part("Gateway/istio-system/ingress", 1, 1, &[])),
        ]);
        assert_eq!(merged.len(), 2);
        let m = &merged[1];
        assert_eq!(m["key"], vs);
        assert_eq!(
            (m["affected"].as_u64(), m["acked"].as_u64()),
            (Some(5), Some(4))
        );
        assert_eq!(m["complete"], false);
        assert_eq!(m["pending"], json!([{"proxy": "p9", "replica": "b"}]));
        assert_eq!(m["replicas"].as_array().unwrap().len(), 2);
        let done = merge_distribution(vec![
            ("a".into(), part(vs, 2, 2, &[])),
            ("b".into(), part(vs, 3, 3, &[])),
        ]);
        assert_eq!(done[0]["complete"], true);
        assert_eq!(done[0]["seconds_to_last_ack"], 0.5);
    }

    #[test]
    fn every_proxy_names_its_replica_and_silent_peers_are_named() {
        let gathered = Gathered {
            parts: vec![(
                "b".into(),
                "10.0.0.2:15014".into(),
                json!({"replica": "b", "proxies": [{"proxy": "p2"}]}),
            )],
            unreachable: vec![json!({"address": "10.0.0.3:15014", "error": "refused"})],
        };
        let merged = merge_syncz("a", json!([{"proxy": "p1"}]), gathered);
        assert_eq!(
            merged["proxies"],
            json!([{"proxy": "p1", "replica": "a"}, {"proxy": "p2", "replica": "b"}])
        );
        assert_eq!(merged["replicas"][1]["address"], "10.0.0.2:15014");
        assert_eq!(merged["unreachable"][0]["address"], "10.0.0.3:15014");
    }
}
