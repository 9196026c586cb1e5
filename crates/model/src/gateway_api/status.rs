//! The status istiod writes on the Gateway API objects it controls
//! (`gateway/conversion.go` `reportGatewayStatus`, `buildListener`; `gateway/conditions.go`
//! `createRouteStatus`; `gatewaycommon/gatewayclass_collection.go` `GetClassStatus`), as
//! JSON shaped like each kind's `status`: GatewayClasses `Accepted`; Gateways `Accepted`
//! (`InvalidParameters` for a bad `parametersRef`), `Programmed`, `ResolvedRefs` (its
//! `tls.backend` certificate), `InsecureFrontendValidationMode` when it applies, and per listener `Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`
//! with `attachedRoutes` and `supportedKinds`; routes, per parentRef, `Accepted` and
//! `ResolvedRefs` with istiod's reasons. Times and `observedGeneration` are the writer's.
//!
//! Computed from what the conversion found (its problems carry istiod's reason in a
//! trailing `(Reason)`), so status and served config never disagree.

use std::collections::BTreeMap;

use axon_config::config::{ConfigKey, ConfigKind, Spec};
use axon_config::config_set::of_kind;
use axon_config::gateway_api::routes::HttpBackendRef;
use axon_config::gateway_api::{GROUP, ISTIO_CONTROLLER, ParentReference};
use serde_json::{Value, json};

use super::gateway_checks;
use super::listeners::Gateways;
use super::{Inputs, Problems};

/// A route's verdict for one of its parentRefs: accepted, or why not (reason, message).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Verdict {
    pub parent_ref: ParentReference,
    pub accepted: Result<(), (String, String)>,
}

/// The reason a problem message ends with (`... (BackendNotFound)`), if any.
pub(crate) fn reason_of(message: &str) -> Option<&str> {
    let inner = message.strip_suffix(')')?;
    let start = inner.rfind('(')?;
    let reason = &inner[start + 1..];
    (!reason.is_empty()
        && reason.chars().all(|c| c.is_ascii_alphanumeric())
        && reason.starts_with(|c: char| c.is_ascii_uppercase()))
    .then_some(reason)
}

/// A problem message without its trailing reason.
pub(crate) fn without_reason(message: &str) -> &str {
    match reason_of(message) {
        Some(reason) => message[..message.len() - reason.len() - 2].trim_end(),
        None => message,
    }
}

fn condition(kind: &str, ok: bool, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": if ok { "True" } else { "False" }, "reason": reason, "message": message})
}

/// The status of every Gateway API object of a class axon controls.
pub(crate) fn compute(
    inputs: &Inputs,
    gateways: &Gateways,
    problems: &Problems,
) -> BTreeMap<ConfigKey, Value> {
    let mut out = BTreeMap::new();
    for c in of_kind(inputs.configs, ConfigKind::GatewayClass) {
        if inputs.classes.contains(c.name()) {
            out.insert(
                c.key.clone(),
                json!({"conditions": [condition("Accepted", true, "Accepted", "Handled by Istio controller")]}),
            );
        }
    }
    for c in of_kind(inputs.configs, ConfigKind::KubernetesGateway) {
        let Spec::KubernetesGateway(gw) = &c.spec else {
            continue;
        };
        let Some(infos) = gateways
            .listeners
            .get(&(c.namespace().to_string(), c.name().to_string()))
        else {
            continue;
        };
        let messages = problems
            .0
            .get(&c.key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let mut listeners = Vec::new();
        let mut invalid = 0;
        for l in &gw.listeners {
            let prefix = format!("listener {:?}: ", l.name);
            let mine: Vec<&String> = messages.iter().filter(|m| m.starts_with(&prefix)).collect();
            let with = |reasons: &[&str]| {
                mine.iter()
                    .find(|m| reason_of(m).is_some_and(|r| reasons.contains(&r)))
                    .map(|m| {
                        (
                            reason_of(m).unwrap_or_default().to_string(),
                            without_reason(&m[prefix.len()..]).to_string(),
                        )
                    })
            };
            let conflict = with(&["HostnameConflict", "ProtocolConflict"]);
            let protocol = with(&["UnsupportedProtocol"]);
            let refs = with(&[
                "InvalidCertificateRef",
                "RefNotPermitted",
                "InvalidRouteKinds",
                "InvalidCACertificateRef",
                "InvalidCACertificateKind",
            ]);
            // istiod: a CA reference that cannot be used (or any reference not permitted)
            // makes the listener not accepted, `NoValidCACertificate`.
            let no_ca = with(&[
                "InvalidCACertificateRef",
                "InvalidCACertificateKind",
                "RefNotPermitted",
            ]);
            let info = infos.iter().find(|i| i.section_name == l.name);
            let kinds: Vec<Value> = info
                .map(|i| {
                    i.allowed_kinds
                        .iter()
                        .map(|k| json!({"group": GROUP, "kind": k.api_kind()}))
                        .collect()
                })
                .unwrap_or_default();
            let attached = info
                .and_then(|i| problems.2.get(&i.internal_name))
                .copied()
                .unwrap_or(0);
            let accepted = match (&conflict, &protocol, &no_ca) {
                (Some((r, m)), _, _) | (None, Some((r, m)), _) => {
                    condition("Accepted", false, r, m)
                }
                (None, None, Some((_, m))) => {
                    condition("Accepted", false, "NoValidCACertificate", m)
                }
                _ => condition("Accepted", true, "Accepted", "No errors found"),
            };
            let programmed = match (&conflict, &protocol, &refs) {
                (Some((r, m)), _, _) => condition("Programmed", false, r, m),
                (None, Some((_, m)), _) => condition("Programmed", false, "Invalid", m),
                (None, None, Some((r, _))) if r != "InvalidRouteKinds" => {
                    condition("Programmed", false, "Invalid", "Bad TLS configuration")
                }
                _ => condition("Programmed", true, "Programmed", "No errors found"),
            };
            let resolved = match &refs {
                Some((r, m)) => condition("ResolvedRefs", false, r, m),
                None => condition("ResolvedRefs", true, "ResolvedRefs", "No errors found"),
            };
            let conflicted = match &conflict {
                Some((r, _)) => condition(
                    "Conflicted",
                    true,
                    r,
                    "Listener has a conflict with another listener attached to the same Gateway",
                ),
                None => condition("Conflicted", false, "NoConflicts", "No errors found"),
            };
            if conflict.is_some() || protocol.is_some() || refs.is_some() {
                invalid += 1;
            }
            listeners.push(json!({
                "name": l.name,
                "supportedKinds": kinds,
                "attachedRoutes": attached,
                "conditions": [accepted, conflicted, programmed, resolved],
            }));
        }
        let parameters = gateway_checks::parameters(inputs, c.namespace(), gw);
        let accepted = if let Some((reason, message)) = &parameters {
            condition("Accepted", false, reason, message)
        } else if invalid == gw.listeners.len() && invalid > 0 {
            condition(
                "Accepted",
                false,
                "ListenersNotValid",
                "None of the Gateway's listeners are valid",
            )
        } else if invalid > 0 {
            condition(
                "Accepted",
                true,
                "ListenersNotValid",
                "One or more of the Gateway's listeners are invalid",
            )
        } else {
            condition("Accepted", true, "Accepted", "Resource accepted")
        };
        let services: Vec<String> = gateways
            .configs
            .iter()
            .filter(|g| g.namespace() == c.namespace())
            .find_map(|g| match &g.spec {
                Spec::Gateway(g) => g
                    .gateway_api
                    .as_ref()
                    .filter(|s| s.gateway_name == c.name())
                    .map(|s| s.services.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let found: Vec<String> = services
            .iter()
            .filter_map(|s| {
                let ports = inputs.services.get(s)?;
                Some(
                    ports
                        .iter()
                        .map(|(p, _)| format!("{s}:{p}"))
                        .collect::<Vec<_>>()
                        .join(","),
                )
            })
            .collect();
        let programmed = if found.is_empty() {
            let missing: Vec<String> = services
                .iter()
                .map(|s| format!("hostname {s:?} not found"))
                .collect();
            condition(
                "Programmed",
                false,
                "AddressNotUsable",
                &format!(
                    "Failed to assign to any requested addresses: {}",
                    missing.join("; ")
                ),
            )
        } else {
            condition(
                "Programmed",
                true,
                "Programmed",
                &format!(
                    "Resource programmed, assigned to service(s) {}",
                    found.join(", ")
                ),
            )
        };
        let resolved = match gateway_checks::backend_client_certificate(inputs, c.namespace(), gw) {
            Some((reason, message)) => condition("ResolvedRefs", false, &reason, &message),
            None => condition(
                "ResolvedRefs",
                true,
                "ResolvedRefs",
                "All references resolved",
            ),
        };
        let mut conditions = vec![accepted, programmed, resolved];
        if gateway_checks::insecure_frontend(gw) {
            conditions.push(condition(
                "InsecureFrontendValidationMode",
                true,
                "ConfigurationChanged",
                "Gateway is operating in AllowInsecureFallback mode for frontend validation",
            ));
        }
        out.insert(
            c.key.clone(),
            json!({"conditions": conditions, "listeners": listeners}),
        );
    }
    backend_tls_policies(inputs, problems, &mut out);
    for (key, verdicts) in &problems.1 {
        let messages = problems.0.get(key).map(Vec::as_slice).unwrap_or_default();
        let unresolved = messages.iter().rev().find(|m| {
            reason_of(m).is_some_and(|r| {
                [
                    "BackendNotFound",
                    "RefNotPermitted",
                    "InvalidKind",
                    "InvalidDestination",
                    "InvalidFilter",
                    "InvalidConfiguration",
                ]
                .contains(&r)
            })
        });
        let resolved = match unresolved {
            Some(m) => condition(
                "ResolvedRefs",
                false,
                reason_of(m).unwrap_or_default(),
                without_reason(m),
            ),
            None => condition(
                "ResolvedRefs",
                true,
                "ResolvedRefs",
                "All references resolved",
            ),
        };
        let parents: Vec<Value> = verdicts
            .iter()
            .map(|v| {
                let accepted = match &v.accepted {
                    Ok(()) => condition("Accepted", true, "Accepted", "Route was valid"),
                    Err((r, m)) => condition("Accepted", false, r, m),
                };
                json!({
                    "parentRef": v.parent_ref,
                    "controllerName": ISTIO_CONTROLLER,
                    "conditions": [accepted, resolved.clone()],
                })
            })
            .collect();
        out.insert(key.clone(), json!({"parents": parents}));
    }
    out
}

/// istiod's mesh controller, the ancestor controller of a policy's own target.
const MESH_CONTROLLER: &str = "istio.io/mesh-controller";

/// BackendTLSPolicies' `status.ancestors` (istiod's `BackendTLSPolicyCollection`): per
/// target, the target itself (the mesh controller's) and each Gateway whose routes reach it.
fn backend_tls_policies(
    inputs: &Inputs,
    problems: &Problems,
    out: &mut BTreeMap<ConfigKey, Value>,
) {
    for c in of_kind(inputs.configs, ConfigKind::BackendTlsPolicy) {
        let Spec::BackendTlsPolicy(spec) = &c.spec else {
            continue;
        };
        let messages = problems
            .0
            .get(&c.key)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let with = |reasons: &[&str]| {
            messages
                .iter()
                .find(|m| reason_of(m).is_some_and(|r| reasons.contains(&r)))
                .map(|m| {
                    (
                        reason_of(m).unwrap_or_default().to_string(),
                        without_reason(m).to_string(),
                    )
                })
        };
        let ca = with(&["InvalidCACertificateRef", "InvalidKind"]);
        let accepted = match (with(&["Conflicted", "TargetNotFound"]), &ca) {
            (Some((r, m)), _) => condition("Accepted", false, &r, &m),
            (None, Some((_, m))) => condition("Accepted", false, "NoValidCACertificate", m),
            _ => condition("Accepted", true, "Accepted", "Configuration is valid"),
        };
        let resolved = match &ca {
            Some((r, m)) => condition("ResolvedRefs", false, r, m),
            None => condition(
                "ResolvedRefs",
                true,
                "ResolvedRefs",
                "Configuration is valid",
            ),
        };
        let conditions = json!([accepted, resolved]);
        let mut ancestors = Vec::new();
        let mut gateways = std::collections::BTreeSet::new();
        for t in &spec.target_refs {
            let mut parent = json!({"group": t.group, "kind": t.kind, "name": t.name});
            if let Some(section) = &t.section_name {
                parent["sectionName"] = json!(section);
            }
            ancestors.push(json!({"ancestorRef": parent, "controllerName": MESH_CONTROLLER, "conditions": conditions}));
            if t.group.is_empty() && t.kind == "Service" {
                gateways.extend(gateways_reaching(inputs, c.namespace(), &t.name));
            }
        }
        for (_, name) in gateways {
            ancestors.push(json!({
                "ancestorRef": {"group": GROUP, "kind": "Gateway", "name": name},
                "controllerName": ISTIO_CONTROLLER,
                "conditions": conditions,
            }));
        }
        out.insert(c.key.clone(), json!({"ancestors": ancestors}));
    }
}

/// A backendRef as `(kind, namespace, name)`.
type BackendName<'a> = (&'a str, Option<&'a String>, &'a str);

/// An HTTPRoute's or GRPCRoute's backendRef as a [`BackendName`].
fn http_backend(b: &HttpBackendRef) -> BackendName<'_> {
    (b.kind.as_str(), b.namespace.as_ref(), b.name.as_str())
}

/// The Gateways (namespace, name) of the routes with a backendRef to Service `name` of
/// `namespace` (istiod's `extractAncestorBackends`).
fn gateways_reaching(inputs: &Inputs, namespace: &str, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for route in inputs.configs.values() {
        let (parents, backends): (&[ParentReference], Vec<BackendName>) = match &route.spec {
            Spec::HttpRoute(r) => (
                &r.parent_refs,
                r.rules
                    .iter()
                    .flat_map(|x| &x.backend_refs)
                    .map(http_backend)
                    .collect(),
            ),
            Spec::GrpcRoute(r) => (
                &r.parent_refs,
                r.rules
                    .iter()
                    .flat_map(|x| &x.backend_refs)
                    .map(http_backend)
                    .collect(),
            ),
            Spec::TlsRoute(r) | Spec::TcpRoute(r) => (
                &r.parent_refs,
                r.rules
                    .iter()
                    .flat_map(|x| &x.backend_refs)
                    .map(|b| (b.kind.as_str(), b.namespace.as_ref(), b.name.as_str()))
                    .collect(),
            ),
            _ => continue,
        };
        let reaches = backends.iter().any(|(kind, ns, n)| {
            *kind == "Service"
                && *n == name
                && ns.map_or(route.namespace(), String::as_str) == namespace
        });
        if !reaches {
            continue;
        }
        for p in parents.iter().filter(|p| p.is_gateway()) {
            out.push((
                p.namespace
                    .clone()
                    .unwrap_or_else(|| route.namespace().to_string()),
                p.name.clone(),
            ));
        }
    }
    out
}
