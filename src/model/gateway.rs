//! The merged view of every Gateway that selects one proxy: servers grouped by port.
//!
//! istiod's `MergedGateway`: LDS makes one listener per port, RDS one route configuration
//! (`http.PORT`) per port, from the same grouping.

use std::collections::BTreeMap;

use super::config::Config;
use super::host;
use super::istio::Server;
use super::proxy::Proxy;
use super::push_context::PushContext;

/// Protocols served through an HTTP connection manager. Others are skipped for now.
pub(super) const HTTP_PROTOCOLS: [&str; 3] = ["HTTP", "HTTP2", "GRPC"];

/// One server of one Gateway.
#[derive(Debug, Clone)]
pub struct GatewayServer<'a> {
    /// `namespace/name` of the Gateway, as VirtualServices reference it.
    pub gateway: String,
    pub namespace: &'a str,
    pub server: &'a Server,
}

impl GatewayServer<'_> {
    /// The hosts this server serves of a VirtualService in `vs_namespace` routing
    /// `vs_hosts` (resolved), as istiod's `NamesForNamespace` then `Intersection`: the server
    /// hosts whose namespace part admits the VirtualService's (`./` is the Gateway's own
    /// namespace, `*/` or none any), intersected with the VirtualService's hosts, each pair
    /// giving the more specific of the two (`*.example.com` on a server for `a.example.com`
    /// is `a.example.com`), lowercased, without repeats, in the server's order.
    pub fn hosts_for(&self, vs_hosts: &[String], vs_namespace: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for h in &self.server.hosts {
            let (ns, server_host) = host::split_namespaced(h);
            let ns_ok = match ns {
                "*" => true,
                "." => vs_namespace == self.namespace,
                ns => ns == vs_namespace,
            };
            if !ns_ok {
                continue;
            }
            for vs_host in vs_hosts {
                // `a` is a subset of `b` when `b` matches it.
                let picked = if host::matches(vs_host, server_host) {
                    server_host
                } else if host::matches(server_host, vs_host) {
                    vs_host.as_str()
                } else {
                    continue;
                };
                let picked = picked.to_ascii_lowercase();
                if !out.contains(&picked) {
                    out.push(picked);
                }
            }
        }
        out
    }
}

/// HTTP servers by port, for the gateways whose selector matches `proxy`.
#[derive(Debug, Default)]
pub struct MergedGateway<'a> {
    pub ports: BTreeMap<u32, Vec<GatewayServer<'a>>>,
    /// The bind address per port (the first server's `bind`, else `0.0.0.0`).
    pub bind: BTreeMap<u32, &'a str>,
}

pub fn merge<'a>(ctx: &'a PushContext, proxy: &Proxy) -> MergedGateway<'a> {
    let mut merged = MergedGateway::default();
    for (config, gateway) in ctx.gateways() {
        if !proxy.matches_selector(&gateway.selector) {
            continue;
        }
        for server in &gateway.servers {
            let Some(port) = &server.port else { continue };
            if !HTTP_PROTOCOLS.contains(&port.protocol.to_ascii_uppercase().as_str()) {
                continue;
            }
            merged
                .bind
                .entry(port.number)
                .or_insert(if server.bind.is_empty() {
                    "0.0.0.0"
                } else {
                    &server.bind
                });
            merged
                .ports
                .entry(port.number)
                .or_default()
                .push(server_of(config, server));
        }
    }
    merged
}

fn server_of<'a>(config: &'a Config, server: &'a Server) -> GatewayServer<'a> {
    GatewayServer {
        gateway: format!("{}/{}", config.namespace(), config.name()),
        namespace: config.namespace(),
        server,
    }
}
