//! The ConnectionDirectory: which connections exist and which proxy each serves, for the
//! debug and monitoring servers. The PushQueue only queues; this actor only answers.
//!
//! Receives [`Register`] and [`Unregister`] from ConnectionActors; answers [`CollectStatus`]
//! (`/debug/syncz`, `/debug/connections`, istioctl's `istio.io/debug/syncz`) by asking every
//! connection [`GetStatus`], [`DumpFor`] (`/debug/config_dump`) by asking the proxy's
//! connection [`Dump`], and [`DumpResourcesFor`] (istioctl's `istio.io/debug/config_dump`)
//! by asking it [`DumpResources`].

use std::collections::HashMap;

use actix::prelude::*;

use super::messages::ConnId;
use axon_xds::Resource;
use axon_xds::debug::dump::DumpFilter;
use axon_xds::protocol::stream::ConnectionStatus;

/// Asks a connection what it would send its proxy now, as Envoy's admin `ConfigDump` in
/// proto3 JSON (`filter`: `?types=`, `?include_eds`, `?resource=`); an error says why there
/// is none (no context yet, an unknown `resource`).
#[derive(Message, Debug, Clone, Default)]
#[rtype(result = "Result<serde_json::Value, String>")]
pub struct Dump {
    pub filter: DumpFilter,
    /// The AuthorizationPolicies that apply to the proxy instead of its resources
    /// (`/debug/authorizationz`).
    pub authorization: bool,
}

/// Asks a connection for its sync status.
#[derive(Message)]
#[rtype(result = "ConnectionStatus")]
pub struct GetStatus;

/// Asks a connection for its config dump as the resources of an xDS debug answer.
#[derive(Message, Debug, Clone)]
#[rtype(result = "Vec<Resource>")]
pub struct DumpResources(pub DumpFilter);

/// A connection with a known proxy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Register {
    pub id: ConnId,
    pub proxy: String,
    /// The proxy's namespace (a debug caller may see only its own).
    pub namespace: String,
    pub status: Recipient<GetStatus>,
    pub dump: Recipient<Dump>,
    pub resources: Recipient<DumpResources>,
}

/// The config dump, as xDS debug resources, of the proxy `name` names (its id, or
/// `POD.NAMESPACE`), if it is connected here and, with `namespace`, in that namespace;
/// empty otherwise (istiod answers the same for both: the caller learns nothing of another
/// namespace).
#[derive(Message)]
#[rtype(result = "Vec<Resource>")]
pub struct DumpResourcesFor {
    pub name: String,
    pub namespace: Option<String>,
}

/// A connection ended.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unregister {
    pub id: ConnId,
}

/// What axon would send one proxy now (`/debug/config_dump`); `None` if it is not connected
/// (or, with `namespace`, not in that namespace). `proxy` is its id or `POD.NAMESPACE`.
#[derive(Message)]
#[rtype(result = "Option<Result<serde_json::Value, String>>")]
pub struct DumpFor {
    pub proxy: String,
    pub namespace: Option<String>,
    pub dump: Dump,
}

/// Gathers the sync status of every connection (`/debug/syncz`) but `except` (the
/// connection asking, which is busy waiting for the answer and adds its own).
#[derive(Message, Default)]
#[rtype(result = "Vec<ConnectionStatus>")]
pub struct CollectStatus {
    pub except: Option<ConnId>,
}

struct Entry {
    proxy: String,
    namespace: String,
    status: Recipient<GetStatus>,
    dump: Recipient<Dump>,
    resources: Recipient<DumpResources>,
}

#[derive(Default)]
pub struct ConnectionDirectory {
    conns: HashMap<ConnId, Entry>,
}

impl Actor for ConnectionDirectory {
    type Context = Context<Self>;
}

impl Handler<Register> for ConnectionDirectory {
    type Result = ();

    fn handle(&mut self, msg: Register, _: &mut Context<Self>) {
        let entry = Entry {
            proxy: msg.proxy,
            namespace: msg.namespace,
            status: msg.status,
            dump: msg.dump,
            resources: msg.resources,
        };
        self.conns.insert(msg.id, entry);
    }
}

impl Handler<Unregister> for ConnectionDirectory {
    type Result = ();

    fn handle(&mut self, msg: Unregister, _: &mut Context<Self>) {
        self.conns.remove(&msg.id);
    }
}

impl Handler<CollectStatus> for ConnectionDirectory {
    type Result = ResponseFuture<Vec<ConnectionStatus>>;

    fn handle(&mut self, msg: CollectStatus, _: &mut Context<Self>) -> Self::Result {
        let asks: Vec<_> = self
            .conns
            .iter()
            .filter(|(id, _)| Some(**id) != msg.except)
            .map(|(_, e)| e.status.send(GetStatus))
            .collect();
        Box::pin(async move {
            let mut all: Vec<ConnectionStatus> = futures::future::join_all(asks)
                .await
                .into_iter()
                .filter_map(Result::ok)
                .collect();
            all.sort_by(|a, b| a.proxy.cmp(&b.proxy));
            all
        })
    }
}

impl Handler<DumpFor> for ConnectionDirectory {
    type Result = ResponseFuture<Option<Result<serde_json::Value, String>>>;

    fn handle(&mut self, msg: DumpFor, _: &mut Context<Self>) -> Self::Result {
        let target = self
            .named(&msg.proxy, msg.namespace.as_deref())
            .map(|e| e.dump.clone());
        Box::pin(async move { target?.send(msg.dump).await.ok() })
    }
}

impl ConnectionDirectory {
    /// The connection of the proxy `name` names (its id, else `POD.NAMESPACE`: the lowest
    /// such id), if it is in `namespace` when one is given.
    fn named(&self, name: &str, namespace: Option<&str>) -> Option<&Entry> {
        self.conns
            .values()
            .filter(|e| axon_xds::debug::names_proxy(&e.proxy, name))
            .filter(|e| namespace.is_none_or(|ns| ns == e.namespace))
            .min_by_key(|e| (e.proxy != name, e.proxy.clone()))
    }
}

impl Handler<DumpResourcesFor> for ConnectionDirectory {
    type Result = ResponseFuture<Vec<Resource>>;

    fn handle(&mut self, msg: DumpResourcesFor, _: &mut Context<Self>) -> Self::Result {
        let target = self
            .named(&msg.name, msg.namespace.as_deref())
            .map(|e| e.resources.clone());
        Box::pin(async move {
            match target {
                Some(t) => t
                    .send(DumpResources(DumpFilter::default()))
                    .await
                    .unwrap_or_default(),
                None => Vec::new(),
            }
        })
    }
}
