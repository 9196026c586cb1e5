//! istiod's merges of the Telemetries that apply to a proxy, in order (`mergeLogs`,
//! `Telemetries.Tracing`, `mergeMetrics` of `pilot/pkg/model/telemetry.go`), by provider
//! name: what [`super::resolve`] assembles.

use std::collections::{BTreeMap, BTreeSet};

use axon_config::istio::{AccessLogging, ISTIO_METRICS, LogFilter, Metrics, Tracing, WorkloadMode};
use axon_config::mesh::MeshTelemetry;

use super::{MetricOverride, MetricsConfig, Side, TracingConfig, TracingSpec};

#[derive(Debug, Clone, Default)]
pub(super) struct LogSpec {
    pub(super) disabled: bool,
    pub(super) filter: Option<LogFilter>,
}

fn names(providers: &[axon_config::istio::ProviderRef]) -> Vec<String> {
    providers.iter().map(|p| p.name.clone()).collect()
}

fn matches(selector: Option<axon_config::istio::ModeSelector>, mode: WorkloadMode) -> bool {
    selector.is_none_or(|s| s.mode.covers(mode))
}

/// istiod's `mergeLogs`, by provider name.
pub(super) fn merge_logs(
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
pub(super) fn resolve_tracing(tracing: &[&Tracing], mesh: &MeshTelemetry) -> Option<TracingConfig> {
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
pub(super) fn merge_metrics(
    metrics: &[&Metrics],
    mesh: &MeshTelemetry,
) -> BTreeMap<String, MetricsConfig> {
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
