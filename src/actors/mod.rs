//! The actors, every one of them and its messages, and how they are wired.
//!
//! ```text
//!  registries (crate::registry: files, Kubernetes)
//!     │ ConfigUpdate (through registry::outbox::Outbox)
//!     ▼
//!  Debouncer ──Flush (awaited)──▶ SnapshotBuilder ──Push──▶ PushQueue ──Push (≤ push_concurrency)──▶ ConnectionActor ×N
//!     ▲ ForcePush                    ▲ GetReady,                ▲ Connect (answered with the        │ │ Register / Unregister
//!     │                              │ GetPushStatus            │ context), PushesDone, Disconnect ─┘ ▼
//!  debug server                  monitoring / debug             └──────────────────────────── ConnectionDirectory ◀─ CollectStatus, DumpFor
//!                                                                                                   │   (asks GetStatus, Dump)
//!  ConnectionActor ──Reports (Affected / Acked / Nacked / Gone)──▶ DistributionTracker ◀─ GetDistribution (debug)
//!        ▲ requests │ responses
//!        │          ▼
//!  axon-transport (ADS on hyper/h2) ◀──▶ Envoy
//!        ▲ close_oldest (rebalance)
//!  Fleet ◀─ SetPeers (--peers, the peer Service's watch), GetReplica, GetPeers (monitoring, debug)
//!        └─ polls each peer's /fleet/replica (PeerClient)
//! ```
//!
//! | actor | module | receives | sends |
//! |---|---|---|---|
//! | FileRegistry, ServiceRegistry, IstioRegistry | [`crate::registry`] | file and watch events, `GetConfigz` | `ConfigUpdate` |
//! | Debouncer | [`debouncer`] | `ConfigUpdate`, `ForcePush` | `Flush` |
//! | SnapshotBuilder | [`snapshot_builder`] | `Flush`, `GetReady`, `GetPushStatus` | `Push` |
//! | PushQueue | [`push_queue`] | `Push`, `Connect`, `PushesDone`, `Disconnect` | `Push` |
//! | ConnectionActor, one per stream | [`connection`] | the stream's requests, `Push`, `GetStatus`, `Dump` | responses; `Connect`, `Disconnect`; `Register`, `Unregister`; through its thread's outbox `PushesDone`, `Reports` |
//! | ConnectionDirectory | [`directory`] | `Register`, `Unregister`, `CollectStatus`, `DumpFor`, `DumpResourcesFor` | `GetStatus`, `Dump`, `DumpResources` |
//! | DistributionTracker | [`distribution`] | `Reports`, `GetDistribution` | |
//! | Fleet | [`fleet`] | `SetPeers`, `GetReplica`, `GetPeers`, `StopBalancing` | (polls the peers; closes the oldest connections to rebalance) |
//!
//! The pipeline's messages are in [`messages`]; queries live beside the actor that answers
//! them, but for `GetStatus` and `Dump`, beside the ConnectionDirectory that sends them. Each actor owns its state and changes it only in its handlers; what crosses between
//! actors is a typed message or an immutable `Arc` snapshot. Messages that a handler counts
//! in `axon_mailbox_depth` are sent through [`mailbox`]. The pipeline actors run on the
//! System's arbiter, the FileRegistry on its own, ConnectionActors on the
//! `connection_threads` arbiters.

pub mod connection;
pub mod debouncer;
pub mod directory;
pub mod distribution;
pub mod fleet;
pub mod mailbox;
pub mod messages;
pub mod push_queue;
pub mod snapshot_builder;
