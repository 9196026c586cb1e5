//! Per-type subscription state of one ADS stream, and istiod's `ShouldRespond` rule.
//!
//! Pure: a stream's [`StreamState`](super::stream::StreamState) keeps one [`Subscription`]
//! per resource type and asks [`Subscription::on_request`] what to do with each request; it
//! records what it sent with [`Subscription::sent`].

use std::collections::BTreeSet;
use std::sync::Arc;

use super::names::NameSets;
use crate::resource::{ResourceSet, ResourceType, XdsRequest};
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::sidecar_scope::SidecarScope;

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

/// What one stream has subscribed to for one type, and where the exchange stands.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Subscription {
    /// Shared with every other stream that subscribed the same names ([`NameSets`]); set
    /// only by a request (`set_names`), which resets the digest kept with them.
    pub names: Arc<BTreeSet<String>>,
    pub wildcard: bool,
    pub nonce_sent: Option<String>,
    pub nonce_acked: Option<String>,
    pub version_sent: Option<String>,
    pub version_acked: Option<String>,
    pub last_error: Option<String>,
    /// The [`crate::ResourceSet::digest`] of what the client has: of the last response
    /// sent (of the whole state, for a partial EDS response), or of the set it said it had
    /// on (re)connecting. A push whose set for this type has the same digest changes
    /// nothing for the proxy, and is not sent.
    pub digest_sent: Option<u64>,
    /// The context version the type was last answered from (sent, or found in sync).
    pub context_sent: Option<u64>,
    /// The `version_info` of a request with an empty nonce (a reconnect, or a client that
    /// restarts its subscription) that is still to be answered: when it is the version of
    /// what would be sent, nothing is sent.
    pub claimed: Option<String>,
    /// The hash of the request names `names` was last found equal to: a request with the
    /// same hash repeats them, and is not compared name by name.
    applied: Option<u64>,
    /// [`crate::names_digest`] of `names`, kept with them.
    digest: Option<crate::NamesDigest>,
}

impl Subscription {
    pub fn new(type_url: ResourceType) -> Subscription {
        Subscription {
            wildcard: type_url.is_wildcard_type(),
            ..Default::default()
        }
    }

    /// Applies a request to this state and says whether to respond (istiod's `ShouldRespond`).
    pub fn on_request(
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

    /// This type's set for the subscribed names ([`crate::generate_shared`]), with the
    /// names' digest kept here.
    pub fn generated(
        &mut self,
        type_url: ResourceType,
        ctx: &PushContext,
        proxy: &Proxy,
        scope: &SidecarScope,
    ) -> Arc<ResourceSet> {
        let (names, digest) = self.names_and_digest();
        crate::generate_shared_digest(type_url, ctx, proxy, scope, names, digest)
    }

    /// [`crate::names_digest`] of the subscribed names, computed once per name set.
    pub fn names_digest(&mut self) -> crate::NamesDigest {
        self.names_and_digest().1
    }

    fn names_and_digest(&mut self) -> (&BTreeSet<String>, crate::NamesDigest) {
        let names = &self.names;
        let digest = *self
            .digest
            .get_or_insert_with(|| crate::names_digest(names));
        (names, digest)
    }

    /// Whether this type has anything subscribed (a non-wildcard type with no names has not).
    pub fn is_subscribed(&self) -> bool {
        self.wildcard || !self.names.is_empty()
    }

    pub fn sent(&mut self, nonce: String, version: String) {
        self.nonce_sent = Some(nonce);
        self.version_sent = Some(version);
        self.claimed = None;
    }

    /// The client said it has `version`, the version of what would be sent: nothing is sent,
    /// and the type counts as ACKed at that version.
    pub fn in_sync(&mut self, version: String) {
        self.nonce_sent = None;
        self.nonce_acked = None;
        self.version_sent = Some(version.clone());
        self.version_acked = Some(version);
        self.last_error = None;
        self.claimed = None;
    }

    /// Whether every response sent has been ACKed (or none was needed: [`Self::in_sync`]).
    pub fn is_acked(&self) -> bool {
        self.nonce_sent == self.nonce_acked
            && (self.nonce_sent.is_some() || self.version_acked.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static NAMES: std::sync::LazyLock<NameSets> = std::sync::LazyLock::new(NameSets::default);

    fn req(nonce: &str, names: &[&str]) -> XdsRequest {
        XdsRequest {
            response_nonce: nonce.to_string(),
            resource_names: names.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_kept_digest_is_the_one_of_the_names() {
        let rds = ResourceType::Route;
        let mut w = Subscription::new(rds);
        w.on_request(rds, &req("", &["80", "8080"]), &NAMES);
        let first = w.names_digest();
        assert_eq!(first, crate::names_digest(&w.names));
        w.sent("n1".into(), "1".into());
        w.on_request(rds, &req("n1", &["80"]), &NAMES);
        let expected = crate::names_digest(&w.names);
        assert_ne!(expected, first);
        assert_eq!(w.names_digest(), expected, "new names, new digest");
    }

    #[test]
    fn first_request_then_ack_then_stale() {
        let mut w = Subscription::new(ResourceType::Endpoint);
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req("", &["a"]), &NAMES),
            Decision::Respond
        );
        w.sent("n1".into(), "1".into());
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req("n1", &["a"]), &NAMES),
            Decision::Ack
        );
        assert!(w.is_acked());
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req("old", &["a", "b"]), &NAMES),
            Decision::Stale
        );
        assert_eq!(w.names.len(), 1, "a stale request changes nothing");
        let mut other = Subscription::new(ResourceType::Endpoint);
        other.on_request(ResourceType::Endpoint, &req("", &["a"]), &NAMES);
        assert!(
            Arc::ptr_eq(&w.names, &other.names),
            "streams subscribing the same names share one set"
        );
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req("n1", &["a", "b"]), &NAMES),
            Decision::Respond
        );
    }

    #[test]
    fn nack_is_recorded_and_not_answered() {
        let mut w = Subscription::new(ResourceType::Cluster);
        w.on_request(ResourceType::Cluster, &req("", &[]), &NAMES);
        w.sent("n1".into(), "1".into());
        let mut nack = req("n1", &[]);
        nack.error_detail = Some("bad cluster".into());
        assert_eq!(
            w.on_request(ResourceType::Cluster, &nack, &NAMES),
            Decision::Nack("bad cluster".into())
        );
        assert_eq!(w.last_error.as_deref(), Some("bad cluster"));
        assert!(!w.is_acked());
    }

    #[test]
    fn a_named_cds_subscription_is_answered_when_names_change() {
        // gRPC clients ask CDS by name, adding names as routes reference them.
        let mut w = Subscription::new(ResourceType::Cluster);
        w.on_request(ResourceType::Cluster, &req("", &["a"]), &NAMES);
        assert!(!w.wildcard);
        w.sent("n1".into(), "1".into());
        assert_eq!(
            w.on_request(ResourceType::Cluster, &req("n1", &["a", "b"]), &NAMES),
            Decision::Respond
        );
    }

    #[test]
    fn wildcard_types_ignore_names_on_ack() {
        let mut w = Subscription::new(ResourceType::Listener);
        w.on_request(ResourceType::Listener, &req("", &[]), &NAMES);
        assert!(w.wildcard && w.is_subscribed());
        w.sent("n1".into(), "1".into());
        assert_eq!(
            w.on_request(ResourceType::Listener, &req("n1", &[]), &NAMES),
            Decision::Ack
        );
    }

    proptest::proptest! {
        /// Whatever was sent and whatever nonce comes back, only the last nonce sent is
        /// ever taken as an ACK.
        #[test]
        fn a_stale_nonce_is_never_taken_as_an_ack(
            sent in proptest::collection::vec("[a-z0-9]{1,4}", 1..6),
            reply in "[a-z0-9]{1,4}",
        ) {
            let mut w = Subscription::new(ResourceType::Endpoint);
            w.on_request(ResourceType::Endpoint, &req("", &["a"]), &NAMES);
            for (i, nonce) in sent.iter().enumerate() {
                w.sent(nonce.clone(), i.to_string());
            }
            let last = sent.last().unwrap().clone();
            let decision = w.on_request(ResourceType::Endpoint, &req(&reply, &["a"]), &NAMES);
            if reply == last {
                proptest::prop_assert_eq!(decision, Decision::Ack);
                proptest::prop_assert!(w.is_acked());
            } else {
                proptest::prop_assert_eq!(decision, Decision::Stale);
                proptest::prop_assert!(!w.is_acked());
                proptest::prop_assert_eq!(w.nonce_acked, None);
            }
        }
    }
}
