//! What a ConnectionActor reports to `/debug/syncz`.

use actix::prelude::*;
use serde::Serialize;

use super::ConnectionActor;

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
