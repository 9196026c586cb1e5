//! The ADS protocol, per stream: what a request asks for and whether it is answered.
//!
//! - [`stream`]: the per-stream state machine (SotW and Delta) that the ConnectionActor
//!   drives: requests in, responses out.
//! - [`subscription`]: one type's subscription on a stream (istiod's `ShouldRespond`).
//! - [`delta`]: Delta xDS's per-stream resource versions.
//! - [`names`]: the resource-name sets streams share.

pub mod delta;
pub mod names;
pub mod stream;
pub mod subscription;
