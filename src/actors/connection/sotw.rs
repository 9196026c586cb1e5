//! State-of-the-world requests and responses of a ConnectionActor.

use super::ConnectionActor;
use crate::xds::subscription::{Decision, Watched};
use crate::xds::{self, Response, TypeUrl, XdsRequest, XdsResponse};

impl ConnectionActor {
    pub(super) fn on_sotw_request(&mut self, req: XdsRequest) {
        let Some(type_url) = TypeUrl::parse(&req.type_url) else {
            self.unknown_type(&req.type_url);
            let version = self.ctx.as_ref().map_or(0, |c| c.version);
            let nonce = self.next_nonce(version);
            self.outbox.push(Response::Sotw(XdsResponse {
                type_url: req.type_url,
                version_info: version.to_string(),
                nonce,
                resources: Default::default(),
            }));
            return;
        };
        let watched = self
            .sotw
            .entry(type_url)
            .or_insert_with(|| Watched::new(type_url));
        let mut decision = watched.on_request(type_url, &req);
        if decision == Decision::Ack && type_url == TypeUrl::Endpoint && self.always_respond_eds {
            decision = Decision::Respond;
        }
        match decision {
            Decision::Respond => self.respond(type_url),
            Decision::Ack => {}
            Decision::Nack(error) => self.on_nack(type_url, &error),
            Decision::Stale => self.on_stale(type_url),
        }
    }

    /// The full current state of one type. A non-wildcard type with no names is unsubscribed
    /// and gets nothing.
    pub(super) fn sotw_response(&mut self, type_url: TypeUrl) -> Option<Response> {
        let (ctx, proxy, scope) = (self.ctx.clone()?, self.proxy.clone()?, self.scope.clone()?);
        let subscribed = &self
            .sotw
            .get(&type_url)
            .filter(|w| w.is_subscribed())?
            .names;
        let names = match (&self.eds_only, type_url) {
            (Some(changed), TypeUrl::Endpoint) => changed,
            _ => subscribed,
        };
        let resources = xds::generate_shared(type_url, &ctx, &proxy, &scope, names);
        let nonce = self.next_nonce(ctx.version);
        let version = ctx.version.to_string();
        self.sotw
            .get_mut(&type_url)?
            .sent(nonce.clone(), version.clone());
        Some(Response::Sotw(XdsResponse {
            type_url: type_url.url(),
            version_info: version,
            nonce,
            resources,
        }))
    }
}
