//! The ConnectionDirectory: which connections exist and which proxy each serves, for the
//! debug and monitoring servers. The PushQueue only queues; this actor only answers.
//!
//! Receives [`Register`] and [`Unregister`] from ConnectionActors; answers [`CollectStatus`]
//! (`/debug/syncz`, `/debug/connections`) by asking every connection [`GetStatus`], and
//! [`DumpFor`] (`/debug/config_dump`) by asking the proxy's connection [`Dump`].

use std::collections::HashMap;

use actix::prelude::*;

use super::messages::ConnId;
use axon_xds::ResourceType;
use axon_xds::protocol::stream::ConnectionStatus;

/// Asks a connection what it would send its proxy now, for the given types (all if empty).
#[derive(Message, Debug, Clone, Default)]
#[rtype(result = "serde_json::Value")]
pub struct Dump {
    pub types: Vec<ResourceType>,
    /// The AuthorizationPolicies that apply to the proxy instead of its resources
    /// (`/debug/authorizationz`).
    pub authorization: bool,
}

/// Asks a connection for its sync status.
#[derive(Message)]
#[rtype(result = "ConnectionStatus")]
pub struct GetStatus;

/// A connection with a known proxy.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Register {
    pub id: ConnId,
    pub proxy: String,
    pub status: Recipient<GetStatus>,
    pub dump: Recipient<Dump>,
}

/// A connection ended.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Unregister {
    pub id: ConnId,
}

/// What axon would send one proxy now (`/debug/config_dump`); `None` if it is not connected.
#[derive(Message)]
#[rtype(result = "Option<serde_json::Value>")]
pub struct DumpFor {
    pub proxy: String,
    pub dump: Dump,
}

/// Gathers the sync status of every connection (`/debug/syncz`).
#[derive(Message)]
#[rtype(result = "Vec<ConnectionStatus>")]
pub struct CollectStatus;

struct Entry {
    proxy: String,
    status: Recipient<GetStatus>,
    dump: Recipient<Dump>,
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
            status: msg.status,
            dump: msg.dump,
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

    fn handle(&mut self, _: CollectStatus, _: &mut Context<Self>) -> Self::Result {
        let asks: Vec<_> = self
            .conns
            .values()
            .map(|e| e.status.send(GetStatus))
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
    type Result = ResponseFuture<Option<serde_json::Value>>;

    fn handle(&mut self, msg: DumpFor, _: &mut Context<Self>) -> Self::Result {
        let target = self
            .conns
            .values()
            .find(|e| e.proxy == msg.proxy)
            .map(|e| e.dump.clone());
        Box::pin(async move { target?.send(msg.dump).await.ok() })
    }
}
