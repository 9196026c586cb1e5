//! State-of-the-world requests and responses: the full current state of a type on every
//! answer.

use super::{Output, StreamState};
use crate::xds::resource::{ResourceType, Response, XdsRequest, XdsResponse};
use crate::xds::subscription::{Decision, Subscription};

impl StreamState {
    pub(super) fn on_sotw_request(&mut self, req: XdsRequest, out: &mut Output) {
        let Some(type_url) = ResourceType::parse(&req.type_url) else {
            self.unknown_type(&req.type_url, out);
            let version = self.context_version().unwrap_or(0);
            let nonce = self.next_nonce(version);
            out.responses.push(Response::Sotw(XdsResponse {
                type_url: req.type_url,
                version_info: version.to_string(),
                nonce,
                resources: Default::default(),
            }));
            return;
        };
        let subscription = self
            .sotw
            .entry(type_url)
            .or_insert_with(|| Subscription::new(type_url));
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
    /// one sent last (same digest): the proxy has it already.
    pub(super) fn sotw_response(
        &mut self,
        type_url: ResourceType,
        skip_unchanged: bool,
    ) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let subscribed = &self
            .sotw
            .get(&type_url)
            .filter(|w| w.is_subscribed())?
            .names;
        let names = match (&self.eds_only, type_url) {
            (Some(changed), ResourceType::Endpoint) => changed,
            _ => subscribed,
        };
        let resources = crate::xds::generate_shared(type_url, &ctx, &proxy, &scope, names);
        let digest = resources.digest();
        let subscription = self.sotw.get(&type_url)?;
        if skip_unchanged && subscription.digest_sent == Some(digest) {
            return None;
        }
        let nonce = self.next_nonce(ctx.version);
        let version = ctx.version.to_string();
        let subscription = self.sotw.get_mut(&type_url)?;
        subscription.sent(nonce.clone(), version.clone());
        subscription.digest_sent = Some(digest);
        Some(Response::Sotw(XdsResponse {
            type_url: type_url.url(),
            version_info: version,
            nonce,
            resources,
        }))
    }
}
