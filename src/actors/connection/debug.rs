//! istioctl's debug requests on an ADS stream (`istio.io/debug/syncz`,
//! `istio.io/debug/config_dump`, and `istio.io/debug` with a debug path, `istioctl x
//! internal-debug`), answered as istiod answers them: syncz from every connection of this
//! replica ([`CollectStatus`]), named by this replica in the response's `control_plane`; a
//! config dump from the named proxy's connection ([`DumpResourcesFor`], [`DumpFor`]).
//! `istio.io/debug` needs a proven identity (the TLS port; else the stream ends
//! UNAUTHENTICATED) and, outside the system namespace, is only `config_dump` (else
//! PERMISSION_DENIED), as istiod's `DebugGen`.
//! On the TLS port a caller outside the system namespace sees only its own namespace's
//! proxies (`StreamState::debug_caller_namespace`).
//!
//! The answer is gathered within `debug_query_timeout` (what has not arrived by then is left
//! out), the actor answering other messages meanwhile (so that two streams asking at once
//! do not wait on each other); a stream may have one debug request in flight, and one that
//! sends another before its answer is closed with RESOURCE_EXHAUSTED, so a client cannot
//! pile them up.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::ConnectionActor;
use crate::actors::directory::{CollectStatus, Dump, DumpFor, DumpResourcesFor};
use axon_xds::Resource;
use axon_xds::debug::dump::DumpFilter;
use axon_xds::debug::{self, DebugQuery, DebugType};
use axon_xds::protocol::stream::CloseReason;

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
        if self.debug_in_flight {
            let reason = CloseReason::ResourceExhausted(
                "one debug request at a time: wait for the answer to the last".into(),
            );
            self.close(reason, ctx);
            return;
        }
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
            Some(DebugType::Http) => match self.http_debug(&query) {
                Ok(gather) => (gather, None),
                Err(reason) => {
                    self.close(reason, ctx);
                    return;
                }
            },
            None => (Box::pin(async { Vec::new() }), None),
        };
        let bounded = async move {
            tokio::time::timeout(timeout, gather)
                .await
                .unwrap_or_default()
        };
        // Spawned, not waited on: the actor keeps answering the directory meanwhile (another
        // stream's debug request asks its status).
        self.debug_in_flight = true;
        ctx.spawn(bounded.into_actor(self).map(move |resources, act, ctx| {
            act.debug_in_flight = false;
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

impl ConnectionActor {
    /// `istio.io/debug` (istiod's `DebugGen`): only a verified caller (the TLS port), one
    /// debug path; a caller outside the system namespace only `config_dump` of its own
    /// namespace's proxies. The answer is the endpoint's JSON, as an `Any` of type
    /// `istio.io/debug`, named by the request; istiod's status line (`{"statusCode":"404"}`)
    /// before the body when it is not 200.
    fn http_debug(&self, query: &DebugQuery) -> Result<BoxFuture, CloseReason> {
        if !self.stream.proxy().is_some_and(|p| p.verified) {
            return Err(CloseReason::Unauthenticated(
                "authentication required: istio.io/debug is served on the TLS port to a proven identity".into(),
            ));
        }
        let [name] = query.names.as_slice() else {
            return Err(CloseReason::InvalidArgument(
                "exactly one debug request is required".into(),
            ));
        };
        let namespace = self.stream.debug_caller_namespace();
        let (path, params) = debug::debug_path(name);
        if let Some(ns) = &namespace
            && !debug::NAMESPACE_DEBUG_PATHS.contains(&path)
        {
            return Err(CloseReason::PermissionDenied(format!(
                "the debug info is not available for current identity: namespace {ns}"
            )));
        }
        let name = name.clone();
        let answer = move |body: Vec<u8>| {
            vec![Resource::from_encoded(
                name,
                debug::DEBUG_PREFIX.to_string(),
                body.into(),
            )]
        };
        let status =
            |code: u16, text: &str| format!("{{\"statusCode\":\"{code}\"}}{text}").into_bytes();
        let directory = self.peers.directory.clone();
        let param = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        };
        match path {
            "syncz" => {
                let own = self
                    .stream
                    .status(self.id, self.connected_at.elapsed().as_secs_f64());
                let ask = CollectStatus {
                    except: Some(self.id),
                };
                Ok(Box::pin(async move {
                    let mut all = directory.send(ask).await.unwrap_or_default();
                    all.push(own);
                    all.sort_by(|a, b| a.proxy.cmp(&b.proxy));
                    answer(serde_json::to_vec(&all).unwrap_or_default())
                }))
            }
            "config_dump" => {
                let Some(proxy) = param("proxyID").filter(|p| !p.is_empty()) else {
                    let body = status(400, "You must provide a proxyID in the query string\n");
                    return Ok(Box::pin(async move { answer(body) }));
                };
                let types = DumpFilter::parse_types(&param("types").unwrap_or_default());
                let filter = match types {
                    Ok(types) => DumpFilter {
                        types,
                        include_eds: param("include_eds").is_some(),
                        resource: None,
                    },
                    Err(e) => {
                        let body = status(400, &format!("{e}\n"));
                        return Ok(Box::pin(async move { answer(body) }));
                    }
                };
                let ask = DumpFor {
                    proxy,
                    namespace,
                    dump: Dump {
                        filter,
                        authorization: false,
                    },
                };
                Ok(Box::pin(async move {
                    let body = match directory.send(ask).await.ok().flatten() {
                        None => status(404, debug::NOT_CONNECTED),
                        Some(Ok(json)) => serde_json::to_vec(&json).unwrap_or_default(),
                        Some(Err(e)) => status(400, &format!("{e}\n")),
                    };
                    answer(body)
                }))
            }
            _ => {
                let body = status(404, "axon does not serve this debug path over xDS\n");
                Ok(Box::pin(async move { answer(body) }))
            }
        }
    }
}
