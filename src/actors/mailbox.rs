//! Sending to an actor and counting it in `axon_mailbox_depth{actor}`: every message that
//! a handler counts as handled ([`Metrics::handled`]) is sent through [`tell`] or [`ask`],
//! so that the two counts cannot diverge.

use actix::dev::{RecipientRequest, ToEnvelope};
use actix::prelude::*;

use crate::metrics::Metrics;

/// Sends `msg` to `to` (an actor of kind `actor`) without waiting for an answer.
pub fn tell<M>(metrics: &Metrics, actor: &str, to: &Recipient<M>, msg: M)
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    metrics.sent(actor);
    to.do_send(msg);
}

/// [`tell`] to an actor's address.
pub fn tell_addr<A, M>(metrics: &Metrics, actor: &str, to: &Addr<A>, msg: M)
where
    A: Actor + Handler<M>,
    A::Context: ToEnvelope<A, M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    metrics.sent(actor);
    to.do_send(msg);
}

/// Sends `msg` to `to` (an actor of kind `actor`); the answer arrives through the request.
pub fn ask<M>(metrics: &Metrics, actor: &str, to: &Recipient<M>, msg: M) -> RecipientRequest<M>
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    metrics.sent(actor);
    to.send(msg)
}
