//! The kube target's input: a script of Kubernetes watch events, one a line, fed to the two
//! pure indexes the Kubernetes registries own ([`ServiceObjectIndex`] and
//! [`IstioObjectIndex`]) as the ServiceRegistry and IstioRegistry feed them, objects decoded
//! from JSON as kube decodes what the API server sends.
//!
//! ```text
//! selector LABELS                 only as the first line: the namespace selector (k=v,...)
//! init|done ns|svc|slice|pod      a list of that kind begins / is complete
//! list|apply|delete ns|svc|slice|pod JSON
//! init|done KIND                  an Istio kind (VirtualService, Gateway, ...)
//! list|apply KIND APIVERSION JSON
//! delete KIND NAMESPACE NAME
//! push                            a PushContext from both indexes' configs
//! ```
//!
//! After every event each index is asked for its configs, as the registries publish after
//! every event. A line that does not parse, or whose JSON is not an object of its kind, is
//! skipped (kube would have failed to decode it).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axon::registry::cluster::namespaces::{NamespaceFilter, NamespaceSelector};
use axon::registry::cluster::services::{ServiceKind, ServiceObjectIndex};
use axon::registry::kubernetes::config::IstioObjectIndex;
use axon_config::config::ConfigKind;
use axon_config::config_set::{self, merge_sources};
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// What a script did, for the seed writer's report.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub events: usize,
    pub skipped: usize,
    pub service_configs: usize,
    pub istio_configs: usize,
    pub pushes: usize,
}

struct Indexes {
    services: ServiceObjectIndex,
    istio: IstioObjectIndex,
}

fn service_kind(word: &str) -> Option<ServiceKind> {
    Some(match word {
        "ns" => ServiceKind::Namespace,
        "svc" => ServiceKind::Service,
        "slice" => ServiceKind::EndpointSlice,
        "pod" => ServiceKind::Pod,
        _ => return None,
    })
}

fn json<T: serde::de::DeserializeOwned>(text: &str) -> Option<T> {
    serde_json::from_str(text).ok()
}

impl Indexes {
    /// One event of a Service-index kind; `None` if it does not parse.
    fn service_event(&mut self, op: &str, kind: ServiceKind, rest: &str) -> Option<()> {
        let s = &mut self.services;
        let i = &mut self.istio;
        match (op, kind) {
            ("init", ServiceKind::Namespace) => {
                s.init(kind);
                i.init_namespaces();
            }
            ("init", _) => s.init(kind),
            ("done", ServiceKind::Namespace) => {
                s.init_done(kind);
                i.namespaces_listed();
            }
            ("done", _) => {
                s.init_done(kind);
            }
            (_, ServiceKind::Namespace) => {
                let ns: Namespace = json(rest)?;
                match op {
                    "list" => {
                        s.init_namespace(&ns);
                        i.init_namespace(&ns);
                    }
                    "apply" => {
                        s.apply_namespace(&ns);
                        i.apply_namespace(&ns);
                    }
                    "delete" => {
                        s.delete_namespace(&ns);
                        i.delete_namespace(&ns);
                    }
                    _ => return None,
                }
            }
            (_, ServiceKind::Service) => {
                let svc: Service = json(rest)?;
                match op {
                    "list" => s.init_service(&svc),
                    "apply" => s.apply_service(&svc),
                    "delete" => s.delete_service(&svc),
                    _ => return None,
                }
            }
            (_, ServiceKind::EndpointSlice) => {
                let slice: EndpointSlice = json(rest)?;
                match op {
                    "list" => s.init_slice(&slice),
                    "apply" => s.apply_slice(&slice),
                    "delete" => s.delete_slice(&slice),
                    _ => return None,
                }
            }
            (_, ServiceKind::Pod) => {
                let pod: Pod = json(rest)?;
                match op {
                    "list" => s.init_pod(&pod),
                    "apply" => s.apply_pod(&pod),
                    "delete" => s.delete_pod(&pod),
                    _ => return None,
                }
            }
        }
        Some(())
    }

    /// One event of an Istio kind; `None` if it does not parse.
    fn istio_event(&mut self, op: &str, kind: ConfigKind, rest: &str) -> Option<()> {
        let i = &mut self.istio;
        match op {
            "init" => i.init(kind),
            "done" => i.init_done(kind),
            "list" | "apply" => {
                let (api_version, object) = rest.split_once(' ')?;
                let object: serde_json::Value = json(object)?;
                // kube's DynamicObject is an object; the watch decodes nothing else.
                object.as_object()?;
                if op == "list" {
                    i.init_apply(kind, api_version, object);
                } else {
                    i.apply(kind, api_version, object);
                }
            }
            "delete" => {
                let (ns, name) = rest.split_once(' ')?;
                i.delete(kind, ns, name);
            }
            _ => return None,
        }
        for r in i.rejected() {
            let _ = r.to_string();
        }
        Some(())
    }

    fn push(&mut self) -> usize {
        let sources = BTreeMap::from([
            (config_set::KUBERNETES_SERVICES, self.services.configs()),
            (config_set::KUBERNETES_ISTIO, self.istio.configs()),
        ]);
        let configs = merge_sources(&sources);
        let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
        let ctx = PushContext::build(None, &configs, &req, &Arc::default());
        ctx.version as usize
    }
}

/// Runs a script; see the module documentation.
pub fn run(script: &str) -> Summary {
    let mut summary = Summary::default();
    let mut lines = script.lines().peekable();
    let selector = lines
        .peek()
        .and_then(|l| l.strip_prefix("selector "))
        .and_then(|s| s.parse::<NamespaceSelector>().ok());
    if selector.is_some() {
        lines.next();
    }
    let mut idx = Indexes {
        services: ServiceObjectIndex::new("cluster.local", NamespaceFilter::new(selector.clone())),
        istio: IstioObjectIndex::new(NamespaceFilter::new(selector)),
    };
    for line in lines {
        let (op, rest) = line.split_once(' ').unwrap_or((line, ""));
        let (kind, rest) = rest.split_once(' ').unwrap_or((rest, ""));
        let done = if op == "push" {
            idx.push();
            summary.pushes += 1;
            Some(())
        } else if let Some(k) = service_kind(kind) {
            idx.service_event(op, k, rest)
        } else if let Some(k) = ConfigKind::from_kind(kind) {
            idx.istio_event(op, k, rest)
        } else {
            None
        };
        match done {
            Some(()) => summary.events += 1,
            None => summary.skipped += 1,
        }
        summary.service_configs = idx.services.configs().len();
        summary.istio_configs = idx.istio.configs().len();
        let _ = idx.services.counts();
    }
    summary
}
