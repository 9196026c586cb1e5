//! SDS: the secrets Envoy asks for by name, as istiod's `SecretGen` answers them.
//!
//! - `kubernetes://NAME` (a Gateway's or DestinationRule's `credentialName`, istiod's
//!   `ToResourceName`): the Secret NAME of the proxy's own namespace, inline: its certificate
//!   chain and key as a `TlsCertificate` (with its OCSP staple), or, for `NAME-cacert`, its
//!   roots (the Secret `NAME-cacert`, else the CA keys of `NAME`) and CRL as a
//!   `ValidationContext` (`toEnvoyTLSSecret`, `toEnvoyCaSecret`). A proxy asking for a
//!   Secret of another namespace (`kubernetes://NS/NAME`) gets nothing, as one asking for a
//!   Secret that does not exist: [`problems`] says why, for the shell to log and count
//!   (`pilot_sds_certificate_errors_total`), as istiod's `filterAuthorizedResources`. With
//!   `MeshConfig::plaintext_secrets` false, only a proxy whose identity the TLS port verified
//!   (`Proxy::verified`) gets any, as istiod.
//! - The file-backed secrets of upstream TLS, named as istio-agent names them and istiod
//!   references them from clusters (`cds::tls`): `file-cert:CERT~KEY` (a certificate chain
//!   and its key) and `file-root:CA` (trusted roots). Each secret points Envoy at the files;
//!   Envoy reads them. A file Envoy cannot read fails that secret's update only (the SDS
//!   NACK), not the clusters: a cluster waiting for its secret sends no TLS, as with istiod
//!   when the agent cannot read a file.
//!
//! Names of any other form get nothing.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};

use crate::resource::Resource;
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::secrets::{SecretProblem, SecretRef, TlsSecret};

/// istio-agent's prefix of a certificate and key secret.
const CERT_PREFIX: &str = "file-cert:";
/// istio-agent's prefix of a trusted-roots secret.
const ROOT_PREFIX: &str = "file-root:";

/// The name of the secret of the certificate `cert` and its key `key`.
pub fn cert_secret_name(cert: &str, key: &str) -> String {
    format!("{CERT_PREFIX}{cert}~{key}")
}

/// The name of the secret of the roots in `ca`.
pub fn root_secret_name(ca: &str) -> String {
    format!("{ROOT_PREFIX}{ca}")
}

/// The secrets of `names` that axon can serve `proxy`.
pub fn generate(ctx: &PushContext, proxy: &Proxy, names: &BTreeSet<String>) -> Vec<Resource> {
    names
        .iter()
        .filter_map(|name| {
            let secret = match lookup(ctx, proxy, name) {
                Lookup::Kubernetes(Ok((reference, found))) => {
                    kubernetes_secret(name, &reference, found)?
                }
                Lookup::Kubernetes(Err(_)) | Lookup::Other => return None,
                Lookup::File => file_secret(name)?,
            };
            Some(Resource::new(name.clone(), &secret))
        })
        .collect()
}

/// A `kubernetes://` name asked for and not served, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdsProblem {
    pub name: String,
    pub reason: String,
    /// The proxy may not read it: of another namespace than the proxy's, or (with
    /// `--plaintext-secrets false`) asked by a proxy whose identity was not verified.
    pub unauthorized: bool,
}

/// The `kubernetes://` names of `names` that `proxy` gets nothing for.
pub fn problems(ctx: &PushContext, proxy: &Proxy, names: &BTreeSet<String>) -> Vec<SdsProblem> {
    names
        .iter()
        .filter_map(|name| match lookup(ctx, proxy, name) {
            Lookup::Kubernetes(Err(problem)) => Some(problem),
            _ => None,
        })
        .collect()
}

enum Lookup<'a> {
    Kubernetes(Result<(SecretRef, &'a TlsSecret), SdsProblem>),
    File,
    Other,
}

fn lookup<'a>(ctx: &'a PushContext, proxy: &Proxy, name: &str) -> Lookup<'a> {
    if name.starts_with(CERT_PREFIX) || name.starts_with(ROOT_PREFIX) {
        return Lookup::File;
    }
    if !name.starts_with(axon_model::secrets::KUBERNETES_PREFIX)
        && !name.starts_with(axon_model::secrets::KUBERNETES_GATEWAY_PREFIX)
        && !name.starts_with(axon_model::secrets::KUBERNETES_CONFIGMAP_PREFIX)
    {
        return Lookup::Other;
    }
    let problem = |reason: String, unauthorized: bool| SdsProblem {
        name: name.to_string(),
        reason,
        unauthorized,
    };
    // A ConfigMap's CA is public: any proxy may read it (istiod's `filterAuthorizedResources`).
    if let Some(reference) = SecretRef::parse(name, &proxy.namespace).filter(|r| r.configmap) {
        return Lookup::Kubernetes(
            ctx.secrets
                .resolve(&reference)
                .map(|found| (reference, found))
                .map_err(|e: SecretProblem| problem(e.to_string(), false)),
        );
    }
    if !proxy.verified && !ctx.mesh.plaintext_secrets {
        return Lookup::Kubernetes(Err(problem(
            "the proxy's identity is not verified (the plaintext port, with --plaintext-secrets false)".into(),
            true,
        )));
    }
    let Some(reference) = SecretRef::parse(name, &proxy.namespace) else {
        return Lookup::Kubernetes(Err(problem("not a Secret name".into(), false)));
    };
    if reference.gateway {
        // istiod's `VerifiedCertificateReferences`: a `kubernetes-gateway://` Secret is served
        // to a proxy only when a Gateway it serves refers to it (the conversion checked the
        // ReferenceGrants of another namespace's).
        let merged = axon_model::gateway::merge(ctx, proxy);
        let base = name.trim_end_matches(axon_model::secrets::CA_SUFFIX);
        let referred = axon_model::gateway::terminated_credentials(merged.servers())
            .iter()
            .any(|c| axon_model::secrets::resource_name(c) == base)
            || merged
                .servers()
                .filter_map(|s| s.tls.as_ref())
                .any(|t| t.ca_cert_credential_name == name);
        if !referred {
            return Lookup::Kubernetes(Err(problem(
                "no Gateway this proxy serves refers to this kubernetes-gateway:// Secret".into(),
                true,
            )));
        }
    } else if reference.namespace != proxy.namespace {
        return Lookup::Kubernetes(Err(problem(
            format!(
                "the Secret is in namespace {}, the proxy in {}: a proxy reads Secrets of its own namespace only",
                reference.namespace, proxy.namespace
            ),
            true,
        )));
    }
    Lookup::Kubernetes(
        ctx.secrets
            .resolve(&reference)
            .map(|found| (reference, found))
            .map_err(|e: SecretProblem| problem(e.to_string(), false)),
    )
}

/// The inline `Secret` of a Kubernetes Secret (istiod's `toEnvoyTLSSecret`, `toEnvoyCaSecret`).
fn kubernetes_secret(name: &str, reference: &SecretRef, found: &TlsSecret) -> Option<Secret> {
    let kind = if reference.ca_only {
        let roots = found.ca.as_ref()?;
        secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(&roots.certificates)),
            crl: roots.crl.as_deref().map(inline),
            ..Default::default()
        })
    } else {
        let pair = found.certificate.as_ref()?;
        secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&pair.chain)),
            private_key: Some(inline(&pair.key)),
            ocsp_staple: pair.ocsp_staple.as_deref().map(inline),
            ..Default::default()
        })
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(kind),
    })
}

/// `secret` with every inline data source replaced by `[N bytes redacted]`, for debug pages.
pub fn redacted(mut secret: Secret) -> Secret {
    let redact = |source: &mut Option<DataSource>| {
        if let Some(DataSource {
            specifier: Some(Specifier::InlineBytes(bytes)),
            ..
        }) = source
        {
            *source = Some(DataSource {
                specifier: Some(Specifier::InlineString(format!(
                    "[{} bytes redacted]",
                    bytes.len()
                ))),
                ..Default::default()
            });
        }
    };
    match &mut secret.r#type {
        Some(secret::Type::TlsCertificate(t)) => {
            redact(&mut t.certificate_chain);
            redact(&mut t.private_key);
            redact(&mut t.ocsp_staple);
        }
        Some(secret::Type::ValidationContext(v)) => {
            redact(&mut v.trusted_ca);
            redact(&mut v.crl);
        }
        _ => {}
    }
    secret
}

fn inline(bytes: &[u8]) -> DataSource {
    DataSource {
        specifier: Some(Specifier::InlineBytes(bytes.to_vec())),
        ..Default::default()
    }
}

fn file_secret(name: &str) -> Option<Secret> {
    let kind = if let Some(paths) = name.strip_prefix(CERT_PREFIX) {
        let (cert, key) = paths.split_once('~')?;
        if cert.is_empty() || key.is_empty() {
            return None;
        }
        secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(file(cert)),
            private_key: Some(file(key)),
            ..Default::default()
        })
    } else {
        let ca = name.strip_prefix(ROOT_PREFIX).filter(|ca| !ca.is_empty())?;
        secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(file(ca)),
            ..Default::default()
        })
    };
    Some(Secret {
        name: name.to_string(),
        r#type: Some(kind),
    })
}

fn file(path: &str) -> DataSource {
    DataSource {
        specifier: Some(Specifier::Filename(path.to_string())),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    fn proxy(namespace: &str) -> Proxy {
        axon_model::fixtures::proxy("router", "10.0.0.1", namespace, &[])
    }

    #[test]
    fn file_secrets_by_istio_agents_names() {
        let names = BTreeSet::from([
            cert_secret_name("/c.pem", "/k.pem"),
            root_secret_name("/ca.pem"),
            "default".to_string(),
            "file-cert:/only-a-cert".to_string(),
        ]);
        let out = generate(&PushContext::default(), &proxy("ns"), &names);
        let by_name: Vec<(&str, Secret)> = out
            .iter()
            .map(|r| (r.name.as_str(), Secret::decode(r.value.as_ref()).unwrap()))
            .collect();
        assert_eq!(by_name.len(), 2, "{by_name:?}");
        let (name, cert) = &by_name[0];
        assert_eq!(*name, "file-cert:/c.pem~/k.pem");
        let Some(secret::Type::TlsCertificate(t)) = &cert.r#type else {
            panic!("{cert:?}")
        };
        assert_eq!(t.private_key, Some(file("/k.pem")));
        let (name, root) = &by_name[1];
        assert_eq!(*name, "file-root:/ca.pem");
        assert!(matches!(
            &root.r#type,
            Some(secret::Type::ValidationContext(v)) if v.trusted_ca == Some(file("/ca.pem"))
        ));
    }

    /// A context with the Secrets `(namespace, name, stringData)`.
    fn context(secrets: &[(&str, &str, String)]) -> PushContext {
        let yaml: Vec<String> = secrets
            .iter()
            .map(|(ns, name, data)| {
                format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {ns}}}\nstringData: {data}\n")
            })
            .collect();
        axon_model::fixtures::context(&yaml.join("---\n"))
    }

    fn decoded(out: &[Resource]) -> Vec<(String, Secret)> {
        out.iter()
            .map(|r| (r.name.clone(), Secret::decode(r.value.as_ref()).unwrap()))
            .collect()
    }

    #[test]
    fn kubernetes_secrets_are_served_inline_to_their_namespace_only() {
        let (cert, key) = axon_config::fixtures::self_signed("shop", 2);
        let data = |keys: &[(&str, &str)]| {
            serde_json::to_string(
                &keys
                    .iter()
                    .copied()
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
            .unwrap()
        };
        let ctx = context(&[
            (
                "shop",
                "both",
                data(&[
                    ("tls.crt", &cert),
                    ("tls.key", &key),
                    ("ca.crt", &cert),
                    ("ca.crl", "CRL"),
                ]),
            ),
            ("shop", "split-cacert", data(&[("cacert", &cert)])),
            (
                "other",
                "theirs",
                data(&[("tls.crt", &cert), ("tls.key", &key)]),
            ),
        ]);
        let names: BTreeSet<String> = [
            "kubernetes://both",
            "kubernetes://both-cacert",
            "kubernetes://split-cacert",
            "kubernetes://shop/both",
            "kubernetes://other/theirs",
            "kubernetes://missing",
            "kubernetes://split",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        let shop = proxy("shop");
        let out = decoded(&generate(&ctx, &shop, &names));
        let served: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            served,
            [
                "kubernetes://both",
                "kubernetes://both-cacert",
                "kubernetes://shop/both",
                "kubernetes://split-cacert"
            ]
        );
        let Some(secret::Type::TlsCertificate(t)) = &out[0].1.r#type else {
            panic!("{:?}", out[0])
        };
        assert_eq!(t.certificate_chain, Some(inline(cert.as_bytes())));
        assert_eq!(t.private_key, Some(inline(key.as_bytes())));
        let Some(secret::Type::ValidationContext(v)) = &out[1].1.r#type else {
            panic!("{:?}", out[1])
        };
        assert_eq!(v.trusted_ca, Some(inline(cert.as_bytes())));
        assert_eq!(v.crl, Some(inline(b"CRL")));
        let problems = problems(&ctx, &shop, &names);
        let why: Vec<(&str, bool)> = problems
            .iter()
            .map(|p| (p.name.as_str(), p.unauthorized))
            .collect();
        assert_eq!(
            why,
            [
                ("kubernetes://missing", false),
                ("kubernetes://other/theirs", true),
                ("kubernetes://split", false)
            ]
        );
        // Debug pages show sizes, never bytes.
        let shown = crate::describe(&generate(&ctx, &shop, &names)[0]);
        assert!(
            shown.contains("bytes redacted") && !shown.contains("BEGIN"),
            "{shown}"
        );
        // The other namespace's proxy gets its own Secret, and not shop's.
        let out = generate(&ctx, &proxy("other"), &names);
        let served: Vec<&str> = out.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(served, ["kubernetes://other/theirs"]);
    }

    #[test]
    fn without_plaintext_secrets_only_verified_proxies_get_them() {
        let (cert, key) = axon_config::fixtures::self_signed("shop", 2);
        let data = serde_json::json!({"tls.crt": cert, "tls.key": key});
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: shop}}\nstringData: {data}\n"
        );
        let mesh = std::sync::Arc::new(axon_config::mesh::MeshConfig {
            plaintext_secrets: false,
            ..Default::default()
        });
        let request = axon_model::push_request::PushRequest::full_push(
            axon_model::push_request::TriggerReason::Config,
            std::time::Instant::now(),
        );
        let ctx = PushContext::build(None, &axon_model::fixtures::configs(&yaml), &request, &mesh);
        let names = BTreeSet::from(["kubernetes://cert".to_string()]);
        let anonymous = proxy("shop");
        assert!(generate(&ctx, &anonymous, &names).is_empty());
        assert!(problems(&ctx, &anonymous, &names)[0].unauthorized);
        let verified = Proxy {
            verified: true,
            ..proxy("shop")
        };
        assert_eq!(generate(&ctx, &verified, &names).len(), 1);
    }

    #[test]
    fn a_gateway_api_certificate_is_served_to_the_proxies_of_gateways_referring_to_it() {
        let (cert, key) = axon_config::fixtures::self_signed("example.org", 2);
        let data = serde_json::json!({"tls.crt": cert, "tls.key": key});
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: certs}}\nstringData: {data}\n---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: infra}}
spec:
  gatewayClassName: istio
  listeners: [{{name: https, port: 443, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert, namespace: certs}}]}}}}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: g, namespace: certs}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}}]
  to: [{{group: '', kind: Secret}}]
"
        );
        let ctx = axon_model::fixtures::context(&yaml);
        let names = BTreeSet::from(["kubernetes-gateway://certs/cert".to_string()]);
        let ours = axon_model::fixtures::proxy(
            "router",
            "10.0.0.1",
            "infra",
            &[("gateway.networking.k8s.io/gateway-name", "gw")],
        );
        assert_eq!(generate(&ctx, &ours, &names).len(), 1);
        // Another gateway's proxy, of the same namespace: refused.
        let theirs = axon_model::fixtures::proxy(
            "router",
            "10.0.0.2",
            "infra",
            &[("gateway.networking.k8s.io/gateway-name", "other")],
        );
        assert!(generate(&ctx, &theirs, &names).is_empty());
        assert!(problems(&ctx, &theirs, &names)[0].unauthorized);
    }
}
