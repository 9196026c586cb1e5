//! Fixtures for tests and benchmarks: a `PushContext` from YAML, proxies from node ids.

use std::sync::Arc;
use std::time::Instant;

use super::proxy::{NodeInfo, Proxy};
use super::push_context::PushContext;
use super::push_request::{PushRequest, TriggerReason};
use axon_config::config::Config;
use axon_config::config_set::ConfigSet;
use axon_config::parse::{DocOutcome, parse_documents};

/// Every document of `yaml` as a config; panics on anything else.
pub fn configs(yaml: &str) -> ConfigSet {
    parse_documents(yaml, "default")
        .into_iter()
        .filter(|d| d.outcome != DocOutcome::Empty)
        .map(|d| match d.outcome {
            DocOutcome::Config(c) => (c.key.clone(), Arc::new(*c)),
            other => panic!("fixture document {}: {other:?}", d.index),
        })
        .collect()
}

/// A first context built from `yaml` with the default mesh config.
pub fn context(yaml: &str) -> PushContext {
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    PushContext::build(None, &configs(yaml), &req, &Arc::default())
}

/// [`context`], each config first passed through `mark`: to set what no file can (the
/// marks of configs made from Gateway API objects).
pub fn context_marked(yaml: &str, mark: impl Fn(&mut Config)) -> PushContext {
    let configs = configs(yaml)
        .into_iter()
        .map(|(key, config)| {
            let mut config = Arc::unwrap_or_clone(config);
            mark(&mut config);
            (key, Arc::new(config))
        })
        .collect();
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    PushContext::build(None, &configs, &req, &Arc::default())
}

/// A proxy with Istio's node id `TYPE~IP~POD.NS~NS.svc.cluster.local`.
pub fn proxy(kind: &str, ip: &str, namespace: &str, labels: &[(&str, &str)]) -> Proxy {
    Proxy::from_node(NodeInfo {
        id: format!("{kind}~{ip}~pod-1.{namespace}~{namespace}.svc.cluster.local"),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    })
    .expect("valid node id")
}
