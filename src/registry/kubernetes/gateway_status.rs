//! The Gateway API status writer: what the SnapshotBuilder computed of each Gateway API
//! object's status (`axon_model::gateway_api`, conditions without times) is written to the
//! API server by one replica at a time, as istiod's status controller does
//! (`istio-gateway-status-leader`): the holder of the `coordination.k8s.io/v1` Lease
//! [`LEASE`] in axon's namespace.
//!
//! For each object whose desired status changed, the writer reads the object, merges: a
//! condition whose type, status, reason and message are unchanged keeps its
//! `lastTransitionTime` (istiod's `UpdateConditionIfChanged`), `observedGeneration` is the
//! object's `metadata.generation`, and a route's `status.parents` entries of other
//! controllers are kept; and `PATCH`es `…/status` (a JSON merge patch) only when the result
//! differs from what the object has, so an unchanged status is never rewritten. Objects are
//! written one at a time; a failed write is retried at the next turn.

use std::collections::BTreeMap;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use serde_json::{Value, json};
use tokio::sync::watch;

use axon_config::config::{ConfigKey, ConfigKind};
use axon_config::gateway_api::{GROUP, ISTIO_CONTROLLER};

use super::lease::Election;
pub use super::lease::Timing;

/// The Lease whose holder writes status (istiod's is `istio-gateway-status-leader`).
pub const LEASE: &str = "axon-gateway-status-leader";

/// istiod's mesh controller: the controller of a policy's ancestor that is its own target.
const MESH_CONTROLLER: &str = "istio.io/mesh-controller";

/// The desired statuses, by object, as the SnapshotBuilder sends them.
pub use crate::actors::snapshot_builder::GatewayApiStatuses as Desired;

/// Runs the writer until `desired`'s sender is dropped.
pub async fn run(
    client: kube::Client,
    namespace: String,
    identity: String,
    mut desired: watch::Receiver<Desired>,
    timing: Timing,
) {
    let election = Election::new(&client, &namespace, LEASE, &identity, timing);
    let mut leader = false;
    // What was last seen written, per object, to skip reading objects whose desired status
    // did not change since.
    let mut written: BTreeMap<ConfigKey, Value> = BTreeMap::new();
    loop {
        let now_leader = election.acquire().await;
        if now_leader != leader {
            tracing::info!(lease = LEASE, %namespace, %identity, leader = now_leader, "Gateway API status leadership changed");
            leader = now_leader;
            written.clear();
        }
        if leader {
            let wanted = desired.borrow_and_update().clone();
            for (key, status) in wanted.iter() {
                if written.get(key) == Some(status) {
                    continue;
                }
                match write(&client, key, status).await {
                    Ok(()) => {
                        written.insert(key.clone(), status.clone());
                    }
                    Err(e) => {
                        tracing::warn!(config = %key, error = %e, "Gateway API status not written; retried at the next turn")
                    }
                }
            }
            written.retain(|k, _| wanted.contains_key(k));
        }
        tokio::select! {
            changed = desired.changed() => if changed.is_err() { return },
            _ = tokio::time::sleep(timing.renew) => {}
        }
    }
}

/// The API resource of a kind (its v1, which every Gateway API kind with a status serves).
fn resource(kind: ConfigKind) -> Option<ApiResource> {
    let plural = match kind {
        ConfigKind::GatewayClass => "gatewayclasses",
        ConfigKind::KubernetesGateway => "gateways",
        ConfigKind::HttpRoute => "httproutes",
        ConfigKind::GrpcRoute => "grpcroutes",
        ConfigKind::TlsRoute => "tlsroutes",
        ConfigKind::TcpRoute => "tcproutes",
        ConfigKind::BackendTlsPolicy => "backendtlspolicies",
        _ => return None,
    };
    Some(ApiResource {
        group: GROUP.to_string(),
        version: "v1".to_string(),
        api_version: format!("{GROUP}/v1"),
        kind: kind.api_kind().to_string(),
        plural: plural.to_string(),
    })
}

/// Reads `key`'s object, merges `desired` into its status and patches it when different.
async fn write(client: &kube::Client, key: &ConfigKey, desired: &Value) -> Result<(), kube::Error> {
    let Some(ar) = resource(key.kind) else {
        return Ok(());
    };
    let api: Api<DynamicObject> = if key.kind == ConfigKind::GatewayClass {
        Api::all_with(client.clone(), &ar)
    } else {
        Api::namespaced_with(client.clone(), &key.namespace, &ar)
    };
    let Some(object) = api.get_opt(&key.name).await? else {
        return Ok(());
    };
    let current = object.data.get("status").cloned().unwrap_or(Value::Null);
    let generation = object.metadata.generation;
    let merged = merge(&current, desired, generation, &now_rfc3339());
    if merged == current {
        return Ok(());
    }
    api.patch_status(
        &key.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": merged})),
    )
    .await?;
    tracing::debug!(config = %key, "Gateway API status written");
    Ok(())
}

fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The status to write: `desired` with times and generations, over `current`.
pub fn merge(current: &Value, desired: &Value, generation: Option<i64>, now: &str) -> Value {
    let mut out = desired.clone();
    if let Some(conditions) = out.get_mut("conditions") {
        *conditions = merge_conditions(&current["conditions"], conditions, generation, now);
    }
    if let Some(listeners) = out.get_mut("listeners").and_then(Value::as_array_mut) {
        for l in listeners {
            let old = current["listeners"]
                .as_array()
                .and_then(|ls| ls.iter().find(|o| o["name"] == l["name"]))
                .map_or(Value::Null, |o| o["conditions"].clone());
            l["conditions"] = merge_conditions(&old, &l["conditions"], generation, now);
        }
    }
    if let Some(ancestors) = out.get_mut("ancestors").and_then(Value::as_array_mut) {
        let old_ancestors = current["ancestors"].as_array().cloned().unwrap_or_default();
        let ours = |o: &Value| {
            o["controllerName"] == ISTIO_CONTROLLER || o["controllerName"] == MESH_CONTROLLER
        };
        for a in ancestors.iter_mut() {
            let old = old_ancestors
                .iter()
                .find(|o| ours(o) && o["ancestorRef"] == a["ancestorRef"])
                .map_or(Value::Null, |o| o["conditions"].clone());
            a["conditions"] = merge_conditions(&old, &a["conditions"], generation, now);
        }
        let others: Vec<Value> = old_ancestors.into_iter().filter(|o| !ours(o)).collect();
        let mine = std::mem::take(ancestors);
        *ancestors = others.into_iter().chain(mine).collect();
    }
    if let Some(parents) = out.get_mut("parents").and_then(Value::as_array_mut) {
        let old_parents = current["parents"].as_array().cloned().unwrap_or_default();
        for p in parents.iter_mut() {
            let old = old_parents
                .iter()
                .find(|o| {
                    o["controllerName"] == ISTIO_CONTROLLER && o["parentRef"] == p["parentRef"]
                })
                .map_or(Value::Null, |o| o["conditions"].clone());
            p["conditions"] = merge_conditions(&old, &p["conditions"], generation, now);
        }
        // Other controllers' entries stay as they are, first.
        let others: Vec<Value> = old_parents
            .into_iter()
            .filter(|o| o["controllerName"] != ISTIO_CONTROLLER)
            .collect();
        let ours = std::mem::take(parents);
        *parents = others.into_iter().chain(ours).collect();
    }
    out
}

/// istiod's `UpdateConditionIfChanged` over each desired condition.
fn merge_conditions(current: &Value, desired: &Value, generation: Option<i64>, now: &str) -> Value {
    let desired = desired.as_array().cloned().unwrap_or_default();
    Value::Array(
        desired
            .into_iter()
            .map(|mut c| {
                let same = current.as_array().and_then(|cs| {
                    cs.iter().find(|o| {
                        o["type"] == c["type"]
                            && o["status"] == c["status"]
                            && o["reason"] == c["reason"]
                            && o["message"] == c["message"]
                    })
                });
                c["lastTransitionTime"] = same
                    .map(|o| o["lastTransitionTime"].clone())
                    .filter(|t| !t.is_null())
                    .unwrap_or_else(|| json!(now));
                if let Some(g) = generation {
                    c["observedGeneration"] = json!(g);
                }
                c
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_condition_keeps_its_time_and_other_controllers_entries_stay() {
        let desired = json!({"parents": [{"parentRef": {"name": "gw"}, "controllerName": ISTIO_CONTROLLER,
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Route was valid"}]}]});
        let first = merge(&Value::Null, &desired, Some(3), "2026-01-01T00:00:00Z");
        assert_eq!(
            first["parents"][0]["conditions"][0]["lastTransitionTime"],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            first["parents"][0]["conditions"][0]["observedGeneration"],
            3
        );
        // The same again later: nothing changes, so nothing is written.
        assert_eq!(
            merge(&first, &desired, Some(3), "2026-02-02T00:00:00Z"),
            first
        );
        // Another controller's entry is kept.
        let mut current = first.clone();
        current["parents"].as_array_mut().unwrap().push(
            json!({"parentRef": {"name": "x"}, "controllerName": "other.io/c", "conditions": []}),
        );
        let merged = merge(&current, &desired, Some(3), "2026-02-02T00:00:00Z");
        assert_eq!(merged["parents"].as_array().unwrap().len(), 2);
        assert_eq!(merged["parents"][0]["controllerName"], "other.io/c");
        // A changed condition gets the new time.
        let changed = json!({"parents": [{"parentRef": {"name": "gw"}, "controllerName": ISTIO_CONTROLLER,
            "conditions": [{"type": "Accepted", "status": "False", "reason": "NoMatchingParent", "message": "m"}]}]});
        let merged = merge(&first, &changed, Some(4), "2026-02-02T00:00:00Z");
        assert_eq!(
            merged["parents"][0]["conditions"][0]["lastTransitionTime"],
            "2026-02-02T00:00:00Z"
        );
    }
}
