//! A stream's subscriptions, by type, of the protocol it was opened with: one enum, so that
//! what the stream asks of them (what is subscribed, whether a push has something to send,
//! whether everything is ACKed, the status) is asked once, whatever the protocol.

use std::collections::BTreeSet;

use super::status::TypeStatus;
use crate::protocol::delta::DeltaSubscriptions;
use crate::protocol::subscription::SotwSubscriptions;
use crate::resource::ResourceType;

/// The xDS protocol of a stream: the ADS method it was opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// State of the world (`StreamAggregatedResources`).
    Sotw,
    /// Incremental (`DeltaAggregatedResources`).
    Delta,
}

impl Protocol {
    /// The protocol of a stream opened with the Delta method (`delta`) or the SotW one.
    pub fn from_delta(delta: bool) -> Protocol {
        if delta {
            Protocol::Delta
        } else {
            Protocol::Sotw
        }
    }

    /// As `/debug/syncz` names it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Sotw => "sotw",
            Protocol::Delta => "delta",
        }
    }
}

/// A stream's subscriptions by type (the maps' values are boxed: see
/// `SotwSubscriptions`).
#[derive(Debug)]
pub(super) enum Subscriptions {
    Sotw(SotwSubscriptions),
    Delta(DeltaSubscriptions),
}

impl Subscriptions {
    pub(super) fn new(protocol: Protocol) -> Subscriptions {
        match protocol {
            Protocol::Sotw => Subscriptions::Sotw(SotwSubscriptions::default()),
            Protocol::Delta => Subscriptions::Delta(DeltaSubscriptions::default()),
        }
    }

    pub(super) fn protocol(&self) -> Protocol {
        match self {
            Subscriptions::Sotw(_) => Protocol::Sotw,
            Subscriptions::Delta(_) => Protocol::Delta,
        }
    }

    /// The names subscribed for a type, if it is subscribed at all.
    pub(super) fn subscribed(&self, type_url: ResourceType) -> Option<&BTreeSet<String>> {
        match self {
            Subscriptions::Sotw(s) => s.subscribed(type_url).map(|w| w.names()),
            Subscriptions::Delta(d) => d.subscribed(type_url).map(|w| w.wanted()),
        }
    }

    /// Whether a push of the context of version `context` has something to send for this
    /// type: it is subscribed, and (SotW) was not already answered from that very context.
    pub(super) fn needs(&self, type_url: ResourceType, context: u64) -> bool {
        match self {
            Subscriptions::Sotw(s) => s.subscribed(type_url).is_some_and(|w| w.needs(context)),
            Subscriptions::Delta(d) => d.subscribed(type_url).is_some(),
        }
    }

    /// Whether a type was requested and every response sent has been ACKed.
    pub(super) fn is_acked(&self) -> bool {
        match self {
            Subscriptions::Sotw(s) => s.is_acked(),
            Subscriptions::Delta(d) => d.is_acked(),
        }
    }

    /// The exchange of every type requested.
    pub(super) fn status(&self) -> Vec<TypeStatus> {
        let owned = |s: Option<&str>| s.map(str::to_string);
        match self {
            Subscriptions::Sotw(s) => s
                .iter()
                .map(|(t, w)| TypeStatus {
                    type_name: t.short(),
                    type_url: t.url(),
                    wildcard: w.wildcard(),
                    subscribed: w.names().len(),
                    nonce_sent: owned(w.nonce_sent()),
                    nonce_acked: owned(w.nonce_acked()),
                    version_sent: owned(w.version_sent()),
                    version_acked: owned(w.version_acked()),
                    last_error: owned(w.last_error()),
                })
                .collect(),
            Subscriptions::Delta(d) => d
                .iter()
                .map(|(t, w)| TypeStatus {
                    type_name: t.short(),
                    type_url: t.url(),
                    wildcard: w.wildcard(),
                    subscribed: w.wanted().len(),
                    nonce_sent: owned(w.nonce_sent()),
                    nonce_acked: owned(w.nonce_acked()),
                    version_sent: None,
                    version_acked: None,
                    last_error: owned(w.last_error()),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn one_enum_is_no_larger_than_the_two_maps_it_replaced() {
        // 10,000 streams each hold one: RSS is a benchmark target.
        assert!(
            size_of::<Subscriptions>() + size_of::<bool>()
                <= 2 * size_of::<BTreeMap<ResourceType, Box<()>>>() + 2 * size_of::<bool>()
        );
    }
}
