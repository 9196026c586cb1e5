//! Per-type state of one Delta xDS stream: what the client subscribed to and which version of
//! each resource it has, so that only changed resources are sent and removals are named.
//!
//! Pure, and its state is its own but for the sets it shares with other streams: a stream's
//! [`StreamState`](super::stream::StreamState) hands each request to
//! [`DeltaSubscriptions::should_respond`], generates the names it reads here
//! ([`DeltaSubscription::wanted`]), and hands the generated set to
//! [`DeltaSubscriptions::answer`], which says what to send of it, if anything.
//!
//! What a client holds is kept as [`HeldVersions`](super::held): a version set shared with
//! every stream that holds the same, and this stream's difference from it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::held::HeldVersions;
use super::names::NameSets;
use super::subscription::Decision;
use crate::resource::{DeltaRequest, Resource, ResourceSet, ResourceType};

/// The hash in a version of ours ([`Resource::content_version`]).
fn parse_version(v: &str) -> Option<u64> {
    (v.len() == 16)
        .then(|| u64::from_str_radix(v, 16).ok())
        .flatten()
}

/// What to send of a generated set: the resources the client lacks, with their versions, the
/// names it must drop, and the response's nonce.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaSent {
    pub resources: Vec<(Resource, String)>,
    pub removed: Vec<String>,
    pub nonce: String,
    /// `resources` is the whole generated set, in its order (a first answer, a full change):
    /// its encoding can be the set's own, shared.
    pub whole: bool,
}

/// The Delta subscriptions of one stream, by type.
#[derive(Debug, Default)]
pub struct DeltaSubscriptions {
    /// Boxed, as the SotW ones (`SotwSubscriptions`).
    types: BTreeMap<ResourceType, Box<DeltaSubscription>>,
}

impl DeltaSubscriptions {
    /// Applies a request to the subscription of its type and says whether to respond.
    pub fn should_respond(
        &mut self,
        type_url: ResourceType,
        req: &DeltaRequest,
        shared: &NameSets,
    ) -> Decision {
        self.types
            .entry(type_url)
            .or_default()
            .on_request(type_url, req, shared)
    }

    /// Folds what the client of a type said it had (a reconnect's `initial_resource_versions`)
    /// into a set shared with the other streams, when it is large: for a request whose answer
    /// waits for a first context.
    pub fn settle(&mut self, type_url: ResourceType, shared: &NameSets) {
        if let Some(subscription) = self.types.get_mut(&type_url) {
            subscription.versions.settle(shared.versions());
        }
    }

    /// What to send of `set`, generated for the subscription's names, or for `within` only
    /// (an endpoint-only push generates just the changed clusters: names outside it are left
    /// as they are); `None` when there is nothing, except that the first answer of a type is
    /// always sent (even empty). A response is recorded as sent, with a nonce made by `nonce`.
    /// What the client holds is shared, through `shared`, with the streams that hold the same.
    pub fn answer(
        &mut self,
        type_url: ResourceType,
        set: &ResourceSet,
        within: Option<&BTreeSet<String>>,
        shared: &NameSets,
        nonce: impl FnOnce() -> String,
    ) -> Option<DeltaSent> {
        let subscription = self.types.get_mut(&type_url)?;
        let first = subscription.nonce_sent.is_none();
        let (resources, removed) = match within {
            Some(_) => subscription.diff_within_in(set, within, shared),
            None => subscription.diff_set_in(set, shared),
        };
        if resources.is_empty() && removed.is_empty() && !first {
            return None;
        }
        let nonce = nonce();
        subscription.nonce_sent = Some(nonce.as_str().into());
        // The changed resources come in the set's order: all of them is the set itself.
        let whole = within.is_none() && !resources.is_empty() && resources.len() == set.len();
        Some(DeltaSent {
            resources,
            removed,
            nonce,
            whole,
        })
    }

    /// The subscription of a type, if it has anything subscribed.
    pub fn subscribed(&self, type_url: ResourceType) -> Option<&DeltaSubscription> {
        self.get(type_url).filter(|w| w.is_subscribed())
    }

    /// The subscription of a type, if it was requested.
    pub fn get(&self, type_url: ResourceType) -> Option<&DeltaSubscription> {
        self.types.get(&type_url).map(|w| &**w)
    }

    /// Every type requested, subscribed or not.
    pub fn iter(&self) -> impl Iterator<Item = (ResourceType, &DeltaSubscription)> {
        self.types.iter().map(|(t, w)| (*t, &**w))
    }

    /// Whether a type was requested and every response sent has been ACKed.
    pub fn is_acked(&self) -> bool {
        !self.types.is_empty() && self.types.values().all(|w| w.is_acked())
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeltaSubscription {
    wildcard: bool,
    /// Names subscribed explicitly.
    /// Shared with every other stream subscribed to the same names.
    names: Arc<BTreeSet<String>>,
    /// The version of each resource the client has, as the hash our versions are made from
    /// (`None`: a version we did not make, from `initial_resource_versions`).
    /// Shared with every other stream that holds the same ([`HeldVersions`]).
    versions: HeldVersions,
    /// Boxed strings, as every byte of a subscription counts ten thousand times: it fits a
    /// 128-byte allocation.
    nonce_sent: Option<Box<str>>,
    nonce_acked: Option<Box<str>>,
    last_error: Option<Box<str>>,
    seen_first: bool,
    /// The digest of the generated set the client was last brought up to date with, while
    /// its subscriptions have not changed since: the same set again needs no diff.
    synced: Option<u64>,
}

impl DeltaSubscription {
    /// Applies a request. `Respond` means: send what the client lacks (after a first request,
    /// even if that is nothing).
    fn on_request(
        &mut self,
        type_url: ResourceType,
        req: &DeltaRequest,
        shared: &NameSets,
    ) -> Decision {
        if let Some(error) = &req.error_detail {
            self.last_error = Some(error.as_str().into());
            return Decision::Nack(error.clone());
        }
        // A first request may carry a nonce of an earlier stream (a reconnect): not stale.
        if !req.response_nonce.is_empty() && self.seen_first {
            if self.nonce_sent.as_deref() != Some(req.response_nonce.as_str()) {
                return Decision::Stale;
            }
            self.nonce_acked = Some(req.response_nonce.as_str().into());
            self.last_error = None;
        }
        let first = !self.seen_first;
        self.seen_first = true;
        if first || !req.subscribe.is_empty() || !req.unsubscribe.is_empty() {
            self.synced = None;
        }
        if first {
            self.wildcard = (type_url.is_wildcard_type() && req.subscribe.is_empty())
                || req.subscribe.iter().any(|n| n == "*");
            self.versions.apply(
                req.initial_versions
                    .iter()
                    .map(|(name, version)| (name.as_str(), Some(parse_version(version)))),
            );
        }
        let mut added = false;
        // The names are shared between streams: a changed list is a new set.
        let mut names: Option<BTreeSet<String>> = None;
        for name in &req.subscribe {
            if name == "*" {
                added |= !self.wildcard;
                self.wildcard = true;
            } else {
                let names = names.get_or_insert_with(|| (*self.names).clone());
                added |= names.insert(name.clone());
            }
        }
        for name in &req.unsubscribe {
            if name == "*" {
                self.wildcard = false;
            } else {
                names
                    .get_or_insert_with(|| (*self.names).clone())
                    .remove(name);
            }
        }
        self.versions
            .apply(req.unsubscribe.iter().map(|name| (name.as_str(), None)));
        if let Some(names) = names {
            self.names = shared.share_set(names);
        }
        // A first request is answered with a whole set, which replaces what it said it had:
        // folding it before would hash each of its names for nothing (unless the answer waits
        // for a first context: `DeltaSubscriptions::settle`).
        if !first {
            self.versions.settle(shared.versions());
        }
        if first || added {
            Decision::Respond
        } else {
            Decision::Ack
        }
    }

    pub fn is_subscribed(&self) -> bool {
        self.wildcard || !self.names.is_empty()
    }

    /// The names to generate (for EDS and RDS, the subscribed ones).
    pub fn wanted(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// [`DeltaSubscription::diff_within_in`] of a whole generated set, skipped when the client
    /// was already brought up to date with an equal set (most types of most pushes).
    fn diff_set_in(
        &mut self,
        set: &ResourceSet,
        shared: &NameSets,
    ) -> (Vec<(Resource, String)>, Vec<String>) {
        let digest = set.digest();
        if self.synced == Some(digest) {
            return (Vec::new(), Vec::new());
        }
        let out = self.diff_within_in(set, None, shared);
        self.synced = Some(digest);
        out
    }

    /// From a freshly generated set, what to send: resources the client does not have at
    /// this version, and the names it has that no longer exist (or are no longer subscribed).
    /// Records the new versions as the client's. A set generated for `within` only (an
    /// endpoint-only push generates just the changed clusters) leaves the names outside it as
    /// they are.
    fn diff_within_in(
        &mut self,
        resources: &ResourceSet,
        within: Option<&BTreeSet<String>>,
        shared: &NameSets,
    ) -> (Vec<(Resource, String)>, Vec<String>) {
        self.synced = None;
        let in_scope: Vec<&Resource> = resources
            .iter()
            .filter(|r| self.wildcard || self.names.contains(&r.name))
            .collect();
        let whole =
            (within.is_none() && in_scope.len() == resources.len()).then(|| resources.digest());
        self.versions
            .diff(&in_scope, within, whole, shared.versions())
    }

    /// What the client holds, by name.
    pub fn versions(&self) -> &HeldVersions {
        &self.versions
    }

    pub fn is_acked(&self) -> bool {
        self.nonce_sent.is_some() && self.nonce_sent == self.nonce_acked
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

    /// The error of the last NACK, until an ACK.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

#[cfg(test)]
mod sharing_tests;

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) static NAMES: std::sync::LazyLock<NameSets> =
        std::sync::LazyLock::new(NameSets::default);

    /// The diffs on the tests' [`NAMES`].
    pub(super) trait Diffs {
        fn diff(&mut self, resources: &[Resource]) -> (Vec<(Resource, String)>, Vec<String>);
        fn diff_set(&mut self, set: &ResourceSet) -> (Vec<(Resource, String)>, Vec<String>);
        fn diff_within(
            &mut self,
            resources: &[Resource],
            within: Option<&BTreeSet<String>>,
        ) -> (Vec<(Resource, String)>, Vec<String>);
    }

    impl Diffs for DeltaSubscription {
        fn diff(&mut self, resources: &[Resource]) -> (Vec<(Resource, String)>, Vec<String>) {
            self.diff_within(resources, None)
        }

        fn diff_set(&mut self, set: &ResourceSet) -> (Vec<(Resource, String)>, Vec<String>) {
            self.diff_set_in(set, &NAMES)
        }

        fn diff_within(
            &mut self,
            resources: &[Resource],
            within: Option<&BTreeSet<String>>,
        ) -> (Vec<(Resource, String)>, Vec<String>) {
            self.diff_within_in(&ResourceSet::from(resources.to_vec()), within, &NAMES)
        }
    }

    pub(super) fn res(name: &str, body: &[u8]) -> Resource {
        Resource::from_encoded(name, "t".into(), bytes::Bytes::copy_from_slice(body))
    }

    pub(super) fn req(subscribe: &[&str], unsubscribe: &[&str], nonce: &str) -> DeltaRequest {
        DeltaRequest {
            subscribe: subscribe.iter().map(|s| s.to_string()).collect(),
            unsubscribe: unsubscribe.iter().map(|s| s.to_string()).collect(),
            response_nonce: nonce.to_string(),
            ..Default::default()
        }
    }

    #[test]
    fn a_subscription_fits_a_128_byte_allocation() {
        // 10,000 streams hold four each: RSS is a benchmark target.
        assert!(size_of::<DeltaSubscription>() <= 128);
    }

    #[test]
    fn wildcard_first_request_is_answered_even_when_empty() {
        let mut w = DeltaSubscription::default();
        assert_eq!(
            w.on_request(ResourceType::Cluster, &req(&[], &[], ""), &NAMES),
            Decision::Respond
        );
        assert!(w.wildcard);
        assert_eq!(w.diff(&[]), (vec![], vec![]));
    }

    #[test]
    fn only_changes_and_removals_are_sent() {
        let mut w = DeltaSubscription::default();
        w.on_request(ResourceType::Cluster, &req(&[], &[], ""), &NAMES);
        let (sent, removed) = w.diff(&[res("a", b"1"), res("b", b"1")]);
        assert_eq!((sent.len(), removed.len()), (2, 0));
        w.nonce_sent = Some("n1".into());
        assert_eq!(
            w.on_request(ResourceType::Cluster, &req(&[], &[], "n1"), &NAMES),
            Decision::Ack
        );
        let (sent, removed) = w.diff(&[res("a", b"2")]);
        assert_eq!(
            sent.iter()
                .map(|(r, _)| r.name.as_str())
                .collect::<Vec<_>>(),
            ["a"]
        );
        assert_eq!(removed, ["b"]);
        assert_eq!(w.diff(&[res("a", b"2")]), (vec![], vec![]), "nothing new");
    }

    #[test]
    fn an_equal_set_is_recognized_until_the_subscription_changes() {
        let mut w = DeltaSubscription::default();
        w.on_request(ResourceType::Cluster, &req(&[], &[], ""), &NAMES);
        let set = |body: &[u8]| ResourceSet::from(vec![res("a", b"1"), res("b", body)]);
        assert_eq!(w.diff_set(&set(b"1")).0.len(), 2);
        w.nonce_sent = Some("n1".into());
        w.on_request(ResourceType::Cluster, &req(&[], &[], "n1"), &NAMES);
        assert_eq!(w.diff_set(&set(b"1")), (vec![], vec![]), "the same set");
        let (sent, _) = w.diff_set(&set(b"2"));
        assert_eq!(sent.len(), 1, "b changed");
        // A client that unsubscribes (and drops its version) is diffed again.
        w.on_request(ResourceType::Cluster, &req(&[], &["b"], "n1"), &NAMES);
        let (sent, _) = w.diff_set(&set(b"2"));
        assert_eq!(
            sent.iter()
                .map(|(r, _)| r.name.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
    }

    #[test]
    fn a_partial_set_leaves_the_other_names_alone() {
        let mut w = DeltaSubscription::default();
        w.on_request(
            ResourceType::Endpoint,
            &req(&["a", "b", "c"], &[], ""),
            &NAMES,
        );
        w.diff(&[res("a", b"1"), res("b", b"1"), res("c", b"1")]);
        let within = BTreeSet::from(["b".to_string(), "c".to_string()]);
        let (sent, removed) = w.diff_within(&[res("b", b"2")], Some(&within));
        assert_eq!(
            sent.iter()
                .map(|(r, _)| r.name.as_str())
                .collect::<Vec<_>>(),
            ["b"]
        );
        assert_eq!(removed, ["c"], "only a name within the set can be removed");
        assert!(w.versions.contains_key("a"), "a was not generated: kept");
    }

    #[test]
    fn subscribe_unsubscribe_and_initial_versions() {
        let mut w = DeltaSubscription::default();
        let mut first = req(&["x", "y"], &[], "");
        first
            .initial_versions
            .insert("x".into(), res("x", b"1").content_version());
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &first, &NAMES),
            Decision::Respond
        );
        assert!(!w.wildcard);
        let (sent, _) = w.diff(&[res("x", b"1"), res("y", b"1"), res("z", b"1")]);
        assert_eq!(
            sent.iter()
                .map(|(r, _)| r.name.as_str())
                .collect::<Vec<_>>(),
            ["y"],
            "x is already at this version; z is not subscribed"
        );
        w.nonce_sent = Some("n1".into());
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req(&["z"], &["x"], "n1"), &NAMES),
            Decision::Respond
        );
        let (sent, removed) = w.diff(&[res("x", b"1"), res("y", b"1"), res("z", b"1")]);
        assert_eq!(
            sent.iter()
                .map(|(r, _)| r.name.as_str())
                .collect::<Vec<_>>(),
            ["z"]
        );
        assert!(
            removed.is_empty(),
            "an unsubscribed name is not reported as removed"
        );
        assert_eq!(
            w.on_request(ResourceType::Endpoint, &req(&[], &[], "stale"), &NAMES),
            Decision::Stale
        );
    }
}
