//! PeerAuthentication as istiod composes it (`model/authentication.go`,
//! `security/authn/policy_applier.go`): which mutual TLS mode a workload's inbound ports
//! accept, and which mode a namespace's services are called with (auto mTLS).
//!
//! - The mesh-wide policy is the selector-less one of the root namespace, a namespace's its
//!   selector-less one, a workload's the one of its namespace whose selector its labels
//!   include; of several, the oldest (istiod's creation order). A policy with a selector in
//!   the root namespace applies to nothing, as in istiod.
//! - UNSET inherits: a workload's from its namespace's, a namespace's from the mesh's, the
//!   mesh's is PERMISSIVE. A port-level UNSET takes the workload's mode.
//! - A namespace's mode for auto mTLS (istiod's `GetNamespaceMutualTLSMode`): its policy's,
//!   else the mesh's, else none (callers then assume PERMISSIVE, as istiod's
//!   `BestEffortInferServiceMTLSMode`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use axon_config::config::{Config, ConfigKind, Spec};
use axon_config::config_set::{ConfigSet, of_kind};
use axon_config::istio::{Labels, MtlsMode as ApiMode, PeerAuthentication};

/// A resolved mutual TLS mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MtlsMode {
    Disable,
    Permissive,
    Strict,
}

impl MtlsMode {
    fn from_api(mode: ApiMode) -> Option<MtlsMode> {
        match mode {
            ApiMode::Unset => None,
            ApiMode::Disable => Some(MtlsMode::Disable),
            ApiMode::Permissive => Some(MtlsMode::Permissive),
            ApiMode::Strict => Some(MtlsMode::Strict),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            MtlsMode::Disable => "DISABLE",
            MtlsMode::Permissive => "PERMISSIVE",
            MtlsMode::Strict => "STRICT",
        }
    }
}

/// What a workload accepts: its mode, and per workload port where its policy says.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MergedPeerAuthn {
    pub mode: MtlsMode,
    pub per_port: BTreeMap<u32, MtlsMode>,
}

impl Default for MergedPeerAuthn {
    fn default() -> Self {
        MergedPeerAuthn {
            mode: MtlsMode::Permissive,
            per_port: BTreeMap::new(),
        }
    }
}

impl MergedPeerAuthn {
    /// The mode of workload port `port` (istiod's `GetMutualTLSModeForPort`).
    pub fn for_port(&self, port: u32) -> MtlsMode {
        self.per_port.get(&port).copied().unwrap_or(self.mode)
    }
}

impl fmt::Display for MergedPeerAuthn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mode.as_str())?;
        for (port, mode) in &self.per_port {
            write!(f, ",{port}={}", mode.as_str())?;
        }
        Ok(())
    }
}

/// The PeerAuthentications of a context.
#[derive(Debug, Default)]
pub struct PeerAuthnIndex {
    root_namespace: String,
    /// By namespace, oldest first.
    by_namespace: BTreeMap<String, Vec<Arc<Config>>>,
    /// The mesh-wide policy's mode (UNSET: PERMISSIVE); none without one.
    global: Option<MtlsMode>,
    /// Each namespace's selector-less policy's mode, UNSET resolved.
    namespaces: BTreeMap<String, MtlsMode>,
    /// Selector-less policies that lose to an older one of their namespace: `ns/name`.
    pub ignored: Vec<String>,
}

fn spec(config: &Config) -> Option<&PeerAuthentication> {
    match &config.spec {
        Spec::PeerAuthentication(pa) => Some(pa),
        _ => None,
    }
}

impl PeerAuthnIndex {
    pub fn build(configs: &ConfigSet, root_namespace: &str) -> PeerAuthnIndex {
        let mut all: Vec<&Arc<Config>> = of_kind(configs, ConfigKind::PeerAuthentication).collect();
        all.sort_by(|a, b| a.creation_order(b));
        let mut index = PeerAuthnIndex {
            root_namespace: root_namespace.to_string(),
            ..Default::default()
        };
        let mut found: BTreeMap<&str, ApiMode> = BTreeMap::new();
        for config in all {
            let Some(pa) = spec(config) else { continue };
            if !pa.has_selector() {
                let ns = config.namespace();
                let taken = if ns == root_namespace {
                    index.global.is_some()
                } else {
                    found.contains_key(ns)
                };
                if taken {
                    index.ignored.push(format!("{ns}/{}", config.name()));
                    continue;
                }
                if ns == root_namespace {
                    index.global =
                        Some(MtlsMode::from_api(pa.mode()).unwrap_or(MtlsMode::Permissive));
                } else {
                    found.insert(ns, pa.mode());
                }
            }
            index
                .by_namespace
                .entry(config.namespace().to_string())
                .or_default()
                .push(config.clone());
        }
        let inherited = index.global.unwrap_or(MtlsMode::Permissive);
        index.namespaces = found
            .into_iter()
            .map(|(ns, mode)| {
                (
                    ns.to_string(),
                    MtlsMode::from_api(mode).unwrap_or(inherited),
                )
            })
            .collect();
        index
    }

    /// istiod's `GetNamespaceMutualTLSMode`: the namespace's policy's mode, else the mesh's,
    /// else none.
    pub fn namespace_mode(&self, namespace: &str) -> Option<MtlsMode> {
        self.namespaces.get(namespace).copied().or(self.global)
    }

    /// istiod's `ComposePeerAuthentication` over the policies of the workload's namespace and
    /// the root namespace that apply to it.
    pub fn for_workload(&self, namespace: &str, labels: &Labels) -> MergedPeerAuthn {
        let applies = |c: &&Arc<Config>| {
            spec(c).is_some_and(|pa| {
                pa.selector
                    .as_ref()
                    .is_none_or(|s| s.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v)))
            })
        };
        let (mut mesh, mut ns, mut workload) = (None, None, None);
        let namespaces = [namespace, self.root_namespace.as_str()];
        let lists = namespaces
            .iter()
            .enumerate()
            .filter(|(i, n)| *i == 0 || **n != namespace)
            .filter_map(|(_, n)| self.by_namespace.get(*n));
        // Each list is oldest first: the first found of each level wins.
        for config in lists.flatten().filter(applies) {
            let Some(pa) = spec(config) else { continue };
            let root = config.namespace() == self.root_namespace;
            let slot = match (pa.has_selector(), root) {
                (false, true) => &mut mesh,
                (false, false) => &mut ns,
                (true, false) => &mut workload,
                (true, true) => continue,
            };
            let older = |held: &Option<&Arc<Config>>| {
                held.is_none_or(|h| config.creation_order(h) == std::cmp::Ordering::Less)
            };
            if older(slot) {
                *slot = Some(config);
            }
        }
        let mut merged = MergedPeerAuthn::default();
        for level in [mesh, ns, workload].into_iter().flatten() {
            if let Some(mode) = spec(level).and_then(|pa| MtlsMode::from_api(pa.mode())) {
                merged.mode = mode;
            }
        }
        if let Some(ports) = workload
            .and_then(|c| spec(c))
            .and_then(|pa| pa.port_level_mtls.as_ref())
        {
            for (port, mtls) in ports {
                let Ok(port) = port.parse::<u32>() else {
                    continue;
                };
                let mode = MtlsMode::from_api(mtls.mode).unwrap_or(merged.mode);
                merged.per_port.insert(port, mode);
            }
        }
        merged
    }

    /// Whether no policy is in force (every workload PERMISSIVE).
    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }
}

#[cfg(test)]
mod tests;
