//! A Kubernetes Secret object (`type`, `data` in base64, `stringData`) to a [`TlsSecret`], as
//! istiod's `ExtractCertInfo` and `ExtractRoot` read it, and checked: every certificate
//! parses and is valid now, and the key is the certificate's (its public key is the one the
//! certificate names). Nothing here logs or prints a byte of the secret.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde::Serialize;
use thiserror::Error;

/// istiod's generic keys (`GenericScrt*`).
const CERT: &str = "cert";
const KEY: &str = "key";
const CACERT: &str = "cacert";
const CRL: &str = "crl";
/// The `kubernetes.io/tls` keys (`TLSSecret*`).
const TLS_CERT: &str = "tls.crt";
const TLS_KEY: &str = "tls.key";
const TLS_STAPLE: &str = "tls.ocsp-staple";
const TLS_CA: &str = "ca.crt";
const TLS_CRL: &str = "ca.crl";

/// Why a Secret is refused. Names keys, never values.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SecretError {
    #[error("data.{0}: not base64")]
    Base64(String),
    #[error("{0}: not a mapping of strings")]
    NotAMap(&'static str),
    #[error("found keys {0:?} and {1:?}, but they were empty")]
    EmptyPair(&'static str, &'static str),
    #[error("found key {0:?}, but it was empty")]
    Empty(&'static str),
    #[error(
        "found secret, but didn't have expected keys (cert and key) or (tls.crt and tls.key) or cacert or ca.crt; found: {0}"
    )]
    NoKeys(String),
    #[error("{key}: no PEM certificate in it")]
    NoCertificate { key: &'static str },
    #[error("{key}: certificate {index} does not parse: {reason}")]
    Unparsable {
        key: &'static str,
        index: usize,
        reason: String,
    },
    #[error(
        "{key}: certificate {subject:?} is expired or not yet valid (valid {not_before} to {not_after})"
    )]
    NotValidNow {
        key: &'static str,
        subject: String,
        not_before: String,
        not_after: String,
    },
    #[error("{key}: not a PEM private key: {reason}")]
    Key { key: &'static str, reason: String },
    #[error("{key} is not the private key of the certificate in {cert}")]
    KeyMismatch {
        key: &'static str,
        cert: &'static str,
    },
}

/// What a certificate (the first of a chain or bundle) is, for logs and debug pages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertInfo {
    pub subject: String,
    /// Seconds since the Unix epoch.
    pub not_after: i64,
    /// How many certificates the PEM holds.
    pub certificates: usize,
    /// The first 16 hex digits of the SHA-256 of the PEM bytes: tells versions apart.
    pub sha256: String,
}

/// A certificate chain and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertificateKey {
    pub chain: Arc<[u8]>,
    pub key: Arc<[u8]>,
    pub ocsp_staple: Option<Arc<[u8]>>,
    pub info: CertInfo,
}

/// Trusted roots and their CRL.
#[derive(Clone, PartialEq, Eq)]
pub struct Roots {
    pub certificates: Arc<[u8]>,
    pub crl: Option<Arc<[u8]>>,
    pub info: CertInfo,
}

/// What axon serves of a Secret: a certificate and key, roots, or both.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSecret {
    /// The Secret's `type` (`kubernetes.io/tls`, `Opaque`, ...).
    pub secret_type: String,
    pub certificate: Option<CertificateKey>,
    pub ca: Option<Roots>,
}

impl fmt::Debug for TlsSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSecret")
            .field("type", &self.secret_type)
            .field("certificate", &self.certificate.as_ref().map(|c| &c.info))
            .field("ca", &self.ca.as_ref().map(|c| &c.info))
            .finish()
    }
}

impl Serialize for TlsSecret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(rename = "type")]
            secret_type: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            certificate: Option<&'a CertInfo>,
            #[serde(skip_serializing_if = "Option::is_none")]
            ca: Option<&'a CertInfo>,
        }
        Shown {
            secret_type: &self.secret_type,
            certificate: self.certificate.as_ref().map(|c| &c.info),
            ca: self.ca.as_ref().map(|c| &c.info),
        }
        .serialize(s)
    }
}

/// Decodes a Secret object (its `type`, `data` and `stringData`; `stringData` wins a key both
/// have, as the API server merges them) and checks it at `now` (seconds since the epoch).
/// `Ok(None)`: it has none of the keys istiod reads, so it is no TLS Secret.
pub fn decode_secret(
    object: &serde_json::Value,
    now: i64,
) -> Result<Option<TlsSecret>, SecretError> {
    let mut data: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    match object.get("data") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            for (k, v) in map {
                let text = match v {
                    serde_json::Value::String(s) => s.as_str(),
                    serde_json::Value::Null => "",
                    _ => return Err(SecretError::NotAMap("data")),
                };
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(text.trim())
                    .map_err(|_| SecretError::Base64(k.clone()))?;
                data.insert(k.clone(), bytes);
            }
        }
        Some(_) => return Err(SecretError::NotAMap("data")),
    }
    match object.get("stringData") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(map)) => {
            for (k, v) in map {
                let serde_json::Value::String(s) = v else {
                    return Err(SecretError::NotAMap("stringData"));
                };
                data.insert(k.clone(), s.clone().into_bytes());
            }
        }
        Some(_) => return Err(SecretError::NotAMap("stringData")),
    }
    let secret_type = object
        .get("type")
        .and_then(|t| t.as_str())
        .unwrap_or("Opaque")
        .to_string();
    decode_data(secret_type, &data, now)
}

/// [`decode_secret`] of decoded `data`.
pub fn decode_data(
    secret_type: String,
    data: &BTreeMap<String, Vec<u8>>,
    now: i64,
) -> Result<Option<TlsSecret>, SecretError> {
    let certificate = certificate_key(data, now)?;
    let ca = roots(data, now)?;
    if certificate.is_none() && ca.is_none() {
        let known = [CERT, KEY, TLS_CERT, TLS_KEY, CACERT, TLS_CA];
        if data.keys().any(|k| known.contains(&k.as_str())) {
            return Err(SecretError::NoKeys(found_keys(data)));
        }
        return Ok(None);
    }
    Ok(Some(TlsSecret {
        secret_type,
        certificate,
        ca,
    }))
}

fn value<'a>(data: &'a BTreeMap<String, Vec<u8>>, key: &str) -> Option<&'a [u8]> {
    data.get(key).map(Vec::as_slice).filter(|v| !v.is_empty())
}

/// istiod's `ExtractCertInfo`: `cert`/`key` first, then `tls.crt`/`tls.key`.
fn certificate_key(
    data: &BTreeMap<String, Vec<u8>>,
    now: i64,
) -> Result<Option<CertificateKey>, SecretError> {
    for (cert_key, key_key, staple_key) in
        [(CERT, KEY, None), (TLS_CERT, TLS_KEY, Some(TLS_STAPLE))]
    {
        if let (Some(chain), Some(key)) = (value(data, cert_key), value(data, key_key)) {
            let info = check_certificates(cert_key, chain, now)?;
            check_key(cert_key, chain, key_key, key)?;
            return Ok(Some(CertificateKey {
                chain: chain.into(),
                key: key.into(),
                ocsp_staple: staple_key.and_then(|k| value(data, k)).map(Into::into),
                info,
            }));
        }
    }
    for (cert_key, key_key) in [(CERT, KEY), (TLS_CERT, TLS_KEY)] {
        if data.contains_key(cert_key) && data.contains_key(key_key) {
            return Err(SecretError::EmptyPair(cert_key, key_key));
        }
    }
    Ok(None)
}

/// istiod's `ExtractRoot`: `cacert` (and `crl`) first, then `ca.crt` (and `ca.crl`).
fn roots(data: &BTreeMap<String, Vec<u8>>, now: i64) -> Result<Option<Roots>, SecretError> {
    for (ca_key, crl_key) in [(CACERT, CRL), (TLS_CA, TLS_CRL)] {
        if let Some(ca) = value(data, ca_key) {
            let info = check_certificates(ca_key, ca, now)?;
            return Ok(Some(Roots {
                certificates: ca.into(),
                crl: value(data, crl_key).map(Into::into),
                info,
            }));
        }
    }
    for ca_key in [CACERT, TLS_CA] {
        if data.contains_key(ca_key) {
            return Err(SecretError::Empty(ca_key));
        }
    }
    Ok(None)
}

/// Every certificate of a PEM text parses and is valid at `now`; the first one's facts.
fn check_certificates(key: &'static str, pem: &[u8], now: i64) -> Result<CertInfo, SecretError> {
    let mut first = None;
    let mut count = 0;
    for (index, der) in CertificateDer::pem_slice_iter(pem).enumerate() {
        let der = der.map_err(|e| SecretError::Unparsable {
            key,
            index: index + 1,
            reason: e.to_string(),
        })?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).map_err(|e| {
            SecretError::Unparsable {
                key,
                index: index + 1,
                reason: e.to_string(),
            }
        })?;
        let validity = cert.validity();
        let (not_before, not_after) = (validity.not_before, validity.not_after);
        if now < not_before.timestamp() || now > not_after.timestamp() {
            return Err(SecretError::NotValidNow {
                key,
                subject: cert.subject().to_string(),
                not_before: not_before.to_string(),
                not_after: not_after.to_string(),
            });
        }
        count += 1;
        first.get_or_insert_with(|| (cert.subject().to_string(), not_after.timestamp()));
    }
    let Some((subject, not_after)) = first else {
        return Err(SecretError::NoCertificate { key });
    };
    Ok(CertInfo {
        subject,
        not_after,
        certificates: count,
        sha256: short_digest(pem),
    })
}

/// The key parses and its public key is the leaf certificate's.
fn check_key(
    cert_key: &'static str,
    chain: &[u8],
    key_key: &'static str,
    key: &[u8],
) -> Result<(), SecretError> {
    let bad_key = |reason: String| SecretError::Key {
        key: key_key,
        reason,
    };
    let der = PrivateKeyDer::from_pem_slice(key).map_err(|e| bad_key(e.to_string()))?;
    let signing =
        rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| bad_key(e.to_string()))?;
    let leaf = CertificateDer::pem_slice_iter(chain)
        .next()
        .and_then(Result::ok)
        .ok_or(SecretError::NoCertificate { key: cert_key })?;
    let (_, cert) = x509_parser::parse_x509_certificate(leaf.as_ref()).map_err(|e| {
        SecretError::Unparsable {
            key: cert_key,
            index: 1,
            reason: e.to_string(),
        }
    })?;
    let mismatch = SecretError::KeyMismatch {
        key: key_key,
        cert: cert_key,
    };
    let spki = signing.public_key().ok_or_else(|| mismatch.clone())?;
    if spki.as_ref() != cert.tbs_certificate.subject_pki.raw {
        return Err(mismatch);
    }
    Ok(())
}

fn short_digest(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// istiod's `truncatedKeysMessage`: the first three keys, and how many more.
fn found_keys(data: &BTreeMap<String, Vec<u8>>) -> String {
    let keys: Vec<&str> = data.keys().map(String::as_str).collect();
    if keys.len() < 3 {
        keys.join(", ")
    } else {
        format!("{}, and {} more...", keys[..3].join(", "), keys.len() - 3)
    }
}

#[cfg(test)]
mod tests;
