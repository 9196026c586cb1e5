//! State-of-the-world requests and responses: the full current state of a type on every
//! answer.

use super::subscriptions::Subscriptions;
use super::{Output, StreamState, next_nonce};
use crate::resource::{
    ResourceSet, ResourceType, Response, XdsRequest, XdsResponse, sotw_version, update_digest,
};

impl StreamState {
    pub(super) fn on_sotw_request(&mut self, req: XdsRequest, out: &mut Output) {
        if crate::debug::is_debug_type(&req.type_url) {
            let names = req.resource_names.iter().map(str::to_string).collect();
            self.on_debug_request(&req.type_url, names, out);
            return;
        }
        let Some(type_url) = ResourceType::parse(&req.type_url) else {
            self.unknown_type(&req.type_url, out);
            let nonce = self.next_nonce(self.context_version().unwrap_or(0));
            out.responses.push(Response::Sotw(XdsResponse {
                type_url: req.type_url,
                version_info: sotw_version(ResourceSet::default().digest()),
                nonce,
                resources: Default::default(),
                control_plane: None,
            }));
            return;
        };
        // The transport reads a stream's requests by the method it was opened with.
        let Subscriptions::Sotw(subscriptions) = &mut self.subscriptions else {
            return;
        };
        let decision = subscriptions.should_respond(type_url, &req, &self.names);
        self.on_decision(type_url, decision, out);
    }

    /// The full current state of one type, generated for the subscribed names and handed to
    /// the subscriptions, which say whether it is sent (`SotwSubscriptions::answer`): not to
    /// an unsubscribed type, nor, with `skip_unchanged` (a push), when the client has the
    /// set, nor to a reconnect that named its version. `version_info` is the set's digest;
    /// during an endpoint-only push the response carries the changed clusters only, and its
    /// version is the digest of the whole state the client then has.
    pub(super) fn sotw_response(
        &mut self,
        type_url: ResourceType,
        skip_unchanged: bool,
    ) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let Subscriptions::Sotw(subscriptions) = &mut self.subscriptions else {
            return None;
        };
        let subscription = subscriptions.subscribed_mut(type_url)?;
        let partial = match &self.eds_only {
            Some(eds) if type_url == ResourceType::Endpoint => Some(eds),
            _ => None,
        };
        let (resources, digest) = match partial {
            None => {
                let (names, key) = subscription.names_digest();
                let set = crate::generate_shared_digest(type_url, &ctx, &proxy, &scope, names, key);
                let digest = set.digest();
                (set, digest)
            }
            Some(eds) => {
                let set = crate::generate_shared(type_url, &ctx, &proxy, &scope, &eds.clusters);
                let digest = match subscription.digest_sent() {
                    Some(had) => {
                        let old = crate::generate_shared(
                            type_url,
                            &eds.old_ctx,
                            &proxy,
                            &eds.old_scope,
                            &eds.clusters,
                        );
                        update_digest(had, &old, &set)
                    }
                    // Partial, but what the client has is unknown: the whole state's digest.
                    None => {
                        let (names, key) = subscription.names_digest();
                        crate::generate_shared_digest(type_url, &ctx, &proxy, &scope, names, key)
                            .digest()
                    }
                };
                (set, digest)
            }
        };
        let counter = &mut self.nonce;
        let sent = subscriptions.answer(type_url, digest, ctx.version, skip_unchanged, || {
            next_nonce(counter, ctx.version)
        })?;
        Some(Response::Sotw(XdsResponse {
            type_url: type_url.url(),
            version_info: sent.version,
            nonce: sent.nonce,
            resources,
            control_plane: None,
        }))
    }
}
