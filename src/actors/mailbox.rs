//! Sending to an actor and counting it in `axon_mailbox_depth{actor}`: every message that
//! a handler counts as handled ([`Metrics::handled`]) is sent through [`tell`] or [`ask`],
//! so that the two counts cannot diverge. A message to an actor that has already stopped is
//! dropped uncounted; one still in the mailbox of an actor that stops is counted and never
//! handled (a ConnectionActor whose stream ends with a Push queued), which the gauge keeps.

use actix::dev::{RecipientRequest, ToEnvelope};
use actix::prelude::*;

use axon_metrics::Metrics;

/// Sends `msg` to `to` (an actor of kind `actor`) without waiting for an answer.
pub fn tell<M>(metrics: &Metrics, actor: &str, to: &Recipient<M>, msg: M)
where
    M: Message + Send + 'static,
    M::Result: Send,
{
    // A message to an actor that has stopped is dropped: not counted as in its mailbox.
    if to.connected() {
        metrics.sent(actor);
        to.do_send(msg);
    }
}

/// [`tell`] to an actor's address.
pub fn tell_addr<A, M>(metrics: &Metrics, actor: &str, to: &Addr<A>, msg: M)
where
    A: Actor + Handler<M>,
    A::Context: ToEnvelope<A, M>,
    M: Message + Send + 'static,
    M::Result: Send,
{
    if to.connected() {
        metrics.sent(actor);
        to.do_send(msg);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Stops;

    impl Actor for Stops {
        type Context = Context<Self>;
    }

    #[derive(Message)]
    #[rtype(result = "()")]
    struct Stop;

    impl Handler<Stop> for Stops {
        type Result = ();
        fn handle(&mut self, _: Stop, ctx: &mut Context<Self>) {
            ctx.stop();
        }
    }

    #[actix_rt::test]
    async fn a_message_to_a_stopped_actor_is_not_counted() {
        let metrics = Metrics::new();
        let addr = Stops.start();
        let depth = || {
            metrics
                .mailbox_depth
                .with_label_values(&["connection"])
                .get()
        };
        addr.send(Stop).await.expect("handled");
        for _ in 0..100 {
            if !addr.connected() {
                break;
            }
            actix_rt::task::yield_now().await;
        }
        assert!(!addr.connected(), "the actor stopped");
        tell_addr(&metrics, "connection", &addr, Stop);
        tell(&metrics, "connection", &addr.clone().recipient(), Stop);
        assert_eq!(depth(), 0);
    }
}
