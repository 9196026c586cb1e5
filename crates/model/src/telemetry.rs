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
use axon_config::istio::{
    AccessLogging, CustomTag, ISTIO_METRICS, LogFilter, Metrics, Telemetry, Tracing, WorkloadMode,
};
use axon_config::mesh::{MeshTelemetry, ProviderKind, TelemetryProvider};

use crate::request_authn::attaches_policy;

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

    /// What a workload is given, merged from the Telemetries that apply and the mesh config.
    pub fn resolve(
        &self,
        namespace: &str,
        labels: &Labels,
        mesh: &MeshTelemetry,
    ) -> ProxyTelemetry {
        let applied: Vec<&Telemetry> = self
            .for_workload(namespace, labels)
            .into_iter()
            .filter_map(|c| spec(c))
            .collect();
        resolve(&applied, mesh)
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

#[derive(Debug, Clone, Default)]
struct LogSpec {
    disabled: bool,
    filter: Option<LogFilter>,
}

fn names(providers: &[axon_config::istio::ProviderRef]) -> Vec<String> {
    providers.iter().map(|p| p.name.clone()).collect()
}

fn matches(selector: Option<axon_config::istio::ModeSelector>, mode: WorkloadMode) -> bool {
    selector.is_none_or(|s| s.mode.covers(mode))
}

/// istiod's `mergeLogs`, by provider name.
fn merge_logs(
    levels: &[&[AccessLogging]],
    mesh: &MeshTelemetry,
    mode: WorkloadMode,
) -> BTreeMap<String, LogSpec> {
    let defaults = &mesh.default_providers.access_logging;
    let mut providers: BTreeMap<String, LogSpec> = BTreeMap::new();
    if levels.is_empty() {
        for p in defaults {
            providers.insert(p.clone(), LogSpec::default());
        }
        return providers;
    }
    let mut in_scope: Vec<String> = defaults.clone();
    let mut filters: BTreeMap<String, LogSpec> = BTreeMap::new();
    for level in levels {
        let mut level_names: BTreeSet<String> = BTreeSet::new();
        for l in level.iter().filter(|l| matches(l.match_, mode)) {
            for p in names(&l.providers) {
                filters.insert(
                    p.clone(),
                    LogSpec {
                        disabled: false,
                        filter: l.filter.clone(),
                    },
                );
                level_names.insert(p);
            }
        }
        if !level_names.is_empty() {
            in_scope = level_names.into_iter().collect();
        }
    }
    let mut parent: Vec<String> = defaults.clone();
    for level in levels {
        for l in level.iter() {
            let mut here = names(&l.providers);
            if here.is_empty() {
                here = parent.clone();
            }
            parent = here.clone();
            for p in here {
                if !in_scope.contains(&p) || !matches(l.match_, mode) {
                    continue;
                }
                let spec = if l.disabled == Some(true) {
                    LogSpec {
                        disabled: true,
                        filter: None,
                    }
                } else {
                    filters.get(&p).cloned().unwrap_or_default()
                };
                providers.insert(p, spec);
            }
        }
    }
    providers
}

/// istiod's `Telemetries.Tracing`.
fn resolve_tracing(tracing: &[&Tracing], mesh: &MeshTelemetry) -> Option<TracingConfig> {
    let defaults = &mesh.default_providers.tracing;
    if tracing.is_empty() && defaults.is_empty() {
        return None;
    }
    let mut client = TracingSpec::default();
    let mut server = TracingSpec::default();
    if let Some(first) = defaults.first() {
        client.provider = mesh.provider(first).cloned();
        server.provider = client.provider.clone();
    }
    for t in tracing {
        let mut specs: Vec<&mut TracingSpec> = match t.match_.map(|m| m.mode) {
            Some(WorkloadMode::Client) => vec![&mut client],
            Some(WorkloadMode::Server) => vec![&mut server],
            _ => vec![&mut client, &mut server],
        };
        for spec in specs.iter_mut() {
            if let Some(first) = t.providers.first() {
                spec.provider = mesh.provider(&first.name).cloned();
            }
            if let Some(d) = t.disable_span_reporting {
                spec.disabled = d;
            }
            if t.custom_tags.is_some() {
                spec.custom_tags = t.custom_tags.clone();
            }
            if let Some(p) = t.random_sampling_percentage {
                spec.random_sampling_percentage = Some(p);
            }
            if let Some(u) = t.use_request_id_for_trace_sampling {
                spec.use_request_id_for_trace_sampling = u;
            }
            if let Some(e) = t.enable_istio_tags {
                spec.enable_istio_tags = e;
            }
            if let Some(d) = t.disable_context_propagation {
                spec.disable_context_propagation = d;
            }
        }
    }
    for spec in [&mut client, &mut server] {
        if spec.provider.is_none() {
            spec.disabled = true;
        }
    }
    Some(TracingConfig { client, server })
}

#[derive(Debug, Clone, Default)]
struct Override {
    disabled: Option<bool>,
    tags: BTreeMap<String, Option<String>>,
}

fn sides(mode: WorkloadMode) -> Vec<Side> {
    match mode {
        WorkloadMode::Client => vec![Side::Client],
        WorkloadMode::Server => vec![Side::Server],
        WorkloadMode::ClientAndServer => vec![Side::Client, Side::Server],
    }
}

/// istiod's `mergeMetrics`: by provider, the overrides of each side, normalized.
fn merge_metrics(metrics: &[&Metrics], mesh: &MeshTelemetry) -> BTreeMap<String, MetricsConfig> {
    let defaults = &mesh.default_providers.metrics;
    // provider -> side -> metric -> override
    let mut providers: BTreeMap<String, BTreeMap<(u8, String), Override>> = BTreeMap::new();
    let side_key = |s: Side| u8::from(s == Side::Server);
    if metrics.is_empty() {
        for p in defaults {
            providers.entry(p.clone()).or_default();
        }
    }
    let mut in_scope: Vec<String> = defaults.clone();
    for m in metrics {
        let here = names(&m.providers);
        if !here.is_empty() {
            in_scope = here;
        }
    }
    let mut parent: Vec<String> = defaults.clone();
    let mut disabled_all: BTreeSet<(String, u8)> = BTreeSet::new();
    let mut intervals: BTreeMap<String, String> = BTreeMap::new();
    for m in metrics {
        let mut here = names(&m.providers);
        if here.is_empty() {
            here = parent.clone();
        }
        parent = here.clone();
        for provider in here {
            if !in_scope.contains(&provider) {
                continue;
            }
            if let Some(i) = &m.reporting_interval {
                intervals.insert(provider.clone(), i.clone());
            }
            let entry = providers.entry(provider.clone()).or_default();
            for o in &m.overrides {
                let selector = o.match_.clone().unwrap_or_default();
                let all = selector.custom_metric.is_none()
                    && selector
                        .metric
                        .as_deref()
                        .is_none_or(|m| m == "ALL_METRICS");
                if all && o.disabled == Some(true) {
                    for side in sides(selector.mode) {
                        disabled_all.insert((provider.clone(), side_key(side)));
                    }
                    continue;
                }
                let metric_names: Vec<String> = match (&selector.custom_metric, &selector.metric) {
                    (Some(c), _) => vec![c.clone()],
                    (None, Some(m)) if m != "ALL_METRICS" => vec![m.clone()],
                    _ => {
                        let mut all: Vec<String> =
                            ISTIO_METRICS[1..].iter().map(|m| m.to_string()).collect();
                        all.sort();
                        all
                    }
                };
                for side in sides(selector.mode) {
                    disabled_all.remove(&(provider.clone(), side_key(side)));
                    for metric in &metric_names {
                        let over = entry.entry((side_key(side), metric.clone())).or_default();
                        if o.disabled.is_some() {
                            over.disabled = o.disabled;
                        }
                        for (tag, to) in &o.tag_overrides {
                            let value = (!to.is_remove()).then(|| to.value.clone());
                            over.tags.insert(tag.clone(), value);
                        }
                    }
                }
            }
        }
    }
    providers
        .into_iter()
        .map(|(provider, overrides)| {
            let mut config = MetricsConfig {
                reporting_interval: intervals.get(&provider).cloned(),
                ..Default::default()
            };
            for side in [Side::Client, Side::Server] {
                let target = match side {
                    Side::Client => &mut config.client,
                    Side::Server => &mut config.server,
                };
                if disabled_all.contains(&(provider.clone(), side_key(side))) {
                    target.disabled = true;
                    continue;
                }
                target.overrides = overrides
                    .iter()
                    .filter(|((s, _), _)| *s == side_key(side))
                    .map(|((_, name), o)| MetricOverride {
                        name: name.clone(),
                        disabled: o.disabled == Some(true),
                        tags: o.tags.clone().into_iter().collect(),
                    })
                    .collect();
            }
            (provider, config)
        })
        .collect()
}

/// What of the Telemetries and the mesh's providers a context cannot apply: a provider a
/// Telemetry or `defaultProviders` names that the mesh config does not define (istiod
/// skips it), and a collector service that is not in the registry (no proxy is sent that
/// provider).
pub fn problems(ctx: &crate::push_context::PushContext) -> Vec<String> {
    let mesh = &ctx.mesh.telemetry;
    let mut out = Vec::new();
    let mut named: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for c in ctx.telemetry.by_namespace.values().flatten() {
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
        let at = match &p.kind {
            ProviderKind::Zipkin { at, .. }
            | ProviderKind::Datadog { at, .. }
            | ProviderKind::Skywalking { at }
            | ProviderKind::OpenTelemetry { at, .. }
            | ProviderKind::HttpAls { at, .. }
            | ProviderKind::TcpAls { at, .. }
            | ProviderKind::OtelAls { at, .. } => at,
            _ => continue,
        };
        let host = at
            .service
            .split_once('/')
            .map_or(at.service.as_str(), |(_, h)| h);
        if ctx.service(host).is_none() {
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
