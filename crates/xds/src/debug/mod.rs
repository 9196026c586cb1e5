//! istioctl's debug types over xDS, as istiod answers them (`pilot/pkg/xds/statusgen.go`):
//! `istio.io/debug/syncz`, every connected proxy's sync state as CSDS `ClientConfig`s (what
//! `istioctl proxy-status` reads: made in [`crate::csds`]), and `istio.io/debug/config_dump`, one proxy's config as
//! the sections of Envoy's admin `ConfigDump` (what `istioctl proxy-status POD` compares with
//! the Envoy's own). Also the config dump itself ([`dump`]) and its proto3 JSON ([`json`]),
//! which the debug HTTP server serves.
//!
//! A debug request is not a subscription: the stream's state machine hands it to its shell as
//! a [`DebugQuery`] ([`crate::protocol::stream::Output::debug`]); the shell gathers the
//! answer from the other streams, and the stream frames it
//! ([`StreamState::debug_response`](crate::protocol::stream::StreamState::debug_response)).
//! Who may read what ([`caller_namespace`]) is istiod's debug authorization: on the TLS port a
//! caller outside the system namespace sees only its own namespace's proxies.

pub mod dump;
pub mod json;
#[cfg(test)]
mod tests;

use axon_model::proxy::Proxy;

/// The prefix of every debug type URL (istiod's `v3.DebugType`).
pub const DEBUG_PREFIX: &str = "istio.io/debug";
/// Per-proxy sync state (istiod's `TypeDebugSyncronization`).
pub const SYNCZ: &str = "istio.io/debug/syncz";
/// One proxy's config dump (istiod's `TypeDebugConfigDump`).
pub const CONFIG_DUMP: &str = "istio.io/debug/config_dump";

/// The system namespace before the first context tells the mesh's root namespace.
pub const SYSTEM_NAMESPACE: &str = "istio-system";

/// The debug types axon answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DebugType {
    Syncz,
    ConfigDump,
    /// `istio.io/debug` itself (istiod's `DebugGen`, `istioctl x internal-debug`): one
    /// resource name, a debug path (`syncz`, `config_dump?proxyID=…`), answered with that
    /// endpoint's JSON as an `Any` of type `istio.io/debug`.
    Http,
}

impl DebugType {
    /// `Some(None)`: a debug type axon does not answer (answered empty, as istiod's
    /// generator answers a debug type it does not know); `None`: not a debug type.
    pub fn parse(type_url: &str) -> Option<Option<DebugType>> {
        if !is_debug_type(type_url) {
            return None;
        }
        Some(match type_url {
            SYNCZ => Some(DebugType::Syncz),
            CONFIG_DUMP => Some(DebugType::ConfigDump),
            DEBUG_PREFIX => Some(DebugType::Http),
            _ => None,
        })
    }
}

/// The debug paths a caller restricted to its namespace may ask over `istio.io/debug`
/// (istiod's `activeNamespaceDebuggers`; axon serves `config_dump` of them).
pub const NAMESPACE_DEBUG_PATHS: [&str; 3] = ["config_dump", "ndsz", "edsz"];

/// istiod's message when a proxy is connected to another replica (`istioctl` looks for it
/// to ask the next one).
pub const NOT_CONNECTED: &str =
    "Proxy not connected to this Pilot instance. It may be connected to another instance.\n";

/// The path and query of an `istio.io/debug` resource name (`config_dump?proxyID=x`).
pub fn debug_path(name: &str) -> (&str, Vec<(String, String)>) {
    let (path, query) = name.split_once('?').unwrap_or((name, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_string(), v.to_string())
        })
        .collect();
    (path.trim_start_matches('/'), pairs)
}

/// Whether a type URL is one of istiod's debug types (`istio.io/debug` or under it).
pub fn is_debug_type(type_url: &str) -> bool {
    type_url == DEBUG_PREFIX
        || type_url
            .strip_prefix(DEBUG_PREFIX)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A debug request a stream's shell must answer: what is asked, the resource names of the
/// request, and the type URL to answer with.
#[derive(Debug, Clone, PartialEq)]
pub struct DebugQuery {
    /// `None`: a debug type axon does not answer: answered with no resources.
    pub kind: Option<DebugType>,
    pub type_url: String,
    pub names: Vec<String>,
}

impl DebugQuery {
    /// The proxy a config dump asks for: exactly one name (istiod answers nothing otherwise).
    pub fn dump_target(&self) -> Option<&str> {
        match (self.kind, self.names.as_slice()) {
            (Some(DebugType::ConfigDump), [one]) if !one.is_empty() => Some(one),
            _ => None,
        }
    }
}

/// The namespace a debug caller is restricted to, or `None` if it may read every proxy:
/// istiod's `callerNamespaceFilter`. Only a verified caller (the TLS port) is restricted,
/// and not when it is in `system_namespace` (the mesh's root namespace).
pub fn caller_namespace(caller: &Proxy, system_namespace: &str) -> Option<String> {
    (caller.verified && caller.namespace != system_namespace).then(|| caller.namespace.clone())
}

/// Whether a proxy named `name` in a debug request is the one with id `id`: its whole id, or
/// `POD.NAMESPACE` as `istioctl proxy-status POD.NAMESPACE` sends it (the id's third part).
pub fn names_proxy(id: &str, name: &str) -> bool {
    id == name || id.split('~').nth(2) == Some(name)
}

/// The `ControlPlane.identifier` of a syncz response, istiod's `IstioControlPlaneInstance` as
/// JSON: istioctl names each replica's answers by its `ID`.
pub fn control_plane_identifier(replica: &str, version: &str) -> String {
    serde_json::json!({
        "Component": "istiod",
        "ID": replica,
        "Info": {"version": version},
    })
    .to_string()
}
