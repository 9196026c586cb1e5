//! Sidecar: the workload selector, the ingress listeners (port, bind, default endpoint, TLS,
//! connection pool), the egress listeners (port or Unix socket bind, hosts) and the outbound
//! traffic policy.

use std::collections::HashSet;

use serde::Deserialize;

use super::destination::destination;
use super::fields::{
    Errors, PORT_RANGE, Protocol, UNIX_PREFIX, invalid_port_name, non_empty, port_in_range,
    protocol, typed, unsupported_value,
};
use super::names::{dns1123_label, is_ip, namespaced_host, selector, unix_address};
use super::tls::{ServerTls, server_tls};
use super::traffic_policy::{ConnectionPool, connection_pool};
use crate::istio::{CaptureMode, Destination, Sidecar};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressListener {
    port: Option<IngressPort>,
    bind: Option<String>,
    capture_mode: Option<String>,
    default_endpoint: Option<String>,
    tls: Option<ServerTls>,
    connection_pool: Option<ConnectionPool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IngressPort {
    number: Option<i64>,
    protocol: Option<String>,
    name: Option<String>,
    target_port: Option<i64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OutboundTrafficPolicy {
    mode: Option<String>,
    egress_proxy: Option<Destination>,
}

pub(super) fn sidecar(errs: &mut Errors, sc: &Sidecar) {
    if let Some(ws) = &sc.workload_selector {
        selector(errs, "spec.workloadSelector.labels", &ws.labels);
    }

    let mut ingress_ports = HashSet::new();
    for (i, value) in sc.ingress.iter().enumerate() {
        let path = format!("spec.ingress[{i}]");
        let Some(listener) = typed::<IngressListener>(errs, &path, value) else {
            continue;
        };
        ingress_listener(errs, &path, &listener, &mut ingress_ports);
    }

    let mut egress_ports = HashSet::new();
    let mut egress_sockets = HashSet::new();
    let mut catch_all_seen = false;
    for (i, egress) in sc.egress.iter().enumerate() {
        let path = format!("spec.egress[{i}]");
        match &egress.port {
            None => {
                // At most one listener without a port, and it comes last.
                if catch_all_seen {
                    errs.add(&path, "egress can have only one listener with empty port");
                } else if i + 1 != sc.egress.len() {
                    errs.add(
                        &path,
                        "the egress listener with empty port should be the last listener in the list",
                    );
                }
                catch_all_seen = true;
            }
            Some(port) => {
                let pp = format!("{path}.port");
                if !port.name.is_empty() && !dns1123_label(&port.name) {
                    errs.add(format!("{pp}.name"), invalid_port_name(&port.name));
                }
                if !port.protocol.is_empty() && protocol(&port.protocol).is_none() {
                    errs.add(
                        format!("{pp}.protocol"),
                        format!("unsupported protocol: {:?}", port.protocol),
                    );
                }
                if port.number == 0 {
                    // A Unix domain socket listener.
                    match egress.bind.strip_prefix(UNIX_PREFIX) {
                        None => errs.add(
                            format!("{path}.bind"),
                            "ports with 0 value must have a unix domain socket bind address",
                        ),
                        Some(socket) => {
                            if let Err(e) = unix_address(socket) {
                                errs.add(format!("{path}.bind"), e);
                            }
                        }
                    }
                    if !matches!(
                        egress.capture_mode,
                        CaptureMode::Default | CaptureMode::None
                    ) {
                        errs.add(
                            format!("{path}.captureMode"),
                            "captureMode must be DEFAULT/NONE for unix domain socket listeners",
                        );
                    }
                    if !egress_sockets.insert(egress.bind.as_str()) {
                        errs.add(
                            format!("{path}.bind"),
                            "unix domain socket values for listeners must be unique",
                        );
                    }
                } else {
                    if !port_in_range(port.number.into()) {
                        errs.add(format!("{pp}.number"), PORT_RANGE);
                    }
                    if !egress.bind.is_empty() && !is_ip(&egress.bind) {
                        errs.add(
                            format!("{path}.bind"),
                            format!("{:?} is not a valid IP", egress.bind),
                        );
                    }
                    if !egress_ports.insert(port.number) {
                        errs.add(
                            format!("{pp}.number"),
                            "ports on IP bound listeners must be unique",
                        );
                    }
                }
            }
        }
        if egress.hosts.is_empty() {
            errs.add(
                format!("{path}.hosts"),
                "Required value: egress listener must contain at least one host",
            );
        }
        for (k, h) in egress.hosts.iter().enumerate() {
            namespaced_host(errs, &format!("{path}.hosts[{k}]"), h, false);
        }
    }

    if let Some(value) = &sc.outbound_traffic_policy {
        let path = "spec.outboundTrafficPolicy";
        if let Some(policy) = typed::<OutboundTrafficPolicy>(errs, path, value) {
            let mode = policy.mode.as_deref().unwrap_or("REGISTRY_ONLY");
            if mode == "ALLOW_ANY_DYNAMIC_DNS" {
                errs.add(
                    format!("{path}.mode"),
                    "ALLOW_ANY_DYNAMIC_DNS mode is only supported in MeshConfig, not in Sidecar resource",
                );
            } else {
                unsupported_value(
                    errs,
                    &format!("{path}.mode"),
                    mode,
                    &["REGISTRY_ONLY", "ALLOW_ANY"],
                );
            }
            if let Some(proxy) = &policy.egress_proxy {
                let pp = format!("{path}.egressProxy");
                if mode != "ALLOW_ANY" {
                    errs.add(
                        &pp,
                        "egressProxy must be set only with ALLOW_ANY outboundTrafficPolicy mode",
                    );
                }
                if proxy.port.is_none() {
                    errs.add(format!("{pp}.port"), "Required value");
                }
                destination(errs, &pp, proxy);
            }
        }
    }
}

fn ingress_listener(
    errs: &mut Errors,
    path: &str,
    listener: &IngressListener,
    ports: &mut HashSet<i64>,
) {
    if let Some(mode) = &listener.capture_mode {
        unsupported_value(
            errs,
            &format!("{path}.captureMode"),
            mode,
            &["DEFAULT", "IPTABLES", "NONE"],
        );
    }
    let Some(port) = &listener.port else {
        errs.add(
            format!("{path}.port"),
            "Required value: port is required for ingress listeners",
        );
        return;
    };
    let pp = format!("{path}.port");
    if port.target_port.is_some_and(|t| t > 0) {
        errs.add(
            format!("{pp}.targetPort"),
            "targetPort has no impact on Sidecars",
        );
    }
    let name = port.name.as_deref().unwrap_or_default();
    if !name.is_empty() && !dns1123_label(name) {
        errs.add(format!("{pp}.name"), invalid_port_name(name));
    }
    let proto = port.protocol.as_deref().unwrap_or_default();
    if !proto.is_empty() && protocol(proto).is_none() {
        errs.add(
            format!("{pp}.protocol"),
            format!("unsupported protocol: {proto:?}"),
        );
    }
    let number = port.number.unwrap_or(0);
    if !port_in_range(number) {
        errs.add(format!("{pp}.number"), PORT_RANGE);
    }
    if !ports.insert(number) {
        errs.add(
            format!("{pp}.number"),
            "ports on IP bound listeners must be unique",
        );
    }
    if let Some(bind) = listener.bind.as_deref().filter(|b| !b.is_empty())
        && !is_ip(bind)
    {
        errs.add(
            format!("{path}.bind"),
            format!("{bind:?} is not a valid IP"),
        );
    }
    if let Some(endpoint) = listener
        .default_endpoint
        .as_deref()
        .filter(|e| !e.is_empty())
    {
        default_endpoint(errs, &format!("{path}.defaultEndpoint"), endpoint);
    }
    if let Some(tls) = &listener.tls {
        let tp = format!("{path}.tls");
        if !tls.subject_alt_names.is_empty() {
            errs.add(&tp, "subjectAltNames is not supported in ingress tls");
        }
        if tls.https_redirect == Some(true) {
            errs.add(&tp, "httpsRedirect is not supported");
        }
        if non_empty(&tls.credential_name) || !tls.credential_names.is_empty() {
            errs.add(&tp, "credentialName(s) is not currently supported");
        }
        if !tls.tls_certificates.is_empty() {
            errs.add(&tp, "tlsCertificates is not currently supported");
        }
        if let Some(mode @ ("ISTIO_MUTUAL" | "AUTO_PASSTHROUGH")) = tls.mode.as_deref() {
            errs.add(
                format!("{tp}.mode"),
                format!("cannot set mode to {mode} in sidecar ingress tls"),
            );
        }
        if protocol(proto) != Some(Protocol::Tls) {
            errs.add(
                &tp,
                "server cannot have TLS settings for non HTTPS/TLS ports",
            );
        }
        server_tls(errs, &tp, tls);
    }
    if let Some(pool) = &listener.connection_pool {
        connection_pool(errs, &format!("{path}.connectionPool"), pool);
    }
}

/// `127.0.0.1:<port>`, `0.0.0.0:<port>`, `[::1]:<port>`, `[::]:<port>`, `:<port>` or
/// `unix://<socket>`.
fn default_endpoint(errs: &mut Errors, path: &str, endpoint: &str) {
    if let Some(socket) = endpoint.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = unix_address(socket) {
            errs.add(path, e);
        }
        return;
    }
    let Some((host, port)) = split_host_port(endpoint) else {
        errs.add(path, format!("{endpoint:?} is not of the form host:port"));
        return;
    };
    if !matches!(host, "" | "127.0.0.1" | "0.0.0.0" | "::1" | "::") {
        errs.add(
            path,
            "defaultEndpoint must be of form 127.0.0.1:<port>, 0.0.0.0:<port>, [::1]:<port>, [::]:<port>, unix://<socket> or unset",
        );
    }
    match port.parse::<i64>() {
        Ok(p) if port_in_range(p) => {}
        Ok(_) => errs.add(path, PORT_RANGE),
        Err(_) => errs.add(path, format!("port {port:?} is not a number")),
    }
}

fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = after.strip_prefix(':')?;
        return Some((host, port));
    }
    let (host, port) = s.rsplit_once(':')?;
    if host.contains(':') {
        return None;
    }
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    #[test]
    fn sidecar_egress() {
        valid(
            "Sidecar",
            "egress: [{hosts: [none/*, default/test.default, '~/*', ./a.example.com, '*/*']}]",
        );
        valid(
            "Sidecar",
            "egress: [{port: {number: 8080, protocol: HTTP, name: http}, hosts: [ns/*]}, {hosts: [ns/*]}]",
        );
        valid(
            "Sidecar",
            "egress: [{port: {number: 0, protocol: HTTP}, bind: 'unix:///var/run/app.sock', captureMode: NONE, hosts: [ns/*]}]",
        );
        invalid(
            "Sidecar",
            "egress: [{hosts: [a.example.com]}]",
            "spec.egress[0].hosts[0]: host must be of form namespace/dnsName",
        );
        invalid(
            "Sidecar",
            "egress: [{hosts: [default/test]}]",
            "spec.egress[0].hosts[0]: short names (non FQDN) are not allowed",
        );
        invalid(
            "Sidecar",
            "egress: [{}]",
            "spec.egress[0].hosts: Required value",
        );
        invalid(
            "Sidecar",
            "egress: [{port: {number: 70000, protocol: HTTP}, hosts: [ns/*]}]",
            "spec.egress[0].port.number: port must be between 1-65535",
        );
        invalid(
            "Sidecar",
            "egress: [{port: {number: 80, protocol: HTTP}, hosts: [ns/*]}, {port: {number: 80, protocol: TCP}, hosts: [ns/*]}]",
            "spec.egress[1].port.number: ports on IP bound listeners must be unique",
        );
        invalid(
            "Sidecar",
            "egress: [{hosts: [ns/*]}, {port: {number: 80}, hosts: [ns/*]}]",
            "spec.egress[0]: the egress listener with empty port should be the last listener",
        );
        invalid(
            "Sidecar",
            "egress: [{port: {number: 0}, bind: 'unix:///sock', captureMode: IPTABLES, hosts: [ns/*]}]",
            "spec.egress[0].captureMode: captureMode must be DEFAULT/NONE for unix domain socket listeners",
        );
        invalid(
            "Sidecar",
            "egress: [{port: {number: 0}, hosts: [ns/*]}]",
            "spec.egress[0].bind: ports with 0 value must have a unix domain socket bind address",
        );
        invalid(
            "Sidecar",
            "workloadSelector: {labels: {app: '*'}}\negress: [{hosts: [ns/*]}]",
            "spec.workloadSelector.labels[app]: wildcard is not supported in selector",
        );
    }

    #[test]
    fn sidecar_ingress_and_outbound_policy() {
        valid(
            "Sidecar",
            "ingress: [{port: {number: 7071, protocol: HTTP, name: httplocal}, defaultEndpoint: '127.0.0.1:17071'}, {port: {number: 7072, protocol: TCP}, defaultEndpoint: '[::1]:17072', captureMode: NONE}, {port: {number: 7073}, defaultEndpoint: 'unix:///var/run/app.sock'}]",
        );
        valid("Sidecar", "outboundTrafficPolicy: {mode: ALLOW_ANY}");
        invalid(
            "Sidecar",
            "ingress: [{defaultEndpoint: '127.0.0.1:80'}]",
            "spec.ingress[0].port: Required value",
        );
        invalid(
            "Sidecar",
            "ingress: [{port: {number: 80}, defaultEndpoint: '10.0.0.1:80'}]",
            "spec.ingress[0].defaultEndpoint: defaultEndpoint must be of form 127.0.0.1:<port>",
        );
        invalid(
            "Sidecar",
            "ingress: [{port: {number: 80}, defaultEndpoint: '127.0.0.1:0'}]",
            "spec.ingress[0].defaultEndpoint: port must be between 1-65535",
        );
        invalid(
            "Sidecar",
            "ingress: [{port: {number: 80}, captureMode: TPROXY}]",
            "spec.ingress[0].captureMode: Unsupported value: \"TPROXY\"",
        );
        invalid(
            "Sidecar",
            "ingress: [{port: {number: 80}}, {port: {number: 80}}]",
            "spec.ingress[1].port.number: ports on IP bound listeners must be unique",
        );
        invalid(
            "Sidecar",
            "outboundTrafficPolicy: {mode: ALLOW_ANY_DYNAMIC_DNS}",
            "spec.outboundTrafficPolicy.mode: ALLOW_ANY_DYNAMIC_DNS mode is only supported in MeshConfig",
        );
        invalid(
            "Sidecar",
            "outboundTrafficPolicy: {mode: REGISTRY_ONLY, egressProxy: {host: egress.example.com, port: {number: 80}}}",
            "spec.outboundTrafficPolicy.egressProxy: egressProxy must be set only with ALLOW_ANY",
        );
    }
}
