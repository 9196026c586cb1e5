//! What a ConnectionActor reports to `/debug/syncz` and `/debug/config_dump`.

use actix::prelude::*;
use serde::Serialize;

use super::ConnectionActor;

/// Asks a connection what it would send its proxy now, for the given types (all if empty).
#[derive(Message, Debug, Clone, Default)]
#[rtype(result = "serde_json::Value")]
pub struct Dump {
    pub types: Vec<crate::xds::TypeUrl>,
}

/// Asks a connection for its sync status.
#[derive(Message)]
#[rtype(result = "ConnectionStatus")]
pub struct GetStatus;

#[derive(Debug, Clone, Serialize)]
pub struct ConnectionStatus {
    pub proxy: String,
    pub connection_id: u64,
    pub protocol: &'static str,
    pub connected_seconds: f64,
    /// The version of the context it last saw.
    pub context_version: Option<u64>,
    /// Whether every subscribed type has been ACKed at least once.
    pub synced: bool,
    pub types: Vec<TypeStatus>,
}

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

impl ConnectionActor {
    /// Generates, without sending, every requested type for the current context, with the
    /// names the proxy subscribed (every resource of wildcard types).
    pub(super) fn dump(&self, msg: &Dump) -> serde_json::Value {
        let (Some(ctx), Some(proxy), Some(scope)) = (&self.ctx, &self.proxy, &self.scope) else {
            return serde_json::json!({"proxy": self.proxy_id(), "error": "no config snapshot yet"});
        };
        let types = if msg.types.is_empty() {
            crate::xds::TypeUrl::PUSH_ORDER.to_vec()
        } else {
            msg.types.clone()
        };
        let mut out = serde_json::Map::new();
        for type_url in types {
            let names = self.subscribed(type_url).cloned().unwrap_or_default();
            let resources = crate::xds::generate(type_url, ctx, proxy, scope, &names);
            let entries: Vec<serde_json::Value> = resources
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "name": r.name,
                        "size_bytes": r.encoded_len(),
                        "resource": crate::xds::describe(r),
                    })
                })
                .collect();
            out.insert(
                type_url.short().to_string(),
                serde_json::Value::Array(entries),
            );
        }
        serde_json::json!({
            "proxy": proxy.id,
            "version": ctx.version,
            "sidecar": scope.sidecar.as_ref().map(|k| k.to_string()),
            "services_in_scope": scope.services.len(),
            "resources": out,
        })
    }

    pub(super) fn status(&self) -> ConnectionStatus {
        let sotw = self.sotw.iter().map(|(t, w)| TypeStatus {
            type_name: t.short(),
            type_url: t.url(),
            wildcard: w.wildcard,
            subscribed: w.names.len(),
            nonce_sent: w.nonce_sent.clone(),
            nonce_acked: w.nonce_acked.clone(),
            version_sent: w.version_sent.clone(),
            version_acked: w.version_acked.clone(),
            last_error: w.last_error.clone(),
        });
        let delta = self.delta.iter().map(|(t, w)| TypeStatus {
            type_name: t.short(),
            type_url: t.url(),
            wildcard: w.wildcard,
            subscribed: w.names.len(),
            nonce_sent: w.nonce_sent.clone(),
            nonce_acked: w.nonce_acked.clone(),
            version_sent: None,
            version_acked: None,
            last_error: w.last_error.clone(),
        });
        ConnectionStatus {
            proxy: self.proxy_id().to_string(),
            connection_id: self.id,
            protocol: if self.sink.is_delta() {
                "delta"
            } else {
                "sotw"
            },
            connected_seconds: self.connected_at.elapsed().as_secs_f64(),
            context_version: self.ctx.as_ref().map(|c| c.version),
            synced: self.synced,
            types: sotw.chain(delta).collect(),
        }
    }
}
