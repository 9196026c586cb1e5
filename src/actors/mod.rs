//! The actors of the push pipeline, and how they are wired.
//!
//! ```text
//!  FileRegistry ──ConfigUpdate──▶ Debouncer ──Flush──▶ SnapshotBuilder ──Push──▶ PushQueue
//!                                                                                  │  ▲
//!                                                              Push (≤ push_concurrency) │ Connect/PushDone/Disconnect
//!                                                                                  ▼  │
//!                            Envoy ◀──ADS stream (tonic, xds::ads)──▶ ConnectionActor (one per stream)
//! ```
//!
//! Each actor owns its state and changes it only in its handlers; what crosses between
//! actors is a typed message or an immutable `Arc` snapshot. The pipeline actors run on the
//! System's arbiter; ConnectionActors are spread over `connection_threads` arbiters.

pub mod connection;
pub mod debouncer;
pub mod distribution;
pub mod file_registry;
pub mod push_queue;
pub mod snapshot_builder;
