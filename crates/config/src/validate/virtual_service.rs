//! VirtualService: hosts, gateways, TCP and TLS routes, and the route destinations and
//! weights (of HTTP routes too). HTTP matches are checked by `http_route`.

use serde::Deserialize;

use super::destination::{gateway_name, route_destinations};
use super::fields::{Errors, PORT_RANGE, nullable, port_in_range, typed};
use super::http_route::http_route;
use super::names::{export_to, ip_or_cidr, is_ip, labels, wildcard_domain};
use crate::host;
use crate::istio::{Destination, HttpRoute, Labels, VirtualService};

/// A TCP or TLS route (`spec.tcp[]`, `spec.tls[]`).
#[derive(Deserialize)]
struct L4Route {
    #[serde(default, rename = "match", deserialize_with = "nullable")]
    matches: Vec<L4Match>,
    #[serde(default, deserialize_with = "nullable")]
    route: Vec<RouteDestination>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct L4Match {
    port: Option<i64>,
    #[serde(default, deserialize_with = "nullable")]
    destination_subnets: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    source_labels: Labels,
    #[serde(default, deserialize_with = "nullable")]
    gateways: Vec<String>,
    #[serde(default, deserialize_with = "nullable")]
    sni_hosts: Vec<String>,
}

#[derive(Deserialize)]
struct RouteDestination {
    destination: Option<Destination>,
    #[serde(default)]
    weight: i64,
}

const MESH_GATEWAY: &str = "mesh";

pub(super) fn virtual_service(errs: &mut Errors, vs: &VirtualService, namespace: &str) {
    // A VirtualService without hosts is a delegate: it is only reachable from another
    // VirtualService's `http.delegate`, so it cannot bind gateways or carry L4 routes.
    if vs.hosts.is_empty() {
        let delegate = "Required value: hosts are required unless this is a delegate VirtualService, and a delegate";
        if !vs.gateways.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not set gateways"));
        }
        if !vs.tcp.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not have tcp routes"));
        }
        if !vs.tls.is_empty() {
            errs.add("spec.hosts", format!("{delegate} must not have tls routes"));
        }
    }
    for (i, g) in vs.gateways.iter().enumerate() {
        gateway_name(errs, &format!("spec.gateways[{i}]"), g);
    }
    let bound_to_gateway =
        !vs.gateways.is_empty() && !vs.gateways.iter().any(|g| g == MESH_GATEWAY);

    let tcp: Vec<Option<L4Route>> = vs
        .tcp
        .iter()
        .enumerate()
        .map(|(i, r)| typed(errs, &format!("spec.tcp[{i}]"), r))
        .collect();
    let tls: Vec<Option<L4Route>> = vs
        .tls
        .iter()
        .enumerate()
        .map(|(i, r)| typed(errs, &format!("spec.tls[{i}]"), r))
        .collect();
    let has_sni = tls
        .iter()
        .flatten()
        .any(|r| r.matches.iter().any(|m| !m.sni_hosts.is_empty()));

    let mut all_hosts_valid = true;
    for (i, h) in vs.hosts.iter().enumerate() {
        let path = format!("spec.hosts[{i}]");
        let checked = if bound_to_gateway && has_sni {
            gateway_sni_domain(h)
        } else {
            wildcard_domain(h)
        };
        match checked {
            Err(e) if !is_ip(h) => {
                errs.add(&path, e);
                all_hosts_valid = false;
            }
            Ok(()) if !bound_to_gateway && h == "*" => {
                errs.add(
                    &path,
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                );
                all_hosts_valid = false;
            }
            _ => {}
        }
    }
    if all_hosts_valid {
        for (i, a) in vs.hosts.iter().enumerate() {
            for b in &vs.hosts[i + 1..] {
                if host::intersects(a, b) {
                    errs.add(
                        "spec.hosts",
                        format!("duplicate hosts in virtual service: {a} & {b}"),
                    );
                }
            }
        }
    }

    if vs.http.is_empty() && vs.tcp.is_empty() && vs.tls.is_empty() {
        errs.add(
            "spec",
            "http, tcp or tls must be provided in virtual service",
        );
    }
    for (i, route) in vs.http.iter().enumerate() {
        let path = format!("spec.http[{i}]");
        http_route(errs, &path, route, bound_to_gateway);
        delegation(errs, &path, route, vs.hosts.is_empty());
    }
    for (i, route) in tls.iter().enumerate() {
        if let Some(route) = route {
            tls_route(errs, &format!("spec.tls[{i}]"), route, vs, bound_to_gateway);
        }
    }
    for (i, route) in tcp.iter().enumerate() {
        if let Some(route) = route {
            tcp_route(errs, &format!("spec.tcp[{i}]"), route);
        }
    }
    export_to(
        errs,
        "spec.exportTo",
        namespace,
        &vs.export_to,
        false,
        false,
    );
}

fn tcp_route(errs: &mut Errors, path: &str, route: &L4Route) {
    for (j, m) in route.matches.iter().enumerate() {
        l4_match(errs, &format!("{path}.match[{j}]"), m);
    }
    if route.route.is_empty() {
        errs.add(
            format!("{path}.route"),
            "Required value: TCP route is required",
        );
    }
    l4_destinations(errs, &format!("{path}.route"), &route.route);
}

fn tls_route(
    errs: &mut Errors,
    path: &str,
    route: &L4Route,
    vs: &VirtualService,
    bound_to_gateway: bool,
) {
    if route.matches.is_empty() {
        errs.add(
            format!("{path}.match"),
            "Required value: TLS route must have at least one match condition",
        );
    }
    for (j, m) in route.matches.iter().enumerate() {
        let p = format!("{path}.match[{j}]");
        if m.sni_hosts.is_empty() {
            errs.add(
                format!("{p}.sniHosts"),
                "Required value: TLS match must have at least one SNI host",
            );
        }
        for (k, sni) in m.sni_hosts.iter().enumerate() {
            let sp = format!("{p}.sniHosts[{k}]");
            let checked = if bound_to_gateway {
                gateway_sni_domain(sni)
            } else {
                wildcard_domain(sni)
            };
            match checked {
                // An IP is against the SNI spec, but Istio only warns.
                Err(_) if is_ip(sni) => {}
                Err(e) => errs.add(&sp, e),
                Ok(()) => {
                    if !vs.hosts.iter().any(|h| host::matches(h, sni)) {
                        errs.add(
                            &sp,
                            format!(
                                "SNI host {sni:?} is not a compatible subset of any of the virtual service hosts: [{}]",
                                vs.hosts.join(", ")
                            ),
                        );
                    }
                }
            }
        }
        l4_match(errs, &p, m);
    }
    if route.route.is_empty() {
        errs.add(
            format!("{path}.route"),
            "Required value: TLS route is required",
        );
    }
    l4_destinations(errs, &format!("{path}.route"), &route.route);
}

fn l4_match(errs: &mut Errors, path: &str, m: &L4Match) {
    for (k, subnet) in m.destination_subnets.iter().enumerate() {
        if !ip_or_cidr(subnet) {
            errs.add(
                format!("{path}.destinationSubnets[{k}]"),
                format!("{subnet:?} is not a valid IP address or CIDR block"),
            );
        }
    }
    if let Some(port) = m.port
        && port != 0
        && !port_in_range(port)
    {
        errs.add(format!("{path}.port"), PORT_RANGE);
    }
    labels(errs, &format!("{path}.sourceLabels"), &m.source_labels);
    for (k, g) in m.gateways.iter().enumerate() {
        gateway_name(errs, &format!("{path}.gateways[{k}]"), g);
    }
}

fn l4_destinations(errs: &mut Errors, path: &str, route: &[RouteDestination]) {
    let destinations: Vec<(Option<&Destination>, i64)> = route
        .iter()
        .map(|d| (d.destination.as_ref(), d.weight))
        .collect();
    route_destinations(errs, path, &destinations);
}

/// A host of a VirtualService bound to a gateway with TLS SNI routes: may also be the SNI
/// name that AUTO_PASSTHROUGH gateways generate, `outbound_.<port>_._.<hostname>`.
fn gateway_sni_domain(domain: &str) -> Result<(), String> {
    if domain.starts_with("outbound_") && domain.len() <= 255 {
        let parts: Vec<&str> = domain.split('_').collect();
        let malformed = || {
            format!(
                "domain name {domain:?} invalid, should follow 'outbound_.<port>_._.<hostname>' format"
            )
        };
        if parts.len() < 4 {
            return Err(malformed());
        }
        let port = parts[1].trim_matches('.');
        let hostname = parts[3].trim_matches('.');
        if parts[0] != "outbound"
            || !port.chars().any(|c| c.is_ascii_digit())
            || !hostname.chars().any(|c| c.is_ascii_alphabetic())
        {
            return Err(malformed());
        }
        return Ok(());
    }
    wildcard_domain(domain)
}

/// istiod's `validateHTTPRouteConflict` for delegation: a root route (one that delegates)
/// routes nowhere itself, and a delegate's routes delegate no further (one level only).
fn delegation(errs: &mut Errors, path: &str, route: &HttpRoute, in_delegate: bool) {
    if route.delegate.is_none() {
        return;
    }
    if in_delegate {
        errs.add(
            format!("{path}.delegate"),
            "delegate HTTP route cannot contain delegate",
        );
        return;
    }
    if route.redirect.is_some() {
        errs.add(
            path,
            format!("root HTTP route {} must not specify redirect", route.name),
        );
    }
    if !route.route.is_empty() {
        errs.add(
            path,
            format!("root HTTP route {} must not specify route", route.name),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    const ROUTE: &str = "http: [{route: [{destination: {host: reviews}}]}]";

    #[test]
    fn virtual_service_hosts() {
        valid("VirtualService", &format!("hosts: [reviews]\n{ROUTE}"));
        valid(
            "VirtualService",
            &format!("hosts: ['*']\ngateways: [bookinfo-gateway]\n{ROUTE}"),
        );
        // A delegate: no hosts, only HTTP routes, no gateways.
        valid("VirtualService", ROUTE);
        valid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{match: [{uri: {prefix: /r}}], delegate: {name: child, namespace: ns}}]",
        );
        invalid(
            "VirtualService",
            "http: [{delegate: {name: grandchild}}]",
            "spec.http[0].delegate: delegate HTTP route cannot contain delegate",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{name: r, delegate: {name: child}, route: [{destination: {host: reviews}}]}]",
            "spec.http[0]: root HTTP route r must not specify route",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{name: r, delegate: {name: child}, redirect: {uri: /x}}]",
            "spec.http[0]: root HTTP route r must not specify redirect",
        );
        invalid(
            "VirtualService",
            &format!("gateways: [bookinfo-gateway]\n{ROUTE}"),
            "spec.hosts: Required value",
        );
        invalid(
            "VirtualService",
            &format!("hosts: ['*']\n{ROUTE}"),
            "spec.hosts[0]: wildcard host * is not allowed for virtual services bound to the mesh gateway",
        );
        invalid(
            "VirtualService",
            &format!("hosts: ['*']\ngateways: [gw, mesh]\n{ROUTE}"),
            "wildcard host * is not allowed",
        );
        invalid(
            "VirtualService",
            &format!("hosts: ['*.example.com', a.example.com]\n{ROUTE}"),
            "spec.hosts: duplicate hosts in virtual service: *.example.com & a.example.com",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]",
            "spec: http, tcp or tls must be provided",
        );
        invalid(
            "VirtualService",
            &format!("hosts: [reviews]\ngateways: ['bad/gw/name']\n{ROUTE}"),
            "spec.gateways[0]: invalid value for gateway name",
        );
    }

    #[test]
    fn virtual_service_destinations_and_weights() {
        valid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews, subset: v1}, weight: 80}, {destination: {host: reviews, subset: v2}, weight: 20}]}]",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{weight: 100}]}]",
            "spec.http[0].route[0].destination: Required value",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {subset: v1}}]}]",
            "spec.http[0].route[0].destination.host: Required value",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews}, weight: -1}]}]",
            "spec.http[0].route[0].weight: weight -1 must not be negative",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: a}}, {destination: {host: b}}]}]",
            "spec.http[0].route: total destination weight = 0",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews, port: {number: 0}}}]}]",
            "spec.http[0].route[0].destination.port.number: port must be between 1-65535",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: '*'}}]}]",
            "spec.http[0].route[0].destination.host: invalid destination host *",
        );
        invalid(
            "VirtualService",
            "hosts: [reviews]\nhttp: [{route: [{destination: {host: reviews, subset: v1.0}}]}]",
            "spec.http[0].route[0].destination.subset: subset name is invalid",
        );
    }

    #[test]
    fn virtual_service_tcp_and_tls_routes() {
        valid(
            "VirtualService",
            "hosts: ['*']\ngateways: [tcp-echo-gateway]\ntcp: [{match: [{port: 31400}], route: [{destination: {host: tcp-echo, port: {number: 9000}, subset: v1}}]}]",
        );
        valid(
            "VirtualService",
            "hosts: [api.dropboxapi.com]\ntls: [{match: [{port: 443, sniHosts: [api.dropboxapi.com]}], route: [{destination: {host: api.dropboxapi.com}}]}]",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntcp: [{match: [{port: 31400}]}]",
            "spec.tcp[0].route: Required value: TCP route is required",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntcp: [{match: [{port: 0, destinationSubnets: [10.0.0.0/33]}], route: [{destination: {host: a.com}}]}]",
            "spec.tcp[0].match[0].destinationSubnets[0]",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntls: [{match: [{sniHosts: [b.com]}], route: [{destination: {host: b.com}}]}]",
            "spec.tls[0].match[0].sniHosts[0]: SNI host \"b.com\" is not a compatible subset",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntls: [{match: [{port: 443}], route: [{destination: {host: a.com}}]}]",
            "spec.tls[0].match[0].sniHosts: Required value",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntcp: [{route: [{destination: {host: a.com, port: {number: 99999}}}]}]",
            "spec.tcp[0].route[0].destination.port.number: port must be between 1-65535",
        );
        invalid(
            "VirtualService",
            "tcp: [{route: [{destination: {host: a.com}}]}]",
            "spec.hosts: Required value",
        );
        invalid(
            "VirtualService",
            "hosts: [a.com]\ntcp: [{route: {destination: {host: a.com}}}]",
            "spec.tcp[0].route: invalid type",
        );
    }
}
