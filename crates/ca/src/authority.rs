//! [`Authority`]: the signing material and what it signs, as istiod's `IstioCA`
//! (`security/pkg/pki/ca/ca.go`) and `util.GenCertFromCSR`
//! (`security/pkg/pki/util/generate_cert.go`).
//!
//! A workload certificate carries the caller's proven identity as its only SAN (a URI SAN,
//! critical, under an empty subject), digitalSignature and keyEncipherment, serverAuth and
//! clientAuth, `CA:FALSE`; nothing the CSR asks beyond its public key is used. It is
//! backdated two minutes for clock skew and never outlives the signing certificate. Pure: the
//! caller passes the time; the only other input is the random serial number.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use rcgen::string::Ia5String;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber, SubjectPublicKeyInfo,
};
use x509_parser::prelude::FromDer;

use crate::{CLOCK_SKEW_GRACE, CaTtls, SignError};

/// The signing certificate and key, the chain above it and the root.
pub struct Authority {
    issuer: Issuer<'static, KeyPair>,
    /// The signing certificate, PEM.
    signing_pem: String,
    signing_not_after: SystemTime,
    /// The certificates returned between the leaf and the root (`cert-chain.pem`'s; the
    /// signing certificate alone when that file is absent and it is not the root).
    chain: Vec<String>,
    root: String,
    root_not_after: SystemTime,
}

/// A serving certificate for axon's own DNS names, and its key.
pub struct IssuedServer {
    /// The leaf, then the certificates up to (not including) the root.
    pub chain_pem: String,
    /// PKCS#8.
    pub key_pem: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

/// A self-signed root just made: its certificate and key (PKCS#8), to be kept.
pub struct SelfSigned {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Authority {
    /// The signing material from istiod's plug-in files: `ca_cert` signs with `ca_key`;
    /// `cert_chain` (may be empty) is returned between the leaf and `root`.
    pub fn from_pem(
        ca_cert: &str,
        ca_key: &str,
        cert_chain: &str,
        root: &str,
    ) -> Result<Authority, String> {
        let signing = pem_certs(ca_cert).map_err(|e| format!("ca-cert.pem: {e}"))?;
        let Some(signing_der) = signing.first() else {
            return Err("ca-cert.pem: no certificate".to_string());
        };
        let key = KeyPair::from_pem(ca_key).map_err(|e| {
            format!(
                "ca-key.pem: {e} (axon reads PKCS#8 keys, \"BEGIN PRIVATE KEY\": convert with \
                 `openssl pkcs8 -topk8 -nocrypt`)"
            )
        })?;
        let (_, parsed) = x509_parser::parse_x509_certificate(signing_der)
            .map_err(|e| format!("ca-cert.pem: {e}"))?;
        if parsed.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err("ca-key.pem is not the key of ca-cert.pem".to_string());
        }
        let signing_not_after = unix(parsed.validity().not_after.timestamp());
        let signing_pem = to_pem(signing_der);
        let issuer =
            Issuer::from_ca_cert_pem(&signing_pem, key).map_err(|e| format!("ca-cert.pem: {e}"))?;
        let roots = pem_certs(root).map_err(|e| format!("root-cert.pem: {e}"))?;
        if roots.is_empty() {
            return Err("root-cert.pem: no certificate".to_string());
        }
        let root_pem: String = roots.iter().map(|der| to_pem(der)).collect();
        let (_, first_root) = x509_parser::parse_x509_certificate(&roots[0])
            .map_err(|e| format!("root-cert.pem: {e}"))?;
        let root_not_after = unix(first_root.validity().not_after.timestamp());
        let mut chain: Vec<String> = pem_certs(cert_chain)
            .map_err(|e| format!("cert-chain.pem: {e}"))?
            .iter()
            .map(|der| to_pem(der))
            .collect();
        if chain.is_empty() && !roots.iter().any(|r| r == signing_der) {
            chain.push(signing_pem.clone());
        }
        Ok(Authority {
            issuer,
            signing_pem,
            signing_not_after,
            chain,
            root: root_pem,
            root_not_after,
        })
    }

    /// A new self-signed root, as istiod's when it has no plug-in CA: organization
    /// `trust_domain`, `CA:TRUE`, keyCertSign and cRLSign, valid from `now` for `ttl`. Its key
    /// is ECDSA P-256 (istiod's is RSA 2048; Envoy and pilot-agent take either).
    pub fn self_signed(
        trust_domain: &str,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<(Authority, SelfSigned), String> {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| format!("generating the root key: {e}"))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, trust_domain);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.not_before = now.into();
        params.not_after = (now + ttl).into();
        params.serial_number = Some(serial());
        let cert = params
            .self_signed(&key)
            .map_err(|e| format!("making the self-signed root: {e}"))?;
        let made = SelfSigned {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        };
        let authority = Authority::from_pem(&made.cert_pem, &made.key_pem, "", &made.cert_pem)?;
        Ok((authority, made))
    }

    /// The root certificate(s), PEM: what proxies trust (`root-cert.pem`).
    pub fn root_pem(&self) -> &str {
        &self.root
    }

    /// When the (first) root expires.
    pub fn root_not_after(&self) -> SystemTime {
        self.root_not_after
    }

    /// The signing certificate, PEM.
    pub fn signing_pem(&self) -> &str {
        &self.signing_pem
    }

    /// When the signing certificate expires.
    pub fn signing_not_after(&self) -> SystemTime {
        self.signing_not_after
    }

    /// The certificates a client certificate this CA issued chains to, DER: the roots, and the
    /// signing certificate (so that a client that presents its leaf alone verifies too).
    pub fn trust_anchors(&self) -> Vec<Vec<u8>> {
        let mut out = pem_certs(&self.root).unwrap_or_default();
        out.extend(pem_certs(&self.signing_pem).unwrap_or_default());
        out
    }

    /// Signs `csr_pem` for `identity` (a SPIFFE URI) alone, for `requested_secs` (the
    /// request's `validity_duration`: 0 or less is the default TTL, above the maximum is
    /// refused, as istiod), at `now`. Returns istiod's `cert_chain`: the leaf, the chain's
    /// certificates, the root last.
    pub fn sign_csr(
        &self,
        csr_pem: &str,
        identity: &str,
        requested_secs: i64,
        ttls: &CaTtls,
        now: SystemTime,
    ) -> Result<Vec<String>, SignError> {
        let public_key = csr_public_key(csr_pem)?;
        let ttl = if requested_secs <= 0 {
            ttls.default
        } else {
            let requested = Duration::from_secs(requested_secs.unsigned_abs());
            if requested > ttls.max {
                return Err(SignError::Ttl {
                    requested,
                    max: ttls.max,
                });
            }
            requested
        };
        let san = Ia5String::try_from(identity)
            .map_err(|e| SignError::Generate(format!("identity {identity}: {e}")))?;
        let mut params = self.leaf_params(vec![SanType::URI(san)], ttl, now)?;
        params.distinguished_name = DistinguishedName::new();
        let cert = params
            .signed_by(&public_key, &self.issuer)
            .map_err(|e| SignError::Generate(e.to_string()))?;
        let mut out = vec![cert.pem()];
        out.extend(self.chain.iter().cloned());
        out.push(self.root.clone());
        Ok(out)
    }

    /// A new key and a certificate for `dns_names` (axon's own serving certificate, as
    /// istiod's `GenKeyCert`), valid for `ttl` from `now` (at most the signing certificate's
    /// life).
    pub fn issue_server(
        &self,
        dns_names: &[String],
        ttl: Duration,
        now: SystemTime,
    ) -> Result<IssuedServer, SignError> {
        let sans = dns_names
            .iter()
            .map(|n| {
                Ia5String::try_from(n.as_str())
                    .map(SanType::DnsName)
                    .map_err(|e| SignError::Generate(format!("DNS name {n}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| SignError::Generate(e.to_string()))?;
        let params = self.leaf_params(sans, ttl, now)?;
        let (not_before, not_after) = (
            SystemTime::from(params.not_before),
            SystemTime::from(params.not_after),
        );
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| SignError::Generate(e.to_string()))?;
        let mut chain_pem = cert.pem();
        for c in &self.chain {
            chain_pem.push_str(c);
        }
        Ok(IssuedServer {
            chain_pem,
            key_pem: key.serialize_pem(),
            not_before,
            not_after,
        })
    }

    /// istiod's workload template: the key usages, backdated by the clock-skew grace, never
    /// past the signing certificate.
    fn leaf_params(
        &self,
        sans: Vec<SanType>,
        ttl: Duration,
        now: SystemTime,
    ) -> Result<CertificateParams, SignError> {
        if now >= self.signing_not_after {
            return Err(SignError::NotReady(format!(
                "the signing certificate expired at {}",
                humanize(self.signing_not_after)
            )));
        }
        let mut params = CertificateParams::default();
        params.subject_alt_names = sans;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(serial());
        params.not_before = now.checked_sub(CLOCK_SKEW_GRACE).unwrap_or(now).into();
        params.not_after = (now + ttl).min(self.signing_not_after).into();
        Ok(params)
    }
}

/// The public key of a CSR whose signature verifies.
fn csr_public_key(csr_pem: &str) -> Result<SubjectPublicKeyInfo, SignError> {
    let bad = |why: String| SignError::Csr(format!("the CSR {why}"));
    let (_, pem) = x509_parser::pem::parse_x509_pem(csr_pem.as_bytes())
        .map_err(|e| bad(format!("is not PEM: {e}")))?;
    if !pem.label.ends_with("CERTIFICATE REQUEST") {
        return Err(bad(format!("is a PEM {}", pem.label)));
    }
    let (_, csr) =
        x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents)
            .map_err(|e| bad(format!("does not parse: {e}")))?;
    csr.verify_signature()
        .map_err(|e| bad(format!("signature does not verify: {e}")))?;
    SubjectPublicKeyInfo::from_der(csr.certification_request_info.subject_pki.raw)
        .map_err(|e| bad(format!("has a public key axon cannot sign: {e}")))
}

/// A random positive 128-bit serial number, as istiod's `genSerialNum`.
fn serial() -> SerialNumber {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    // The system's random source does not fail on the platforms axon runs on; a zero serial
    // would still be a valid certificate.
    let _ = ring::rand::SystemRandom::new().fill(&mut bytes);
    bytes[0] = (bytes[0] & 0x7f) | 0x01;
    SerialNumber::from_slice(&bytes)
}

/// The DER of every certificate of a PEM text (other blocks skipped).
pub(crate) fn pem_certs(text: &str) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    for pem in x509_parser::pem::Pem::iter_from_buffer(text.as_bytes()) {
        let pem = pem.map_err(|e| e.to_string())?;
        if pem.label == "CERTIFICATE" {
            x509_parser::parse_x509_certificate(&pem.contents).map_err(|e| e.to_string())?;
            out.push(pem.contents);
        }
    }
    Ok(out)
}

/// One certificate as PEM, newline-terminated.
pub(crate) fn to_pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

fn unix(secs: i64) -> SystemTime {
    if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        SystemTime::UNIX_EPOCH
    }
}

fn humanize(t: SystemTime) -> String {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{secs} (unix seconds)")
}

#[cfg(test)]
mod tests;
