//! Who a client proved to be, and whether that lets it be the proxy it claims (istiod's
//! `pilot/pkg/xds/auth.go`): a SPIFFE identity `spiffe://TRUST_DOMAIN/ns/NS/sa/SA` must name
//! the proxy's namespace, and its service account the node's `SERVICE_ACCOUNT` when the node
//! declares one.

use std::fmt;

use super::proxy::Proxy;

/// A workload identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub trust_domain: String,
    pub namespace: String,
    pub service_account: String,
}

impl Identity {
    /// Parses `spiffe://TRUST_DOMAIN/ns/NS/sa/SA`.
    pub fn from_spiffe(uri: &str) -> Option<Identity> {
        let rest = uri.strip_prefix("spiffe://")?;
        let mut parts = rest.split('/');
        let (td, ns_key, ns, sa_key, sa) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if parts.next().is_some() || ns_key != "ns" || sa_key != "sa" {
            return None;
        }
        if [td, ns, sa].iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(Identity {
            trust_domain: td.to_string(),
            namespace: ns.to_string(),
            service_account: sa.to_string(),
        })
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spiffe://{}/ns/{}/sa/{}",
            self.trust_domain, self.namespace, self.service_account
        )
    }
}

/// Why an identity may not be the proxy it claims.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("identity {identity} is not of trust domain {trust_domain}")]
    TrustDomain {
        identity: String,
        trust_domain: String,
    },
    #[error("identity {identity} may not act for a proxy in namespace {namespace}")]
    Namespace { identity: String, namespace: String },
    #[error("identity {identity} is not the node's SERVICE_ACCOUNT {service_account}")]
    ServiceAccount {
        identity: String,
        service_account: String,
    },
}

impl Denied {
    /// A short label for the metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Denied::TrustDomain { .. } => "trust_domain",
            Denied::Namespace { .. } => "namespace",
            Denied::ServiceAccount { .. } => "service_account",
        }
    }
}

/// Whether `identity` may be `proxy` (whose node declared `service_account`, if any).
pub fn authorize(
    identity: &Identity,
    trust_domain: &str,
    proxy: &Proxy,
    service_account: Option<&str>,
) -> Result<(), Denied> {
    if identity.trust_domain != trust_domain {
        return Err(Denied::TrustDomain {
            identity: identity.to_string(),
            trust_domain: trust_domain.to_string(),
        });
    }
    if identity.namespace != proxy.namespace {
        return Err(Denied::Namespace {
            identity: identity.to_string(),
            namespace: proxy.namespace.clone(),
        });
    }
    if let Some(sa) = service_account.filter(|sa| !sa.is_empty())
        && identity.service_account != sa
    {
        return Err(Denied::ServiceAccount {
            identity: identity.to_string(),
            service_account: sa.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::NodeInfo;

    fn proxy(id: &str, namespace: Option<&str>) -> Proxy {
        Proxy::from_node(NodeInfo {
            id: id.to_string(),
            namespace: namespace.map(str::to_string),
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn spiffe_ids_parse_and_bad_ones_do_not() {
        let id = Identity::from_spiffe("spiffe://cluster.local/ns/demo/sa/web").unwrap();
        assert_eq!(
            (
                id.trust_domain.as_str(),
                id.namespace.as_str(),
                id.service_account.as_str()
            ),
            ("cluster.local", "demo", "web")
        );
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/demo/sa/web");
        for bad in [
            "spiffe://cluster.local/ns/demo",
            "spiffe://cluster.local/ns/demo/sa/web/x",
            "spiffe://cluster.local/sa/web/ns/demo",
            "spiffe:///ns/demo/sa/web",
            "https://cluster.local/ns/demo/sa/web",
        ] {
            assert_eq!(Identity::from_spiffe(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_identity_must_name_the_proxys_namespace_and_declared_service_account() {
        let id = Identity::from_spiffe("spiffe://cluster.local/ns/demo/sa/web").unwrap();
        let p = proxy("sidecar~10.0.0.1~web-1.demo~demo.svc.cluster.local", None);
        assert_eq!(authorize(&id, "cluster.local", &p, None), Ok(()));
        assert_eq!(authorize(&id, "cluster.local", &p, Some("web")), Ok(()));
        let e = authorize(&id, "cluster.local", &p, Some("db")).unwrap_err();
        assert_eq!(e.reason(), "service_account");
        // Claiming another namespace, by node id or by NAMESPACE metadata.
        let other = proxy("sidecar~10.0.0.1~x-1.secret~secret.svc.cluster.local", None);
        assert_eq!(
            authorize(&id, "cluster.local", &other, None)
                .unwrap_err()
                .reason(),
            "namespace"
        );
        let meta = proxy(
            "sidecar~10.0.0.1~web-1.demo~demo.svc.cluster.local",
            Some("secret"),
        );
        assert_eq!(
            authorize(&id, "cluster.local", &meta, None)
                .unwrap_err()
                .reason(),
            "namespace"
        );
        assert_eq!(
            authorize(&id, "example.org", &p, None)
                .unwrap_err()
                .reason(),
            "trust_domain"
        );
    }
}
