//! The terminating Gateway servers whose `credentialName` has no valid Secret: istiod serves
//! them no filter chain, and axon says so (the SnapshotBuilder logs each, naming the Gateway
//! and the Secret, and counts it in `pilot_sds_certificate_errors_total`). Looked up in the
//! Gateway's namespace, where its gateway proxies run in the usual layout; the chains are
//! decided per proxy, in the proxy's namespace ([`super::credential_available`]).

use super::super::push_context::PushContext;
use super::{server_of, terminated_credentials};

/// A terminating server whose credential is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingCredential {
    /// `namespace/name` of the Gateway.
    pub gateway: String,
    /// The server's name, else its port's name, else its port number.
    pub server: String,
    pub credential: String,
    pub reason: String,
}

/// Every terminating server of every Gateway whose credential is missing or invalid.
pub fn missing_credentials(ctx: &PushContext) -> Vec<MissingCredential> {
    let mut out = Vec::new();
    for (config, gateway) in ctx.gateways() {
        for server in &gateway.servers {
            let Some(port) = &server.port else { continue };
            let s = server_of(config, server, port.number);
            for credential in terminated_credentials(std::iter::once(&s)) {
                if let Err(problem) = ctx
                    .secrets
                    .credential(config.namespace(), &credential, false)
                {
                    out.push(MissingCredential {
                        gateway: s.gateway.clone(),
                        server: [&server.name, &port.name]
                            .into_iter()
                            .find(|n| !n.is_empty())
                            .cloned()
                            .unwrap_or_else(|| port.number.to_string()),
                        credential,
                        reason: problem.to_string(),
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminating_server_without_its_secret_is_named() {
        let gateway = "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: gw, namespace: istio-system}\nspec:\n  selector: {istio: ingressgateway}\n  servers:\n  - port: {number: 443, name: https, protocol: HTTPS}\n    hosts: ['*']\n    tls: {mode: SIMPLE, credentialName: missing}\n  - port: {number: 8443, name: pass, protocol: TLS}\n    hosts: ['*']\n    tls: {mode: PASSTHROUGH}\n";
        let ctx = crate::fixtures::context(gateway);
        let missing = missing_credentials(&ctx);
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert_eq!(
            (
                missing[0].gateway.as_str(),
                missing[0].server.as_str(),
                missing[0].credential.as_str()
            ),
            ("istio-system/gw", "https", "missing")
        );
        assert!(
            missing[0].reason.contains("istio-system/missing not found"),
            "{missing:?}"
        );
    }
}
