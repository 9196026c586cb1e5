//! State-of-the-world requests and responses: the full current state of a type on every
//! answer.

use super::{Output, StreamState};
use crate::protocol::subscription::{Decision, Subscription};
use crate::resource::{
    ResourceSet, ResourceType, Response, XdsRequest, XdsResponse, sotw_version, update_digest,
};

impl StreamState {
    pub(super) fn on_sotw_request(&mut self, req: XdsRequest, out: &mut Output) {
        let Some(type_url) = ResourceType::parse(&req.type_url) else {
            self.unknown_type(&req.type_url, out);
            let nonce = self.next_nonce(self.context_version().unwrap_or(0));
            out.responses.push(Response::Sotw(XdsResponse {
                type_url: req.type_url,
                version_info: sotw_version(ResourceSet::default().digest()),
                nonce,
                resources: Default::default(),
            }));
            return;
        };
        let subscription = self
            .sotw
            .entry(type_url)
            .or_insert_with(|| Box::new(Subscription::new(type_url)));
        let mut decision = subscription.on_request(type_url, &req, &self.names);
        if decision == Decision::Ack
            && type_url == ResourceType::Endpoint
            && self.always_respond_eds
        {
            decision = Decision::Respond;
        }
        self.on_decision(type_url, decision, out);
    }

    /// The full current state of one type. A non-wildcard type with no names is unsubscribed
    /// and gets nothing; with `skip_unchanged` (a push), neither does one whose set is the
    /// one sent last (same digest): the proxy has it already. Nor does a request with an
    /// empty nonce whose `version_info` is the version of the set (a reconnect to this or
    /// another replica): the client has that set (but EDS right after a CDS response, which
    /// Envoy's warming clusters wait for). `version_info` is the set's digest; during an
    /// endpoint-only push the response carries the changed clusters only, and its version
    /// is the digest of the whole state the client then has.
    pub(super) fn sotw_response(
        &mut self,
        type_url: ResourceType,
        skip_unchanged: bool,
    ) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let subscription = self.sotw.get_mut(&type_url).filter(|w| w.is_subscribed())?;
        let partial = match &self.eds_only {
            Some(eds) if type_url == ResourceType::Endpoint => Some(eds),
            _ => None,
        };
        let resources = match partial {
            Some(eds) => crate::generate_shared(type_url, &ctx, &proxy, &scope, &eds.clusters),
            None => subscription.generated(type_url, &ctx, &proxy, &scope),
        };
        let subscription = &**subscription;
        let digest = match (partial, subscription.digest_sent) {
            (Some(eds), Some(had)) => {
                let old = crate::generate_shared(
                    type_url,
                    &eds.old_ctx,
                    &proxy,
                    &eds.old_scope,
                    &eds.clusters,
                );
                update_digest(had, &old, &resources)
            }
            // Partial, but what the client has is unknown: the whole state's digest.
            (Some(_), None) => {
                crate::generate_shared(type_url, &ctx, &proxy, &scope, &subscription.names).digest()
            }
            (None, _) => resources.digest(),
        };
        let version = sotw_version(digest);
        let subscription = self.sotw.get_mut(&type_url)?;
        if skip_unchanged && subscription.digest_sent == Some(digest) {
            return None;
        }
        let warming = type_url == ResourceType::Endpoint && self.always_respond_eds;
        if subscription.claimed.take().is_some_and(|v| v == version) && !warming {
            subscription.in_sync(version);
            subscription.digest_sent = Some(digest);
            subscription.context_sent = Some(ctx.version);
            return None;
        }
        let nonce = self.next_nonce(ctx.version);
        let subscription = self.sotw.get_mut(&type_url)?;
        subscription.sent(nonce.clone(), version.clone());
        subscription.digest_sent = Some(digest);
        subscription.context_sent = Some(ctx.version);
        Some(Response::Sotw(XdsResponse {
            type_url: type_url.url(),
            version_info: version,
            nonce,
            resources,
        }))
    }
}
