//! Telemetry, as istiod's `ValidateTelemetry` checks it: at most one of `selector`,
//! `targetRef` and `targetRefs`, each target reference as a RequestAuthentication's, the
//! selector's labels as every selector's; providers named; a sampling percentage in
//! [0, 100]; custom tags named, with a value or a name; tag overrides whose value is set
//! exactly when the operation is UPSERT; a custom metric named; and an access log filter that
//! is an expression (istiod parses it as CEL: axon checks that it is not empty and that its
//! brackets and quotes are balanced, so that Envoy does not reject the listener for it).
//! Beyond istiod (its proto types them): a metric one of `IstioMetric`'s, an operation UPSERT
//! or REMOVE, and a reporting interval that is a duration.

use super::fields::{Errors, duration};
use super::request_authentication::policy_selection;
use crate::istio::{ISTIO_METRICS, ProviderRef, Telemetry};

pub(super) fn telemetry(errs: &mut Errors, t: &Telemetry) {
    policy_selection(
        errs,
        t.selector.as_ref(),
        t.target_ref.as_ref(),
        &t.target_refs,
    );
    for (i, tracing) in t.tracing.iter().enumerate() {
        let path = format!("spec.tracing[{i}]");
        providers(errs, &path, &tracing.providers);
        if let Some(p) = tracing.random_sampling_percentage
            && !(0.0..=100.0).contains(&p)
        {
            errs.add(
                format!("{path}.randomSamplingPercentage"),
                "randomSamplingPercentage must be in range [0.0, 100.0]",
            );
        }
        for (name, tag) in tracing.custom_tags.iter().flatten() {
            let at = format!("{path}.customTags[{name}]");
            if name.is_empty() {
                errs.add(&at, "tag name may not be empty");
            }
            let kinds = usize::from(tag.literal.is_some())
                + usize::from(tag.environment.is_some())
                + usize::from(tag.header.is_some())
                + usize::from(tag.formatter.is_some());
            if kinds != 1 {
                errs.add(
                    &at,
                    "exactly one of literal, environment, header or formatter must be set",
                );
            }
            if tag.literal.as_ref().is_some_and(|l| l.value.is_empty()) {
                errs.add(&at, "literal tag value may not be empty");
            }
            if tag.header.as_ref().is_some_and(|h| h.name.is_empty()) {
                errs.add(&at, "header tag name may not be empty");
            }
            if tag.environment.as_ref().is_some_and(|e| e.name.is_empty()) {
                errs.add(&at, "environment tag name may not be empty");
            }
            if tag.formatter.as_ref().is_some_and(|f| f.value.is_empty()) {
                errs.add(&at, "formatter tag value may not be empty");
            }
        }
    }
    for (i, metrics) in t.metrics.iter().enumerate() {
        let path = format!("spec.metrics[{i}]");
        providers(errs, &path, &metrics.providers);
        if let Some(interval) = &metrics.reporting_interval {
            duration(errs, &format!("{path}.reportingInterval"), interval, false);
        }
        for (j, o) in metrics.overrides.iter().enumerate() {
            let path = format!("{path}.overrides[{j}]");
            for (tag, to) in &o.tag_overrides {
                let at = format!("{path}.tagOverrides[{tag}]");
                match to.operation.as_deref() {
                    None | Some("UPSERT") if to.value.is_empty() => errs.add(
                        &at,
                        "tagOverrides.value must be set when operation is UPSERT",
                    ),
                    Some("REMOVE") if !to.value.is_empty() => errs.add(
                        &at,
                        "tagOverrides.value may only be set when operation is UPSERT",
                    ),
                    None | Some("UPSERT" | "REMOVE") => {}
                    Some(other) => {
                        errs.add(&at, format!("operation {other:?} is not UPSERT or REMOVE"))
                    }
                }
            }
            if let Some(m) = &o.match_ {
                if m.custom_metric.as_deref() == Some("") {
                    errs.add(format!("{path}.match"), "customMetric may not be empty");
                }
                if m.metric.is_some() && m.custom_metric.is_some() {
                    errs.add(
                        format!("{path}.match"),
                        "only one of metric and customMetric may be set",
                    );
                }
                if let Some(metric) = &m.metric
                    && !ISTIO_METRICS.contains(&metric.as_str())
                {
                    errs.add(
                        format!("{path}.match.metric"),
                        format!(
                            "{metric:?} is not an Istio metric ({})",
                            ISTIO_METRICS.join(", ")
                        ),
                    );
                }
            }
        }
    }
    for (i, logging) in t.access_logging.iter().enumerate() {
        let path = format!("spec.accessLogging[{i}]");
        providers(errs, &path, &logging.providers);
        if let Some(filter) = &logging.filter
            && let Err(reason) = expression(&filter.expression)
        {
            errs.add(
                format!("{path}.filter.expression"),
                format!("must be a valid CEL expression, {reason}"),
            );
        }
    }
}

/// istiod's `validateTelemetryProviders`.
fn providers(errs: &mut Errors, path: &str, providers: &[ProviderRef]) {
    if providers.iter().any(|p| p.name.is_empty()) {
        errs.add(
            format!("{path}.providers"),
            "providers.name may not be empty",
        );
    }
}

/// What axon checks of a CEL expression: not empty, brackets balanced and quotes closed.
fn expression(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the expression is empty".into());
    }
    let mut open: Vec<char> = Vec::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' | '\'' => loop {
                match chars.next() {
                    None => return Err(format!("unterminated string literal ({c})")),
                    Some('\\') => {
                        chars.next();
                    }
                    Some(q) if q == c => break,
                    Some(_) => {}
                }
            },
            '(' | '[' | '{' => open.push(c),
            ')' | ']' | '}' => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if open.pop() != Some(want) {
                    return Err(format!("unbalanced {c:?}"));
                }
            }
            _ => {}
        }
    }
    match open.last() {
        Some(c) => Err(format!("unclosed {c:?}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::check;

    #[test]
    fn istio_docs_telemetries_are_valid() {
        for spec in [
            "tracing: [{providers: [{name: zipkin}], randomSamplingPercentage: 100, customTags: {a: {literal: {value: b}}, c: {header: {name: x-user, defaultValue: none}}, d: {environment: {name: HOME}}}}]",
            "accessLogging: [{providers: [{name: otel}], filter: {expression: 'response.code >= 500'}}]",
            "selector: {matchLabels: {app: httpbin}}\naccessLogging: [{match: {mode: SERVER}, disabled: true}]",
            "metrics: [{providers: [{name: prometheus}], overrides: [{match: {metric: REQUEST_COUNT, mode: CLIENT}, tagOverrides: {response_code: {operation: REMOVE}, x: {value: request.host}}}]}]",
            "metrics: [{overrides: [{match: {metric: ALL_METRICS, mode: CLIENT_AND_SERVER}, disabled: true}], reportingInterval: 10s}]",
        ] {
            assert_eq!(check("Telemetry", spec), Ok(()), "{spec}");
        }
    }

    #[test]
    fn each_problem_names_its_field() {
        let errs = check(
            "Telemetry",
            "selector: {matchLabels: {app: a}}\ntargetRef: {kind: Gateway, group: gateway.networking.k8s.io, name: gw}\ntracing: [{providers: [{name: ''}], randomSamplingPercentage: 101, customTags: {t: {literal: {value: ''}}}}]\nmetrics: [{overrides: [{match: {metric: REQUEST_COUNTS}, tagOverrides: {a: {operation: REMOVE, value: x}, b: {}}}]}]\naccessLogging: [{filter: {expression: 'response.code >= (500'}}]",
        )
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec: only one of targetRefs or workloadSelector can be set",
                "spec.tracing[0].providers: providers.name may not be empty",
                "spec.tracing[0].randomSamplingPercentage: randomSamplingPercentage must be in range [0.0, 100.0]",
                "spec.tracing[0].customTags[t]: literal tag value may not be empty",
                "spec.metrics[0].overrides[0].tagOverrides[a]: tagOverrides.value may only be set when operation is UPSERT",
                "spec.metrics[0].overrides[0].tagOverrides[b]: tagOverrides.value must be set when operation is UPSERT",
                "spec.metrics[0].overrides[0].match.metric: \"REQUEST_COUNTS\" is not an Istio metric (ALL_METRICS, REQUEST_COUNT, REQUEST_DURATION, REQUEST_SIZE, RESPONSE_SIZE, TCP_OPENED_CONNECTIONS, TCP_CLOSED_CONNECTIONS, TCP_SENT_BYTES, TCP_RECEIVED_BYTES, GRPC_REQUEST_MESSAGES, GRPC_RESPONSE_MESSAGES)",
                "spec.accessLogging[0].filter.expression: must be a valid CEL expression, unclosed '('",
            ]
        );
    }
}
