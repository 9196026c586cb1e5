//! The state-of-the-world subscriptions of one ADS stream and istiod's `ShouldRespond` rule
//! over them, in one place: whether a request is answered (a first request, a reconnect, an
//! ACK with changed names, an ACK of EDS right after a CDS response: AlwaysRespond) or not (an
//! ACK, a NACK, a stale nonce), and whether a generated set is sent (not when the client
//! already has it: a push of the same set, a reconnect that names its version).
//!
//! Pure, and its state is its own: a stream's [`StreamState`](super::stream::StreamState)
//! hands each request to [`SotwSubscriptions::should_respond`], generates what the answer
//! needs with the names it reads here, and hands the generated set's digest to
//! [`SotwSubscriptions::answer`], which says what to send, if anything, and records it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::names::NameSets;
use crate::NamesDigest;
use crate::resource::{ResourceType, XdsRequest, sotw_version};

#[cfg(test)]
mod tests;

/// What a request asks of the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Send the current resources of this type.
    Respond,
    /// An ACK of the last response: nothing to send.
    Ack,
    /// Envoy rejected the last response: record it, send nothing (no re-push loop).
    Nack(String),
    /// A nonce that is not the last one sent: ignore.
    Stale,
}

/// A response to send: its `version_info` and nonce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub version: String,
    pub nonce: String,
}

/// The SotW subscriptions of one stream, by type.
#[derive(Debug, Default)]
pub struct SotwSubscriptions {
    /// Boxed: a map's node has room for 11 values, and 11 inline subscriptions of ~230 bytes
    /// made 2.5 KiB per stream for the four or five types a proxy subscribes.
    types: BTreeMap<ResourceType, Box<Subscription>>,
    /// After CDS is sent, the next EDS request is answered even if it looks like an ACK, and
    /// EDS is sent even to a client that says it has it, until an EDS response is sent, so
    /// that cluster warming completes (istiod's AlwaysRespond, envoy#13009).
    always_respond_eds: bool,
}

impl SotwSubscriptions {
    /// Applies a request to the subscription of its type and says whether to respond
    /// (istiod's `ShouldRespond`).
    pub fn should_respond(
        &mut self,
        type_url: ResourceType,
        req: &XdsRequest,
        shared: &NameSets,
    ) -> Decision {
        let subscription = self
            .types
            .entry(type_url)
            .or_insert_with(|| Box::new(Subscription::new(type_url)));
        match subscription.on_request(type_url, req, shared) {
            Decision::Ack if type_url == ResourceType::Endpoint && self.always_respond_eds => {
                Decision::Respond
            }
            decision => decision,
        }
    }

    /// What to send of a set generated for `type_url` from the context of version `context`,
    /// whose [`crate::ResourceSet::digest`] (of the whole state the client will have, for a
    /// partial EDS response) is `digest`; `None`: nothing, the client has it. With
    /// `skip_unchanged` (a push), a set of the digest last sent is not sent again. A set of the
    /// version a reconnecting client named is not sent either (the type is then in sync), but
    /// EDS right after a CDS response. A response is recorded as sent, with a nonce made by
    /// `nonce`.
    pub fn answer(
        &mut self,
        type_url: ResourceType,
        digest: u64,
        context: u64,
        skip_unchanged: bool,
        nonce: impl FnOnce() -> String,
    ) -> Option<Sent> {
        let warming = type_url == ResourceType::Endpoint && self.always_respond_eds;
        let subscription = self.types.get_mut(&type_url)?;
        let sent = subscription.answer(digest, context, skip_unchanged, warming, nonce)?;
        // EDS must follow a CDS response; an EDS response satisfies that.
        self.always_respond_eds = type_url == ResourceType::Cluster
            || (self.always_respond_eds && type_url != ResourceType::Endpoint);
        Some(sent)
    }

    /// The subscription of a type, if it has anything subscribed.
    pub fn subscribed(&self, type_url: ResourceType) -> Option<&Subscription> {
        self.types
            .get(&type_url)
            .map(|w| &**w)
            .filter(|w| w.is_subscribed())
    }

    /// [`Self::subscribed`], to read its names' digest.
    pub fn subscribed_mut(&mut self, type_url: ResourceType) -> Option<&mut Subscription> {
        self.types
            .get_mut(&type_url)
            .map(|w| &mut **w)
            .filter(|w| w.is_subscribed())
    }

    /// Every type requested, subscribed or not.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceType, &Subscription)> {
        self.types.iter().map(|(t, w)| (*t, &**w))
    }

    /// Whether a type was requested and every response sent has been ACKed.
    pub fn is_acked(&self) -> bool {
        !self.types.is_empty() && self.types.values().all(|w| w.is_acked())
    }
}

/// What one stream has subscribed to for one type, and where the exchange stands.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subscription {
    /// Shared with every other stream that subscribed the same names ([`NameSets`]); set
    /// only by a request (`set_names`), which resets the digest kept with them.
    names: Arc<BTreeSet<String>>,
    wildcard: bool,
    nonce_sent: Option<String>,
    nonce_acked: Option<String>,
    version_sent: Option<String>,
    version_acked: Option<String>,
    last_error: Option<String>,
    /// The [`crate::ResourceSet::digest`] of what the client has: of the last response
    /// sent (of the whole state, for a partial EDS response), or of the set it said it had
    /// on (re)connecting. A push whose set for this type has the same digest changes
    /// nothing for the proxy, and is not sent.
    digest_sent: Option<u64>,
    /// The context version the type was last answered from (sent, or found in sync).
    context_sent: Option<u64>,
    /// The `version_info` of a request with an empty nonce (a reconnect, or a client that
    /// restarts its subscription) that is still to be answered: when it is the version of
    /// what would be sent, nothing is sent.
    claimed: Option<String>,
    /// The hash of the request names `names` was last found equal to: a request with the
    /// same hash repeats them, and is not compared name by name.
    applied: Option<u64>,
    /// [`crate::names_digest`] of `names`, kept with them.
    digest: Option<NamesDigest>,
}

impl Subscription {
    fn new(type_url: ResourceType) -> Subscription {
        Subscription {
            wildcard: type_url.is_wildcard_type(),
            ..Default::default()
        }
    }

    /// The per-type part of `ShouldRespond`.
    fn on_request(
        &mut self,
        type_url: ResourceType,
        req: &XdsRequest,
        shared: &NameSets,
    ) -> Decision {
        if let Some(error) = &req.error_detail {
            self.last_error = Some(error.clone());
            return Decision::Nack(error.clone());
        }
        let first = self.nonce_sent.is_none();
        // An empty nonce is a new subscription (or a reconnect): always answered.
        if first || req.response_nonce.is_empty() {
            self.set_names(type_url, req, shared);
            self.claimed = (req.response_nonce.is_empty() && !req.version_info.is_empty())
                .then(|| req.version_info.clone());
            return Decision::Respond;
        }
        if self.nonce_sent.as_deref() != Some(req.response_nonce.as_str()) {
            return Decision::Stale;
        }
        self.nonce_acked = Some(req.response_nonce.clone());
        self.version_acked = Some(req.version_info.clone());
        self.last_error = None;
        // A wildcard subscription (Envoy's CDS and LDS) ignores names; a named one (a gRPC
        // client's CDS and LDS, everyone's EDS and RDS) is answered when they change.
        // Most ACKs repeat the names: the very same list, or else compared without building
        // a new set.
        let names = &req.resource_names;
        if self.applied == Some(names.hash()) {
            return Decision::Ack;
        }
        let same = names.len() == self.names.len() && names.iter().all(|n| self.names.contains(n));
        if same {
            self.applied = Some(names.hash());
            return Decision::Ack;
        }
        let was_wildcard = type_url.is_wildcard_type() && self.wildcard;
        let previous = std::mem::take(&mut self.names);
        self.set_names(type_url, req, shared);
        let now_wildcard = type_url.is_wildcard_type() && self.wildcard;
        let changed = !(was_wildcard && now_wildcard) && previous != self.names;
        if changed {
            Decision::Respond
        } else {
            Decision::Ack
        }
    }

    fn set_names(&mut self, type_url: ResourceType, req: &XdsRequest, shared: &NameSets) {
        let names: BTreeSet<String> = req.resource_names.iter().map(str::to_string).collect();
        if type_url.is_wildcard_type() {
            self.wildcard = names.is_empty() || names.contains("*");
        }
        self.names = shared.share(req.resource_names.hash(), names);
        self.applied = Some(req.resource_names.hash());
        self.digest = None;
    }

    /// The per-type part of [`SotwSubscriptions::answer`]; `warming`: EDS right after a CDS
    /// response.
    fn answer(
        &mut self,
        digest: u64,
        context: u64,
        skip_unchanged: bool,
        warming: bool,
        nonce: impl FnOnce() -> String,
    ) -> Option<Sent> {
        let version = sotw_version(digest);
        if skip_unchanged && self.digest_sent == Some(digest) {
            return None;
        }
        self.digest_sent = Some(digest);
        self.context_sent = Some(context);
        if self.claimed.take().is_some_and(|v| v == version) && !warming {
            self.in_sync(version);
            return None;
        }
        let nonce = nonce();
        self.nonce_sent = Some(nonce.clone());
        self.version_sent = Some(version.clone());
        Some(Sent { version, nonce })
    }

    /// The client said it has `version`, the version of what would be sent: nothing is sent,
    /// and the type counts as ACKed at that version.
    fn in_sync(&mut self, version: String) {
        self.nonce_sent = None;
        self.nonce_acked = None;
        self.version_sent = Some(version.clone());
        self.version_acked = Some(version);
        self.last_error = None;
    }

    /// The subscribed names.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// The subscribed names and their [`crate::names_digest`], computed once per name set.
    pub fn names_digest(&mut self) -> (&BTreeSet<String>, NamesDigest) {
        let names = &self.names;
        let digest = *self
            .digest
            .get_or_insert_with(|| crate::names_digest(names));
        (names, digest)
    }

    /// The digest of what the client has, if known: of the last set sent, or of the one it
    /// named on reconnecting.
    pub fn digest_sent(&self) -> Option<u64> {
        self.digest_sent
    }

    /// Whether this type has anything subscribed (a non-wildcard type with no names has not).
    pub fn is_subscribed(&self) -> bool {
        self.wildcard || !self.names.is_empty()
    }

    /// Whether a push of the context of version `context` has something to send: the type is
    /// subscribed and was not answered from that very context.
    pub fn needs(&self, context: u64) -> bool {
        self.is_subscribed() && self.context_sent != Some(context)
    }

    /// Whether every response sent has been ACKed (or none was needed: the client had it).
    pub fn is_acked(&self) -> bool {
        self.nonce_sent == self.nonce_acked
            && (self.nonce_sent.is_some() || self.version_acked.is_some())
    }

    pub fn wildcard(&self) -> bool {
        self.wildcard
    }

    pub fn nonce_sent(&self) -> Option<&str> {
        self.nonce_sent.as_deref()
    }

    pub fn nonce_acked(&self) -> Option<&str> {
        self.nonce_acked.as_deref()
    }

    pub fn version_sent(&self) -> Option<&str> {
        self.version_sent.as_deref()
    }

    pub fn version_acked(&self) -> Option<&str> {
        self.version_acked.as_deref()
    }

    /// The error of the last NACK, until an ACK.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}
