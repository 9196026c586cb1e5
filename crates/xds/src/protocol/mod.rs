//! The ADS protocol, per stream: what a request asks for and whether it is answered.
//!
//! - [`stream`]: the per-stream state machine (SotW and Delta) that the ConnectionActor
//!   drives: requests in, responses out.
//! - [`subscription`]: a SotW stream's subscriptions and istiod's `ShouldRespond` over them
//!   (ACK, NACK, stale nonces, reconnects, AlwaysRespond), with private state.
//! - [`delta`]: a Delta stream's subscriptions and the resource versions its client has.
//! - [`held`]: those versions, shared between the streams whose clients hold the same.
//! - [`names`]: the resource-name sets streams share.

pub mod delta;
pub mod held;
pub mod names;
pub mod stream;
pub mod subscription;
