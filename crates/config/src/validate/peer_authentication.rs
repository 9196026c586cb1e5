//! PeerAuthentication, as istiod's `ValidatePeerAuthentication` checks it: port-level
//! settings only with a workload selector, and not an empty map; ports in 1..65535; the
//! selector's labels as every selector's.

use super::fields::Errors;
use super::names::selector;
use crate::istio::PeerAuthentication;

pub(super) fn peer_authentication(errs: &mut Errors, pa: &PeerAuthentication) {
    if let Some(ports) = &pa.port_level_mtls {
        if !pa.has_selector() && !ports.is_empty() {
            errs.add(
                "spec.portLevelMtls",
                "mesh/namespace peer authentication cannot have port level mTLS",
            );
        }
        if ports.is_empty() {
            errs.add(
                "spec.portLevelMtls",
                "port level mTLS, if defined, must have at least one element",
            );
        }
        for port in ports.keys() {
            if !port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p)) {
                errs.add(
                    format!("spec.portLevelMtls[{port}]"),
                    "port must be in range 1..65535",
                );
            }
        }
    }
    if let Some(sel) = &pa.selector {
        selector(errs, "spec.selector.matchLabels", &sel.match_labels);
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::check;

    #[test]
    fn istiod_rules() {
        assert!(check("PeerAuthentication", "mtls: {mode: STRICT}").is_ok());
        assert!(
            check(
                "PeerAuthentication",
                "selector: {matchLabels: {app: a}}\nportLevelMtls: {8080: {mode: DISABLE}}"
            )
            .is_ok()
        );
        assert_eq!(
            check(
                "PeerAuthentication",
                "portLevelMtls: {8080: {mode: DISABLE}}"
            )
            .unwrap_err(),
            vec![
                "spec.portLevelMtls: mesh/namespace peer authentication cannot have port level mTLS"
            ]
        );
        assert_eq!(
            check(
                "PeerAuthentication",
                "selector: {matchLabels: {app: a}}\nportLevelMtls: {}"
            )
            .unwrap_err(),
            vec!["spec.portLevelMtls: port level mTLS, if defined, must have at least one element"]
        );
        assert_eq!(
            check(
                "PeerAuthentication",
                "selector: {matchLabels: {app: a}}\nportLevelMtls: {0: {mode: STRICT}, 70000: {}}"
            )
            .unwrap_err(),
            vec![
                "spec.portLevelMtls[0]: port must be in range 1..65535",
                "spec.portLevelMtls[70000]: port must be in range 1..65535"
            ]
        );
    }
}
