//! Telemetry, resolved per proxy as istiod's `pilot/pkg/model/telemetry.go` does: the
//! Telemetries that apply to a proxy (the root namespace's namespace-wide one, its own
//! namespace's, then those of its namespace that select it by labels or `targetRef`, each
//! later one overriding), merged into what its client side (a gateway, a sidecar's outbound)
//! and its server side (a sidecar's inbound) log, trace and measure. Pure: which collector
//! cluster a provider's service is, and the Envoy protos, are `xds::lds::telemetry`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::config_set::{ConfigSet, by_namespace_oldest_first};
use axon_config::istio::Labels;
use axon_config::istio::{AccessLogging, CustomTag, Metrics, Telemetry, Tracing, WorkloadMode};
use axon_config::mesh::{MeshTelemetry, ProviderKind, TelemetryProvider};

use crate::request_authn::attaches_policy;
use merge::{merge_logs, merge_metrics, resolve_tracing};

mod merge;

/// The Telemetries of a context, by namespace, oldest first.
#[derive(Debug, Default)]
pub struct TelemetryIndex {
    root_namespace: String,
    by_namespace: BTreeMap<String, Vec<Arc<Config>>>,
}

fn spec(c: &Config) -> Option<&Telemetry> {
    match &c.spec {
        Spec::Telemetry(t) => Some(t),
        _ => None,
    }
}

impl TelemetryIndex {
    pub fn build(configs: &ConfigSet, root_namespace: &str) -> TelemetryIndex {
        TelemetryIndex {
            root_namespace: root_namespace.to_string(),
            by_namespace: by_namespace_oldest_first(configs, ConfigKind::Telemetry),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }

    /// How many Telemetries there are.
    pub fn len(&self) -> usize {
        self.by_namespace.values().map(Vec::len).sum()
    }

    /// The oldest namespace-wide Telemetry of `namespace` (istiod's
    /// `namespaceWideTelemetryConfig`).
    fn namespace_wide(&self, namespace: &str) -> Option<&Arc<Config>> {
        self.by_namespace
            .get(namespace)?
            .iter()
            .find(|c| spec(c).is_some_and(Telemetry::is_namespace_wide))
    }

    /// The Telemetries that apply to a workload of `namespace` with `labels`, in istiod's
    /// order (`applicableTelemetries`): the root namespace's, its namespace's, then each of
    /// its namespace's that selects it.
    pub fn for_workload(&self, namespace: &str, labels: &Labels) -> Vec<&Arc<Config>> {
        let mut out: Vec<&Arc<Config>> = Vec::new();
        out.extend(self.namespace_wide(&self.root_namespace));
        if namespace != self.root_namespace {
            out.extend(self.namespace_wide(namespace));
        }
        for c in self.by_namespace.get(namespace).into_iter().flatten() {
            let Some(t) = spec(c) else { continue };
            if t.is_namespace_wide() {
                continue;
            }
            if attaches_policy(
                t.selector.as_ref(),
                &t.target_refs(),
                c.namespace(),
                namespace,
                labels,
            ) {
                out.push(c);
            }
        }
        out
    }

    /// The keys of [`Self::for_workload`].
    pub fn keys_for(&self, namespace: &str, labels: &Labels) -> Vec<ConfigKey> {
        self.for_workload(namespace, labels)
            .into_iter()
            .map(|c| c.key.clone())
            .collect()
    }
}

/// Which side of a proxy's traffic: a gateway and a sidecar's outbound are clients
/// (istiod's `workloadMode`), a sidecar's inbound the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    fn mode(self) -> WorkloadMode {
        match self {
            Side::Client => WorkloadMode::Client,
            Side::Server => WorkloadMode::Server,
        }
    }
}

/// What one proxy is given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProxyTelemetry {
    /// Access logs by side: `None` where no Telemetry (or default provider) says anything,
    /// so that MeshConfig `accessLogFile` applies (istiod's fallback).
    pub client_logs: Option<Vec<LogChoice>>,
    pub server_logs: Option<Vec<LogChoice>>,
    /// `None`: no Telemetry tracing, MeshConfig `enableTracing` applies.
    pub tracing: Option<TracingConfig>,
    /// The metrics of each provider that has some (istiod's `mergeMetrics`), by name.
    pub metrics: BTreeMap<String, MetricsConfig>,
    /// The access logging providers of each side that are not disabled (they count for the
    /// stats filter's providers, istiod's `telemetryFilters`).
    pub client_log_providers: BTreeSet<String>,
    pub server_log_providers: BTreeSet<String>,
}

impl ProxyTelemetry {
    pub fn logs(&self, side: Side) -> Option<&[LogChoice]> {
        match side {
            Side::Client => self.client_logs.as_deref(),
            Side::Server => self.server_logs.as_deref(),
        }
    }
}

/// One provider's access log for a side (istiod's `LoggingConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct LogChoice {
    pub provider: TelemetryProvider,
    pub filter: Option<String>,
    pub disabled: bool,
}

/// Tracing for each side (istiod's `TracingConfig`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TracingConfig {
    pub client: TracingSpec,
    pub server: TracingSpec,
}

impl TracingConfig {
    pub fn side(&self, side: Side) -> &TracingSpec {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }
}

/// istiod's `TracingSpec`.
#[derive(Debug, Clone, PartialEq)]
pub struct TracingSpec {
    pub provider: Option<TelemetryProvider>,
    pub disabled: bool,
    pub random_sampling_percentage: Option<f64>,
    pub custom_tags: Option<BTreeMap<String, CustomTag>>,
    pub use_request_id_for_trace_sampling: bool,
    pub enable_istio_tags: bool,
    pub disable_context_propagation: bool,
}

impl Default for TracingSpec {
    fn default() -> Self {
        TracingSpec {
            provider: None,
            disabled: false,
            random_sampling_percentage: None,
            custom_tags: None,
            use_request_id_for_trace_sampling: true,
            enable_istio_tags: true,
            disable_context_propagation: false,
        }
    }
}

/// One provider's metrics (istiod's `metricsConfig`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsConfig {
    pub client: MetricConfig,
    pub server: MetricConfig,
    /// `reportingInterval`, as written (`15s`).
    pub reporting_interval: Option<String>,
}

impl MetricsConfig {
    pub fn side(&self, side: Side) -> &MetricConfig {
        match side {
            Side::Client => &self.client,
            Side::Server => &self.server,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricConfig {
    /// `ALL_METRICS` disabled: no filter on this side.
    pub disabled: bool,
    /// By metric name, sorted.
    pub overrides: Vec<MetricOverride>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricOverride {
    /// The Istio metric (`REQUEST_COUNT`) or a custom one.
    pub name: String,
    pub disabled: bool,
    /// By tag name, sorted: `None` removes the tag, `Some(value)` sets it.
    pub tags: Vec<(String, Option<String>)>,
}

/// What a workload is given, merged from the Telemetry configs that apply to it (in
/// [`TelemetryIndex::for_workload`]'s order) and the mesh config.
pub fn resolve_configs(applied: &[&Arc<Config>], mesh: &MeshTelemetry) -> ProxyTelemetry {
    let specs: Vec<&Telemetry> = applied.iter().filter_map(|c| spec(c)).collect();
    resolve(&specs, mesh)
}

/// istiod's resolution of the Telemetries that apply (in order) with the mesh config.
pub fn resolve(applied: &[&Telemetry], mesh: &MeshTelemetry) -> ProxyTelemetry {
    let levels: Vec<&[AccessLogging]> = applied
        .iter()
        .map(|t| t.access_logging.as_slice())
        .filter(|l| !l.is_empty())
        .collect();
    let logs = |side: Side| -> (Option<Vec<LogChoice>>, BTreeSet<String>) {
        let merged = merge_logs(&levels, mesh, side.mode());
        let active = merged
            .iter()
            .filter(|(_, s)| !s.disabled)
            .map(|(n, _)| n.clone())
            .collect();
        if levels.is_empty() && mesh.default_providers.access_logging.is_empty() {
            return (None, active);
        }
        let choices = merged
            .into_iter()
            .filter_map(|(name, s)| {
                Some(LogChoice {
                    provider: mesh.provider(&name)?.clone(),
                    filter: s.filter.map(|f| f.expression),
                    disabled: s.disabled,
                })
            })
            .collect();
        (Some(choices), active)
    };
    let (client_logs, client_log_providers) = logs(Side::Client);
    let (server_logs, server_log_providers) = logs(Side::Server);
    let tracing: Vec<&Tracing> = applied.iter().flat_map(|t| &t.tracing).collect();
    let metrics: Vec<&Metrics> = applied.iter().flat_map(|t| &t.metrics).collect();
    ProxyTelemetry {
        client_logs,
        server_logs,
        tracing: resolve_tracing(&tracing, mesh),
        metrics: merge_metrics(&metrics, mesh),
        client_log_providers,
        server_log_providers,
    }
}

/// What of the Telemetries of `index` and the mesh's providers cannot be applied: a provider
/// a Telemetry or `defaultProviders` names that the mesh config does not define (istiod
/// skips it), and a collector service that is not in the registry (`known_service` says
/// which are; no proxy is sent that provider).
pub fn problems(
    index: &TelemetryIndex,
    mesh: &MeshTelemetry,
    known_service: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut named: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in index.by_namespace.values().flatten() {
        let Some(t) = spec(c) else { continue };
        let refs = t
            .tracing
            .iter()
            .flat_map(|x| &x.providers)
            .chain(t.metrics.iter().flat_map(|x| &x.providers))
            .chain(t.access_logging.iter().flat_map(|x| &x.providers));
        for r in refs {
            named
                .entry(r.name.clone())
                .or_default()
                .push(c.key.to_string());
        }
    }
    let defaults = &mesh.default_providers;
    for name in defaults
        .tracing
        .iter()
        .chain(&defaults.metrics)
        .chain(&defaults.access_logging)
    {
        named
            .entry(name.clone())
            .or_default()
            .push("MeshConfig defaultProviders".into());
    }
    for (name, by) in named {
        if mesh.provider(&name).is_none() {
            let mut by = by;
            by.dedup();
            out.push(format!(
                "provider {name:?} (named by {}) is not defined in the mesh config's \
                 extensionProviders: ignored, as istiod does",
                by.join(", ")
            ));
        }
    }
    for p in &mesh.providers {
        let Some(at) = p.kind.service() else {
            continue;
        };
        let (_, host) = at.namespace_and_host();
        if !known_service(host) {
            out.push(format!(
                "provider {:?}: its service {:?} is not in the registry: no proxy is sent it",
                p.name, at.service
            ));
        }
    }
    out
}

/// Whether `provider` is a Prometheus one (the only kind istiod's stats filter serves).
pub fn is_prometheus(provider: &TelemetryProvider) -> bool {
    matches!(provider.kind, ProviderKind::Prometheus)
}

#[cfg(test)]
mod tests;
