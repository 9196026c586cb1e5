//! axon's integration tests, one binary: each concern a module, the harness in `support`.
//! `cargo test --test it NAME` runs the tests whose path contains NAME (`e2e::gateway`,
//! `corpus`).

// A test binary: the harness's helpers are `pub` for the test modules, not for another
// crate, and a test's `unwrap` is its assertion.
#![allow(unreachable_pub, clippy::unwrap_used)]

mod ads;
mod ca;
mod config;
mod e2e;
mod kube;
mod layering;
mod mesh;
mod ops;
mod support;
mod support_selftest;
