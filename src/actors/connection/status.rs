//! What a ConnectionActor answers for `/debug/syncz` and `/debug/config_dump` (and their
//! xDS forms, istioctl's `istio.io/debug/*`), from its stream's state.

use actix::prelude::*;

use super::ConnectionActor;
use crate::actors::directory::{Dump, DumpResources, GetStatus};

impl Handler<Dump> for ConnectionActor {
    type Result = MessageResult<Dump>;

    fn handle(&mut self, msg: Dump, _: &mut Context<Self>) -> Self::Result {
        if msg.authorization {
            return MessageResult(Ok(self.stream.authorization()));
        }
        let dump = match self.stream.config_dump_json(&msg.filter) {
            None => Err("no config snapshot yet".to_string()),
            Some(json) => json.map_err(|e| e.to_string()),
        };
        MessageResult(dump)
    }
}

impl Handler<GetStatus> for ConnectionActor {
    type Result = MessageResult<GetStatus>;

    fn handle(&mut self, _: GetStatus, _: &mut Context<Self>) -> Self::Result {
        let connected = self.connected_at.elapsed().as_secs_f64();
        MessageResult(self.stream.status(self.id, connected))
    }
}

impl Handler<DumpResources> for ConnectionActor {
    type Result = MessageResult<DumpResources>;

    fn handle(&mut self, msg: DumpResources, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.stream.config_dump_resources(&msg.0))
    }
}
