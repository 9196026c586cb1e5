//! The generators: one per xDS type, pure functions of a `PushContext`, a proxy and its
//! `SidecarScope` ([`generate`]), and the memo that lets proxies with the same scope share
//! one encoded copy ([`generate_shared`]).
//!
//! - [`cds`], [`eds`], [`lds`], [`rds`], [`sds`]: Envoy's sidecars and gateways.
//! - [`grpc`]: what proxyless gRPC clients (`xds:///`) are served instead.

pub mod cds;
pub mod eds;
pub mod grpc;
pub mod lds;
pub mod rds;
pub mod sds;

use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::SidecarScope;

use crate::resource::{Resource, ResourceSet, ResourceType};

/// Generates the resources of one type for one proxy seen through its scope. `names` are
/// the subscribed names (used by EDS and RDS; CDS and LDS are wildcard).
pub fn generate(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &std::collections::BTreeSet<String>,
) -> Vec<Resource> {
    if grpc::is_grpc(proxy) {
        return match type_url {
            ResourceType::Cluster => grpc::clusters(cds::generate(ctx, proxy, scope), names),
            ResourceType::Endpoint => eds::generate(ctx, Some(proxy), names),
            ResourceType::Listener => grpc::listeners(scope, names),
            ResourceType::Route => grpc::routes(ctx, proxy, scope, names),
            ResourceType::Secret => Vec::new(),
        };
    }
    match type_url {
        ResourceType::Cluster => cds::generate(ctx, proxy, scope),
        ResourceType::Endpoint => eds::generate(ctx, Some(proxy), names),
        ResourceType::Listener => lds::generate(ctx, proxy, scope),
        ResourceType::Route => rds::generate(ctx, proxy, scope, names),
        ResourceType::Secret => sds::generate(ctx, proxy, names),
    }
}

/// [`generate`], memoized in the context: proxies with the same scope key asking for the same
/// names share one generated and encoded copy (EDS per cluster, across all proxies).
pub fn generate_shared(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &std::collections::BTreeSet<String>,
) -> std::sync::Arc<ResourceSet> {
    generate_shared_digest(type_url, ctx, proxy, scope, names, &names_digest(names))
}

/// [`generate_shared`] with the names' [`names_digest`] given: a stream keeps it while its
/// names stay the same, instead of hashing them for every push.
pub fn generate_shared_digest(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &std::collections::BTreeSet<String>,
    digest: &str,
) -> std::sync::Arc<ResourceSet> {
    // Load assignments (EDS, and the inline ones of DNS clusters) depend on the proxy only
    // where a DestinationRule orders endpoints by locality: then on its scope and its
    // locality key too.
    let local = || {
        ctx.locality_key(proxy)
            .map(|k| format!("{}|{k}", scope.key))
    };
    if type_url == ResourceType::Endpoint {
        let local = local();
        let set_key = match &local {
            None => format!("eds|{digest}"),
            Some(k) => format!("eds|{digest}|{k}"),
        };
        return ctx.memo.get_or_compute(&set_key, || {
            names
                .iter()
                .map(|name| {
                    let per_proxy = local.as_ref().filter(|_| {
                        axon_model::service::parse_outbound_cluster_name(name).is_some_and(
                            |(port, subset, host)| {
                                eds::per_proxy_setting(ctx, proxy, host, subset, port, |_, _| ())
                                    .is_some()
                            },
                        )
                    });
                    let key = match per_proxy {
                        None => format!("cla|{name}"),
                        Some(k) => format!("cla|{name}|{k}"),
                    };
                    let one = ctx.memo.get_or_compute(&key, || {
                        let single = std::collections::BTreeSet::from([name.clone()]);
                        eds::generate(ctx, per_proxy.map(|_| proxy), &single).pop()
                    });
                    (*one).clone()
                })
                .collect::<Option<Vec<Resource>>>()
                .unwrap_or_default()
                .into()
        });
    }
    let key = match type_url {
        ResourceType::Cluster => match local() {
            Some(k) => format!("{}|{k}|{digest}", type_url.short()),
            None => format!("{}|{}|{digest}", type_url.short(), scope.key),
        },
        // Secrets also depend on whether the proxy's identity was verified.
        ResourceType::Secret => format!("sds|{}|{}|{digest}", scope.key, proxy.verified),
        _ => format!("{}|{}|{digest}", type_url.short(), scope.key),
    };
    ctx.memo.get_or_compute(&key, || {
        ResourceSet::from(generate(type_url, ctx, proxy, scope, names))
    })
}

/// What the memo keys of [`generate_shared`] say of the names: their count and hash.
pub fn names_digest(names: &std::collections::BTreeSet<String>) -> String {
    let hash = axon_config::hash::hash_texts(names.iter());
    format!("{}:{hash:016x}", names.len())
}
