//! The merged view of every Gateway that selects one proxy, as istiod's `MergeGateways`:
//! servers grouped by the port they listen on (the server port mapped to the gateway
//! workload's port, istiod's `resolvePorts`), what kind of server each is (plaintext HTTP,
//! HTTPS terminated, opaque TCP, TLS terminated, passthrough), their route configuration
//! names (`http.PORT`, `https.PORT.PORT_NAME.GATEWAY.NAMESPACE`), their SNI hosts, and the
//! servers istiod skips (a plaintext and a TLS server on one port and bind, two TLS servers
//! for one host, two HTTPS servers with one route name).
//!
//! LDS makes one listener per port and bind from it (`xds::lds::gateway`), RDS one route
//! configuration per route name (`xds::rds`).

use std::collections::{BTreeMap, BTreeSet};

use super::proxy::Proxy;
use super::push_context::PushContext;
use axon_config::config::Config;
use axon_config::host;
use axon_config::istio::{Server, ServerTlsMode, ServerTlsSettings};

/// A server port's protocol, as istiod's `protocol.Parse` sorts it for gateways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerProtocol {
    /// HTTP, HTTP2, HTTP_PROXY, GRPC, GRPC-WEB: an HTTP connection manager.
    Http,
    /// HTTPS.
    Https,
    /// TLS.
    Tls,
    /// TCP and the other opaque protocols (MONGO, REDIS, MYSQL).
    Tcp,
    /// Anything else (validation rejects it).
    Unsupported,
}

impl ServerProtocol {
    pub fn parse(protocol: &str) -> ServerProtocol {
        match protocol.to_ascii_lowercase().as_str() {
            "http" | "http2" | "http_proxy" | "grpc" | "grpc-web" => Self::Http,
            "https" => Self::Https,
            "tls" => Self::Tls,
            "tcp" | "mongo" | "redis" | "mysql" => Self::Tcp,
            _ => Self::Unsupported,
        }
    }
}

/// How a server's connections are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Plaintext HTTP (its `tls` can only ask for `httpsRedirect`).
    Http,
    /// HTTPS whose TLS the gateway terminates: an HTTP connection manager behind TLS.
    HttpsTerminated,
    /// Opaque TCP (no `tls`): `tcp` routes.
    Tcp,
    /// TLS (or TCP) whose TLS the gateway terminates: `tcp` routes behind TLS.
    TlsTerminated,
    /// PASSTHROUGH: `tls` routes by SNI, the TLS bytes forwarded.
    Passthrough,
    /// AUTO_PASSTHROUGH: forwarded by SNI to the cluster the SNI names.
    AutoPassthrough,
}

/// One server of one Gateway, on the port it listens on.
#[derive(Debug, Clone)]
pub struct GatewayServer<'a> {
    /// `namespace/name` of the Gateway, as VirtualServices reference it.
    pub gateway: String,
    pub namespace: &'a str,
    pub server: &'a Server,
    /// The server's `tls`, typed.
    pub tls: Option<ServerTlsSettings>,
    /// The port the gateway listens on for it (the server's port, mapped to the gateway
    /// workload's port when a Service of the gateway maps it).
    pub listen_port: u32,
    /// Its route configuration's name (HTTP and terminated HTTPS servers), else empty.
    pub route_name: String,
    /// istiod's `GetSNIHostsForServer`: its hosts without their namespace part, sorted, once
    /// each (TLS servers only).
    pub sni_hosts: Vec<String>,
}

impl GatewayServer<'_> {
    pub fn port_number(&self) -> u32 {
        self.server.port.as_ref().map_or(0, |p| p.number)
    }

    pub fn protocol(&self) -> ServerProtocol {
        ServerProtocol::parse(self.server.port.as_ref().map_or("", |p| &p.protocol))
    }

    /// The server's kind (istiod's `IsHTTPServer`, `IsPassThroughServer`,
    /// `IsHTTPSServerWithTLSTermination`).
    pub fn kind(&self) -> ServerKind {
        kind_of(self.protocol(), self.tls.as_ref())
    }

    /// Whether `httpsRedirect` is set.
    pub fn https_redirect(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.https_redirect)
    }

    /// The hosts this server serves of a VirtualService in `vs_namespace` routing
    /// `vs_hosts` (resolved), as istiod's `NamesForNamespace` then `Intersection`: the server
    /// hosts whose namespace part admits the VirtualService's (`./` is the Gateway's own
    /// namespace, `*/` or none any), intersected with the VirtualService's hosts, each pair
    /// giving the more specific of the two (`*.example.com` on a server for `a.example.com`
    /// is `a.example.com`), lowercased, without repeats, in the server's order.
    pub fn hosts_for(&self, vs_hosts: &[String], vs_namespace: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for h in &self.server.hosts {
            let Some(server_host) = self.admits(h, vs_namespace) else {
                continue;
            };
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

    /// Whether a VirtualService in `vs_namespace` routing `vs_hosts` has a host this server
    /// serves (istiod's `pickMatchingGatewayHosts`, for TCP and TLS routes: host patterns
    /// that overlap).
    pub fn matches_any_host(&self, vs_hosts: &[String], vs_namespace: &str) -> bool {
        self.server.hosts.iter().any(|h| {
            self.admits(h, vs_namespace)
                .is_some_and(|sh| vs_hosts.iter().any(|vh| host::intersects(sh, vh)))
        })
    }

    /// The host part of server host `h` when its namespace part admits `vs_namespace`.
    fn admits<'h>(&self, h: &'h str, vs_namespace: &str) -> Option<&'h str> {
        let (ns, server_host) = host::split_namespaced(h);
        let ok = match ns {
            "*" => true,
            "." => vs_namespace == self.namespace,
            ns => ns == vs_namespace,
        };
        ok.then_some(server_host)
    }
}

fn kind_of(protocol: ServerProtocol, tls: Option<&ServerTlsSettings>) -> ServerKind {
    match (protocol, tls) {
        (ServerProtocol::Http, _) => ServerKind::Http,
        (_, None) => ServerKind::Tcp,
        (_, Some(t)) if t.mode == ServerTlsMode::Passthrough => ServerKind::Passthrough,
        (_, Some(t)) if t.mode == ServerTlsMode::AutoPassthrough => ServerKind::AutoPassthrough,
        (ServerProtocol::Https, Some(_)) => ServerKind::HttpsTerminated,
        (_, Some(_)) => ServerKind::TlsTerminated,
    }
}

/// istiod's `ServerPort`: a listener's port, the protocol of its first server, its bind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ServerPort {
    pub number: u32,
    pub protocol: String,
    /// The bind address; empty for the wildcard.
    pub bind: String,
}

impl ServerPort {
    /// The address the listener binds (`0.0.0.0` for none).
    pub fn bind_address(&self) -> &str {
        if self.bind.is_empty() {
            "0.0.0.0"
        } else {
            &self.bind
        }
    }
}

/// The servers merged on one [`ServerPort`].
#[derive(Debug, Clone)]
pub struct MergedServers<'a> {
    pub port: ServerPort,
    pub servers: Vec<GatewayServer<'a>>,
    /// The route configuration of a plaintext HTTP port.
    pub route_name: String,
}

/// The servers of the Gateways that select one proxy, merged as istiod merges them.
#[derive(Debug, Default)]
pub struct MergedGateway<'a> {
    /// Per server port, in the order the ports were first seen (istiod's `ServerPorts`).
    pub ports: Vec<MergedServers<'a>>,
    /// The HTTP and terminated-HTTPS servers of each route configuration.
    pub by_route_name: BTreeMap<String, Vec<GatewayServer<'a>>>,
    /// The servers not served, each with why (istiod logs them and counts them in
    /// `pilot_total_rejected_configs`).
    pub skipped: Vec<String>,
}

impl MergedGateway<'_> {
    /// Every merged server.
    pub fn servers(&self) -> impl Iterator<Item = &GatewayServer<'_>> {
        self.ports.iter().flat_map(|m| m.servers.iter())
    }
}

/// Whether the secret `credential_name` of a terminating server is there to serve to a
/// gateway proxy of `proxy_namespace`: a valid certificate and key in the Secret that SDS
/// would answer `kubernetes://NAME` with (the proxy's namespace, as istiod resolves it;
/// `model::secrets`). istiod does not serve a terminating server's filter chain whose
/// credential is missing.
pub fn credential_available(
    ctx: &PushContext,
    proxy_namespace: &str,
    credential_name: &str,
) -> bool {
    ctx.secrets
        .credential(proxy_namespace, credential_name, false)
        .is_ok()
}

/// The credentials of the servers the gateway terminates TLS for (`credentialName`,
/// `credentialNames`), each once.
pub fn terminated_credentials<'a: 'b, 'b>(
    servers: impl Iterator<Item = &'b GatewayServer<'a>>,
) -> BTreeSet<String> {
    servers
        .filter(|s| {
            matches!(
                s.kind(),
                ServerKind::HttpsTerminated | ServerKind::TlsTerminated
            )
        })
        .filter_map(|s| s.tls.as_ref())
        .flat_map(|tls| std::iter::once(&tls.credential_name).chain(&tls.credential_names))
        .filter(|c| !c.is_empty())
        .cloned()
        .collect()
}

/// The merged gateway of `proxy`: every server of the Gateways that apply to it
/// ([`gateways_for`]), on each port it listens on there.
pub fn merge<'a>(ctx: &'a PushContext, proxy: &Proxy) -> MergedGateway<'a> {
    let mut m = Merger::default();
    for selected in gateways_for(ctx, proxy) {
        for server in &selected.gateway.servers {
            let Some(port) = &server.port else { continue };
            for listen_port in selected.listen_ports(port.number) {
                m.add(server_of(selected.config, server, listen_port));
            }
        }
    }
    m.done
}

/// The gateway workload's Service ports at its address: service port → the port its
/// endpoint listens on, the first of each (istiod's `resolvePorts` with the legacy
/// selector: the first Service port that matches, else the port as is). A Gateway API
/// Gateway's ports go through its own Services only ([`SelectedGateway::listen_ports`]).
pub fn workload_ports(ctx: &PushContext, proxy: &Proxy) -> BTreeMap<u32, u32> {
    let mut out = BTreeMap::new();
    for (_, service_port, endpoint_port) in ctx
        .endpoints
        .by_address
        .get(&proxy.ip)
        .into_iter()
        .flatten()
    {
        out.entry(*service_port).or_insert(*endpoint_port);
    }
    out
}

fn resolve_port(number: u32, ports: &BTreeMap<u32, u32>) -> u32 {
    ports
        .get(&number)
        .copied()
        .filter(|p| *p != 0)
        .unwrap_or(number)
}

fn server_of<'a>(config: &'a Config, server: &'a Server, listen_port: u32) -> GatewayServer<'a> {
    let tls = server.tls_settings();
    let mut s = GatewayServer {
        gateway: format!("{}/{}", config.namespace(), config.name()),
        namespace: config.namespace(),
        server,
        tls,
        listen_port,
        route_name: String::new(),
        sni_hosts: Vec::new(),
    };
    s.route_name = route_name(&s, config);
    if s.tls.is_some() {
        let hosts: BTreeSet<String> = server
            .hosts
            .iter()
            .map(|h| host::split_namespaced(h).1.to_string())
            .collect();
        s.sni_hosts = hosts.into_iter().collect();
    }
    s
}

/// istiod's `gatewayRDSRouteName`: `http.PORT` (the listening port) for HTTP servers,
/// `https.PORT.PORT_NAME.GATEWAY.NAMESPACE` (the server's port) for terminated HTTPS, with
/// `.BIND` when the server binds an address; none for the others.
fn route_name(s: &GatewayServer, config: &Config) -> String {
    let bind = if s.server.bind.is_empty() {
        String::new()
    } else {
        format!(".{}", s.server.bind)
    };
    match s.kind() {
        ServerKind::Http => format!("http.{}{bind}", s.listen_port),
        ServerKind::HttpsTerminated => format!(
            "https.{}.{}.{}.{}{bind}",
            s.port_number(),
            s.server.port.as_ref().map_or("", |p| p.name.as_str()),
            config.name(),
            config.namespace()
        ),
        _ => String::new(),
    }
}

/// istiod's `mergeGateways` loop state.
#[derive(Default)]
struct Merger<'a> {
    done: MergedGateway<'a>,
    /// Listening ports seen.
    seen: BTreeSet<u32>,
    /// The plaintext server port of each listening port.
    plaintext: BTreeMap<u32, ServerPort>,
    /// Per listening port, each TLS host and its bind (istiod's `CheckDuplicates`).
    tls_hosts: BTreeMap<u32, BTreeMap<String, String>>,
}

impl<'a> Merger<'a> {
    fn add(&mut self, s: GatewayServer<'a>) {
        let port = s.listen_port;
        let bind = s.server.bind.clone();
        let what = || {
            format!(
                "server {:?} of gateway {} on port {port}",
                s.server.port.as_ref().map_or("", |p| p.name.as_str()),
                s.gateway
            )
        };
        if s.tls.is_some() {
            let known = self.tls_hosts.entry(port).or_default();
            let duplicates: Vec<&String> = s
                .server
                .hosts
                .iter()
                .filter(|h| known.get(*h).is_some_and(|b| *b == bind))
                .collect();
            if !duplicates.is_empty() {
                let why = format!("{}: duplicate host names {duplicates:?}", what());
                self.done.skipped.push(why);
                return;
            }
            for h in &s.server.hosts {
                known.insert(h.clone(), bind.clone());
            }
        }
        let server_port = ServerPort {
            number: port,
            protocol: s
                .server
                .port
                .as_ref()
                .map_or(String::new(), |p| p.protocol.clone()),
            bind: bind.clone(),
        };
        let protocol = s.protocol();
        let is_tls_server = s.tls.is_some() && protocol != ServerProtocol::Http;
        let is_http_server = matches!(s.kind(), ServerKind::Http | ServerKind::HttpsTerminated);
        if !self.seen.insert(port) {
            if let Some(current) = self.plaintext.get(&port).cloned() {
                let same_bind = current.bind == bind;
                let mergeable = protocol == ServerProtocol::Http
                    && ServerProtocol::parse(&current.protocol) == ServerProtocol::Http;
                if !mergeable && same_bind {
                    let why = format!(
                        "{}: conflicts with the {} server there",
                        what(),
                        current.protocol
                    );
                    self.done.skipped.push(why);
                    return;
                }
                if s.route_name.is_empty() && same_bind {
                    self.done.skipped.push(format!("{}: no route name", what()));
                    return;
                }
                if same_bind {
                    self.append(&current, s);
                } else if let Some(i) = self.index_of(&server_port) {
                    self.done.ports[i].route_name = s.route_name.clone();
                    self.append(&server_port, s);
                } else {
                    self.add_new(server_port, s, is_tls_server, is_http_server);
                }
                return;
            }
            if !is_tls_server {
                self.plaintext.insert(port, server_port.clone());
                if is_http_server {
                    self.done
                        .by_route_name
                        .insert(s.route_name.clone(), vec![s.clone()]);
                }
                let route_name = s.route_name.clone();
                self.done.ports.push(MergedServers {
                    port: server_port,
                    servers: vec![s],
                    route_name,
                });
                return;
            }
            if is_http_server {
                if s.route_name.is_empty() || self.done.by_route_name.contains_key(&s.route_name) {
                    let why = format!("{}: route name {:?} is not unique", what(), s.route_name);
                    self.done.skipped.push(why);
                    return;
                }
                self.done
                    .by_route_name
                    .insert(s.route_name.clone(), vec![s.clone()]);
            }
            match self.index_of(&server_port) {
                Some(_) => self.append(&server_port, s),
                None => self.done.ports.push(MergedServers {
                    port: server_port,
                    servers: vec![s],
                    route_name: String::new(),
                }),
            }
            return;
        }
        self.add_new(server_port, s, is_tls_server, is_http_server);
    }

    /// istiod's `addPlainTextServer`: a new server port.
    fn add_new(&mut self, port: ServerPort, s: GatewayServer<'a>, tls: bool, http: bool) {
        if !tls {
            self.plaintext.insert(port.number, port.clone());
        }
        if http {
            self.done
                .by_route_name
                .insert(s.route_name.clone(), vec![s.clone()]);
        }
        let route_name = s.route_name.clone();
        self.done.ports.push(MergedServers {
            port,
            servers: vec![s],
            route_name,
        });
    }

    fn append(&mut self, port: &ServerPort, s: GatewayServer<'a>) {
        if matches!(s.kind(), ServerKind::Http) {
            self.done
                .by_route_name
                .entry(s.route_name.clone())
                .or_default()
                .push(s.clone());
        }
        if let Some(i) = self.index_of(port) {
            self.done.ports[i].servers.push(s);
        }
    }

    fn index_of(&self, port: &ServerPort) -> Option<usize> {
        self.done.ports.iter().position(|m| m.port == *port)
    }
}

mod credentials;
mod selection;
pub use credentials::{MissingCredential, missing_credentials};
pub use selection::{SelectedGateway, gateways_for};

#[cfg(test)]
mod tests;
