//! The Gateway API CRDs' validation (`config/crd/*/gateway.networking.k8s.io_*.yaml`): the
//! OpenAPI constraints (patterns, ranges, list sizes) and the CEL `x-kubernetes-validations`
//! rules, with the CRDs' messages. The API server applies them before istiod sees an object,
//! so an object they reject is rejected here, from a file as from Kubernetes.
//!
//! Layout: this file (GatewayClass, Gateway, ReferenceGrant, BackendTLSPolicy and the checks
//! every kind shares), [`routes`] (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute).

mod routes;

use std::collections::BTreeSet;

use regex::Regex;

use super::fields::Errors;
use crate::gateway_api::{
    BackendTlsPolicySpec, GatewayClassSpec, GatewaySpec, ParentReference, ReferenceGrantSpec,
    TlsMode,
};

pub(super) use routes::{grpc_route, http_route, l4_route};

fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("a valid pattern")
}

/// `Hostname`: a DNS name, lower case, with an optional leading `*.` label.
pub(super) fn hostname(errs: &mut Errors, path: &str, value: &str) {
    let pattern = re(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    if value.is_empty() || value.len() > 253 || !pattern.is_match(value) {
        errs.add(
            path,
            format!("{value:?}: should match '^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"),
        );
    }
}

/// `ObjectName`, `Namespace` and `SectionName`: a name of 1–253 (namespaces: 63) characters.
pub(super) fn name(errs: &mut Errors, path: &str, value: &str, max: usize) {
    let pattern = re(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$");
    if value.is_empty() || value.len() > max || !pattern.is_match(value) {
        errs.add(
            path,
            format!("{value:?}: must be a lower case name of 1-{max} characters"),
        );
    }
}

pub(super) fn port(errs: &mut Errors, path: &str, port: Option<u32>) {
    if let Some(p) = port
        && !(1..=65535).contains(&p)
    {
        errs.add(path, format!("{p}: should be between 1 and 65535"));
    }
}

pub(super) fn max_items(errs: &mut Errors, path: &str, len: usize, min: usize, max: usize) {
    if len < min {
        errs.add(path, format!("should have at least {min} items"));
    } else if len > max {
        errs.add(path, format!("must have at most {max} items"));
    }
}

/// `parentRefs` (shared by every route kind).
pub(super) fn parent_refs(errs: &mut Errors, refs: &[ParentReference]) {
    max_items(errs, "spec.parentRefs", refs.len(), 0, 32);
    let mut seen = BTreeSet::new();
    for (i, r) in refs.iter().enumerate() {
        let path = format!("spec.parentRefs[{i}]");
        name(errs, &format!("{path}.name"), &r.name, 253);
        if let Some(ns) = &r.namespace {
            name(errs, &format!("{path}.namespace"), ns, 63);
        }
        if let Some(section) = &r.section_name {
            name(errs, &format!("{path}.sectionName"), section, 253);
        }
        port(errs, &format!("{path}.port"), r.port);
        let key = (
            r.group.clone(),
            r.kind.clone(),
            r.namespace.clone(),
            r.name.clone(),
            r.section_name.clone(),
            r.port,
        );
        if !seen.insert(key) {
            errs.add(
                "spec.parentRefs",
                "sectionName or port must be specified when parentRefs includes 2 or more references to the same parent",
            );
        }
    }
    // When one ref to a parent names a section, every ref to that parent must.
    for (i, a) in refs.iter().enumerate() {
        for b in &refs[i + 1..] {
            let same = a.group == b.group
                && a.kind == b.kind
                && a.namespace == b.namespace
                && a.name == b.name;
            if same && (a.section_name.is_none() != b.section_name.is_none()) {
                errs.add(
                    "spec.parentRefs",
                    "sectionName must be specified when parentRefs includes 2 or more references to the same parent",
                );
            }
        }
    }
}

pub(super) fn gateway_class(errs: &mut Errors, class: &GatewayClassSpec) {
    let pattern = re(
        r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9\/\-._~%!$&'()*+,;=:]+$",
    );
    if !pattern.is_match(&class.controller_name) || class.controller_name.len() > 253 {
        errs.add(
            "spec.controllerName",
            format!(
                "{:?}: must be a domain-prefixed path (example.com/bar)",
                class.controller_name
            ),
        );
    }
}

pub(super) fn gateway(errs: &mut Errors, gw: &GatewaySpec) {
    name(errs, "spec.gatewayClassName", &gw.gateway_class_name, 253);
    max_items(errs, "spec.listeners", gw.listeners.len(), 1, 64);
    let protocol = re(
        r"^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$|[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[A-Za-z0-9]+$",
    );
    let mut names = BTreeSet::new();
    let mut combos = BTreeSet::new();
    for (i, l) in gw.listeners.iter().enumerate() {
        let path = format!("spec.listeners[{i}]");
        name(errs, &format!("{path}.name"), &l.name, 253);
        if !names.insert(&l.name) {
            errs.add(
                "spec.listeners",
                "Listener name must be unique within the Gateway",
            );
        }
        if !combos.insert((l.port, &l.protocol, &l.hostname)) {
            errs.add(
                "spec.listeners",
                "Combination of port, protocol and hostname must be unique for each listener",
            );
        }
        if let Some(h) = &l.hostname {
            hostname(errs, &format!("{path}.hostname"), h);
        }
        port(errs, &format!("{path}.port"), Some(l.port));
        if !protocol.is_match(&l.protocol) || l.protocol.len() > 255 {
            errs.add(
                format!("{path}.protocol"),
                format!("{:?}: not a protocol name", l.protocol),
            );
        }
        let plain = ["HTTP", "TCP", "UDP"].contains(&l.protocol.as_str());
        if plain && l.tls.is_some() {
            errs.add(
                format!("{path}.tls"),
                "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
            );
        }
        if ["TCP", "UDP"].contains(&l.protocol.as_str()) && l.hostname.is_some() {
            errs.add(
                format!("{path}.hostname"),
                "hostname must not be specified for protocols ['TCP', 'UDP']",
            );
        }
        if l.protocol == "HTTPS" && l.tls.as_ref().is_some_and(|t| t.mode != TlsMode::Terminate) {
            errs.add(
                format!("{path}.tls.mode"),
                "tls mode must be Terminate for protocol HTTPS",
            );
        }
        if let Some(tls) = &l.tls {
            if tls.mode == TlsMode::Terminate
                && tls.certificate_refs.is_empty()
                && tls.options.is_empty()
            {
                errs.add(
                    format!("{path}.tls"),
                    "certificateRefs or options must be specified when mode is Terminate",
                );
            }
            max_items(
                errs,
                &format!("{path}.tls.certificateRefs"),
                tls.certificate_refs.len(),
                0,
                64,
            );
            max_items(
                errs,
                &format!("{path}.tls.options"),
                tls.options.len(),
                0,
                16,
            );
        }
        let from = &l.allowed_routes.namespaces;
        if from.from == crate::gateway_api::FromNamespaces::None {
            errs.add(
                format!("{path}.allowedRoutes.namespaces.from"),
                "Unsupported value: \"None\": supported values: \"All\", \"Selector\", \"Same\"",
            );
        }
        max_items(
            errs,
            &format!("{path}.allowedRoutes.kinds"),
            l.allowed_routes.kinds.len(),
            0,
            8,
        );
    }
    let mut ips = BTreeSet::new();
    let mut hosts = BTreeSet::new();
    for (i, a) in gw.addresses.iter().enumerate() {
        let path = format!("spec.addresses[{i}]");
        match a.address_type.as_str() {
            "IPAddress" => {
                if !a.value.is_empty() && a.value.parse::<std::net::IpAddr>().is_err() {
                    errs.add(format!("{path}.value"), "value must be an IP address");
                }
                if !ips.insert(&a.value) {
                    errs.add("spec.addresses", "IPAddress values must be unique");
                }
            }
            "Hostname" => {
                hostname(errs, &format!("{path}.value"), &a.value);
                if !hosts.insert(&a.value) {
                    errs.add("spec.addresses", "Hostname values must be unique");
                }
            }
            _ => {}
        }
    }
    max_items(errs, "spec.addresses", gw.addresses.len(), 0, 16);
}

pub(super) fn reference_grant(errs: &mut Errors, grant: &ReferenceGrantSpec) {
    max_items(errs, "spec.from", grant.from.len(), 1, 16);
    max_items(errs, "spec.to", grant.to.len(), 1, 16);
    for (i, f) in grant.from.iter().enumerate() {
        name(errs, &format!("spec.from[{i}].namespace"), &f.namespace, 63);
    }
}

pub(super) fn backend_tls_policy(errs: &mut Errors, policy: &BackendTlsPolicySpec) {
    max_items(errs, "spec.targetRefs", policy.target_refs.len(), 1, 16);
    let v = &policy.validation;
    if v.ca_certificate_refs.is_empty() == v.well_known_ca_certificates.is_none() {
        errs.add(
            "spec.validation",
            "must specify either CACertificateRefs or WellKnownCACertificates",
        );
    }
    if let Some(w) = &v.well_known_ca_certificates
        && w != "System"
    {
        errs.add(
            "spec.validation.wellKnownCACertificates",
            format!("Unsupported value: {w:?}: supported values: \"System\""),
        );
    }
    hostname(errs, "spec.validation.hostname", &v.hostname);
    for (i, san) in v.subject_alt_names.iter().enumerate() {
        let path = format!("spec.validation.subjectAltNames[{i}]");
        match san.san_type.as_str() {
            "Hostname" if san.hostname.is_none() || san.uri.is_some() => errs.add(
                &path,
                "SubjectAltName element must contain Hostname, if Type is set to Hostname",
            ),
            "URI" if san.uri.is_none() || san.hostname.is_some() => errs.add(
                &path,
                "SubjectAltName element must contain URI, if Type is set to URI",
            ),
            "Hostname" | "URI" => {}
            other => errs.add(
                format!("{path}.type"),
                format!("Unsupported value: {other:?}: supported values: \"Hostname\", \"URI\""),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
