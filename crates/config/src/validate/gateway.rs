//! Gateway: the name, the selector and the servers (hosts, bind address, port, and whether
//! the port's protocol goes with the server's TLS settings, which `tls` checks).

use std::collections::HashSet;

use super::fields::{
    Errors, PORT_RANGE, Protocol, UNIX_PREFIX, non_empty, port_in_range, protocol, typed,
};
use super::names::{dns1123_label, is_ip, namespaced_host, selector, unix_address};
use super::tls::{ServerTls, server_tls};
use crate::istio::Gateway;

pub(super) fn gateway(errs: &mut Errors, gw: &Gateway, name: &str) {
    if !dns1123_label(name) {
        errs.add(
            "metadata.name",
            format!("invalid gateway name {name:?}: must be a DNS-1123 label (no dots)"),
        );
    }
    // Istio itself does not check the selector of a Gateway; a `*` could never match a
    // Kubernetes label value, so it is rejected as in the other selectors.
    selector(errs, "spec.selector", &gw.selector);
    if gw.servers.is_empty() {
        errs.add(
            "spec.servers",
            "Required value: gateway must have at least one server",
        );
    }
    let mut port_names = HashSet::new();
    for (i, server) in gw.servers.iter().enumerate() {
        let path = format!("spec.servers[{i}]");
        if server.hosts.is_empty() {
            errs.add(
                format!("{path}.hosts"),
                "Required value: server config must contain at least one host",
            );
        }
        for (k, h) in server.hosts.iter().enumerate() {
            namespaced_host(errs, &format!("{path}.hosts[{k}]"), h, true);
        }
        let tls = match &server.tls {
            Some(v) => typed::<ServerTls>(errs, &format!("{path}.tls"), v),
            None => None,
        };
        if let Some(t) = &tls {
            server_tls(errs, &format!("{path}.tls"), t);
        }
        let bind_unix = server.bind.strip_prefix(UNIX_PREFIX);
        if let Some(socket) = bind_unix {
            if let Err(e) = unix_address(socket) {
                errs.add(format!("{path}.bind"), e);
            }
        } else if !server.bind.is_empty() && !is_ip(&server.bind) {
            errs.add(
                format!("{path}.bind"),
                format!("{:?} is not a valid IP", server.bind),
            );
        }
        let Some(port) = &server.port else {
            errs.add(format!("{path}.port"), "Required value");
            continue;
        };
        let pp = format!("{path}.port");
        let mut port_ok = true;
        let proto = protocol(&port.protocol);
        if proto.is_none() {
            port_ok = false;
            errs.add(
                format!("{pp}.protocol"),
                format!(
                    "invalid protocol {:?}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP",
                    port.protocol
                ),
            );
        }
        if bind_unix.is_some() {
            if port.number != 0 {
                errs.add(
                    format!("{pp}.number"),
                    "port number must be 0 for unix domain socket binds",
                );
            }
        } else if !port_in_range(port.number.into()) {
            port_ok = false;
            errs.add(format!("{pp}.number"), PORT_RANGE);
        }
        if port.target_port.is_some_and(|t| t > 0) {
            port_ok = false;
            errs.add(
                format!("{pp}.targetPort"),
                "targetPort has no impact on Gateways",
            );
        }
        if port.name.is_empty() {
            port_ok = false;
            errs.add(
                format!("{pp}.name"),
                "Required value: port name must be set",
            );
        } else if !port_names.insert(port.name.as_str()) {
            errs.add(
                format!("{pp}.name"),
                format!(
                    "port names in servers must be unique: duplicate name {:?}",
                    port.name
                ),
            );
        }
        if !port_ok {
            continue;
        }
        match (proto, &tls) {
            (Some(Protocol::Tls), None) if server.tls.is_none() => errs.add(
                format!("{path}.tls"),
                "Required value: server must have TLS settings for HTTPS/TLS protocols",
            ),
            (Some(Protocol::Http), Some(t)) => {
                // Only `httpsRedirect` makes sense on a plain-text HTTP server.
                let passthrough = matches!(
                    t.mode.as_deref().unwrap_or("PASSTHROUGH"),
                    "PASSTHROUGH" | "AUTO_PASSTHROUGH"
                );
                if !passthrough
                    || non_empty(&t.ca_certificates)
                    || non_empty(&t.private_key)
                    || non_empty(&t.server_certificate)
                {
                    errs.add(
                        format!("{path}.tls"),
                        "server cannot have TLS settings for plain text HTTP ports",
                    );
                }
            }
            (Some(Protocol::Other), Some(_)) => errs.add(
                format!("{path}.tls"),
                "server cannot have TLS settings for non HTTPS/TLS ports",
            ),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{check_named, invalid, valid};

    const SERVER: &str = "{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}";

    #[test]
    fn gateway_servers() {
        valid(
            "Gateway",
            &format!("selector: {{istio: ingressgateway}}\nservers: [{SERVER}]"),
        );
        // Deviation from istiod, which rejects short names: Istio's own test data uses one.
        valid(
            "Gateway",
            "servers: [{port: {number: 443, name: https, protocol: HTTPS}, hosts: [b], tls: {mode: SIMPLE, credentialName: ingress-cert}}]",
        );
        invalid(
            "Gateway",
            "selector: {istio: ingressgateway}",
            "spec.servers: Required value",
        );
        invalid(
            "Gateway",
            "servers: [{hosts: ['*']}]",
            "spec.servers[0].port: Required value",
        );
        invalid(
            "Gateway",
            "servers: [{port: {number: 0, name: http, protocol: HTTP}, hosts: ['*']}]",
            "spec.servers[0].port.number: port must be between 1-65535",
        );
        invalid(
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}}]",
            "spec.servers[0].hosts: Required value",
        );
        invalid(
            "Gateway",
            "servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}, {port: {number: 81, name: http, protocol: HTTP}, hosts: ['*']}]",
            "spec.servers[1].port.name: port names in servers must be unique",
        );
        invalid(
            "Gateway",
            "servers: [{port: {number: 80, protocol: HTTP}, hosts: ['*']}]",
            "spec.servers[0].port.name: Required value",
        );
        invalid(
            "Gateway",
            "servers: [{port: {number: 80, name: x, protocol: SPDY}, hosts: ['*']}]",
            "spec.servers[0].port.protocol: invalid protocol \"SPDY\"",
        );
        invalid(
            "Gateway",
            &format!("selector: {{istio: '*'}}\nservers: [{SERVER}]"),
            "spec.selector[istio]: wildcard is not supported in selector",
        );
        let errs =
            check_named("Gateway", "my.gateway", &format!("servers: [{SERVER}]")).unwrap_err();
        assert!(
            errs[0].starts_with("metadata.name: invalid gateway name"),
            "{errs:?}"
        );
    }

    #[test]
    fn gateway_hosts() {
        let gw = |host: &str| {
            format!(
                "servers: [{{port: {{number: 80, name: http, protocol: HTTP}}, hosts: ['{host}']}}]"
            )
        };
        for host in [
            "*",
            "*.local",
            "uk.bookinfo.com",
            "ns/*.example.com",
            "./a.example.com",
            "*/*",
            "10.0.0.1",
        ] {
            valid("Gateway", &gw(host));
        }
        invalid(
            "Gateway",
            &gw("*x.example.com"),
            "spec.servers[0].hosts[0]: partial wildcard",
        );
        invalid(
            "Gateway",
            &gw("bad_ns/a.com"),
            "invalid namespace value \"bad_ns\" in gateway",
        );
        invalid("Gateway", &gw("ns/"), "cannot be empty");
    }

    #[test]
    fn gateway_tls() {
        let gw = |protocol: &str, tls: &str| {
            format!(
                "servers: [{{port: {{number: 443, name: p, protocol: {protocol}}}, hosts: ['*']{tls}}}]"
            )
        };
        valid(
            "Gateway",
            &gw(
                "HTTPS",
                ", tls: {mode: SIMPLE, serverCertificate: /etc/certs/cert.pem, privateKey: /etc/certs/key.pem}",
            ),
        );
        valid("Gateway", &gw("TLS", ", tls: {mode: AUTO_PASSTHROUGH}"));
        valid("Gateway", &gw("HTTP", ", tls: {httpsRedirect: true}"));
        invalid(
            "Gateway",
            &gw("HTTPS", ""),
            "spec.servers[0].tls: Required value",
        );
        invalid(
            "Gateway",
            &gw("HTTPS", ", tls: {mode: SIMPLE}"),
            "spec.servers[0].tls.serverCertificate: Required value: SIMPLE TLS requires a server certificate",
        );
        invalid(
            "Gateway",
            &gw(
                "HTTPS",
                ", tls: {mode: MUTUAL, serverCertificate: c, privateKey: k}",
            ),
            "spec.servers[0].tls.caCertificates: Required value: MUTUAL TLS requires a client CA bundle",
        );
        invalid(
            "Gateway",
            &gw(
                "HTTPS",
                ", tls: {mode: SIMPLE, credentialName: a, serverCertificate: c, privateKey: k}",
            ),
            "only one of credentialName, credentialNames, serverCertificate/privateKey, tlsCertificates",
        );
        invalid(
            "Gateway",
            &gw("TCP", ", tls: {mode: SIMPLE, credentialName: a}"),
            "spec.servers[0].tls: server cannot have TLS settings for non HTTPS/TLS ports",
        );
        invalid(
            "Gateway",
            &gw("HTTP", ", tls: {mode: SIMPLE, credentialName: a}"),
            "spec.servers[0].tls: server cannot have TLS settings for plain text HTTP ports",
        );
        invalid(
            "Gateway",
            &gw("HTTPS", ", tls: {mode: ISTIO_MUTUAL, credentialName: a}"),
            "ISTIO_MUTUAL TLS cannot have",
        );
    }
}
