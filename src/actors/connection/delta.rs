//! Delta xDS requests and responses of a ConnectionActor: only what changed, and removals.

use super::ConnectionActor;
use crate::xds::delta::DeltaWatched;
use crate::xds::subscription::Decision;
use crate::xds::{self, DeltaRequest, DeltaResponse, Response, TypeUrl};

impl ConnectionActor {
    pub(super) fn on_delta_request(&mut self, req: DeltaRequest) {
        let Some(type_url) = TypeUrl::parse(&req.type_url) else {
            self.unknown_type(&req.type_url);
            let version = self.ctx.as_ref().map_or(0, |c| c.version);
            let nonce = self.next_nonce(version);
            self.outbox.push(Response::Delta(DeltaResponse {
                type_url: req.type_url,
                system_version_info: version.to_string(),
                nonce,
                resources: Vec::new(),
                removed: Vec::new(),
            }));
            return;
        };
        match self
            .delta
            .entry(type_url)
            .or_default()
            .on_request(type_url, &req)
        {
            Decision::Respond => self.respond(type_url),
            Decision::Ack => {}
            Decision::Nack(error) => self.on_nack(type_url, &error),
            Decision::Stale => self.on_stale(type_url),
        }
    }

    /// The resources the client lacks and the names it must drop; `None` when there is
    /// nothing, except that the first answer of a type is always sent (even empty).
    pub(super) fn delta_response(&mut self, type_url: TypeUrl) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let watched = self.delta.get(&type_url)?;
        // An endpoint-only push generates only the clusters whose endpoints changed.
        let within = self
            .eds_only
            .as_ref()
            .filter(|_| type_url == TypeUrl::Endpoint);
        let names = within.unwrap_or(watched.wanted());
        let resources = xds::generate_shared(type_url, &ctx, &proxy, &scope, names);
        let watched: &mut DeltaWatched = self.delta.get_mut(&type_url)?;
        let first = watched.nonce_sent.is_none();
        let (resources, removed) = match within {
            Some(_) => watched.diff_within(&resources, within),
            None => watched.diff_set(&resources),
        };
        if resources.is_empty() && removed.is_empty() && !first {
            return None;
        }
        let nonce = self.next_nonce(ctx.version);
        self.delta.get_mut(&type_url)?.sent(nonce.clone());
        Some(Response::Delta(DeltaResponse {
            type_url: type_url.url(),
            system_version_info: ctx.version.to_string(),
            nonce,
            resources,
            removed,
        }))
    }
}
