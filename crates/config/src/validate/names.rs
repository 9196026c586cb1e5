//! Name checks shared by the kinds: DNS labels and domains (with and without wildcards), IP
//! addresses and CIDR blocks, Unix socket addresses, Kubernetes labels and label selectors,
//! `namespace/host` references of Gateways and Sidecars, and `exportTo` lists.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::LazyLock;

use regex::Regex;

use super::fields::{Errors, re};
use crate::istio::Labels;

static DNS1123_LABEL: LazyLock<Regex> =
    LazyLock::new(|| re(r"^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$"));
static WILDCARD_LABEL: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:\*|(?:\*|\*-)?[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)$"));

/// A DNS label as Istio checks it (`labels.IsDNS1123Label`): at most 63 letters, digits and
/// inner dashes. Istio allows upper case here.
pub(super) fn dns1123_label(s: &str) -> bool {
    s.len() <= 63 && DNS1123_LABEL.is_match(s)
}

/// A domain whose first label may be a wildcard: `*`, `*.example.com`, `*x`, `reviews`.
pub(super) fn wildcard_domain(domain: &str) -> Result<(), String> {
    domain_preconditions(domain)?;
    let (first, rest) = match domain.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (domain, None),
    };
    if first.len() > 63 || !WILDCARD_LABEL.is_match(first) {
        return Err(format!(
            "domain name {domain:?} invalid (label {first:?} invalid)"
        ));
    }
    match rest {
        Some(rest) => dns1123_labels(domain, rest),
        None => Ok(()),
    }
}

/// A fully qualified domain name without wildcards (a trailing dot is allowed).
pub(super) fn fqdn(domain: &str) -> Result<(), String> {
    domain_preconditions(domain)?;
    dns1123_labels(domain, domain)
}

fn domain_preconditions(domain: &str) -> Result<(), String> {
    if domain.is_empty() {
        return Err("empty domain name not allowed".to_string());
    }
    if domain.len() > 255 {
        return Err(format!("domain name {domain:?} too long (max 255)"));
    }
    Ok(())
}

fn dns1123_labels(domain: &str, labels: &str) -> Result<(), String> {
    let parts: Vec<&str> = labels.split('.').collect();
    let last = parts.len() - 1;
    if parts[last].parse::<i64>().is_ok() {
        return Err(format!(
            "domain name {domain:?} invalid (top level domain {:?} cannot be all-numeric)",
            parts[last]
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == last && label.is_empty() {
            break; // `istio.io.`
        }
        if !dns1123_label(label) {
            return Err(format!(
                "domain name {domain:?} invalid (label {label:?} invalid)"
            ));
        }
    }
    Ok(())
}

pub(super) fn is_ip(s: &str) -> bool {
    s.parse::<IpAddr>().is_ok()
}

/// An IP address, or a CIDR block `a.b.c.d/n` / `x::/n`.
pub(super) fn ip_or_cidr(s: &str) -> bool {
    let Some((ip, bits)) = s.split_once('/') else {
        return is_ip(s);
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let decimal = !bits.is_empty()
        && bits.bytes().all(|b| b.is_ascii_digit())
        && (bits == "0" || !bits.starts_with('0'));
    let max = if ip.is_ipv4() { 32 } else { 128 };
    decimal && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// The part after `unix://`: an absolute path to a file, or an abstract socket `@name`.
pub(super) fn unix_address(socket: &str) -> Result<(), String> {
    if socket.is_empty() {
        return Err("unix address must not be empty".to_string());
    }
    if socket.starts_with('@') {
        return Ok(());
    }
    if !socket.starts_with('/') || socket.ends_with('/') {
        return Err(format!("{socket:?} is not an absolute path to a file"));
    }
    Ok(())
}

static LABEL_KEY: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:([a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?)*)/)?(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$",
    )
});
static LABEL_VALUE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"));

/// Kubernetes-style labels, as Istio checks them (`labels.Instance.Validate`).
pub(super) fn labels(errs: &mut Errors, path: &str, labels: &Labels) {
    for (k, v) in labels {
        let p = format!("{path}[{k}]");
        let key_ok = LABEL_KEY
            .captures(k)
            .is_some_and(|c| c.get(1).is_none_or(|prefix| prefix.as_str().len() <= 253));
        if !key_ok {
            errs.add(&p, format!("invalid label key: {k:?}"));
        }
        if !LABEL_VALUE.is_match(v) {
            errs.add(&p, format!("invalid label value: {v:?}"));
        }
    }
}

/// Label selectors (`workloadSelector`, Gateway `selector`).
pub(super) fn selector(errs: &mut Errors, path: &str, labels: &Labels) {
    for (k, v) in labels {
        let p = format!("{path}[{k}]");
        if k.is_empty() {
            errs.add(&p, "empty key is not supported in selector");
        }
        if k.contains('*') || v.contains('*') {
            errs.add(
                &p,
                format!("wildcard is not supported in selector: \"{k}={v}\""),
            );
        }
        if v.len() > 63 {
            errs.add(
                &p,
                "label values in selectors may not be longer than 63 characters",
            );
        }
    }
}

/// A host reference of a Gateway server or Sidecar egress listener: `namespace/dnsName`
/// (Gateways also take a bare `dnsName`).
pub(super) fn namespaced_host(errs: &mut Errors, path: &str, reference: &str, is_gateway: bool) {
    let name = match reference.split_once('/') {
        None if is_gateway => reference,
        None => {
            errs.add(path, "host must be of form namespace/dnsName");
            return;
        }
        Some((ns, name)) => {
            if ns.is_empty() || name.is_empty() {
                errs.add(
                    path,
                    "config namespace and dnsName in host entry cannot be empty",
                );
            }
            if is_gateway {
                if !matches!(ns, "*" | ".") && !dns1123_label(ns) {
                    errs.add(path, format!("invalid namespace value {ns:?} in gateway"));
                }
            } else {
                let bare = ns.strip_prefix('~').unwrap_or(ns);
                if !matches!(bare, "" | "*" | ".") && !dns1123_label(bare) {
                    errs.add(path, format!("invalid namespace value {ns:?} in sidecar"));
                }
            }
            name
        }
    };
    if name.is_empty() {
        return;
    }
    // Deviation: istiod rejects short names (no dot) for Gateway servers as well, but Istio's
    // own test data (tests/integration/pilot/testdata, Gateway host `b`) uses one; only
    // Sidecars are held to it.
    if !is_gateway && name != "*" && !name.contains('.') {
        errs.add(path, "short names (non FQDN) are not allowed");
    }
    if let Err(e) = wildcard_domain(name)
        && !(is_gateway && is_ip(name))
    {
        errs.add(path, e);
    }
    if name.contains('*') && name != "*" && !name.starts_with("*.") {
        errs.add(path, format!("partial wildcard {name:?} not allowed"));
    }
}

/// `exportTo`: `.`, `*`, a namespace, or (ServiceEntry only) `~`; no duplicates, and `*`
/// or `~` alone.
pub(super) fn export_to(
    errs: &mut Errors,
    path: &str,
    namespace: &str,
    list: &[String],
    service_entry: bool,
    dr_with_selector: bool,
) {
    if list.is_empty() {
        return;
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, entry) in list.iter().enumerate() {
        let p = format!("{path}[{i}]");
        let key = if entry == "." {
            namespace
        } else {
            entry.as_str()
        };
        if seen.contains(key) {
            if key != entry {
                errs.add(
                    &p,
                    format!("duplicate entries in exportTo: . and current namespace {namespace}"),
                );
            } else {
                errs.add(
                    &p,
                    format!("duplicate entries in exportTo for entry {entry}"),
                );
            }
            continue;
        }
        let valid = match key {
            "*" => true,
            "~" if service_entry => true,
            "~" => {
                errs.add(
                    &p,
                    "exportTo ~ (none) is not allowed for Istio configuration objects",
                );
                false
            }
            _ if entry == "." || dns1123_label(key) => true,
            _ => {
                errs.add(
                    &p,
                    format!("only ., *, or a valid DNS 1123 label is allowed as exportTo entry, not {entry:?}"),
                );
                false
            }
        };
        if valid {
            seen.insert(key);
        }
    }
    if dr_with_selector && !seen.is_empty() {
        if !seen.contains(namespace) {
            errs.add(
                path,
                "destination rule with workload selector cannot have exportTo beyond current namespace",
            );
        } else if seen.len() > 1 {
            errs.add(
                path,
                "destination rule with workload selector cannot have multiple entries in exportTo",
            );
        }
    }
    if seen.contains("*") && list.len() > 1 {
        errs.add(
            path,
            "cannot have both public (*) and non-public exportTo values for a resource",
        );
    }
    if seen.contains("~") && list.len() > 1 {
        errs.add(
            path,
            "cannot export service entry to no one (~) and someone",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fields::{Protocol, protocol};
    use crate::validate::fixtures::{invalid, valid};

    #[test]
    fn export_to() {
        valid("ServiceEntry", "hosts: [a.com]\nexportTo: ['~']");
        invalid(
            "ServiceEntry",
            "hosts: [a.com]\nexportTo: [default, .]",
            "spec.exportTo[1]: duplicate entries in exportTo: . and current namespace default",
        );
        invalid(
            "ServiceEntry",
            "hosts: [a.com]\nexportTo: ['*', foo]",
            "spec.exportTo: cannot have both public (*) and non-public exportTo values",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\nexportTo: ['~']\nhttp: [{route: [{destination: {host: a.com}}]}]",
            "spec.exportTo[0]: exportTo ~ (none) is not allowed",
        );
        invalid(
            "DestinationRule",
            "host: a.com\nworkloadSelector: {matchLabels: {app: a}}\nexportTo: ['*']",
            "spec.exportTo: destination rule with workload selector cannot have exportTo beyond current namespace",
        );
    }

    #[test]
    fn domains_addresses_and_labels() {
        for ok in [
            "reviews",
            "a.example.com",
            "*",
            "*.example.com",
            "*x",
            "*-x.example.com",
            "istio.io.",
        ] {
            assert!(wildcard_domain(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a..b", "foo*", "a.*.com", "-a.com", "a.123", "a_b.com"] {
            assert!(wildcard_domain(bad).is_err(), "{bad}");
        }
        assert!(fqdn("a.example.com").is_ok());
        assert!(fqdn("*.example.com").is_err());
        assert!(fqdn(&format!("{}.com", "a".repeat(64))).is_err());
        for ok in [
            "1.2.3.4",
            "001:db8::",
            "::1",
            "10.0.0.0/8",
            "1.1.1.1/32",
            "2001:db8::/32",
            "192.192.192.192/24",
        ] {
            assert!(ip_or_cidr(ok), "{ok}");
        }
        for bad in [
            "1.2.3.4/33",
            "1.2.3.4/",
            "1.2.3.4/08",
            "::/129",
            "example.com",
            "1.2.3",
        ] {
            assert!(!ip_or_cidr(bad), "{bad}");
        }
        assert!(dns1123_label(&"a".repeat(63)));
        assert!(!dns1123_label(&"a".repeat(64)));
        assert!(dns1123_label("Http-1"));
        assert!(!dns1123_label("http-"));
        assert_eq!(protocol("tcp"), Some(Protocol::Other));
        assert_eq!(protocol("GRPC-Web"), Some(Protocol::Http));
        assert_eq!(protocol("https"), Some(Protocol::Tls));
        assert_eq!(protocol(""), None);
        let mut errs = Errors::default();
        let good: Labels = [
            ("app.kubernetes.io/name", "a"),
            ("version", "v2-mysql-vm"),
            ("empty", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        labels(&mut errs, "labels", &good);
        assert!(errs.0.is_empty(), "{:?}", errs.0);
        let bad: Labels = [("-a", "b"), ("c", "d e")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        labels(&mut errs, "labels", &bad);
        assert_eq!(errs.0.len(), 2, "{:?}", errs.0);
    }
}
