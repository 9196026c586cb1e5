//! A Sidecar's `ingress` listeners as the inbound side of its scope (istiod's
//! `buildInboundChainConfigs` and `buildInboundClustersFromSidecar`): when the Sidecar has
//! any, they replace the ports of the workload's service endpoints. Each is a port (its
//! protocol: an HTTP connection manager or a `tcp_proxy`), bound to a listener of its own
//! when `captureMode: NONE` (or, for `DEFAULT`, when the proxy intercepts nothing) on `bind`
//! (else the proxy's IP if it is a global unicast one, else `0.0.0.0`), else a filter chain
//! of `virtualInbound`; its cluster `inbound|PORT||` sends to `defaultEndpoint`
//! (`127.0.0.1:P` there, `0.0.0.0:P` the proxy's IP, none: the original destination). A
//! second listener on a port an earlier one took is skipped, as istiod. Its `tls` is kept
//! for the chains (used where the port's PeerAuthentication mode is DISABLE, as istiod's
//! `buildInboundListeners`). A `unix://` endpoint is not applied (`model::applied` says so).

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Deserialize;

use super::InboundPort;
use crate::proxy::Proxy;
use axon_config::istio::{CaptureMode, ServerTlsSettings, SidecarPort};

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Ingress {
    #[serde(default)]
    port: Option<SidecarPort>,
    #[serde(default)]
    bind: String,
    #[serde(default)]
    capture_mode: CaptureMode,
    #[serde(default)]
    default_endpoint: String,
    #[serde(default)]
    tls: Option<ServerTlsSettings>,
}

/// The inbound ports of the ingress listeners `values` (as validated at load) for `proxy`;
/// `primary`: the primary service of each workload port (istiod's `findOrCreateService`
/// takes the first service target whose port is the listener's).
pub(super) fn inbound_ports(
    values: &[serde_json::Value],
    proxy: &Proxy,
    primary: &BTreeMap<u32, (String, u32)>,
) -> Vec<InboundPort> {
    let mut out: Vec<InboundPort> = Vec::new();
    for value in values {
        let Ok(ingress) = serde_json::from_value::<Ingress>(value.clone()) else {
            continue;
        };
        let Some(port) = ingress.port.filter(|p| p.number != 0) else {
            continue;
        };
        if out.iter().any(|p| p.port == port.number) {
            continue;
        }
        let bound = match ingress.capture_mode {
            CaptureMode::Default => proxy.interception_none,
            mode => mode == CaptureMode::None,
        };
        let bind = bound.then(|| {
            if !ingress.bind.is_empty() {
                ingress.bind.clone()
            } else if is_global_unicast(&proxy.ip) {
                proxy.ip.clone()
            } else {
                "0.0.0.0".to_string()
            }
        });
        let Some(endpoint) = endpoint(&ingress.default_endpoint, &proxy.ip) else {
            continue;
        };
        out.push(InboundPort {
            port: port.number,
            protocol: port.protocol.to_ascii_uppercase(),
            endpoint,
            bind,
            service: primary
                .get(&port.number)
                .map(|(host, _)| (host.clone(), port.number)),
            tls: ingress.tls,
        });
    }
    out.sort();
    out
}

/// Where the cluster of a `defaultEndpoint` sends: `Some(None)` the original destination,
/// `None` an endpoint axon does not serve (a `unix://` one, or unparsable).
#[allow(clippy::option_option)]
fn endpoint(default_endpoint: &str, proxy_ip: &str) -> Option<Option<(String, u32)>> {
    if default_endpoint.is_empty() {
        return Some(None);
    }
    let (host, port) = default_endpoint.rsplit_once(':')?;
    let port: u32 = port.parse().ok()?;
    let address = match host {
        "127.0.0.1" => "127.0.0.1".to_string(),
        "0.0.0.0" => proxy_ip.to_string(),
        _ => return None,
    };
    Some(Some((address, port)))
}

/// Go's `IsGlobalUnicast` for IPv4 and IPv6 alike: not unspecified, loopback, multicast,
/// link-local or broadcast.
fn is_global_unicast(ip: &str) -> bool {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => {
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_multicast()
                || v4.is_link_local()
                || v4.is_broadcast())
        }
        Ok(IpAddr::V6(v6)) => {
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::proxy;

    fn ports(yaml: &str, ip: &str, interception_none: bool) -> Vec<InboundPort> {
        let values: Vec<serde_json::Value> = serde_norway::from_str(yaml).unwrap();
        let mut p = proxy("sidecar", ip, "a", &[]);
        p.interception_none = interception_none;
        inbound_ports(&values, &p, &BTreeMap::new())
    }

    #[test]
    fn ingress_listeners_bind_and_send_as_istiod() {
        let yaml = "- {port: {number: 9080, protocol: HTTP, name: http}, defaultEndpoint: 127.0.0.1:8080, captureMode: NONE, bind: 127.0.0.1}\n- {port: {number: 9090, protocol: TCP, name: tcp}, defaultEndpoint: 0.0.0.0:7070}\n- {port: {number: 9090, protocol: HTTP, name: again}}\n- {port: {number: 9091, protocol: TCP, name: sock}, defaultEndpoint: unix:///var/run/app.sock}\n- {port: {number: 9092, protocol: TCP, name: orig}}\n";
        let got = ports(yaml, "10.0.0.7", false);
        assert_eq!(
            got,
            [
                InboundPort {
                    port: 9080,
                    protocol: "HTTP".into(),
                    endpoint: Some(("127.0.0.1".into(), 8080)),
                    bind: Some("127.0.0.1".into()),
                    service: None,
                    tls: None,
                },
                InboundPort {
                    port: 9090,
                    protocol: "TCP".into(),
                    endpoint: Some(("10.0.0.7".into(), 7070)),
                    bind: None,
                    service: None,
                    tls: None,
                },
                InboundPort {
                    port: 9092,
                    protocol: "TCP".into(),
                    endpoint: None,
                    bind: None,
                    service: None,
                    tls: None,
                },
            ]
        );
        // DEFAULT capture on a proxy that intercepts nothing: bound, on its IP when global.
        let got = ports(
            "- {port: {number: 9090, protocol: TCP, name: t}}\n",
            "10.0.0.7",
            true,
        );
        assert_eq!(got[0].bind.as_deref(), Some("10.0.0.7"));
        let got = ports(
            "- {port: {number: 9090, protocol: TCP, name: t}}\n",
            "127.0.0.2",
            true,
        );
        assert_eq!(got[0].bind.as_deref(), Some("0.0.0.0"));
    }
}
