//! The Kubernetes wiring against the in-process fake API server, a cluster described in a
//! config directory, and the shipped manifests.

mod directory;
mod fake_api;
mod gateway_api;
mod gateway_deployment;
mod gateway_status;
mod manifests;
mod peer_authentication;
mod peers;
mod request_authentication;
mod secrets;
mod unapplied;
mod webhook_config;
