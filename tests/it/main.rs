//! axon's integration tests, one binary: each concern a module, the harness in `support`.
//! `cargo test --test it NAME` runs the tests whose path contains NAME (`e2e::gateway`,
//! `corpus`).

mod ads;
mod config;
mod e2e;
mod kube;
mod layering;
mod ops;
mod support;
mod support_selftest;
