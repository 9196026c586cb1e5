//! istioctl's debug requests on an ADS stream (`istio.io/debug/syncz`,
//! `istio.io/debug/config_dump`), answered as istiod answers them: syncz from every
//! connection of this replica ([`CollectStatus`]), named by this replica in the response's
//! `control_plane`; a config dump from the named proxy's connection ([`DumpResourcesFor`]).
//! On the TLS port a caller outside the system namespace sees only its own namespace's
//! proxies (`StreamState::debug_caller_namespace`).
//!
//! The answer is gathered within `debug_query_timeout` while the actor waits: the stream's
//! next request is read only after it, so a client cannot pile debug requests up, and a
//! connection that does not answer in time is left out.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::ConnectionActor;
use crate::actors::directory::{CollectStatus, DumpResourcesFor};
use axon_xds::Resource;
use axon_xds::debug::{self, DebugQuery, DebugType};

/// What a ConnectionActor needs to answer debug requests.
#[derive(Clone)]
pub struct DebugAnswers {
    /// This replica's name: syncz answers carry it (istioctl tells replicas apart by it).
    pub replica: Arc<str>,
    /// How long gathering an answer may take.
    pub timeout: Duration,
}

impl ConnectionActor {
    pub(super) fn answer_debug(&mut self, query: DebugQuery, ctx: &mut Context<Self>) {
        let namespace = self.stream.debug_caller_namespace();
        let directory = self.peers.directory.clone();
        let timeout = self.peers.debug.timeout;
        let (gather, control_plane): (BoxFuture, Option<String>) = match query.kind {
            Some(DebugType::Syncz) => {
                let identifier = debug::control_plane_identifier(
                    &self.peers.debug.replica,
                    env!("CARGO_PKG_VERSION"),
                );
                // Its own status now: it cannot answer the directory while it waits.
                let own = self
                    .stream
                    .status(self.id, self.connected_at.elapsed().as_secs_f64());
                let ask = CollectStatus {
                    except: Some(self.id),
                };
                let gather = async move {
                    let mut statuses = directory.send(ask).await.unwrap_or_default();
                    statuses.push(own);
                    statuses.sort_by(|a, b| a.proxy.cmp(&b.proxy));
                    axon_xds::csds::syncz(&statuses, namespace.as_deref())
                };
                (Box::pin(gather), Some(identifier))
            }
            Some(DebugType::ConfigDump) => match query.dump_target() {
                Some(name) => {
                    let ask = DumpResourcesFor {
                        name: name.to_string(),
                        namespace,
                    };
                    let gather = async move { directory.send(ask).await.unwrap_or_default() };
                    (Box::pin(gather), None)
                }
                None => (Box::pin(async { Vec::new() }), None),
            },
            None => (Box::pin(async { Vec::new() }), None),
        };
        let bounded = async move {
            tokio::time::timeout(timeout, gather)
                .await
                .unwrap_or_default()
        };
        ctx.wait(bounded.into_actor(self).map(move |resources, act, ctx| {
            tracing::debug!(
                proxy = %act.proxy_log(),
                r#type = %axon_config::log_safe::Escaped(&query.type_url),
                resources = resources.len(),
                "ADS: debug request answered"
            );
            let response = act.stream.debug_response(&query, resources, control_plane);
            act.write(vec![response], ctx, false);
        }));
    }
}

type BoxFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Vec<Resource>>>>;
