//! Delta requests and responses: only what changed, and the names removed.

use super::subscriptions::Subscriptions;
use super::{Output, StreamState, next_nonce};
use crate::resource::{DeltaRequest, DeltaResponse, ResourceType, Response};

impl StreamState {
    pub(super) fn on_delta_request(&mut self, req: DeltaRequest, out: &mut Output) {
        if crate::debug::is_debug_type(&req.type_url) {
            let names = req.subscribe.clone();
            self.on_debug_request(&req.type_url, names, out);
            return;
        }
        let Some(type_url) = ResourceType::parse(&req.type_url) else {
            self.unknown_type(&req.type_url, out);
            let version = self.context_version().unwrap_or(0);
            let nonce = self.next_nonce(version);
            out.responses.push(Response::Delta(DeltaResponse {
                type_url: req.type_url,
                system_version_info: version.to_string(),
                nonce,
                resources: Vec::new(),
                removed: Vec::new(),
                control_plane: None,
                whole: None,
            }));
            return;
        };
        // The transport reads a stream's requests by the method it was opened with.
        let Subscriptions::Delta(subscriptions) = &mut self.subscriptions else {
            return;
        };
        let decision = subscriptions.should_respond(type_url, &req, &self.names);
        if self.ctx.is_none() {
            // Answered when the first context comes: what the client has is shared meanwhile.
            subscriptions.settle(type_url, &self.names);
        }
        self.on_decision(type_url, decision, out);
    }

    /// The resources the client lacks and the names it must drop, of a set generated for the
    /// subscribed names and handed to the subscriptions (`DeltaSubscriptions::answer`);
    /// `None` when there is nothing, except that the first answer of a type is always sent
    /// (even empty).
    pub(super) fn delta_response(&mut self, type_url: ResourceType) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let Subscriptions::Delta(subscriptions) = &mut self.subscriptions else {
            return None;
        };
        // An endpoint-only push generates only the clusters whose endpoints changed.
        let within = self
            .eds_only
            .as_ref()
            .filter(|_| type_url == ResourceType::Endpoint)
            .map(|eds| &eds.clusters);
        let names = within.unwrap_or(subscriptions.get(type_url)?.wanted());
        let resources = crate::generate_shared(type_url, &ctx, &proxy, &scope, names);
        let counter = &mut self.nonce;
        let sent = subscriptions.answer(type_url, &resources, within, &self.names, || {
            next_nonce(counter, ctx.version)
        })?;
        Some(Response::Delta(DeltaResponse {
            type_url: type_url.url(),
            system_version_info: ctx.version.to_string(),
            nonce: sent.nonce,
            resources: sent.resources,
            removed: sent.removed,
            control_plane: None,
            whole: sent.whole.then_some(resources),
        }))
    }
}
