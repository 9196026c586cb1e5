//! The messages of the push pipeline, in the order a change travels:
//!
//! ```text
//!  registry ──ConfigUpdate──▶ Debouncer ──Flush──▶ SnapshotBuilder ──Push──▶ PushQueue ──Push──▶ ConnectionActor
//!                                                                              ▲
//!                                               Connects / PushesDone / Disconnects
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

/// A connection with a known proxy joins the queue. It started from the context
/// [`LatestContext`] held when it connected (`seen`, its version); if the queue has another
/// by the time it joins, it is pushed that one in full.
pub struct Connect {
    pub id: ConnId,
    pub conn: Recipient<Push>,
    pub seen: Option<u64>,
}

/// Connections joining the queue (batched per connection thread by the ConnectionActors'
/// outbox, in the order they connected).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Connects(pub Vec<Connect>);

/// Connections that left the queue (batched as [`Connects`]).
#[derive(Message)]
#[rtype(result = "()")]
pub struct Disconnects(pub Vec<ConnId>);

/// The PushQueue's latest context, shared for reading: a connection that knows its proxy
/// starts from it at once, instead of asking the queue and waiting for the answer.
#[derive(Clone, Default)]
pub struct LatestContext(Arc<std::sync::RwLock<Option<Arc<PushContext>>>>);

impl LatestContext {
    pub fn get(&self) -> Option<Arc<PushContext>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set(&self, ctx: Arc<PushContext>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
    }
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
