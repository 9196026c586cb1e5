//! The values of a DestinationRule's traffic policies that axon accepts and does not apply:
//! `tls.mode: ISTIO_MUTUAL` (applied only for proxies beside istio's agent, which serves
//! istiod's SDS names `default` and `ROOTCA`, or with metadata certificates), wherever a
//! `tls` block is (the rule, a port, a subset, a subset's port).

use crate::istio::DestinationRule;
use crate::istio::traffic_policy::{ClientTls, TlsMode, TrafficPolicy};

/// The notes of one DestinationRule.
pub(super) fn notes(dr: &DestinationRule, out: &mut Vec<String>) {
    if let Some(doc) = &dr.traffic_policy {
        policy_notes(&doc.policy, "spec.trafficPolicy", out);
    }
    for (i, subset) in dr.subsets.iter().enumerate() {
        if let Some(doc) = &subset.traffic_policy {
            policy_notes(
                &doc.policy,
                &format!("spec.subsets[{i}].trafficPolicy"),
                out,
            );
        }
    }
}

fn policy_notes(policy: &TrafficPolicy, path: &str, out: &mut Vec<String>) {
    tls_note(policy.tls.as_ref(), path, out);
    for (i, port) in policy.port_level_settings.iter().flatten().enumerate() {
        tls_note(
            port.tls.as_ref(),
            &format!("{path}.portLevelSettings[{i}]"),
            out,
        );
    }
}

fn tls_note(tls: Option<&ClientTls>, path: &str, out: &mut Vec<String>) {
    if tls.is_some_and(|t| t.mode == TlsMode::IstioMutual) {
        out.push(format!(
            "{path}.tls.mode: ISTIO_MUTUAL is applied for proxies run by istio's agent \
             (ISTIO_VERSION metadata: the workload certificate over its sds-grpc cluster) or \
             with TLS_CLIENT_* certificate files in their metadata; any other proxy sends \
             plaintext"
        ));
    }
}
