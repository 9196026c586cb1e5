//! WorkloadEntry and WorkloadGroup: a workload's address, ports and labels (the same checks
//! serve ServiceEntry endpoints and the WorkloadGroup template, see [`AddressRule`]), and a
//! group's metadata and readiness probe.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::Deserialize;

use super::fields::{
    Errors, PORT_RANGE, UNIX_PREFIX, invalid_port_name, nullable, port_in_range, re, required_port,
    typed,
};
use super::names::{dns1123_label, fqdn, is_ip, labels};
use crate::istio::{Labels, WorkloadEntry, WorkloadGroup};

/// What a non-Unix-socket address of a workload may be.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum AddressRule {
    /// A WorkloadEntry, or a DNS ServiceEntry's endpoint: an IP or a hostname.
    IpOrFqdn,
    /// A STATIC ServiceEntry's endpoint: an IP.
    Ip,
    /// Not checked beyond the CRD rules (endpoints of a NONE ServiceEntry, already invalid).
    Any,
    /// A WorkloadGroup template: the address may be empty and is filled in later.
    Template,
}

pub(super) fn workload_entry(errs: &mut Errors, path: &str, we: &WorkloadEntry, rule: AddressRule) {
    let address = we.address.as_str();
    let address_path = format!("{path}.address");
    if address.is_empty() {
        if we.network.is_empty() && rule != AddressRule::Template {
            errs.add(
                &address_path,
                "Address is required: set address, or network for a workload reached through a gateway",
            );
        }
    } else if address.len() > 256 {
        errs.add(&address_path, "may not be longer than 256 characters");
    }

    if let Some(socket) = address.strip_prefix(UNIX_PREFIX) {
        if !socket.starts_with('/') && !socket.starts_with('@') {
            errs.add(
                &address_path,
                "UDS must be an absolute path or abstract socket",
            );
        }
        if address.ends_with('/') {
            errs.add(&address_path, "UDS may not be a dir");
        }
        if !we.ports.is_empty() {
            errs.add(format!("{path}.ports"), "UDS may not include ports");
        }
    } else if !address.is_empty() && !is_ip(address) {
        match rule {
            AddressRule::IpOrFqdn => {
                if let Err(e) = fqdn(address) {
                    errs.add(
                        &address_path,
                        format!("{address:?} is not a valid IP address or FQDN: {e}"),
                    );
                }
            }
            AddressRule::Ip => errs.add(
                &address_path,
                format!("{address:?} is not a valid IP address (resolution STATIC needs IPs or unix:// sockets)"),
            ),
            AddressRule::Any | AddressRule::Template => {}
        }
    }

    if we.ports.len() > 128 {
        errs.add(format!("{path}.ports"), "may have at most 128 entries");
    }
    for (name, &number) in &we.ports {
        let port_path = format!("{path}.ports[{name}]");
        if !port_in_range(number.into()) {
            errs.add(&port_path, PORT_RANGE);
        }
        if !dns1123_label(name) {
            errs.add(&port_path, invalid_port_name(name));
        }
    }
    if rule != AddressRule::Template {
        labels(errs, &format!("{path}.labels"), &we.labels);
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GroupMetadata {
    #[serde(default, deserialize_with = "nullable")]
    labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    initial_delay_seconds: Option<i64>,
    timeout_seconds: Option<i64>,
    period_seconds: Option<i64>,
    success_threshold: Option<i64>,
    failure_threshold: Option<i64>,
    http_get: Option<HttpGetProbe>,
    tcp_socket: Option<TcpSocketProbe>,
    exec: Option<ExecProbe>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HttpGetProbe {
    port: Option<i64>,
    scheme: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    http_headers: Vec<ProbeHeader>,
}

#[derive(Deserialize)]
struct ProbeHeader {
    name: Option<String>,
}

#[derive(Deserialize)]
struct TcpSocketProbe {
    port: Option<i64>,
}

#[derive(Deserialize)]
struct ExecProbe {
    #[serde(default, deserialize_with = "nullable")]
    command: Vec<String>,
}

static PROBE_HEADER_NAME: LazyLock<Regex> = LazyLock::new(|| re(r"^[-_A-Za-z0-9]+$"));

pub(super) fn workload_group(errs: &mut Errors, wg: &WorkloadGroup) {
    match &wg.template {
        None => errs.add("spec.template", "Required value"),
        Some(t) => workload_entry(errs, "spec.template", t, AddressRule::Template),
    }
    if let Some(meta) = wg
        .metadata
        .as_ref()
        .and_then(|m| typed::<GroupMetadata>(errs, "spec.metadata", m))
    {
        labels(errs, "spec.metadata.labels", &meta.labels);
        if meta.labels.len() > 256 {
            errs.add("spec.metadata.labels", "may have at most 256 entries");
        }
        if meta.annotations.len() > 256 {
            errs.add("spec.metadata.annotations", "may have at most 256 entries");
        }
    }
    if let Some(probe) = wg
        .probe
        .as_ref()
        .and_then(|p| typed::<Probe>(errs, "spec.probe", p))
    {
        readiness_probe(errs, "spec.probe", &probe);
    }
}

fn readiness_probe(errs: &mut Errors, path: &str, probe: &Probe) {
    let counters = [
        ("initialDelaySeconds", probe.initial_delay_seconds),
        ("timeoutSeconds", probe.timeout_seconds),
        ("periodSeconds", probe.period_seconds),
        ("successThreshold", probe.success_threshold),
        ("failureThreshold", probe.failure_threshold),
    ];
    for (field, value) in counters {
        if value.is_some_and(|v| v < 0) {
            errs.add(format!("{path}.{field}"), "must be non-negative");
        }
    }
    let methods = [
        probe.http_get.is_some(),
        probe.tcp_socket.is_some(),
        probe.exec.is_some(),
    ];
    match methods.iter().filter(|m| **m).count() {
        0 => errs.add(path, "one of httpGet, tcpSocket or exec is required"),
        1 => {}
        _ => errs.add(path, "only one of httpGet, tcpSocket or exec can be set"),
    }
    if let Some(http) = &probe.http_get {
        required_port(errs, &format!("{path}.httpGet.port"), http.port);
        if let Some(scheme) = &http.scheme
            && !matches!(scheme.as_str(), "" | "HTTP" | "HTTPS")
        {
            errs.add(
                format!("{path}.httpGet.scheme"),
                "scheme must be one of [HTTP, HTTPS]",
            );
        }
        for (i, header) in http.http_headers.iter().enumerate() {
            let name = header.name.as_deref().unwrap_or_default();
            if !PROBE_HEADER_NAME.is_match(name) {
                errs.add(
                    format!("{path}.httpGet.httpHeaders[{i}].name"),
                    format!("{name:?} should match '^[-_A-Za-z0-9]+$'"),
                );
            }
        }
    }
    if let Some(tcp) = &probe.tcp_socket {
        required_port(errs, &format!("{path}.tcpSocket.port"), tcp.port);
    }
    if let Some(exec) = &probe.exec {
        if exec.command.is_empty() {
            errs.add(format!("{path}.exec.command"), "Required value");
        }
        for (i, c) in exec.command.iter().enumerate() {
            if c.is_empty() {
                errs.add(format!("{path}.exec.command[{i}]"), "may not be empty");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    // --- WorkloadEntry -----------------------------------------------------------------------

    #[test]
    fn workload_entry_address() {
        valid("WorkloadEntry", "network: net");
        valid("WorkloadEntry", "address: example.com");
        valid(
            "WorkloadEntry",
            "address: 1.2.3.4\nserviceAccount: sa\nnetwork: net\nlabels: {app: app}\nports: {http: 1}\nweight: 2\nlocality: foo/bar/baz",
        );
        invalid("WorkloadEntry", "{}", "spec.address: Address is required");
        invalid(
            "WorkloadEntry",
            "address: 'bad address!'",
            "spec.address: \"bad address!\" is not a valid IP address or FQDN",
        );
        invalid(
            "WorkloadEntry",
            "address: 1.2.3.4\nlabels: {'bad key!': v}",
            "spec.labels[bad key!]: invalid label key",
        );
    }

    #[test]
    fn workload_entry_unix_sockets() {
        valid("WorkloadEntry", "address: 'unix://@foo'");
        valid("WorkloadEntry", "address: 'unix:///foo/bar'");
        invalid(
            "WorkloadEntry",
            "address: 'unix:///dir/'",
            "spec.address: UDS may not be a dir",
        );
        invalid(
            "WorkloadEntry",
            "address: 'unix://relative'",
            "spec.address: UDS must be an absolute path or abstract socket",
        );
        invalid(
            "WorkloadEntry",
            "address: 'unix://@foo'\nports: {http: 80}",
            "spec.ports: UDS may not include ports",
        );
    }

    #[test]
    fn workload_entry_ports() {
        invalid(
            "WorkloadEntry",
            "address: 1.1.1.1\nports: {http: 99999}",
            "spec.ports[http]: port must be between 1-65535",
        );
        invalid(
            "WorkloadEntry",
            "address: 1.1.1.1\nports: {'@': 80}",
            "spec.ports[@]: Invalid value: \"@\": port name must be valid",
        );
        let name63 = format!("http-{}", "a".repeat(58));
        valid(
            "WorkloadEntry",
            &format!("address: 1.1.1.1\nports: {{{name63}: 80}}"),
        );
        invalid(
            "WorkloadEntry",
            &format!("address: 1.1.1.1\nports: {{{name63}a: 80}}"),
            "port name must be valid",
        );
    }

    // --- WorkloadGroup -----------------------------------------------------------------------

    #[test]
    fn workload_group_template() {
        valid("WorkloadGroup", "template: {}");
        valid(
            "WorkloadGroup",
            "template: {serviceAccount: sa, network: net, ports: {http: 1}}",
        );
        invalid(
            "WorkloadGroup",
            "metadata: {labels: {a: b}}",
            "spec.template: Required value",
        );
        invalid(
            "WorkloadGroup",
            "template: {address: 1.2.3.4, ports: {http: 0}}",
            "spec.template.ports[http]: port must be between 1-65535",
        );
        invalid(
            "WorkloadGroup",
            "template: {address: 'unix://relative'}",
            "spec.template.address: UDS must be an absolute path",
        );
        invalid(
            "WorkloadGroup",
            "metadata: {labels: {a: 'no spaces'}}\ntemplate: {}",
            "spec.metadata.labels[a]: invalid label value",
        );
    }

    #[test]
    fn workload_group_probe() {
        valid(
            "WorkloadGroup",
            r#"
probe:
  periodSeconds: 1
  httpGet: {port: 8080, host: bar, scheme: HTTPS, path: /bar, httpHeaders: [{name: foo, value: bar}]}
template: {}
"#,
        );
        valid(
            "WorkloadGroup",
            "probe: {tcpSocket: {port: 8080}}\ntemplate: {}",
        );
        valid(
            "WorkloadGroup",
            "probe: {exec: {command: [cat, /ready]}}\ntemplate: {}",
        );
        invalid(
            "WorkloadGroup",
            "probe: {tcpSocket: {port: 65536}}\ntemplate: {}",
            "spec.probe.tcpSocket.port: port must be between 1-65535",
        );
        invalid(
            "WorkloadGroup",
            "probe: {httpGet: {port: 80, httpHeaders: [{name: '**'}]}}\ntemplate: {}",
            "spec.probe.httpGet.httpHeaders[0].name: \"**\" should match '^[-_A-Za-z0-9]+$'",
        );
        invalid(
            "WorkloadGroup",
            "probe: {httpGet: {port: 80, scheme: FTP}}\ntemplate: {}",
            "spec.probe.httpGet.scheme: scheme must be one of [HTTP, HTTPS]",
        );
        invalid(
            "WorkloadGroup",
            "probe: {httpGet: {path: /}}\ntemplate: {}",
            "spec.probe.httpGet.port: Required value",
        );
        invalid(
            "WorkloadGroup",
            "probe: {periodSeconds: -1, tcpSocket: {port: 1}}\ntemplate: {}",
            "spec.probe.periodSeconds: must be non-negative",
        );
        invalid(
            "WorkloadGroup",
            "probe: {periodSeconds: 1}\ntemplate: {}",
            "spec.probe: one of httpGet, tcpSocket or exec is required",
        );
        invalid(
            "WorkloadGroup",
            "probe: {tcpSocket: {port: 1}, exec: {command: [x]}}\ntemplate: {}",
            "spec.probe: only one of httpGet, tcpSocket or exec can be set",
        );
        invalid(
            "WorkloadGroup",
            "probe: {tcpSocket: {port: eighty}}\ntemplate: {}",
            "spec.probe.tcpSocket.port: invalid type",
        );
    }
}
