//! Subscribed name sets shared between streams: the streams of proxies that see the same
//! world subscribe the same names (a sidecar's EDS request names every cluster it sees), and
//! keep one copy of them between them instead of one each. It also carries the interner of
//! what Delta clients hold ([`VersionSets`]), which is shared the same way.
//!
//! One [`NameSets`] is made at start-up and handed to every stream's state; nothing here is
//! process-wide.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, Weak};

use super::held::VersionSets;

/// Name sets by the hash of the request list they came from.
#[derive(Default)]
pub struct NameSets {
    inner: Mutex<Inner>,
    versions: VersionSets,
}

#[derive(Default)]
struct Inner {
    sets: HashMap<u64, Weak<BTreeSet<String>>>,
    /// Entries at the last sweep of dead ones.
    swept_at: usize,
}

impl NameSets {
    /// The sets of versions Delta clients hold.
    pub fn versions(&self) -> &VersionSets {
        &self.versions
    }

    /// A set shared with any other stream that holds an equal one.
    pub fn share_set(&self, names: BTreeSet<String>) -> Arc<BTreeSet<String>> {
        self.share(axon_config::hash::hash_texts(names.iter()), names)
    }

    /// `names` as a set shared with any other stream that holds an equal one; `hash`
    /// identifies it (equal sets may come with different hashes, and then are not shared).
    pub fn share(&self, hash: u64, names: BTreeSet<String>) -> Arc<BTreeSet<String>> {
        if names.is_empty() {
            return Arc::default();
        }
        let Ok(mut shared) = self.inner.lock() else {
            return Arc::new(names);
        };
        if let Some(existing) = shared.sets.get(&hash).and_then(Weak::upgrade)
            && *existing == names
        {
            return existing;
        }
        let names = Arc::new(names);
        shared.sets.insert(hash, Arc::downgrade(&names));
        if shared.sets.len() > 2 * shared.swept_at + 1024 {
            shared.sets.retain(|_, set| set.strong_count() > 0);
            shared.swept_at = shared.sets.len();
        }
        names
    }
}
