//! The HTTP servers: [`monitoring`] (`/metrics`, `/healthz`, `/ready`, and what peer
//! replicas ask: [`fleet`]) and [`debug`] (istiod's debug endpoints, fleet-wide with
//! `?fleet=true`). They ask actors by message only; [`peer_client`] is how a replica asks
//! its peers (the Fleet actor's polls and the fleet view). [`webhook`] is the validating
//! admission webhook (HTTPS), which asks no actor: its decision is pure.

pub mod debug;
pub mod fleet;
pub mod monitoring;
pub mod peer_client;
pub mod webhook;
