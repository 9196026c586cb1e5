//! End-to-end test harness: a real `axon` process, a real Envoy fed by it over ADS, tiny
//! HTTP upstreams and a raw HTTP client. This file is the index; each concern has its file:
//!
//! | file | owns |
//! |---|---|
//! | `accept.rs` | [`Acceptor`](accept::Acceptor), the accept loop of the small servers, stopped on drop |
//! | `zipkin.rs` | a Zipkin-compatible collector (`POST /api/v2/spans`, JSON v2) whose spans a test waits for |
//! | `access_log.rs` | access log files of real Envoys read back: istiod's TEXT and JSON formats, lines waited for |
//! | `wait.rs` | [`wait_until`] (waiting on a condition with a deadline), [`free_port`] |
//! | `tools.rs` | the project-local venv with the pinned Envoy and grpcio ([`ensure_envoy`], [`grpc_python`]) |
//! | `http.rs` | the raw HTTP/1.1 client ([`http_get`], [`http_request`]) |
//! | `upstream.rs` | [`Upstream`], an HTTP server that answers with its name |
//! | `echo.rs` | [`EchoUpstream`], an HTTP server that answers with what it received and records it |
//! | `status_upstream.rs` | [`StatusUpstream`], an HTTP server that answers the status it is set to, counting requests |
//! | `config_dir.rs` | [`ConfigDir`], the watched config directory, written atomically |
//! | `process.rs` | child processes: log capture, kill, temp dirs kept on panic |
//! | `axon.rs` | [`Axon`], the `axon serve` process, its log and monitoring address |
//! | `axon_debug.rs` | what a test asks axon about its state: debug endpoints, `/metrics` |
//! | `envoy.rs` | [`Envoy`] and [`EnvoyOptions`], its admin API |
//! | `config_dump.rs` | what Envoy's config_dump says; [`wait_for_route`] (a route in force) |
//! | `load.rs` | [`Load`], `axon-load run --reconnect`'s simulated proxies and their [`LoadLine`] |
//! | `listen_port.rs` | [`start_envoy_listening`]: another port if an xDS listener's was taken |
//!
//! Everything here is blocking std code (threads, `std::process`, `std::net`). Tests wait on
//! conditions with deadlines ([`wait_until`]), never on fixed sleeps. On a panicking test,
//! [`Axon`] and [`Envoy`] print the tail of their logs and keep their temp directories (the
//! path is printed) for inspection.
//!
//! The helpers of one concern each, used by name (`support::scenario::...`):
//!
//! | module | owns |
//! |---|---|
//! | `scenario` | the common meshes and waits of the end-to-end tests |
//! | `sidecar` | the sidecar tests' world under capture ([`sidecar::Scenario`]), a bound sidecar's node and options |
//! | `ads_client`, `delta_client`, `raw_h2` | in-process ADS clients (tonic SotW, Delta, raw HTTP/2) |
//! | `fake_kube` | the in-process fake Kubernetes API server |
//! | `pki` | test certificates, istiod's plug-in CA files (`plug_in_ca`) |
//! | `ca_client` | a client of axon's CA as pilot-agent calls it (`CaCall`), CSRs made with openssl, `openssl verify` of an answer |
//! | `axon_ca` | axon started as the mesh's CA (`--ca-dir`, tokens the fake API server reviews): its root, each service account's token and CA access |
//! | `grpc_echo`, `tcp_echo`, `tls_upstream` | upstreams of those protocols |
//! | `mesh` | pods made of network namespaces: sidecar Envoys under real iptables capture |
//! | `agent` | pilot-agent for the tests: CSR to the CA, renewal, SDS on a Unix socket; a stub CA |

#![allow(dead_code)]

pub mod accept;
pub mod access_log;
pub mod ads_client;
pub mod agent;
mod axon;
pub mod axon_ca;
mod axon_debug;
pub mod ca_client;
mod config_dir;
mod config_dump;
pub mod delta_client;
mod echo;
mod envoy;
pub mod fake_kube;
pub mod grpc_echo;
mod http;
pub mod istioctl;
mod listen_port;
mod load;
pub mod mesh;
pub mod pki;
mod process;
pub mod raw_h2;
pub mod scenario;
pub mod sidecar;
mod status_upstream;
pub mod tcp_echo;
pub mod tls_upstream;
mod tools;
mod upstream;
mod wait;
pub mod zipkin;

#[allow(unused_imports)]
pub use axon::*;
#[allow(unused_imports)]
pub use axon_debug::*;
#[allow(unused_imports)]
pub use config_dir::*;
#[allow(unused_imports)]
pub use config_dump::*;
#[allow(unused_imports)]
pub use echo::*;
#[allow(unused_imports)]
pub use envoy::*;
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use listen_port::*;
#[allow(unused_imports)]
pub use load::*;
#[allow(unused_imports)]
pub use process::strip_ansi;
#[allow(unused_imports)]
pub use status_upstream::StatusUpstream;
#[allow(unused_imports)]
pub use tools::*;
#[allow(unused_imports)]
pub use upstream::*;
#[allow(unused_imports)]
pub use wait::*;
