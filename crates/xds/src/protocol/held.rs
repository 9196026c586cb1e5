//! What a Delta client holds of one type (the name and version of every resource it was sent,
//! or said it had), kept once for all the streams that hold the same.
//!
//! Proxies that see the same world are sent the same sets, and so hold the same versions: a
//! stream's [`HeldVersions`] is a [`VersionSet`] shared by `Arc` with every stream that holds
//! exactly it ([`VersionSets`] interns them by digest), plus a small sorted overlay of where
//! this stream differs from it (an endpoint-only push that changed a few clusters, an
//! unsubscribe, the `initial_resource_versions` of a reconnect). A whole set answered makes
//! the client hold exactly its in-scope resources: the stream then takes the interned set of
//! those and drops its overlay; an overlay grown past a fraction of its base is folded into a
//! new interned base.
//!
//! One [`VersionSets`] is made at start-up (inside [`NameSets`](super::names::NameSets)) and
//! handed to every stream's state; nothing here is process-wide.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::hash::Hasher;
use std::iter::Peekable;
use std::slice;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use crate::resource::Resource;

#[cfg(test)]
mod tests;

/// A version held: the hash our versions are made from, `None` for one we did not make
/// (from `initial_resource_versions`).
pub type Version = Option<u64>;

/// An overlay grows to this many entries, or to a [`FOLD_FRACTION`] of its base, before it
/// is folded into a new shared base: it costs its stream about 80 bytes an entry (SotW keeps
/// no such state), a fold one pass over the base.
const FOLD_MIN: usize = 4;
const FOLD_FRACTION: usize = 16;

/// The one empty set, which every new stream starts from.
static EMPTY: LazyLock<Arc<VersionSet>> = LazyLock::new(Arc::default);

/// One term of a held set's digest: [`crate::resource::mix`] for a version of ours, so that
/// a set held is digested as the set it was sent.
fn mix(name: &str, version: Version) -> u64 {
    match version {
        Some(hash) => crate::resource::mix(name, hash),
        None => {
            let mut h = axon_config::hash::StableHasher::new();
            h.write_text(name);
            h.finish()
        }
    }
}

/// The digest of entries: the sum of their [`mix`], in any order.
fn digest_of(entries: &[(&str, Version)]) -> u64 {
    entries.iter().fold(0u64, |sum, (name, version)| {
        sum.wrapping_add(mix(name, *version))
    })
}

/// Held versions, sorted by name (unique), immutable and shared between streams.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct VersionSet {
    entries: Box<[(Box<str>, Version)]>,
    /// [`digest_of`] the entries: a fold updates it for the entries it changes.
    digest: u64,
}

impl VersionSet {
    fn new(digest: u64, entries: &[(&str, Version)]) -> VersionSet {
        VersionSet {
            entries: entries.iter().map(|(n, v)| (Box::from(*n), *v)).collect(),
            digest,
        }
    }

    fn get(&self, name: &str) -> Option<Version> {
        self.entries
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()
            .and_then(|i| self.entries.get(i))
            .map(|(_, v)| *v)
    }

    /// Whether the set holds exactly `entries` (sorted by name).
    fn matches(&self, entries: &[(&str, Version)]) -> bool {
        self.entries.len() == entries.len()
            && self
                .entries
                .iter()
                .zip(entries)
                .all(|((n, v), (m, w))| **n == **m && v == w)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Held sets by digest, shared between streams. Self-cleaning: an entry keeps only a weak
/// reference, and dead entries are swept whenever the map has doubled since the last sweep.
#[derive(Default)]
pub struct VersionSets {
    inner: Mutex<Interned>,
}

#[derive(Default)]
struct Interned {
    sets: HashMap<u64, Weak<VersionSet>>,
    /// Entries at the last sweep of dead ones.
    swept_at: usize,
}

impl VersionSets {
    /// The set of `entries` (sorted by name, names unique), whose digest is `digest`, shared
    /// with any stream that holds an equal one. Names are copied only for a set not held yet.
    pub fn share(&self, digest: u64, entries: &[(&str, Version)]) -> Arc<VersionSet> {
        if entries.is_empty() {
            return EMPTY.clone();
        }
        // Compared outside the lock: streams of other threads look up sets too.
        if let Some(existing) = self.live(digest)
            && existing.matches(entries)
        {
            return existing;
        }
        let set = Arc::new(VersionSet::new(digest, entries));
        let Ok(mut shared) = self.inner.lock() else {
            return set;
        };
        // Another stream may have made it meanwhile.
        if let Some(existing) = shared.sets.get(&digest).and_then(Weak::upgrade)
            && *existing == *set
        {
            return existing;
        }
        shared.sets.insert(digest, Arc::downgrade(&set));
        if shared.sets.len() > 2 * shared.swept_at + 1024 {
            shared.sets.retain(|_, set| set.strong_count() > 0);
            shared.swept_at = shared.sets.len();
        }
        set
    }

    /// The set of this digest, if a stream holds it.
    fn live(&self, digest: u64) -> Option<Arc<VersionSet>> {
        let shared = self.inner.lock().ok()?;
        shared.sets.get(&digest).and_then(Weak::upgrade)
    }

    /// Entries in the map, live or not yet swept.
    #[cfg(test)]
    fn entries(&self) -> usize {
        self.inner.lock().map(|s| s.sets.len()).unwrap_or(0)
    }
}

/// An entry of an overlay: a name and what the stream holds of it (a version, or `None`: not
/// held).
type Override = (Box<str>, Option<Version>);

/// What a client holds of one type: a shared base and where this stream differs from it.
#[derive(Debug, Clone)]
pub struct HeldVersions {
    base: Arc<VersionSet>,
    /// Sorted by name, unique, each differing from `base`: held at a version (`Some`) or not
    /// held (`None`, a name of `base` dropped). A boxed slice, no allocation when empty (most
    /// streams, most of the time); it is small, and copied when it changes.
    overlay: Box<[Override]>,
}

impl Default for HeldVersions {
    fn default() -> HeldVersions {
        HeldVersions {
            base: EMPTY.clone(),
            overlay: Box::default(),
        }
    }
}

/// Two are equal when they hold the same, however it is split between base and overlay.
impl PartialEq for HeldVersions {
    fn eq(&self, other: &HeldVersions) -> bool {
        self.iter().eq(other.iter())
    }
}

impl HeldVersions {
    /// The version held of `name`, if it is held.
    pub fn get(&self, name: &str) -> Option<Version> {
        let overlay = self.overlay();
        match overlay.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => overlay.get(i).and_then(|(_, v)| *v),
            Err(_) => self.base.get(name),
        }
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// Every name held and its version, by name.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            base: self.base.entries.iter().peekable(),
            overlay: self.overlay().iter().peekable(),
        }
    }

    /// The shared base.
    pub fn base(&self) -> &Arc<VersionSet> {
        &self.base
    }

    /// Entries of this stream's own (where it differs from its base).
    pub fn overlay_len(&self) -> usize {
        self.overlay().len()
    }

    fn overlay(&self) -> &[Override] {
        &self.overlay
    }

    pub fn insert(&mut self, name: &str, version: Version) {
        self.apply([(name, Some(version))]);
    }

    pub fn remove(&mut self, name: &str) {
        self.apply([(name, None)]);
    }

    /// Holds each name at its version (`None`: not at all), in the overlay unless the base
    /// agrees; the overlay is copied once for all of them (and not at all when it stays empty).
    pub fn apply<'a>(&mut self, changes: impl IntoIterator<Item = (&'a str, Option<Version>)>) {
        let mut overlay = std::mem::take(&mut self.overlay).into_vec();
        for (name, version) in changes {
            let same = self.base.get(name) == version;
            match (overlay.binary_search_by(|(n, _)| (**n).cmp(name)), same) {
                (Ok(i), true) => {
                    overlay.remove(i);
                }
                (Ok(i), false) => {
                    if let Some(entry) = overlay.get_mut(i) {
                        entry.1 = version;
                    }
                }
                (Err(_), true) => {}
                (Err(i), false) => overlay.insert(i, (Box::from(name), version)),
            }
        }
        self.overlay = overlay.into_boxed_slice();
    }

    /// Makes the client hold exactly `entries` (sorted, unique) digested as `digest`.
    fn replace(&mut self, shared: &VersionSets, digest: u64, entries: &[(&str, Version)]) {
        if !(self.base.digest == digest && self.base.matches(entries)) {
            self.base = shared.share(digest, entries);
        }
        self.overlay = Box::default();
    }

    /// Folds an overlay grown past its bound into a new shared base.
    pub fn settle(&mut self, shared: &VersionSets) {
        if self.overlay().len() <= FOLD_MIN.max(self.base.len() / FOLD_FRACTION) {
            return;
        }
        // The base's digest with the overlay's changes: no pass of hashing over the base.
        let digest = self
            .overlay()
            .iter()
            .fold(self.base.digest, |d, (name, version)| {
                let d = match self.base.get(name) {
                    Some(old) => d.wrapping_sub(mix(name, old)),
                    None => d,
                };
                match version {
                    Some(new) => d.wrapping_add(mix(name, *new)),
                    None => d,
                }
            });
        let base = {
            let entries: Vec<(&str, Version)> = self.iter().collect();
            debug_assert_eq!(digest, digest_of(&entries));
            shared.share(digest, &entries)
        };
        self.base = base;
        self.overlay = Box::default();
    }

    /// What to send of `in_scope` (the resources of a generated set the client subscribes
    /// to, in the set's order): those it does not hold at their version, and the names it
    /// holds (of `within`, if given) that are not among them. Records the result as held.
    /// A whole set (`within` is `None`) leaves the client holding exactly `in_scope`;
    /// `whole_digest` is its digest when it is the generated set entire.
    pub fn diff(
        &mut self,
        in_scope: &[&Resource],
        within: Option<&BTreeSet<String>>,
        whole_digest: Option<u64>,
        shared: &VersionSets,
    ) -> (Vec<(Resource, String)>, Vec<String>) {
        let mut sorted: Vec<(usize, &Resource)> = in_scope.iter().copied().enumerate().collect();
        // Stable: of resources of one name, the last in the set is the one held.
        sorted.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let mut changed: Vec<usize> = Vec::new();
        let mut removed: Vec<String> = Vec::new();
        let mut duplicates = false;
        let mut held = self.iter().peekable();
        let mut previous: Option<&Resource> = None;
        for &(i, r) in &sorted {
            while let Some((name, _)) = held.next_if(|(name, _)| *name < r.name.as_str()) {
                if within.is_none_or(|w| w.contains(name)) {
                    removed.push(name.to_string());
                }
            }
            let before = match previous {
                Some(p) if p.name == r.name => {
                    duplicates = true;
                    Some(Some(p.hash))
                }
                _ => held
                    .next_if(|(name, _)| *name == r.name.as_str())
                    .map(|(_, v)| v),
            };
            if before != Some(Some(r.hash)) {
                changed.push(i);
            }
            previous = Some(r);
        }
        for (name, _) in held {
            if within.is_none_or(|w| w.contains(name)) {
                removed.push(name.to_string());
            }
        }
        changed.sort_unstable();
        let changed: Vec<&Resource> = changed
            .iter()
            .filter_map(|&i| in_scope.get(i).copied())
            .collect();
        if within.is_none() {
            if !(changed.is_empty() && removed.is_empty() && self.overlay().is_empty()) {
                let mut entries: Vec<(&str, Version)> = sorted
                    .iter()
                    .map(|(_, r)| (r.name.as_str(), Some(r.hash)))
                    .collect();
                if duplicates {
                    // Keeps the last of each name.
                    entries.reverse();
                    entries.dedup_by(|a, b| a.0 == b.0);
                    entries.reverse();
                }
                let digest = match whole_digest {
                    Some(d) if !duplicates => d,
                    _ => digest_of(&entries),
                };
                self.replace(shared, digest, &entries);
            }
        } else {
            let drops = removed.iter().map(|name| (name.as_str(), None));
            let news = changed
                .iter()
                .map(|r| (r.name.as_str(), Some(Some(r.hash))));
            self.apply(drops.chain(news));
            self.settle(shared);
        }
        let changed = changed
            .into_iter()
            .map(|r| (r.clone(), r.content_version()))
            .collect();
        (changed, removed)
    }
}

/// The entries of a [`HeldVersions`], by name: its base's, as its overlay changes them.
pub struct Iter<'a> {
    base: Peekable<slice::Iter<'a, (Box<str>, Version)>>,
    overlay: Peekable<slice::Iter<'a, Override>>,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, Version);

    fn next(&mut self) -> Option<(&'a str, Version)> {
        loop {
            let order = match (self.base.peek(), self.overlay.peek()) {
                (None, None) => return None,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(b), Some(o)) => b.0.cmp(&o.0),
            };
            if order == Ordering::Less {
                return self.base.next().map(|(n, v)| (&**n, *v));
            }
            if order == Ordering::Equal {
                self.base.next();
            }
            if let Some((name, Some(version))) = self.overlay.next() {
                return Some((name, *version));
            }
        }
    }
}
