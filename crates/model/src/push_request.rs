//! `PushRequest`: what changed, and whether the snapshot must be rebuilt.
//!
//! Registries send one per change; the Debouncer merges them ([`PushRequest::merge`]); the
//! SnapshotBuilder and each ConnectionActor read `full` and `configs_updated` to decide how
//! much to rebuild and whom to push.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use axon_config::config::{ConfigKey, ConfigKind};

/// Why a push happens; counted per reason, a closed set (bounded metric cardinality).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TriggerReason {
    Config,
    Endpoint,
    Service,
    Proxy,
    Forced,
}

impl TriggerReason {
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerReason::Config => "config",
            TriggerReason::Endpoint => "endpoint",
            TriggerReason::Service => "service",
            TriggerReason::Proxy => "proxy",
            TriggerReason::Forced => "forced",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct PushRequest {
    /// Rebuild the PushContext and regenerate every type; false means endpoints only.
    pub full: bool,
    /// Configs that changed; empty with `full` means everything.
    pub configs_updated: BTreeSet<ConfigKey>,
    /// Push to every proxy even if its scope does not depend on the change.
    pub forced: bool,
    /// Count of merged events per reason.
    pub reasons: BTreeMap<TriggerReason, u32>,
    /// When the first merged event happened.
    pub start: Instant,
}

impl PushRequest {
    pub fn full_push(reason: TriggerReason, start: Instant) -> Self {
        PushRequest {
            full: true,
            configs_updated: BTreeSet::new(),
            forced: true,
            reasons: BTreeMap::from([(reason, 1)]),
            start,
        }
    }

    pub fn config_change(keys: BTreeSet<ConfigKey>, start: Instant) -> Self {
        let reason = if keys.iter().all(|k| k.kind == ConfigKind::ServiceEntry) {
            TriggerReason::Service
        } else {
            TriggerReason::Config
        };
        PushRequest {
            full: true,
            configs_updated: keys,
            forced: false,
            reasons: BTreeMap::from([(reason, 1)]),
            start,
        }
    }

    /// A change to endpoints only (WorkloadEntries, inline ServiceEntry endpoints): the
    /// snapshot swaps its endpoint index and only EDS is pushed.
    pub fn endpoint_change(keys: BTreeSet<ConfigKey>, start: Instant) -> Self {
        PushRequest {
            full: false,
            configs_updated: keys,
            forced: false,
            reasons: BTreeMap::from([(TriggerReason::Endpoint, 1)]),
            start,
        }
    }

    /// Merges `other` into `self`: `full` and `forced` are OR-ed, updated sets unioned,
    /// reasons summed, and the earliest start kept.
    pub fn merge(mut self, other: PushRequest) -> PushRequest {
        self.full |= other.full;
        self.forced |= other.forced;
        self.configs_updated.extend(other.configs_updated);
        for (reason, n) in other.reasons {
            *self.reasons.entry(reason).or_default() += n;
        }
        self.start = self.start.min(other.start);
        self
    }

    /// This request split by the namespace of its updated configs (`""` for cluster-scoped
    /// ones), each part with its own keys; the first part carries the reasons. A request
    /// without keys (everything changed) is one part under `""`.
    pub fn split_by_namespace(self) -> Vec<(String, PushRequest)> {
        if self.configs_updated.is_empty() {
            return vec![(String::new(), self)];
        }
        let mut parts: BTreeMap<String, BTreeSet<ConfigKey>> = BTreeMap::new();
        for key in &self.configs_updated {
            parts
                .entry(key.namespace.clone())
                .or_default()
                .insert(key.clone());
        }
        let mut reasons = Some(self.reasons);
        parts
            .into_iter()
            .map(|(namespace, keys)| {
                let part = PushRequest {
                    full: self.full,
                    configs_updated: keys,
                    forced: self.forced,
                    reasons: reasons.take().unwrap_or_default(),
                    start: self.start,
                };
                (namespace, part)
            })
            .collect()
    }

    /// Whether every updated config is of one of `kinds` (never when everything changed).
    pub fn only_kinds(&self, kinds: &[ConfigKind]) -> bool {
        !self.configs_updated.is_empty()
            && self.configs_updated.iter().all(|k| kinds.contains(&k.kind))
    }

    /// Whether a config of `kind` is among the updated ones (or everything changed).
    pub fn touches(&self, kind: ConfigKind) -> bool {
        self.configs_updated.is_empty() || self.configs_updated.iter().any(|k| k.kind == kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: ConfigKind, name: &str) -> ConfigKey {
        ConfigKey::new(kind, "default", name)
    }

    #[test]
    fn only_kinds_is_never_true_when_everything_changed() {
        let t0 = Instant::now();
        let vs = BTreeSet::from([key(ConfigKind::VirtualService, "a")]);
        let routes = [ConfigKind::VirtualService, ConfigKind::Gateway];
        assert!(PushRequest::config_change(vs.clone(), t0).only_kinds(&routes));
        let mixed = PushRequest::config_change(vs, t0).merge(PushRequest::config_change(
            BTreeSet::from([key(ConfigKind::ServiceEntry, "a")]),
            t0,
        ));
        assert!(!mixed.only_kinds(&routes));
        assert!(!PushRequest::full_push(TriggerReason::Config, t0).only_kinds(&routes));
    }

    #[test]
    fn merge_ors_unions_and_keeps_earliest() {
        let t0 = Instant::now();
        let a = PushRequest::config_change(
            BTreeSet::from([key(ConfigKind::VirtualService, "a")]),
            t0 + std::time::Duration::from_millis(5),
        );
        let b = PushRequest::full_push(TriggerReason::Forced, t0);
        let m = a.merge(b);
        assert!(m.full && m.forced);
        assert_eq!(m.configs_updated.len(), 1);
        assert_eq!(m.start, t0);
        assert_eq!(m.reasons.values().sum::<u32>(), 2);
    }

    fn arb_request() -> impl proptest::strategy::Strategy<Value = PushRequest> {
        use proptest::prelude::*;
        (
            any::<bool>(),
            any::<bool>(),
            proptest::collection::btree_set((0usize..3, "[a-c]{1,2}"), 0..4),
            0u64..1000,
        )
            .prop_map(|(full, forced, keys, offset)| PushRequest {
                full,
                forced,
                configs_updated: keys
                    .into_iter()
                    .map(|(k, name)| {
                        let kind = [
                            ConfigKind::VirtualService,
                            ConfigKind::Gateway,
                            ConfigKind::ServiceEntry,
                        ][k];
                        ConfigKey::new(kind, "ns", name)
                    })
                    .collect(),
                reasons: BTreeMap::from([(TriggerReason::Config, 1)]),
                start: base() + std::time::Duration::from_millis(offset),
            })
    }

    fn base() -> Instant {
        static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *BASE.get_or_init(Instant::now)
    }

    #[test]
    fn splits_by_namespace_with_the_reasons_once() {
        let t0 = Instant::now();
        let keys = BTreeSet::from([
            ConfigKey::new(ConfigKind::VirtualService, "a", "x"),
            ConfigKey::new(ConfigKind::VirtualService, "b", "y"),
            ConfigKey::new(ConfigKind::DestinationRule, "a", "z"),
        ]);
        let parts = PushRequest::config_change(keys, t0).split_by_namespace();
        let shape: Vec<(&str, usize, u32)> = parts
            .iter()
            .map(|(ns, r)| {
                (
                    ns.as_str(),
                    r.configs_updated.len(),
                    r.reasons.values().sum(),
                )
            })
            .collect();
        assert_eq!(shape, [("a", 2, 1), ("b", 1, 0)]);
        let all = PushRequest::full_push(TriggerReason::Forced, t0).split_by_namespace();
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].0, "");
    }

    proptest::proptest! {
        #[test]
        fn merge_is_associative_and_commutative(a in arb_request(), b in arb_request(), c in arb_request()) {
            let ab_c = a.clone().merge(b.clone()).merge(c.clone());
            let a_bc = a.clone().merge(b.clone().merge(c.clone()));
            proptest::prop_assert_eq!(&ab_c, &a_bc);
            let ab = a.clone().merge(b.clone());
            let ba = b.merge(a);
            proptest::prop_assert_eq!(ab, ba);
        }
    }
}
