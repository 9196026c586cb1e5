//! The Kubernetes wiring against the in-process fake API server, and the shipped manifests.

mod fake_api;
mod manifests;
mod peers;
mod secrets;
