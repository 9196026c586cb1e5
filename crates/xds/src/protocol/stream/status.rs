//! What a stream reports to `/debug/syncz` and `/debug/authorizationz` (its config dump is
//! `stream/debug.rs`).

use serde::Serialize;

use super::StreamState;

/// The sync state of one stream.
#[derive(Debug, Clone, Serialize)]
pub struct ConnectionStatus {
    pub proxy: String,
    /// The proxy's namespace (a debug caller may be restricted to its own).
    pub namespace: String,
    /// The node's `CLUSTER_ID` and `ISTIO_VERSION` metadata, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub istio_version: Option<String>,
    /// The node, as `/debug/nodes` shows it (not in `/debug/syncz`).
    #[serde(skip)]
    pub node: Option<axon_model::proxy::NodeInfo>,
    pub connection_id: u64,
    pub protocol: &'static str,
    pub connected_seconds: f64,
    /// The version of the context it last saw.
    pub context_version: Option<u64>,
    /// Whether every subscribed type has been ACKed at least once.
    pub synced: bool,
    pub types: Vec<TypeStatus>,
}

/// The exchange of one resource type on a stream.
#[derive(Debug, Clone, Serialize)]
pub struct TypeStatus {
    #[serde(rename = "type")]
    pub type_name: &'static str,
    pub type_url: String,
    pub wildcard: bool,
    pub subscribed: usize,
    pub nonce_sent: Option<String>,
    pub nonce_acked: Option<String>,
    pub version_sent: Option<String>,
    pub version_acked: Option<String>,
    pub last_error: Option<String>,
}

impl StreamState {
    /// The AuthorizationPolicies that apply to the stream's proxy in its current context, in
    /// the order they are evaluated (CUSTOM, AUDIT, DENY, ALLOW), as istiod's
    /// `/debug/authorizationz` lists them.
    pub fn authorization(&self) -> serde_json::Value {
        let proxy_id = self.proxy.as_ref().map_or("", |p| p.id.as_str());
        let (Some(ctx), Some(proxy)) = (&self.ctx, &self.proxy) else {
            return serde_json::json!({"proxy": proxy_id, "error": "no config snapshot yet"});
        };
        let policies = ctx.authz.for_workload(&proxy.namespace, &proxy.labels);
        let listed: Vec<serde_json::Value> = policies
            .all()
            .filter_map(|c| {
                let p = axon_model::authz::policy(c)?;
                Some(serde_json::json!({
                    "policy": format!("{}/{}", c.namespace(), c.name()),
                    "action": format!("{:?}", p.action).to_uppercase(),
                    "dry_run": p.dry_run,
                    "rules": p.rules.as_ref().map_or(0, Vec::len),
                }))
            })
            .collect();
        serde_json::json!({
            "proxy": proxy.id,
            "version": ctx.version,
            "policies": listed,
        })
    }

    /// The stream's sync state, as `/debug/syncz` shows it.
    pub fn status(&self, connection_id: u64, connected_seconds: f64) -> ConnectionStatus {
        ConnectionStatus {
            proxy: self
                .proxy
                .as_ref()
                .map_or("", |p| p.id.as_str())
                .to_string(),
            namespace: self
                .proxy
                .as_ref()
                .map_or("", |p| p.namespace.as_str())
                .to_string(),
            cluster_id: self.cluster_id.clone(),
            istio_version: self.istio_version.clone(),
            node: self.node_info(),
            connection_id,
            protocol: self.protocol().name(),
            connected_seconds,
            context_version: self.context_version(),
            synced: self.synced,
            types: self.subscriptions.status(),
        }
    }
}
