//! The messages of the push pipeline, in the order a change travels:
//!
//! ```text
//!  registry ──ConfigUpdate──▶ Debouncer ──Flush──▶ SnapshotBuilder ──Push──▶ PushQueue ──Push──▶ ConnectionActor
//!                                                                              ▲
//!                                                 Connect / PushesDone / Disconnect
//! ```
//!
//! Queries of the debug and monitoring servers live beside the actor that answers them,
//! but for [`GetConfigz`], which every registry answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use actix::prelude::*;

use axon_config::config_set::{ConfigSet, SourceId};
use axon_model::push_context::PushContext;
use axon_model::push_request::PushRequest;

/// Identifies one ADS stream (and its ConnectionActor) for the life of the process.
pub type ConnId = u64;

/// A registry's new state and what changed in it (registry → Debouncer).
#[derive(Message)]
#[rtype(result = "()")]
pub struct ConfigUpdate {
    pub source: SourceId,
    pub configs: Arc<ConfigSet>,
    pub request: PushRequest,
}

/// Forces a full push to every proxy (`/debug/adsz?push=true`), through the debounce.
#[derive(Message)]
#[rtype(result = "()")]
pub struct ForcePush;

/// A merged request and the newest config set of every source (Debouncer →
/// SnapshotBuilder). Answered when the snapshot is built and handed to the PushQueue.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Flush {
    pub request: PushRequest,
    pub sources: BTreeMap<SourceId, Arc<ConfigSet>>,
}

/// A built context and the request it answers (SnapshotBuilder → PushQueue → ConnectionActor).
#[derive(Message, Clone)]
#[rtype(result = "()")]
pub struct Push {
    pub ctx: Arc<PushContext>,
    /// Shared by every connection it is queued for (merged into a copy only when one is
    /// already pending).
    pub request: Arc<PushRequest>,
}

/// A connection with a known proxy joins the queue; answered with the current context, if any.
#[derive(Message)]
#[rtype(result = "Option<Arc<PushContext>>")]
pub struct Connect {
    pub id: ConnId,
    pub conn: Recipient<Push>,
}

/// A connection left the queue.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Disconnect {
    pub id: ConnId,
}

/// Connections finished the pushes they were given (batched per connection thread by the
/// ConnectionActors' outbox).
#[derive(Message)]
#[rtype(result = "()")]
pub struct PushesDone {
    pub ids: Vec<ConnId>,
}

/// The configs a registry holds and the problems it found (`/debug/configz`); every
/// registry answers it.
#[derive(Message)]
#[rtype(result = "serde_json::Value")]
pub struct GetConfigz;

/// Why a registry has not sent its first update yet (`/ready`), if it has not: `None` once
/// it has. The FileRegistry answers it.
#[derive(Message)]
#[rtype(result = "Option<String>")]
pub struct GetWaiting;
