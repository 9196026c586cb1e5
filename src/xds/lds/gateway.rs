//! A gateway's listeners: one bound listener per Gateway server port, named like istiod's
//! `0.0.0.0_PORT`, with an HTTP connection manager that takes routes over RDS (`http.PORT`).

use super::{HcmKind, listener};
use crate::model::gateway;
use crate::model::proxy::Proxy;
use crate::model::push_context::PushContext;
use crate::xds::resource::Resource;

pub(super) fn listeners(ctx: &PushContext, proxy: &Proxy) -> Vec<Resource> {
    let merged = gateway::merge(ctx, proxy);
    merged
        .ports
        .keys()
        .map(|&port| {
            let bind = merged.bind.get(&port).copied().unwrap_or("0.0.0.0");
            let route = format!("http.{port}");
            listener(
                bind,
                port,
                true,
                &route,
                HcmKind::Gateway,
                proxy.idle_timeout,
            )
        })
        .collect()
}
