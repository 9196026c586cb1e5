//! ServiceEntry: hosts, addresses, ports, the resolution and the endpoints (each endpoint is
//! checked as a WorkloadEntry, by `workload`), and the rules that tie hosts, addresses, ports
//! and endpoints to the resolution.

use std::collections::HashSet;

use super::fields::{
    Errors, PORT_RANGE, Protocol, UNIX_PREFIX, invalid_port_name, port_in_range, protocol,
};
use super::names::{dns1123_label, export_to, fqdn, ip_or_cidr, selector, wildcard_domain};
use super::workload::{AddressRule, workload_entry};
use crate::istio::{Resolution, ServiceEntry};

pub(super) fn service_entry(errs: &mut Errors, se: &ServiceEntry, namespace: &str) {
    if se.hosts.is_empty() {
        errs.add(
            "spec.hosts",
            "Required value: a ServiceEntry needs at least one host",
        );
    }
    if se.hosts.len() > 256 {
        errs.add("spec.hosts", "must have at most 256 items");
    }
    for (i, h) in se.hosts.iter().enumerate() {
        if h == "*" {
            errs.add(format!("spec.hosts[{i}]"), "hostname cannot be wildcard");
        } else if let Err(e) = wildcard_domain(h) {
            errs.add(format!("spec.hosts[{i}]"), e);
        }
    }

    let mut has_cidr = false;
    for (i, a) in se.addresses.iter().enumerate() {
        has_cidr |= a.contains('/');
        if !ip_or_cidr(a) {
            errs.add(
                format!("spec.addresses[{i}]"),
                format!("{a:?} is not a valid IP address or CIDR block"),
            );
        }
    }
    if has_cidr && !matches!(se.resolution, Resolution::None | Resolution::Static) {
        errs.add(
            "spec.addresses",
            "CIDR addresses are allowed only for NONE/STATIC resolution types",
        );
    }

    if let Some(ws) = &se.workload_selector {
        selector(errs, "spec.workloadSelector.labels", &ws.labels);
        if !se.endpoints.is_empty() {
            errs.add(
                "spec",
                "only one of WorkloadSelector or Endpoints can be set",
            );
        }
    }

    let mut port_names = HashSet::new();
    let mut port_numbers = HashSet::new();
    for (i, p) in se.ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        if !port_in_range(p.number.into()) {
            errs.add(format!("{path}.number"), PORT_RANGE);
        } else if !port_numbers.insert(p.number) {
            errs.add(
                format!("{path}.number"),
                format!("port number cannot be duplicated: {}", p.number),
            );
        }
        if let Some(t) = p.target_port
            && !port_in_range(t.into())
        {
            errs.add(format!("{path}.targetPort"), PORT_RANGE);
        }
        if p.name.is_empty() {
            errs.add(format!("{path}.name"), "Required value");
        } else {
            if !port_names.insert(p.name.as_str()) {
                errs.add(
                    format!("{path}.name"),
                    format!("Duplicate value: {:?}", p.name),
                );
            }
            if !dns1123_label(&p.name) {
                errs.add(format!("{path}.name"), invalid_port_name(&p.name));
            }
        }
        if !p.protocol.is_empty() && protocol(&p.protocol).is_none() {
            errs.add(
                format!("{path}.protocol"),
                format!("unsupported protocol: {:?}", p.protocol),
            );
        }
    }

    match se.resolution {
        Resolution::None if !se.endpoints.is_empty() => {
            errs.add("spec.endpoints", "NONE mode cannot set endpoints");
        }
        Resolution::DnsRoundRobin if se.endpoints.len() > 1 => {
            errs.add(
                "spec.endpoints",
                "DNS_ROUND_ROBIN mode cannot have multiple endpoints",
            );
        }
        _ => {}
    }
    if matches!(se.resolution, Resolution::Dns | Resolution::DnsRoundRobin)
        && se.endpoints.is_empty()
    {
        // The hosts themselves are resolved, so they must be resolvable names.
        for (i, h) in se.hosts.iter().enumerate() {
            if h == "*" {
                continue; // reported above
            }
            if let Err(e) = fqdn(h) {
                errs.add(
                    format!("spec.hosts[{i}]"),
                    format!(
                        "hosts must be fully qualified domain names without wildcards when resolution is {} and no endpoints are given: {e}",
                        resolution_name(se.resolution)
                    ),
                );
            }
        }
    }

    let rule = match se.resolution {
        Resolution::Static => AddressRule::Ip,
        Resolution::Dns | Resolution::DnsRoundRobin => AddressRule::IpOrFqdn,
        Resolution::None => AddressRule::Any,
    };
    for (i, ep) in se.endpoints.iter().enumerate() {
        let path = format!("spec.endpoints[{i}]");
        workload_entry(errs, &path, ep, rule);
        if se.resolution == Resolution::None {
            continue; // endpoints are already an error
        }
        for name in ep.ports.keys() {
            if !port_names.contains(name.as_str()) {
                errs.add(
                    format!("{path}.ports[{name}]"),
                    "endpoint port is not defined by the service entry (no spec.ports entry has this name)",
                );
            }
        }
        if se.resolution == Resolution::Static
            && ep.address.starts_with(UNIX_PREFIX)
            && se.ports.len() != 1
        {
            errs.add(
                format!("{path}.address"),
                "exactly 1 service port required for unix endpoints",
            );
        }
    }

    // With several hosts, only HTTP (Host header) or TLS (SNI) can tell them apart, unless
    // the hosts are ignored anyway (resolution NONE).
    if se.resolution != Resolution::None
        && se.hosts.len() > 1
        && let Some(i) = se
            .ports
            .iter()
            .position(|p| !matches!(protocol(&p.protocol), Some(Protocol::Http | Protocol::Tls)))
    {
        errs.add(
            format!("spec.ports[{i}].protocol"),
            "multiple hosts provided with non-HTTP, non-TLS ports",
        );
    }

    export_to(errs, "spec.exportTo", namespace, &se.export_to, true, false);
}

fn resolution_name(r: Resolution) -> &'static str {
    match r {
        Resolution::None => "NONE",
        Resolution::Static => "STATIC",
        Resolution::Dns => "DNS",
        Resolution::DnsRoundRobin => "DNS_ROUND_ROBIN",
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    #[test]
    fn service_entry_quirks_istio_accepts() {
        // The corpus's `full` ServiceEntry, with the IPv6 address in block style.
        valid(
            "ServiceEntry",
            r#"
hosts: [example.com]
workloadSelector: {labels: {foo: bar}}
addresses:
- 1.2.3.4
- "001:db8::"
exportTo: [foo, .]
ports: [{name: foo, protocol: HTTP, number: 1234, targetPort: 2345}]
subjectAltNames: [sa]
resolution: DNS
"#,
        );
        valid("ServiceEntry", "hosts: ['*x']");
        valid("ServiceEntry", "hosts: [example.com]\nworkloadSelector: {}");
        valid(
            "ServiceEntry",
            "hosts: [example.com]\naddresses: [1.1.1.1/32]",
        );
        valid(
            "ServiceEntry",
            "hosts: [dummy.github.com]\naddresses: [140.82.112.0/20]\nports: [{name: tcp, number: 22, protocol: tcp}]",
        );
        valid(
            "ServiceEntry",
            "hosts: [example.unix.local]\nports: [{number: 8001, name: http, protocol: HTTP}]\nresolution: STATIC\nendpoints: [{address: 'unix:///var/run/example/socket'}]",
        );
    }

    #[test]
    fn service_entry_hosts() {
        invalid("ServiceEntry", "{}", "spec.hosts: Required value");
        invalid("ServiceEntry", "hosts: []", "spec.hosts: Required value");
        invalid(
            "ServiceEntry",
            "hosts: ['*']",
            "spec.hosts[0]: hostname cannot be wildcard",
        );
        invalid(
            "ServiceEntry",
            "hosts: [a.com, 'b..com']",
            "spec.hosts[1]: domain name",
        );
        invalid("ServiceEntry", "hosts: ['foo*']", "spec.hosts[0]");
    }

    #[test]
    fn service_entry_selector() {
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nworkloadSelector: {labels: {val: '*'}}",
            "spec.workloadSelector.labels[val]: wildcard is not supported in selector",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: STATIC\nworkloadSelector: {}\nendpoints: [{address: 1.2.3.4}]",
            "spec: only one of WorkloadSelector or Endpoints can be set",
        );
    }

    #[test]
    fn service_entry_cidr_needs_none_or_static() {
        for resolution in ["NONE", "STATIC"] {
            valid(
                "ServiceEntry",
                &format!("hosts: [example.com]\naddresses: [1.2.3.4/16]\nresolution: {resolution}"),
            );
        }
        for resolution in ["DNS", "DNS_ROUND_ROBIN"] {
            invalid(
                "ServiceEntry",
                &format!("hosts: [example.com]\naddresses: [1.2.3.4/16]\nresolution: {resolution}"),
                "spec.addresses: CIDR addresses are allowed only for NONE/STATIC resolution types",
            );
        }
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\naddresses: [1.2.3.4/99]",
            "spec.addresses[0]: \"1.2.3.4/99\" is not a valid IP address or CIDR block",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\naddresses: [example.com]",
            "spec.addresses[0]",
        );
    }

    #[test]
    fn service_entry_ports() {
        let se = |ports: &str| format!("hosts: [example.com]\nports: {ports}");
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 99999}]"),
            "spec.ports[0].number: port must be between 1-65535",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 0}]"),
            "spec.ports[0].number: port must be between 1-65535",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 1, targetPort: 99999}]"),
            "spec.ports[0].targetPort: port must be between 1-65535",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 1}, {name: b, number: 1}]"),
            "spec.ports[1].number: port number cannot be duplicated",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 1}, {name: a, number: 12}]"),
            "spec.ports[1].name: Duplicate value: \"a\"",
        );
        invalid(
            "ServiceEntry",
            &se("[{number: 1}]"),
            "spec.ports[0].name: Required value",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: http_1, number: 1}]"),
            "spec.ports[0].name: Invalid value: \"http_1\": port name must be valid",
        );
        invalid(
            "ServiceEntry",
            &se("[{name: a, number: 1, protocol: SPDY}]"),
            "spec.ports[0].protocol: unsupported protocol",
        );
        // 63 characters is the longest valid name.
        let name63 = format!("http-{}", "a".repeat(58));
        valid(
            "ServiceEntry",
            &se(&format!("[{{name: {name63}, number: 80}}]")),
        );
        invalid(
            "ServiceEntry",
            &se(&format!("[{{name: {name63}a, number: 80}}]")),
            "port name must be valid",
        );
    }

    #[test]
    fn service_entry_resolution_and_endpoints() {
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nendpoints: [{address: 1.2.3.4}]",
            "spec.endpoints: NONE mode cannot set endpoints",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a.example.com}, {address: b.example.com}]",
            "spec.endpoints: DNS_ROUND_ROBIN mode cannot have multiple endpoints",
        );
        valid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: DNS_ROUND_ROBIN\nendpoints: [{address: a.example.com}]",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: STATIC\nendpoints: [{address: a.example.com}]",
            "spec.endpoints[0].address: \"a.example.com\" is not a valid IP address",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: DNS\nendpoints: [{address: 'not a host'}]",
            "spec.endpoints[0].address",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: STATIC\nports: [{name: http, number: 80}]\nendpoints: [{address: 1.2.3.4, ports: {https: 8443}}]",
            "spec.endpoints[0].ports[https]: endpoint port is not defined by the service entry",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: STATIC\nendpoints: [{address: 1.2.3.4, ports: {http: 0}}]",
            "spec.endpoints[0].ports[http]: port must be between 1-65535",
        );
        invalid(
            "ServiceEntry",
            "hosts: [example.com]\nresolution: STATIC\nendpoints: [{labels: {app: a}}]",
            "spec.endpoints[0].address: Address is required",
        );
        // The hosts of a DNS ServiceEntry without endpoints are what gets resolved.
        invalid(
            "ServiceEntry",
            "hosts: ['*.example.com']\nresolution: DNS",
            "spec.hosts[0]: hosts must be fully qualified",
        );
        valid("ServiceEntry", "hosts: ['*.example.com']\nresolution: NONE");
    }

    #[test]
    fn service_entry_several_hosts_need_http_or_tls() {
        let se = |resolution: &str, protocol: &str| {
            format!(
                "hosts: [a.com, b.com]\nresolution: {resolution}\nports: [{{name: p, number: 443, protocol: {protocol}}}]"
            )
        };
        valid("ServiceEntry", &se("DNS", "TLS"));
        valid("ServiceEntry", &se("DNS", "HTTP"));
        valid("ServiceEntry", &se("NONE", "TCP"));
        invalid(
            "ServiceEntry",
            &se("DNS", "TCP"),
            "spec.ports[0].protocol: multiple hosts provided with non-HTTP, non-TLS ports",
        );
    }
}
