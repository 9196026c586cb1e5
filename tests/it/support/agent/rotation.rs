//! The agent's certificate loop, as pilot-agent's secret cache runs it
//! (`security/pkg/nodeagent/cache/secretcache.go`): ask for the first certificate, publish
//! it to the SDS streams, sleep until `grace_ratio` of its lifetime (counted from when it
//! arrived) is left, then ask again with a new key; a failed request is retried with a
//! doubling wait. Renewals authenticate with the current certificate unless told otherwise.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::ca_client::{CaAccess, CaAuth, create_certificate, key_and_csr};
use super::{AgentOptions, Identity, Issued, RenewAuth, Shared};

/// The longest wait between two failed requests.
const MAX_RETRY: Duration = Duration::from_secs(5);

/// Runs until the agent's runtime stops.
pub(crate) async fn run(
    identity: Identity,
    ca: CaAccess,
    options: AgentOptions,
    shared: Arc<Shared>,
) {
    let mut current: Option<Arc<Issued>> = None;
    let mut retry = options.retry;
    loop {
        let auth = credential(&ca, &options, current.as_deref());
        match fetch(&identity, &ca, &auth, &options, current.as_deref()).await {
            Ok(issued) => {
                let issued = Arc::new(issued);
                let received = SystemTime::now();
                shared.update(|s| {
                    s.issued += 1;
                    s.serial = Some(issued.serial.clone());
                    s.not_after = Some(issued.not_after);
                });
                shared.current.send_replace(Some(issued.clone()));
                retry = options.retry;
                let delay = renew_delay(received, issued.not_after, options.grace_ratio);
                current = Some(issued);
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                shared.update(|s| {
                    s.errors += 1;
                    s.last_error = Some(e);
                });
                tokio::time::sleep(retry).await;
                retry = (retry * 2).min(MAX_RETRY);
            }
        }
    }
}

/// The credential of the next request: the current certificate for a renewal (while it is
/// valid) under [`RenewAuth::Certificate`], else the initial one.
fn credential(ca: &CaAccess, options: &AgentOptions, current: Option<&Issued>) -> CaAuth {
    match current {
        Some(c)
            if options.renew_auth == RenewAuth::Certificate && SystemTime::now() < c.not_after =>
        {
            CaAuth::Certificate {
                cert_pem: c.chain_pem.clone(),
                key_pem: c.key_pem.clone(),
            }
        }
        _ => ca.auth.clone(),
    }
}

/// pilot-agent's `rotateTime`: renew when `grace_ratio` of the lifetime (from `received`
/// to `not_after`) is left.
fn renew_delay(received: SystemTime, not_after: SystemTime, grace_ratio: f64) -> Duration {
    let lifetime = not_after.duration_since(received).unwrap_or_default();
    lifetime.mul_f64((1.0 - grace_ratio).clamp(0.0, 1.0))
}

/// One certificate: a new key and CSR, signed by the CA; the chain split as pilot-agent
/// serves it (leaf and intermediates as `default`, the root, last, as `ROOTCA`).
async fn fetch(
    identity: &Identity,
    ca: &CaAccess,
    auth: &CaAuth,
    options: &AgentOptions,
    previous: Option<&Issued>,
) -> Result<Issued, String> {
    let (key_pem, csr) = key_and_csr(identity)?;
    let validity = options.validity.as_secs().max(1) as i64;
    let chain = create_certificate(ca, auth, csr, validity).await?;
    let pems: Vec<&str> = chain.iter().map(|c| c.trim()).collect();
    let (root, certs) = match pems.split_last() {
        Some((root, certs)) if !certs.is_empty() => (root, certs),
        _ => return Err(format!("cert_chain of {} entries: no leaf", pems.len())),
    };
    let leaf_pem = format!("{}\n", certs[0]);
    let (serial, not_after) = leaf_facts(&leaf_pem)?;
    Ok(Issued {
        chain_pem: certs.iter().map(|c| format!("{c}\n")).collect(),
        leaf_pem,
        key_pem,
        root_pem: format!("{root}\n"),
        serial,
        not_after,
        version: previous.map_or(1, |p| p.version + 1),
    })
}

/// The serial (lowercase hex, no leading zeros) and `notAfter` of a PEM certificate.
pub(crate) fn leaf_facts(pem: &str) -> Result<(String, SystemTime), String> {
    let (_, pem) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| format!("leaf PEM: {e}"))?;
    let cert = pem.parse_x509().map_err(|e| format!("leaf: {e}"))?;
    let serial = cert.tbs_certificate.serial.to_str_radix(16);
    let not_after = cert.validity().not_after.timestamp();
    let not_after = SystemTime::UNIX_EPOCH + Duration::from_secs(not_after.max(0) as u64);
    Ok((normalize_serial(&serial), not_after))
}

/// The serial of a PEM certificate, as [`normalize_serial`] prints it ("" if unreadable).
pub fn leaf_serial(pem: &str) -> String {
    leaf_facts(pem).map(|(s, _)| s).unwrap_or_default()
}

/// A serial as the agent and Envoy's `/certs` both print it, compared: lowercase hex
/// without leading zeros.
pub fn normalize_serial(serial: &str) -> String {
    let s = serial.trim().to_ascii_lowercase().replace(':', "");
    let s = s.trim_start_matches('0');
    if s.is_empty() { "0".into() } else { s.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renews_at_the_grace_ratio_of_the_lifetime() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let end = t0 + Duration::from_secs(20);
        assert_eq!(renew_delay(t0, end, 0.5), Duration::from_secs(10));
        assert_eq!(renew_delay(t0, end, 0.25), Duration::from_secs(15));
        assert_eq!(renew_delay(end, t0, 0.5), Duration::ZERO);
    }

    #[test]
    fn serials_compare_without_case_colons_or_leading_zeros() {
        assert_eq!(normalize_serial("0A:1b"), "a1b");
        assert_eq!(normalize_serial("00"), "0");
    }
}
