//! `SidecarScope`: what one proxy sees, and the configs its xDS depends on.
//!
//! For a sidecar, the Sidecar resource that selects it (by `workloadSelector` in its namespace,
//! else its namespace's default, else the root namespace's) restricts the services and
//! VirtualServices it imports, per egress listener; without one it imports `*/*`. For a
//! gateway, everything exported to its namespace. Either way, `exportTo` applies.
//!
//! `deps` is the set of configs that the proxy's generated xDS reads: a change to any other
//! config cannot change what it would be sent, so it is not pushed (istiod's ProxyNeedsPush).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::gateway;
use super::memo::{Layer, Table};
use super::proxy::{Proxy, ProxyType};
use super::push_context::PushContext;
use super::push_request::PushRequest;
use super::service::Service;
use axon_config::config::{Config, ConfigKey};
use axon_config::host;
use axon_config::istio::{CaptureMode, IstioEgressListener, VirtualService};

mod inbound;
mod ingress;
mod outbound;

use inbound::inbound_ports;

pub use outbound::OutboundPolicy;

/// One `namespace/host` import of an egress listener.
#[derive(Debug, Clone, PartialEq)]
pub struct HostImport {
    /// `*` any namespace, `~` none, else a namespace (`.` is resolved to the proxy's).
    pub namespace: String,
    pub host: String,
}

impl HostImport {
    fn parse(reference: &str, proxy_namespace: &str) -> HostImport {
        let (ns, host) = host::split_namespaced(reference);
        let namespace = if ns == "." { proxy_namespace } else { ns };
        HostImport {
            namespace: namespace.to_string(),
            host: host.to_string(),
        }
    }

    /// Whether a config in `namespace` with `config_host` is imported.
    pub fn imports(&self, namespace: &str, config_host: &str) -> bool {
        let ns_ok = match self.namespace.as_str() {
            "*" => true,
            "~" => false,
            ns => ns == namespace,
        };
        ns_ok && host::intersects(&self.host, config_host)
    }
}

/// An egress listener of the scope, with what it imports.
#[derive(Debug, Clone)]
pub struct EgressScope {
    /// `None` for the catch-all listener (outbound listeners per service port).
    pub port: Option<u32>,
    /// The declared port's protocol (`port.protocol`, upper-cased; empty: none declared):
    /// an HTTP one gets an HTTP listener, another a TCP one (istiod's
    /// `ModelProtocolToListenerProtocol`).
    pub protocol: String,
    pub bind: Option<String>,
    /// `captureMode: NONE`: a bound listener that applications call directly.
    pub capture_none: bool,
    pub imports: Vec<HostImport>,
    pub services: Vec<Arc<Service>>,
    /// Mesh VirtualServices imported by this listener, in istiod's order for the proxy.
    pub virtual_services: Vec<Arc<Config>>,
}

impl EgressScope {
    fn imports(&self, namespace: &str, host: &str) -> bool {
        self.imports.iter().any(|i| i.imports(namespace, host))
    }

    /// Whether the listener imports VirtualService `vs` (of `config`): one of its hosts
    /// overlaps an import of its namespace (istiod's `VSMatches`); one made from Gateway API
    /// routes needs a host within an import (`*.com` is not imported by `a.com`), as a
    /// service does.
    fn imports_virtual_service(&self, config: &Config, vs: &VirtualService) -> bool {
        let ns = config.namespace();
        vs.hosts.iter().any(|h| {
            let h = vs.resolve_host(h, ns);
            if vs.gateway_semantics() {
                self.imports
                    .iter()
                    .any(|i| i.imports(ns, &h) && host::matches(&i.host, &h))
            } else {
                self.imports(ns, &h)
            }
        })
    }

    /// The imported VirtualServices that may route `hostname` for this sidecar, as istiod
    /// picks them (`MostSpecificHostMatch` over the VirtualServices in the proxy's order):
    /// those that name it exactly, in that order (the first with a route for the proxy
    /// wins; the others' virtual hosts are istiod's duplicates), else the first with the
    /// most specific wildcard matching it.
    pub fn virtual_services_for(&self, hostname: &str) -> Vec<(&Config, &VirtualService)> {
        let mut exact = Vec::new();
        let mut best: Option<(usize, &Config, &VirtualService)> = None;
        for c in &self.virtual_services {
            let axon_config::config::Spec::VirtualService(vs) = &c.spec else {
                continue;
            };
            for h in &vs.hosts {
                let h = vs.resolve_host(h, c.namespace());
                if h == hostname {
                    exact.push((c.as_ref(), vs));
                    break;
                }
                // A longer wildcard is more specific; the first of equals wins.
                if h.starts_with('*')
                    && host::matches(&h, hostname)
                    && best.is_none_or(|(len, _, _)| h.len() > len)
                {
                    best = Some((h.len(), c.as_ref(), vs));
                }
            }
        }
        if exact.is_empty() {
            exact.extend(best.map(|(_, c, vs)| (c, vs)));
        }
        exact
    }
}

/// A port of the proxy's own workload: from the service endpoints at its IP, or from the
/// Sidecar's `ingress` listeners when it has any (`ingress`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct InboundPort {
    pub port: u32,
    pub protocol: String,
    /// Where its cluster `inbound|PORT||` sends: an address and port (`127.0.0.1:PORT` for
    /// a service endpoint's port), or none: the original destination (an ingress listener
    /// without `defaultEndpoint`).
    pub endpoint: Option<(String, u32)>,
    /// The address of a listener of its own (an ingress listener bound to its port); none:
    /// a filter chain of `virtualInbound`.
    pub bind: Option<String>,
    /// The service whose DestinationRule gives the cluster its connection pool, and the port
    /// that rule's `portLevelSettings` are looked up by (istiod's `buildInboundCluster`: the
    /// port's first service target and its service port; for an ingress listener, the
    /// listener's port); none: no service targets the port.
    pub service: Option<(String, u32)>,
    /// A Sidecar ingress listener's `tls`: the TLS its chains terminate where the port's
    /// PeerAuthentication mode is DISABLE.
    pub tls: Option<axon_config::istio::ServerTlsSettings>,
}

#[derive(Debug, Clone, Default)]
pub struct SidecarScope {
    /// Proxies with the same key see the same world: they share this scope and everything
    /// generated from it (the memo of the context).
    pub key: String,
    /// The Sidecar resource in force, if any.
    pub sidecar: Option<ConfigKey>,
    pub egress: Vec<EgressScope>,
    /// Every service some egress listener imports, in host order.
    pub services: Vec<Arc<Service>>,
    pub inbound: Vec<InboundPort>,
    /// What becomes of traffic to destinations the sidecar does not know.
    pub outbound: OutboundPolicy,
    /// The configs generation reads for this proxy.
    pub deps: BTreeSet<ConfigKey>,
    /// A gateway's terminating credentials and whether each is there to serve (a server
    /// whose credential is missing gets no filter chain): a Secret change pushes more than
    /// SDS only when this changes.
    pub credentials: BTreeMap<String, bool>,
    /// What a sidecar's inbound ports accept (its PeerAuthentications, composed).
    pub mtls: crate::peer_authn::MergedPeerAuthn,
    /// Its access logs, tracing and metrics (its Telemetries, merged with the mesh's).
    pub telemetry: crate::telemetry::ProxyTelemetry,
}

impl SidecarScope {
    pub fn compute(ctx: &PushContext, proxy: &Proxy) -> SidecarScope {
        let mut scope = match proxy.proxy_type {
            ProxyType::Sidecar => sidecar_scope(ctx, proxy),
            ProxyType::Router => gateway_scope(ctx, proxy),
        };
        scope.key = scope_key(ctx, proxy);
        if proxy.proxy_type == ProxyType::Sidecar {
            scope.mtls = ctx.peer_authn.for_workload(&proxy.namespace, &proxy.labels);
        }
        // Its JWT filter reads the RequestAuthentications that apply and their fetched JWKS.
        scope.deps.extend(request_authn_deps(ctx, proxy));
        // Its access logs, tracing and stats filter, the Telemetries that apply.
        let telemetries = ctx.telemetry.for_workload(&proxy.namespace, &proxy.labels);
        scope.deps.extend(telemetries.iter().map(|c| c.key.clone()));
        scope.telemetry = crate::telemetry::resolve_configs(&telemetries, &ctx.mesh.telemetry);
        scope
    }

    /// The scope of `proxy` in `ctx`, computed once per distinct view and shared.
    pub fn of(ctx: &PushContext, proxy: &Proxy) -> Arc<SidecarScope> {
        SidecarScope::of_key(ctx, proxy, &scope_key(ctx, proxy))
    }

    /// [`Self::of`], the proxy's scope key in `ctx` known to be `key`.
    fn of_key(ctx: &PushContext, proxy: &Proxy, key: &str) -> Arc<SidecarScope> {
        ctx.memo
            .layer::<Scopes>()
            .0
            .get_or_compute(key, || SidecarScope::compute(ctx, proxy))
    }

    /// The proxy's scope in `new`, moving from `old` (its previous context and scope): the old
    /// scope itself when `new` was made from `old` by an endpoint-only request that left the
    /// proxy's own workload ports alone (such a context shares every index a scope reads but
    /// the endpoints, and a scope reads endpoints only at the proxy's IP); the scope of the
    /// old scope's key when `new` shares every index the key reads (a VirtualService edit that
    /// left the `sourceLabels` alone: the key is not computed again for each proxy); else
    /// [`Self::of`].
    pub fn next(
        old: Option<(&PushContext, &Arc<SidecarScope>)>,
        new: &PushContext,
        proxy: &Proxy,
    ) -> Arc<SidecarScope> {
        match old {
            Some((ctx, scope))
                if new.endpoint_changes_since(ctx).is_some()
                    && ctx.endpoints.by_address.get(&proxy.ip)
                        == new.endpoints.by_address.get(&proxy.ip) =>
            {
                scope.clone()
            }
            Some((ctx, scope)) if !scope.key.is_empty() && same_key_inputs(ctx, new) => {
                SidecarScope::of_key(new, proxy, &scope.key)
            }
            _ => SidecarScope::of(new, proxy),
        }
    }

    /// The egress listener of an explicit port, if the Sidecar declares one.
    pub fn egress_for_port(&self, port: u32) -> Option<&EgressScope> {
        self.egress.iter().find(|e| e.port == Some(port))
    }

    /// The catch-all egress listener.
    pub fn default_egress(&self) -> Option<&EgressScope> {
        self.egress.iter().find(|e| e.port.is_none())
    }
}

/// The scopes of one context by their key: the model's layer of the context's memo.
#[derive(Default)]
struct Scopes(Table<Box<str>, SidecarScope>);

impl Layer for Scopes {
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// The RequestAuthentications that apply to `proxy` and the fetched JWKS their rules read.
fn request_authn_deps(ctx: &PushContext, proxy: &Proxy) -> Vec<ConfigKey> {
    if ctx.request_authn.is_empty() {
        return Vec::new();
    }
    let mut deps = ctx.request_authn.keys_for(&proxy.namespace, &proxy.labels);
    deps.extend(
        ctx.request_authn
            .rules_for(&proxy.namespace, &proxy.labels)
            .into_iter()
            .filter_map(|r| r.jwks_source())
            .map(|s| crate::request_authn::jwks_config_key(&s)),
    );
    deps
}

/// Whether [`scope_key`] reads the same in `old` and `new`: every index it reads is shared
/// (the builder reuses the index of each kind a request did not touch), and the
/// VirtualServices, when rebuilt, select the same `sourceLabels`.
fn same_key_inputs(old: &PushContext, new: &PushContext) -> bool {
    Arc::ptr_eq(&old.mesh, &new.mesh)
        && Arc::ptr_eq(&old.services, &new.services)
        && Arc::ptr_eq(&old.endpoints, &new.endpoints)
        && Arc::ptr_eq(&old.destination_rules, &new.destination_rules)
        && Arc::ptr_eq(&old.gateways, &new.gateways)
        && Arc::ptr_eq(&old.sidecars, &new.sidecars)
        && Arc::ptr_eq(&old.peer_authn, &new.peer_authn)
        && Arc::ptr_eq(&old.authz, &new.authz)
        && Arc::ptr_eq(&old.request_authn, &new.request_authn)
        && Arc::ptr_eq(&old.telemetry, &new.telemetry)
        && (Arc::ptr_eq(&old.virtual_services, &new.virtual_services)
            || old.virtual_services.source_selectors == new.virtual_services.source_selectors)
}

/// What makes two proxies see the same world: their type, namespace, the Sidecar (or the
/// Gateways) that select them, how they intercept, their idle timeout, what they ask to be
/// generated by, their own workload's ports, which VirtualService `sourceLabels` their labels
/// include (the match blocks that apply to them), which DestinationRules select them, for
/// a sidecar, the mutual TLS its PeerAuthentications give its inbound ports, the
/// AuthorizationPolicies and which RequestAuthentications apply to it (its JWT filter).
fn scope_key(ctx: &PushContext, proxy: &Proxy) -> String {
    let selected = match proxy.proxy_type {
        // And, for a Sidecar with ingress listeners, the proxy's IP (their default bind and
        // `0.0.0.0:PORT` endpoints).
        ProxyType::Sidecar => select_sidecar(ctx, proxy)
            .map(|(c, sc)| {
                if sc.ingress.is_empty() {
                    c.key.to_string()
                } else {
                    format!("{}@{}", c.key, proxy.ip)
                }
            })
            .unwrap_or_default(),
        // And the ports its own Service maps (the ports its listeners listen on).
        ProxyType::Router => format!(
            "{}|{:?}",
            gateway::gateways_for(ctx, proxy)
                .iter()
                .map(gateway::SelectedGateway::key_part)
                .collect::<Vec<_>>()
                .join(","),
            gateway::workload_ports(ctx, proxy)
        ),
    };
    // With the primary service of each port: its DestinationRule shapes the inbound cluster.
    let inbound: Vec<String> = inbound_ports(ctx, proxy)
        .iter()
        .map(|p| format!("{}/{}/{:?}", p.port, p.protocol, p.service))
        .collect();
    let sources: Vec<String> = ctx
        .virtual_services
        .source_selectors
        .iter()
        .filter(|s| proxy.matches_selector(s))
        .map(|s| format!("{s:?}"))
        .collect();
    let rules: Vec<String> = ctx
        .destination_rules_selecting(&proxy.namespace, &proxy.labels)
        .map(|c| c.key.to_string())
        .collect();
    // Upstream TLS reads the proxy's metadata certificates and whether it runs beside
    // istio's agent (`cds::tls`).
    let certs = proxy
        .client_certs
        .as_ref()
        .map(|c| format!("{}~{}~{}", c.cert_chain, c.key, c.root_cert))
        .unwrap_or_default();
    // A headless service's listeners (one per endpoint) leave out the proxy's own address
    // (`lds::outbound`): a proxy that is such an endpoint sees its own set.
    let is_headless_endpoint = ctx
        .endpoints
        .by_address
        .get(&proxy.ip)
        .into_iter()
        .flatten()
        .any(|(host, _, _)| ctx.service(host).is_some_and(|s| s.is_headless()));
    let own_address = if is_headless_endpoint {
        proxy.ip.as_str()
    } else {
        ""
    };
    // Its inbound chains follow the PeerAuthentications that select it.
    let mtls = match proxy.proxy_type {
        ProxyType::Sidecar if !ctx.peer_authn.is_empty() => ctx
            .peer_authn
            .for_workload(&proxy.namespace, &proxy.labels)
            .to_string(),
        _ => String::new(),
    };
    // And the AuthorizationPolicies that apply to it.
    let authz = if ctx.authz.is_empty() {
        String::new()
    } else {
        let policies = ctx.authz.for_workload(&proxy.namespace, &proxy.labels);
        policies
            .all()
            .map(|c| c.key.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    // Its JWT filter follows the RequestAuthentications that apply to it.
    let jwt: Vec<String> = ctx
        .request_authn
        .keys_for(&proxy.namespace, &proxy.labels)
        .iter()
        .map(|k| k.to_string())
        .collect();
    let jwt = jwt.join(",");
    let telemetry = telemetry_key(ctx, proxy);
    format!(
        "{:?}|{}|{}|{}|{}|{own_address}|{:?}|{}|{}|{}|{}|{certs}|{}|{mtls}|{authz}|{jwt}|{telemetry}|{}",
        proxy.proxy_type,
        proxy.namespace,
        selected,
        proxy.interception_none,
        proxy.tproxy,
        proxy.idle_timeout,
        proxy.generator.as_deref().unwrap_or(""),
        inbound.join(","),
        sources.join(","),
        rules.join(","),
        proxy.istio_agent,
        proxy.num_trusted_proxies,
    )
}

/// What a proxy's telemetry reads beyond its scope: the Telemetries that apply, and what
/// tracing's Istio tags and span service names take from the proxy itself (its canonical
/// service and revision labels, mesh and cluster ids, and, for tracers that are sent the
/// service name, its node cluster).
fn telemetry_key(ctx: &PushContext, proxy: &Proxy) -> String {
    let keys: Vec<String> = ctx
        .telemetry
        .keys_for(&proxy.namespace, &proxy.labels)
        .iter()
        .map(|k| k.to_string())
        .collect();
    let label = |l: &str| proxy.labels.get(l).map_or("", String::as_str);
    let named_service = ctx.mesh.telemetry.providers.iter().any(|p| {
        matches!(
            p.kind,
            axon_config::mesh::ProviderKind::Datadog { .. }
                | axon_config::mesh::ProviderKind::OpenTelemetry { .. }
        )
    });
    format!(
        "{}~{}~{:?}~{}~{}~{}~{}~{}",
        keys.join(","),
        proxy.istio_stats,
        proxy.proxy_tracing,
        label("service.istio.io/canonical-name"),
        label("service.istio.io/canonical-revision"),
        proxy.mesh_id,
        proxy.cluster_id,
        if named_service {
            proxy.cluster.as_str()
        } else {
            ""
        },
    )
}

/// Whether a push must reach a proxy whose scope was `old` and is now `new` (istiod's
/// `ProxyNeedsPush`): forced and unscoped pushes reach everyone; otherwise only a proxy that
/// depends, before or after, on a changed config. A Secret's content reaches a proxy over
/// SDS alone (`xds::stream`): a changed Secret needs a full push only where it changed
/// whether a credential is there to serve.
pub fn needs_push(old: Option<&SidecarScope>, new: &SidecarScope, request: &PushRequest) -> bool {
    if request.forced || request.configs_updated.is_empty() {
        return true;
    }
    let Some(old) = old else { return true };
    request.configs_updated.iter().any(|k| {
        let depends = new.deps.contains(k) || old.deps.contains(k);
        // A PeerAuthentication shapes inbound chains and every caller's auto mTLS; an
        // AuthorizationPolicy the filters of the proxies it selects, before or after.
        if matches!(
            k.kind,
            axon_config::config::ConfigKind::PeerAuthentication
                | axon_config::config::ConfigKind::AuthorizationPolicy
        ) {
            return true;
        }
        if k.kind == axon_config::config::ConfigKind::Secret {
            depends && old.credentials != new.credentials
        } else {
            depends
        }
    })
}

/// The Sidecar resource that applies to `proxy`: one in its namespace whose selector matches,
/// else its namespace's selector-less one, else the root namespace's selector-less one.
fn select_sidecar<'a>(
    ctx: &'a PushContext,
    proxy: &Proxy,
) -> Option<(&'a Config, &'a axon_config::istio::Sidecar)> {
    let in_ns = || ctx.sidecars_in(&proxy.namespace);
    in_ns()
        .find(|(_, sc)| {
            sc.workload_selector
                .as_ref()
                .is_some_and(|ws| !ws.labels.is_empty() && proxy.matches_selector(&ws.labels))
        })
        .or_else(|| in_ns().find(|(_, sc)| selectorless(sc)))
        .or_else(|| {
            ctx.sidecars_in(&ctx.mesh.root_namespace)
                .find(|(_, sc)| selectorless(sc))
        })
}

fn selectorless(sc: &axon_config::istio::Sidecar) -> bool {
    sc.workload_selector
        .as_ref()
        .is_none_or(|ws| ws.labels.is_empty())
}

fn sidecar_scope(ctx: &PushContext, proxy: &Proxy) -> SidecarScope {
    let selected = select_sidecar(ctx, proxy);
    let default_listener = IstioEgressListener {
        hosts: vec!["*/*".to_string()],
        ..Default::default()
    };
    let listeners: Vec<&IstioEgressListener> = match selected {
        Some((_, sc)) if !sc.egress.is_empty() => sc.egress.iter().collect(),
        _ => vec![&default_listener],
    };
    let mut scope = SidecarScope {
        sidecar: selected.map(|(c, _)| c.key.clone()),
        outbound: OutboundPolicy::resolve(
            selected.and_then(|(_, sc)| sc.outbound_traffic_policy.as_ref()),
            ctx.mesh.outbound_registry_only,
        ),
        ..Default::default()
    };
    scope.deps.extend(scope.sidecar.clone());
    for listener in listeners {
        let imports = listener
            .hosts
            .iter()
            .map(|h| HostImport::parse(h, &proxy.namespace))
            .collect();
        let mut egress = EgressScope {
            port: listener.port.as_ref().map(|p| p.number).filter(|p| *p != 0),
            protocol: listener
                .port
                .as_ref()
                .map(|p| p.protocol.to_ascii_uppercase())
                .unwrap_or_default(),
            bind: Some(listener.bind.clone()).filter(|b| !b.is_empty()),
            capture_none: listener.capture_mode == CaptureMode::None,
            imports,
            services: Vec::new(),
            virtual_services: Vec::new(),
        };
        egress.services = candidate_services(ctx, &egress.imports)
            .filter(|s| s.export_to.visible_from(&proxy.namespace))
            .filter(|s| egress.imports(&s.namespace, &s.hostname))
            .cloned()
            .collect();
        egress.services.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        egress.services.dedup_by(|a, b| a.hostname == b.hostname);
        // In istiod's order (exportTo group, creation time, name, namespace): for a host
        // several of them name, the sidecar takes the first.
        let mesh = ctx.virtual_services.by_gateway.get("mesh");
        egress.virtual_services = ctx
            .in_proxy_order(mesh.into_iter().flatten(), &proxy.namespace)
            .into_iter()
            .filter(|c| match &c.spec {
                axon_config::config::Spec::VirtualService(vs) => {
                    egress.imports_virtual_service(c, vs)
                }
                _ => false,
            })
            .cloned()
            .collect();
        scope.egress.push(egress);
    }
    finish(ctx, proxy, scope)
}

/// The services an import list can match: those of the namespaces it names, or all when it
/// imports from any namespace.
fn candidate_services<'a>(
    ctx: &'a PushContext,
    imports: &[HostImport],
) -> Box<dyn Iterator<Item = &'a Arc<Service>> + 'a> {
    if imports.iter().any(|i| i.namespace == "*") {
        return Box::new(ctx.services.by_host.values());
    }
    let namespaces: BTreeSet<String> = imports.iter().map(|i| i.namespace.clone()).collect();
    Box::new(
        namespaces
            .into_iter()
            .filter_map(|ns| ctx.services.by_namespace.get(&ns))
            .flatten(),
    )
}

fn gateway_scope(ctx: &PushContext, proxy: &Proxy) -> SidecarScope {
    let mut scope = SidecarScope::default();
    let merged = gateway::merge(ctx, proxy);
    for selected in gateway::gateways_for(ctx, proxy) {
        scope.deps.insert(selected.config.key.clone());
    }
    for name in gateway::terminated_credentials(merged.servers()) {
        let reference = super::secrets::SecretRef::parse(
            &super::secrets::resource_name(&name),
            &proxy.namespace,
        );
        scope
            .deps
            .extend(reference.into_iter().flat_map(|r| r.related()));
        let available = gateway::credential_available(ctx, &proxy.namespace, &name);
        scope.credentials.insert(name, available);
    }
    for server in merged.servers() {
        for (vs, _) in ctx.virtual_services_for_gateway(&server.gateway) {
            let keys = ctx.virtual_services.with_delegates(&vs.key);
            scope.deps.extend(keys.cloned());
        }
    }
    scope.egress.push(EgressScope {
        port: None,
        protocol: String::new(),
        bind: None,
        capture_none: false,
        imports: vec![HostImport {
            namespace: "*".into(),
            host: "*".into(),
        }],
        services: ctx
            .services
            .by_host
            .values()
            .filter(|s| s.export_to.visible_from(&proxy.namespace))
            .cloned()
            .collect(),
        virtual_services: Vec::new(),
    });
    finish(ctx, proxy, scope)
}

/// Fills the union of services, the inbound ports, and the service and rule dependencies.
fn finish(ctx: &PushContext, proxy: &Proxy, mut scope: SidecarScope) -> SidecarScope {
    let mut hosts = BTreeSet::new();
    for egress in &scope.egress {
        for s in &egress.services {
            if hosts.insert(s.hostname.clone()) {
                scope.services.push(s.clone());
            }
        }
        for vs in &egress.virtual_services {
            let keys = ctx.virtual_services.with_delegates(&vs.key);
            scope.deps.extend(keys.cloned());
        }
    }
    scope.services.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    for service in &scope.services {
        scope.deps.insert(service.source.clone());
        if let Some(chosen) = ctx.destination_rule_for_workload(
            &service.hostname,
            &proxy.namespace,
            Some(&proxy.labels),
        ) {
            scope
                .deps
                .extend(chosen.configs.iter().map(|c| c.key.clone()));
        }
    }
    // A Sidecar's ingress listeners replace the service endpoints' ports (istiod's
    // `HasIngressListener`).
    let ingress = scope
        .sidecar
        .as_ref()
        .and_then(|key| ctx.sidecars_in(&key.namespace).find(|(c, _)| c.key == *key))
        .map(|(_, sc)| sc.ingress.as_slice())
        .filter(|i| !i.is_empty());
    scope.inbound = match ingress {
        Some(listeners) => {
            ingress::inbound_ports(listeners, proxy, &inbound::primary_services(ctx, proxy))
        }
        None => inbound_ports(ctx, proxy).into_iter().collect(),
    };
    let rules = inbound::rule_deps(ctx, proxy, &scope.inbound);
    scope.deps.extend(rules);
    for (host, _, _) in ctx
        .endpoints
        .by_address
        .get(&proxy.ip)
        .into_iter()
        .flatten()
    {
        if let Some(service) = ctx.service(host) {
            scope.deps.insert(service.source.clone());
        }
    }
    scope
}

#[cfg(test)]
mod tests;
