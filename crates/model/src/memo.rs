//! A memo attached to one immutable `PushContext`: answers computed from the context once and
//! shared by every proxy that asks the same question of it (its SidecarScope, its generated
//! resources), like istiod's XdsCache. It lives and dies with its context, so nothing in it
//! can be stale.
//!
//! Typed: each kind of answer has a [`Table`] of its own, keyed by a type that says what the
//! answer depends on, and looked up by a borrowed form of that key ([`KeyRef`]), so that a hit
//! allocates nothing. The tables of one user are one [`Layer`]: the SidecarScopes of
//! `sidecar_scope`, the generated resources of `axon-xds`. The memo holds each layer by its
//! type, made on first use; it cannot name them (the scopes' module reads the context, and
//! `axon-xds` is a layer above), so that is the one place a type is looked up at run time.

use std::any::Any;
use std::hash::Hash;
use std::sync::{Arc, OnceLock, RwLock};

pub use hashbrown::Equivalent;
use hashbrown::HashMap;

/// The tables one user of the memo keeps in a context: made empty (`Default`) on first use.
pub trait Layer: Any + Send + Sync {
    /// The entries of all its tables.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The layers a memo has room for (the model's scopes and `axon-xds`'s generated resources
/// are two).
const LAYERS: usize = 4;

#[derive(Default)]
pub struct Memo {
    /// Each set once, in order: a layer's type is in the first slot that holds it.
    layers: [OnceLock<Box<dyn Layer>>; LAYERS],
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} entries)", self.len())
    }
}

impl Memo {
    /// The layer of type `T` of this context, made empty the first time it is asked for.
    pub fn layer<T: Layer + Default>(&self) -> &T {
        for slot in &self.layers {
            // A slot is set once: by whoever comes first, with the layer it looks for; the
            // others then see that layer, and move on if it is not theirs.
            let layer: &dyn Any = &**slot.get_or_init(|| Box::new(T::default()));
            if let Some(layer) = layer.downcast_ref::<T>() {
                return layer;
            }
        }
        panic!("a memo has room for {LAYERS} layers");
    }

    /// The entries of every layer.
    pub fn len(&self) -> usize {
        self.layers
            .iter()
            .filter_map(OnceLock::get)
            .map(|layer| layer.len())
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A borrowed form of a table's key `K`: found without making a `K`, which is made
/// ([`KeyRef::to_key`]) only to store a new entry. Its `Hash` must hash as the `K` it is
/// equivalent to.
pub trait KeyRef<K>: Hash + Equivalent<K> {
    fn to_key(&self) -> K;
}

impl KeyRef<Box<str>> for str {
    fn to_key(&self) -> Box<str> {
        self.into()
    }
}

/// Answers of one kind, by key. Read far more than written (every proxy of a view reads what
/// the first one stored), from every connection thread at once: readers do not wait for each
/// other.
pub struct Table<K, V> {
    entries: RwLock<HashMap<K, Arc<V>>>,
}

impl<K, V> Default for Table<K, V> {
    fn default() -> Self {
        Table {
            entries: RwLock::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq, V> Table<K, V> {
    /// The value memoized under `key`, computing it with `compute` if absent. The lock is not
    /// held while computing: two callers may both compute, and the first stored value wins.
    pub fn get_or_compute<Q>(&self, key: &Q, compute: impl FnOnce() -> V) -> Arc<V>
    where
        Q: KeyRef<K> + ?Sized,
    {
        if let Some(found) = self.get(key) {
            return found;
        }
        let value = Arc::new(compute());
        let Ok(mut entries) = self.entries.write() else {
            return value;
        };
        if let Some(found) = entries.get(key) {
            return found.clone();
        }
        entries.insert(key.to_key(), value.clone());
        value
    }

    pub fn get<Q>(&self, key: &Q) -> Option<Arc<V>>
    where
        Q: Hash + Equivalent<K> + ?Sized,
    {
        self.entries.read().ok()?.get(key).cloned()
    }

    pub fn len(&self) -> usize {
        self.entries.read().map_or(0, |e| e.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Numbers(Table<Box<str>, Vec<i32>>);

    impl Layer for Numbers {
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    #[derive(Default)]
    struct Words(Table<Box<str>, String>);

    impl Layer for Words {
        fn len(&self) -> usize {
            self.0.len()
        }
    }

    #[test]
    fn computes_once_per_key() {
        let memo = Memo::default();
        let mut calls = 0;
        let table = &memo.layer::<Numbers>().0;
        let a = table.get_or_compute("k", || {
            calls += 1;
            vec![1, 2]
        });
        let b = table.get_or_compute("k", || -> Vec<i32> { unreachable!("memoized") });
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(calls, 1);
        assert_eq!(memo.len(), 1);
    }

    #[test]
    fn each_layer_is_its_own() {
        let memo = Memo::default();
        memo.layer::<Words>()
            .0
            .get_or_compute("k", || "v".to_string());
        memo.layer::<Numbers>().0.get_or_compute("k", || vec![1]);
        assert_eq!(*memo.layer::<Words>().0.get("k").unwrap(), "v");
        assert_eq!(*memo.layer::<Numbers>().0.get("k").unwrap(), [1]);
        assert_eq!(memo.len(), 2);
    }
}
