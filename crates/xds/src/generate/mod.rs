//! The generators: one per xDS type, pure functions of a `PushContext`, a proxy and its
//! `SidecarScope` ([`generate`]), and the memo that lets proxies with the same scope share
//! one encoded copy ([`generate_shared`]; its typed keys in `memo.rs`).
//!
//! - [`cds`], [`eds`], [`lds`], [`rds`], [`sds`]: Envoy's sidecars and gateways.
//! - [`grpc`]: what proxyless gRPC clients (`xds:///`) are served instead.

pub mod cds;
pub mod eds;
pub mod grpc;
pub mod lds;
mod memo;
pub mod rds;
pub mod sds;

use std::collections::BTreeSet;
use std::sync::Arc;

use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::SidecarScope;

use crate::resource::{Resource, ResourceSet, ResourceType};
use memo::{AssignmentKey, SetKey};
pub use memo::{NamesDigest, names_digest};

/// Generates the resources of one type for one proxy seen through its scope. `names` are
/// the subscribed names (used by EDS and RDS; CDS and LDS are wildcard).
pub fn generate(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &BTreeSet<String>,
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
    names: &BTreeSet<String>,
) -> Arc<ResourceSet> {
    generate_shared_digest(type_url, ctx, proxy, scope, names, names_digest(names))
}

/// [`generate_shared`] with the names' [`names_digest`] given: a stream keeps it while its
/// names stay the same, instead of hashing them for every push.
pub fn generate_shared_digest(
    type_url: ResourceType,
    ctx: &PushContext,
    proxy: &Proxy,
    scope: &SidecarScope,
    names: &BTreeSet<String>,
    digest: NamesDigest,
) -> Arc<ResourceSet> {
    // Load assignments (EDS, and the inline ones of DNS clusters) depend on the proxy only
    // where a DestinationRule orders endpoints by locality: then on its scope and its
    // locality key too.
    let locality = match type_url {
        ResourceType::Endpoint | ResourceType::Cluster => ctx.locality_key(proxy),
        _ => None,
    };
    let locality = locality.as_deref();
    let scope_key = scope.key.as_str();
    if type_url == ResourceType::Endpoint {
        let key = SetKey {
            type_url,
            scope: locality.map(|_| scope_key),
            locality,
            names: digest,
            verified: false,
        };
        return memo::set(ctx, &key, || {
            names
                .iter()
                .map(|name| {
                    let per_proxy = locality.filter(|_| {
                        axon_model::service::parse_outbound_cluster_name(name).is_some_and(
                            |(port, subset, host)| {
                                eds::per_proxy_setting(ctx, proxy, host, subset, port, |_, _| ())
                                    .is_some()
                            },
                        )
                    });
                    let key = AssignmentKey {
                        cluster: name.as_str(),
                        local: per_proxy.map(|locality| (scope_key, locality)),
                    };
                    let one = memo::assignment(ctx, &key, || {
                        let single = BTreeSet::from([name.clone()]);
                        eds::generate(ctx, per_proxy.map(|_| proxy), &single).pop()
                    });
                    (*one).clone()
                })
                .collect::<Option<Vec<Resource>>>()
                .unwrap_or_default()
                .into()
        });
    }
    let key = SetKey {
        type_url,
        scope: Some(scope_key),
        locality,
        names: digest,
        // Secrets also depend on whether the proxy's identity was verified.
        verified: type_url == ResourceType::Secret && proxy.verified,
    };
    memo::set(ctx, &key, || {
        ResourceSet::from(generate(type_url, ctx, proxy, scope, names))
    })
}
