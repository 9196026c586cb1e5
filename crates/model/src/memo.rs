//! A memo attached to one immutable `PushContext`: answers computed from the context once and
//! shared by every proxy that asks the same question of it (its SidecarScope, its generated
//! resources), like istiod's XdsCache. It lives and dies with its context, so nothing in it
//! can be stale.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

#[derive(Default)]
pub struct Memo {
    /// Read far more than written (every proxy of a view reads what the first one stored),
    /// from every connection thread at once: readers do not wait for each other.
    entries: RwLock<HashMap<String, Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Memo({} entries)", self.len())
    }
}

impl Memo {
    /// The value memoized under `key`, computing it with `compute` if absent. The lock is not
    /// held while computing: two callers may both compute, and the first stored value wins.
    pub fn get_or_compute<T: Any + Send + Sync>(
        &self,
        key: &str,
        compute: impl FnOnce() -> T,
    ) -> Arc<T> {
        if let Some(found) = self.get::<T>(key) {
            return found;
        }
        let value: Arc<dyn Any + Send + Sync> = Arc::new(compute());
        let stored = match self.entries.write() {
            Ok(mut entries) => entries.entry(key.to_string()).or_insert(value).clone(),
            Err(_) => value,
        };
        stored
            .downcast::<T>()
            .unwrap_or_else(|_| panic!("memo key {key:?} holds another type"))
    }

    fn get<T: Any + Send + Sync>(&self, key: &str) -> Option<Arc<T>> {
        let entries = self.entries.read().ok()?;
        entries.get(key).cloned()?.downcast::<T>().ok()
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

    #[test]
    fn computes_once_per_key() {
        let memo = Memo::default();
        let mut calls = 0;
        let a = memo.get_or_compute("k", || {
            calls += 1;
            vec![1, 2]
        });
        let b = memo.get_or_compute("k", || -> Vec<i32> { unreachable!("memoized") });
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(calls, 1);
        assert_eq!(memo.len(), 1);
    }
}
