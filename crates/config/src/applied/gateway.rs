//! The values of a Gateway's servers that axon accepts and does not apply: `tls.mode`
//! `ISTIO_MUTUAL` (translated as istiod does, with the SDS names `default` and `ROOTCA` that
//! a workload-certificate agent beside Envoy serves, which axon's proxies do not have),
//! `AUTO_PASSTHROUGH` (its SNI-DNAT clusters are not generated), and
//! `verifyCertificateSpki`/`verifyCertificateHash` beside file paths (istiod applies them
//! with `credentialName` only).

use crate::istio::{Gateway, ServerTlsMode};

/// The notes of one Gateway.
pub(super) fn notes(gw: &Gateway, out: &mut Vec<String>) {
    for (i, server) in gw.servers.iter().enumerate() {
        let Some(tls) = server.tls_settings() else {
            continue;
        };
        let path = format!("spec.servers[{i}].tls");
        match tls.mode {
            ServerTlsMode::IstioMutual => out.push(format!(
                "{path}.mode: ISTIO_MUTUAL needs the workload certificate of an agent beside \
                 Envoy (SDS `default` and `ROOTCA`), which axon does not run: the server's \
                 handshakes fail"
            )),
            ServerTlsMode::AutoPassthrough => out.push(format!(
                "{path}.mode: AUTO_PASSTHROUGH is not served (axon generates no SNI-DNAT \
                 clusters)"
            )),
            _ => {}
        }
        let by_credential = !tls.credential_name.is_empty() || !tls.credential_names.is_empty();
        let client_checked = matches!(
            tls.mode,
            ServerTlsMode::Mutual | ServerTlsMode::OptionalMutual
        );
        if client_checked && !by_credential {
            for (field, values) in [
                ("verifyCertificateSpki", &tls.verify_certificate_spki),
                ("verifyCertificateHash", &tls.verify_certificate_hash),
            ] {
                if !values.is_empty() {
                    out.push(format!(
                        "{path}.{field}: not applied with file paths, as istiod (only with \
                         credentialName)"
                    ));
                }
            }
        }
    }
}
