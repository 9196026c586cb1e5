//! SDS: the file-backed secrets of upstream TLS, named as istio-agent names them and istiod
//! references them from clusters (`cds::tls`): `file-cert:CERT~KEY` (a certificate chain and
//! its key) and `file-root:CA` (trusted roots). Each secret points Envoy at the files; Envoy
//! reads them. A file Envoy cannot read fails that secret's update only (the SDS NACK), not
//! the clusters: a cluster waiting for its secret sends no TLS, as with istiod when the agent
//! cannot read a file. Names of any other form get nothing.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};

use super::resource::Resource;

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

/// The secrets of `names` that axon knows how to make.
pub fn generate(names: &BTreeSet<String>) -> Vec<Resource> {
    names
        .iter()
        .filter_map(|name| Some(Resource::new(name.clone(), &secret(name)?)))
        .collect()
}

fn secret(name: &str) -> Option<Secret> {
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

    #[test]
    fn file_secrets_by_istio_agents_names() {
        let names = BTreeSet::from([
            cert_secret_name("/c.pem", "/k.pem"),
            root_secret_name("/ca.pem"),
            "default".to_string(),
            "file-cert:/only-a-cert".to_string(),
        ]);
        let out = generate(&names);
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
}
