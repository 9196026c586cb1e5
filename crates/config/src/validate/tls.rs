//! TLS settings: the client side (DestinationRule `tls`, in a traffic policy) and the server
//! side (Gateway server `tls`, also read for Sidecar ingress listeners).

use serde::Deserialize;

use super::fields::{Errors, non_empty, nullable, unsupported_value};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ClientTls {
    mode: Option<String>,
    client_certificate: Option<String>,
    private_key: Option<String>,
    ca_certificates: Option<String>,
    credential_name: Option<String>,
    ca_crl: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    subject_alt_names: Vec<String>,
    insecure_skip_verify: Option<bool>,
}

pub(super) fn client_tls(errs: &mut Errors, path: &str, tls: &ClientTls) {
    let mode = tls.mode.as_deref().unwrap_or("DISABLE");
    unsupported_value(
        errs,
        &format!("{path}.mode"),
        mode,
        &["DISABLE", "SIMPLE", "MUTUAL", "ISTIO_MUTUAL"],
    );
    let ca = non_empty(&tls.ca_certificates);
    let credential = non_empty(&tls.credential_name);
    if tls.insecure_skip_verify == Some(true) {
        let sans = !tls.subject_alt_names.is_empty();
        if mode == "SIMPLE" && (ca || credential || sans) {
            errs.add(
                path,
                "cannot specify caCertificates or credentialName or subjectAltNames when insecureSkipVerify is set true",
            );
        }
        if mode == "MUTUAL" && (ca || sans) {
            errs.add(
                path,
                "cannot specify caCertificates or subjectAltNames when insecureSkipVerify is set true",
            );
        }
    }
    if matches!(mode, "SIMPLE" | "MUTUAL") && credential {
        if non_empty(&tls.client_certificate)
            || ca
            || non_empty(&tls.private_key)
            || non_empty(&tls.ca_crl)
        {
            errs.add(
                path,
                "cannot specify client certificates or CA certificate or CA CRL if credentialName is set",
            );
        }
        return;
    }
    if mode == "MUTUAL" {
        if !non_empty(&tls.client_certificate) {
            errs.add(
                format!("{path}.clientCertificate"),
                "Required value: client certificate required for mutual tls",
            );
        }
        if !non_empty(&tls.private_key) {
            errs.add(
                format!("{path}.privateKey"),
                "Required value: private key required for mutual tls",
            );
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct ServerTls {
    pub(super) https_redirect: Option<bool>,
    pub(super) mode: Option<String>,
    pub(super) server_certificate: Option<String>,
    pub(super) private_key: Option<String>,
    pub(super) ca_certificates: Option<String>,
    ca_crl: Option<String>,
    pub(super) credential_name: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub(super) credential_names: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub(super) tls_certificates: Vec<TlsCertificate>,
    #[serde(default, deserialize_with = "nullable")]
    pub(super) subject_alt_names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TlsCertificate {
    server_certificate: Option<String>,
    private_key: Option<String>,
}

pub(super) fn server_tls(errs: &mut Errors, path: &str, tls: &ServerTls) {
    let mode = tls.mode.as_deref().unwrap_or("PASSTHROUGH");
    unsupported_value(
        errs,
        &format!("{path}.mode"),
        mode,
        &[
            "PASSTHROUGH",
            "SIMPLE",
            "MUTUAL",
            "AUTO_PASSTHROUGH",
            "ISTIO_MUTUAL",
            "OPTIONAL_MUTUAL",
        ],
    );
    let server_cert = non_empty(&tls.server_certificate);
    let key = non_empty(&tls.private_key);
    let ca = non_empty(&tls.ca_certificates);
    let credential = non_empty(&tls.credential_name);
    if mode == "ISTIO_MUTUAL" {
        if server_cert
            || key
            || ca
            || credential
            || !tls.tls_certificates.is_empty()
            || !tls.credential_names.is_empty()
        {
            errs.add(
                path,
                "ISTIO_MUTUAL TLS cannot have an associated server certificate, private key, CA bundle, tlsCertificates or credentialName(s)",
            );
        }
        return;
    }
    let sources = [
        server_cert && key,
        credential,
        !tls.credential_names.is_empty(),
        !tls.tls_certificates.is_empty(),
    ];
    if sources.iter().filter(|s| **s).count() > 1 {
        errs.add(
            path,
            "only one of credentialName, credentialNames, serverCertificate/privateKey, tlsCertificates should be specified",
        );
    }
    if non_empty(&tls.ca_crl) {
        if credential {
            errs.add(
                format!("{path}.caCrl"),
                "CRL is not supported with credentialName. CRL has to be specified in the credential",
            );
        }
        if mode == "SIMPLE" {
            errs.add(
                format!("{path}.caCrl"),
                "CRL is not supported with SIMPLE TLS",
            );
        }
    }
    if !matches!(mode, "SIMPLE" | "MUTUAL" | "OPTIONAL_MUTUAL") {
        return;
    }
    if credential || !tls.credential_names.is_empty() {
        return; // certificates come from the credential
    }
    let label = if mode == "SIMPLE" {
        "SIMPLE TLS"
    } else {
        "MUTUAL TLS"
    };
    if mode != "SIMPLE" && !ca {
        errs.add(
            format!("{path}.caCertificates"),
            format!("Required value: {label} requires a client CA bundle"),
        );
    }
    if tls.tls_certificates.is_empty() {
        if !server_cert {
            errs.add(
                format!("{path}.serverCertificate"),
                format!("Required value: {label} requires a server certificate"),
            );
        }
        if !key {
            errs.add(
                format!("{path}.privateKey"),
                format!("Required value: {label} requires a private key"),
            );
        }
    }
    for (i, cert) in tls.tls_certificates.iter().enumerate() {
        if !non_empty(&cert.server_certificate) {
            errs.add(
                format!("{path}.tlsCertificates[{i}].serverCertificate"),
                format!("Required value: {label} requires a server certificate"),
            );
        }
        if !non_empty(&cert.private_key) {
            errs.add(
                format!("{path}.tlsCertificates[{i}].privateKey"),
                format!("Required value: {label} requires a private key"),
            );
        }
    }
}
