//! Route destinations (host, subset, port, weights) and gateway names: what VirtualService
//! HTTP, TCP and TLS routes and Sidecar egress listeners share.

use super::fields::{Errors, PORT_RANGE, invalid_subset_name, port_in_range};
use super::names::{dns1123_label, fqdn, wildcard_domain};
use crate::istio::Destination;

/// Weights are not required to add up to 100 (Envoy normalises them), but none may be
/// negative and, with several destinations, not all may be zero.
pub(super) fn route_destinations(
    errs: &mut Errors,
    path: &str,
    destinations: &[(Option<&Destination>, i64)],
) {
    let mut total = 0i64;
    for (k, (dest, weight)) in destinations.iter().enumerate() {
        let p = format!("{path}[{k}]");
        match dest {
            None => errs.add(format!("{p}.destination"), "Required value"),
            Some(d) => destination(errs, &format!("{p}.destination"), d),
        }
        if *weight < 0 {
            errs.add(
                format!("{p}.weight"),
                format!("weight {weight} must not be negative"),
            );
        }
        total = total.saturating_add(*weight);
    }
    if destinations.len() > 1 && total == 0 {
        errs.add(
            path,
            "total destination weight = 0: give at least one destination a positive weight",
        );
    }
}

pub(super) fn destination(errs: &mut Errors, path: &str, d: &Destination) {
    if d.host.is_empty() {
        errs.add(format!("{path}.host"), "Required value");
    } else if d.host == "*" {
        errs.add(format!("{path}.host"), "invalid destination host *");
    } else if let Err(e) = wildcard_domain(&d.host) {
        errs.add(format!("{path}.host"), e);
    }
    if !d.subset.is_empty() && !dns1123_label(&d.subset) {
        errs.add(format!("{path}.subset"), invalid_subset_name(&d.subset));
    }
    if let Some(port) = &d.port
        && !port_in_range(port.number.into())
    {
        errs.add(format!("{path}.port.number"), PORT_RANGE);
    }
}

/// `name` or `namespace/name` of a Gateway, or `mesh`.
pub(super) fn gateway_name(errs: &mut Errors, path: &str, name: &str) {
    match name.split_once('/') {
        None => {
            if let Err(e) = fqdn(name) {
                errs.add(path, format!("invalid gateway name: {e}"));
            }
        }
        Some((ns, gw)) => {
            if !dns1123_label(ns) {
                errs.add(path, format!("invalid value for namespace: {ns:?}"));
            }
            if !dns1123_label(gw) {
                errs.add(path, format!("invalid value for gateway name: {gw:?}"));
            }
        }
    }
}
