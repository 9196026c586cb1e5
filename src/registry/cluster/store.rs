//! A store of one kind's objects by namespace and name, with watch-list semantics.
//!
//! Owned by the indexes. Between `init` and `init_done` (a watcher's initial list, or its
//! relist after 410 Gone) objects go to a buffer while the live map keeps serving; at
//! `init_done` the buffer replaces the live map and the store reports exactly the keys that
//! changed. Values are the trimmed part of an object that axon reads, so an update of the
//! resourceVersion or status alone is no change.

use std::collections::BTreeMap;
use std::fmt;

/// Names an object: namespace (empty for cluster-scoped kinds) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    pub namespace: String,
    pub name: String,
}

impl ObjKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of a Kubernetes object, `None` when it has no name.
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<Self> {
        let name = meta.name.as_deref().filter(|n| !n.is_empty())?;
        Some(ObjKey::new(
            meta.namespace.clone().unwrap_or_default(),
            name,
        ))
    }
}

impl fmt::Display for ObjKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One key whose value changed; `old` is what the store held before.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<T> {
    pub key: ObjKey,
    pub old: Option<T>,
}

#[derive(Debug)]
pub struct Store<T> {
    live: BTreeMap<ObjKey, T>,
    buffer: Option<BTreeMap<ObjKey, T>>,
}

impl<T> Default for Store<T> {
    fn default() -> Self {
        Store {
            live: BTreeMap::new(),
            buffer: None,
        }
    }
}

impl<T: PartialEq> Store<T> {
    pub fn get(&self, key: &ObjKey) -> Option<&T> {
        self.live.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ObjKey, &T)> {
        self.live.iter()
    }

    pub fn len(&self) -> usize {
        self.live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// A (re)list begins: what follows until [`Store::init_done`] is the whole kind.
    pub fn init(&mut self) {
        self.buffer = Some(BTreeMap::new());
    }

    /// An object of the list; `None` means it is not held (filtered out).
    pub fn init_apply(&mut self, key: ObjKey, value: Option<T>) {
        match (&mut self.buffer, value) {
            (Some(buffer), Some(v)) => {
                buffer.insert(key, v);
            }
            (Some(buffer), None) => {
                buffer.remove(&key);
            }
            // A list item without a list start: take it as an update.
            (None, value) => {
                self.apply(key, value);
            }
        }
    }

    /// The list is complete: it replaces the live objects. Returns the keys that changed.
    pub fn init_done(&mut self) -> Vec<Change<T>> {
        let Some(new) = self.buffer.take() else {
            return Vec::new();
        };
        let mut old = std::mem::replace(&mut self.live, new);
        let mut changes: Vec<Change<T>> = Vec::new();
        for (key, value) in &self.live {
            match old.remove(key) {
                Some(prev) if prev == *value => {}
                prev => changes.push(Change {
                    key: key.clone(),
                    old: prev,
                }),
            }
        }
        changes.extend(old.into_iter().map(|(key, prev)| Change {
            key,
            old: Some(prev),
        }));
        changes
    }

    /// An added or modified object; `None` means it is not held (filtered out), which
    /// removes what was held under its key.
    pub fn apply(&mut self, key: ObjKey, value: Option<T>) -> Option<Change<T>> {
        let old = match value {
            Some(v) => {
                if self.live.get(&key) == Some(&v) {
                    return None;
                }
                self.live.insert(key.clone(), v)
            }
            None => Some(self.live.remove(&key)?),
        };
        Some(Change { key, old })
    }

    pub fn delete(&mut self, key: &ObjKey) -> Option<Change<T>> {
        let old = self.live.remove(key)?;
        Some(Change {
            key: key.clone(),
            old: Some(old),
        })
    }

    /// Drops every object of `namespace` (a namespace no longer selected).
    pub fn purge_namespace(&mut self, namespace: &str) -> Vec<Change<T>> {
        if let Some(buffer) = &mut self.buffer {
            buffer.retain(|k, _| k.namespace != namespace);
        }
        let keys: Vec<ObjKey> = self
            .live
            .keys()
            .filter(|k| k.namespace == namespace)
            .cloned()
            .collect();
        keys.iter().filter_map(|k| self.delete(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(name: &str) -> ObjKey {
        ObjKey::new("ns", name)
    }

    #[test]
    fn a_relist_reports_exactly_what_changed() {
        let mut s = Store::default();
        s.init();
        s.init_apply(k("a"), Some(1));
        s.init_apply(k("b"), Some(2));
        assert!(s.is_empty(), "the list is buffered until it is done");
        assert_eq!(s.init_done().len(), 2);
        // A relist: a is the same, b changed, c is new, and d (never held) is filtered out.
        s.init();
        s.init_apply(k("a"), Some(1));
        s.init_apply(k("c"), Some(3));
        s.init_apply(k("d"), None);
        assert_eq!(s.get(&k("b")), Some(&2), "the live objects keep serving");
        let changes = s.init_done();
        let keys: Vec<&str> = changes.iter().map(|c| c.key.name.as_str()).collect();
        assert_eq!(keys, ["c", "b"]);
        assert_eq!(changes[1].old, Some(2));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn updates_with_the_same_value_are_no_change() {
        let mut s = Store::default();
        assert!(s.apply(k("a"), Some(1)).is_some());
        assert!(s.apply(k("a"), Some(1)).is_none());
        assert_eq!(s.apply(k("a"), None).map(|c| c.old), Some(Some(1)));
        assert!(s.delete(&k("a")).is_none());
        s.apply(ObjKey::new("x", "a"), Some(1));
        s.apply(ObjKey::new("y", "a"), Some(1));
        assert_eq!(s.purge_namespace("x").len(), 1);
        assert_eq!(s.len(), 1);
    }
}
