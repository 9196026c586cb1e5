//! Telemetry on a proxy's listeners, as istiod's listener builder puts it there: each HTTP
//! connection manager gets its side's access logs, tracing, request ID extension and (for
//! proxies run by istio's agent) the metadata exchange and `istio.stats` filters; each TCP
//! proxy its access logs and stats filter; the listeners that take captured or gateway
//! traffic a connection-level log of what no chain took (`NR`). A gateway and a sidecar's
//! outbound are the client side, a sidecar's inbound the server side
//! (`axon_model::telemetry`). The additions are made once per side (`SideTelemetry`) and
//! applied to each listener as it is built (`SideTelemetry::apply`).

mod access_log;
mod stats;
mod tracing;

use stats::plugin_configs;
#[cfg(test)]
use stats::{MX_FILTER, PluginConfig, STATS_FILTER};

use envoy_types::pb::envoy::config::accesslog::v3::AccessLog;
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, RequestIdExtension, http_connection_manager::Tracing,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;
use prost::Message;

use axon_config::mesh::{MeshTelemetry, ProviderService};
use axon_model::proxy::{Proxy, ProxyType};
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::SidecarScope;
use axon_model::telemetry::Side;

const HCM: &str = "envoy.filters.network.http_connection_manager";
const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
const ROUTER: &str = "envoy.filters.http.router";

/// The collectors a proxy can reach: a provider's service resolved to its outbound cluster
/// (istiod's `LookupCluster`: `ns/host` or `host`, at the provider's port), only if the
/// proxy's scope has the service (else its cluster is not in the proxy's CDS and Envoy
/// would reject the listener that names it).
pub(super) struct Collectors<'a> {
    ctx: &'a PushContext,
    scope: &'a SidecarScope,
}

impl Collectors<'_> {
    /// `(hostname, cluster)` of `at`.
    pub(super) fn resolve(&self, at: &ProviderService) -> Option<(String, String)> {
        let (namespace, host) = at.namespace_and_host();
        let service = self.ctx.service(host)?;
        if namespace.is_some_and(|ns| service.namespace != ns) {
            return None;
        }
        self.scope
            .services
            .binary_search_by(|s| s.hostname.as_str().cmp(host))
            .ok()?;
        Some((
            service.hostname.clone(),
            format!("outbound|{}||{}", at.port, service.hostname),
        ))
    }
}

/// What one side of a proxy's listeners is given.
#[derive(Debug, Clone, Default)]
pub(super) struct SideTelemetry {
    /// The access logs of each connection manager and TCP proxy.
    logs: Vec<AccessLog>,
    /// A listener's own log (`NR` only).
    listener_logs: Vec<AccessLog>,
    tracing: Option<Tracing>,
    request_id: Option<RequestIdExtension>,
    /// Run by istio's agent: the metadata exchange filters.
    mx: Option<Side>,
    http_stats: Vec<HttpFilter>,
    tcp_stats: Vec<Filter>,
    /// `HttpConnectionManager` and `TcpProxy` messages of only the fields added, encoded:
    /// appended to a filter's encoding, they merge into it (protobuf's concatenation).
    hcm_extra: Vec<u8>,
    tcp_extra: Vec<u8>,
}

impl SideTelemetry {
    /// `side` of `proxy`, as its scope's Telemetries and the mesh config make it.
    pub(super) fn of(
        ctx: &PushContext,
        proxy: &Proxy,
        scope: &SidecarScope,
        side: Side,
    ) -> SideTelemetry {
        let mesh: &MeshTelemetry = &ctx.mesh.telemetry;
        let telemetry = &scope.telemetry;
        let collectors = Collectors { ctx, scope };
        let logs = access_log::telemetry_logs(telemetry.logs(side), mesh, &collectors)
            .unwrap_or_else(|| access_log::mesh_log(mesh).into_iter().collect());
        let listener_logs = logs.iter().cloned().map(access_log::listener_log).collect();
        let (tracing, request_id) =
            tracing::tracing(telemetry.tracing.as_ref(), mesh, proxy, side, &collectors);
        let (mx, http_stats, tcp_stats) = if proxy.istio_stats {
            let gateway = proxy.proxy_type == ProxyType::Router;
            let configs = plugin_configs(telemetry, mesh, side, gateway);
            (
                Some(side),
                stats::http_filters(&configs),
                stats::network_filters(&configs),
            )
        } else {
            (None, Vec::new(), Vec::new())
        };
        let hcm_extra = HttpConnectionManager {
            access_log: logs.clone(),
            tracing: tracing.clone(),
            request_id_extension: Some(request_id.clone()),
            ..Default::default()
        }
        .encode_to_vec();
        let tcp_extra = TcpProxy {
            access_log: logs.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        SideTelemetry {
            logs,
            listener_logs,
            tracing,
            request_id: Some(request_id),
            mx,
            http_stats,
            tcp_stats,
            hcm_extra,
            tcp_extra,
        }
    }

    /// Gives `listener` this side's telemetry; `own_log`: it takes captured or gateway
    /// traffic, and logs what no chain took.
    pub(super) fn apply(&self, listener: &mut Listener, own_log: bool) {
        for chain in listener
            .filter_chains
            .iter_mut()
            .chain(listener.default_filter_chain.as_mut())
        {
            self.apply_chain(chain);
        }
        if own_log {
            listener
                .access_log
                .extend(self.listener_logs.iter().cloned());
        }
    }

    fn apply_chain(&self, chain: &mut FilterChain) {
        let mut i = 0;
        let is_tcp_chain = !chain.filters.iter().any(|f| f.name == HCM);
        while i < chain.filters.len() {
            let name = chain.filters[i].name.clone();
            if name == HCM {
                if let Some(filter::ConfigType::TypedConfig(any)) =
                    &mut chain.filters[i].config_type
                {
                    if self.mx.is_some() || !self.http_stats.is_empty() {
                        self.rebuild_hcm(&mut any.value);
                    } else {
                        any.value.extend_from_slice(&self.hcm_extra);
                    }
                }
            } else if name == TCP_PROXY {
                if let Some(filter::ConfigType::TypedConfig(any)) =
                    &mut chain.filters[i].config_type
                {
                    any.value.extend_from_slice(&self.tcp_extra);
                }
                let stats = self.tcp_stats.len();
                chain.filters.splice(i..i, self.tcp_stats.iter().cloned());
                i += stats;
            }
            i += 1;
        }
        if is_tcp_chain
            && self.mx == Some(Side::Server)
            && chain.filters.iter().any(|f| f.name == TCP_PROXY)
        {
            chain.filters.insert(0, stats::tcp_mx());
        }
    }

    /// A connection manager of a proxy run by istio's agent: decoded, given the metadata
    /// exchange first and the stats filters before the router, as istiod orders them.
    fn rebuild_hcm(&self, value: &mut Vec<u8>) {
        let Ok(mut hcm) = HttpConnectionManager::decode(value.as_slice()) else {
            value.extend_from_slice(&self.hcm_extra);
            return;
        };
        if let Some(side) = self.mx {
            hcm.http_filters.insert(0, stats::http_mx(side));
        }
        let router = hcm
            .http_filters
            .iter()
            .position(|f| f.name == ROUTER)
            .unwrap_or(hcm.http_filters.len());
        hcm.http_filters
            .splice(router..router, self.http_stats.iter().cloned());
        hcm.access_log.extend(self.logs.iter().cloned());
        if self.tracing.is_some() {
            hcm.tracing = self.tracing.clone();
        }
        hcm.request_id_extension = self.request_id.clone();
        *value = hcm.encode_to_vec();
    }
}

/// Both sides of a proxy.
pub(super) struct ProxyTelemetry {
    pub client: SideTelemetry,
    pub server: SideTelemetry,
}

impl ProxyTelemetry {
    pub(super) fn of(ctx: &PushContext, proxy: &Proxy, scope: &SidecarScope) -> ProxyTelemetry {
        ProxyTelemetry {
            client: SideTelemetry::of(ctx, proxy, scope, Side::Client),
            server: if proxy.proxy_type == ProxyType::Sidecar {
                SideTelemetry::of(ctx, proxy, scope, Side::Server)
            } else {
                SideTelemetry::default()
            },
        }
    }
}

#[cfg(test)]
mod tests;
