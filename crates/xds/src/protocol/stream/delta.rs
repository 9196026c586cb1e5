//! Delta requests and responses: only what changed, and the names removed.

use super::{Output, StreamState};
use crate::resource::{DeltaRequest, DeltaResponse, ResourceType, Response};

impl StreamState {
    pub(super) fn on_delta_request(&mut self, req: DeltaRequest, out: &mut Output) {
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
            }));
            return;
        };
        let decision =
            self.delta_subs
                .entry(type_url)
                .or_default()
                .on_request(type_url, &req, &self.names);
        self.on_decision(type_url, decision, out);
    }

    /// The resources the client lacks and the names it must drop; `None` when there is
    /// nothing, except that the first answer of a type is always sent (even empty).
    pub(super) fn delta_response(&mut self, type_url: ResourceType) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let subscription = self.delta_subs.get(&type_url)?;
        // An endpoint-only push generates only the clusters whose endpoints changed.
        let within = self
            .eds_only
            .as_ref()
            .filter(|_| type_url == ResourceType::Endpoint)
            .map(|eds| &eds.clusters);
        let names = within.unwrap_or(subscription.wanted());
        let resources = crate::generate_shared(type_url, &ctx, &proxy, &scope, names);
        let subscription = self.delta_subs.get_mut(&type_url)?;
        let first = subscription.nonce_sent.is_none();
        let (resources, removed) = match within {
            Some(_) => subscription.diff_within(&resources, within),
            None => subscription.diff_set(&resources),
        };
        if resources.is_empty() && removed.is_empty() && !first {
            return None;
        }
        let nonce = self.next_nonce(ctx.version);
        self.delta_subs.get_mut(&type_url)?.sent(nonce.clone());
        Some(Response::Delta(DeltaResponse {
            type_url: type_url.url(),
            system_version_info: ctx.version.to_string(),
            nonce,
            resources,
            removed,
        }))
    }
}
