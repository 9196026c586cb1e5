//! axon-load's library: the mesh generator ([`mesh`]), shared by the `axon-load` binary
//! (which writes a mesh's config and connects its proxies) and the generators' benchmark
//! (`crates/xds/benches/generate.rs`).

pub mod mesh;
