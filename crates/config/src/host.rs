//! Hostnames as Istio reads them: short names resolved in a namespace, wildcards, and
//! `namespace/host` references in Gateway servers and Sidecar egress.

/// The cluster domain that short names are completed with.
pub const DEFAULT_DOMAIN: &str = "svc.cluster.local";

/// The Kubernetes cluster domain that `--cluster-domain` defaults to. Only the hostnames of
/// Services read from Kubernetes follow `--cluster-domain`; short names in Istio configs are
/// always completed with [`DEFAULT_DOMAIN`].
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// A Kubernetes Service's hostname: `name.namespace.svc.cluster_domain`.
pub fn kubernetes_hostname(name: &str, namespace: &str, cluster_domain: &str) -> String {
    format!("{name}.{namespace}.svc.{cluster_domain}")
}

/// Resolves a host written in a config of `namespace`: a short name (no dot) becomes
/// `name.namespace.svc.cluster.local`; anything else (FQDN, wildcard) is kept.
pub fn resolve(host: &str, namespace: &str) -> String {
    if host.contains('.') || host.starts_with('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.{DEFAULT_DOMAIN}")
    }
}

/// Whether `host` (concrete or wildcard) is matched by `pattern` (concrete, `*`, or `*.suffix`).
/// Both may be wildcards: `*.example.com` matches `*.a.example.com`.
pub fn matches(pattern: &str, host: &str) -> bool {
    if pattern == "*" || pattern == host {
        return true;
    }
    if let Some(suffix) = pattern.strip_prefix('*') {
        return host.ends_with(suffix) && host.len() > suffix.len();
    }
    false
}

/// Whether two host patterns overlap in either direction.
pub fn intersects(a: &str, b: &str) -> bool {
    matches(a, b) || matches(b, a)
}

/// Splits a `namespace/host` reference (Gateway server hosts, Sidecar egress hosts).
/// A bare host means any namespace (`*`).
pub fn split_namespaced(reference: &str) -> (&str, &str) {
    match reference.split_once('/') {
        Some((ns, host)) => (ns, host),
        None => ("*", reference),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_short_names_only() {
        assert_eq!(
            resolve("reviews", "bookinfo"),
            "reviews.bookinfo.svc.cluster.local"
        );
        assert_eq!(resolve("api.example.com", "x"), "api.example.com");
        assert_eq!(resolve("*", "x"), "*");
        assert_eq!(
            kubernetes_hostname("reviews", "bookinfo", DEFAULT_CLUSTER_DOMAIN),
            resolve("reviews", "bookinfo")
        );
    }

    #[test]
    fn wildcard_matching() {
        assert!(matches("*", "a.b"));
        assert!(matches("*.example.com", "api.example.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(matches("*.example.com", "*.a.example.com"));
        assert!(!matches("api.example.com", "*.example.com"));
        assert!(intersects("api.example.com", "*.example.com"));
        assert_eq!(split_namespaced("ns/a.com"), ("ns", "a.com"));
        assert_eq!(split_namespaced("a.com"), ("*", "a.com"));
    }
}
