//! The JWKS resolver's plain state: which sources are wanted (the RequestAuthentications'
//! rules, from each built context), what was fetched from each, when each is due again, and
//! the config set that carries it to the pipeline. No runtime, no clock: times are passed in.
//!
//! As istiod's `JwksResolver`: a source is fetched as soon as it is wanted; then every
//! `refresh_interval`; after a failure `on_failure`, doubled with each further failure up to
//! an hour, back to `refresh_interval` after a success. A failed refresh keeps the keys last
//! fetched; a source that never fetched has none (its rules fail closed). A source no longer
//! wanted is dropped at once (istiod evicts unused keys after a week; nothing reads them).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axon_config::config::Config;
use axon_config::config_set::ConfigSet;
use axon_config::istio::{FetchedJwks, JwksSource};
use axon_model::request_authn::jwks_config_key;

/// The longest wait after failures (istiod's `JwtPubKeyRefreshIntervalOnFailureResetThreshold`).
pub(super) const MAX_FAILURE_INTERVAL: Duration = Duration::from_secs(60 * 60);

/// The resolver's intervals and bounds (from the limits file).
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub refresh_interval: Duration,
    pub on_failure: Duration,
    pub max_timeout: Duration,
    pub max_sources: usize,
}

#[derive(Debug, Clone)]
struct Entry {
    timeout: Duration,
    keys: Option<String>,
    due: Instant,
    /// The wait after the last failure; none after a success.
    backoff: Option<Duration>,
}

#[derive(Debug)]
pub(super) struct JwksState {
    schedule: Schedule,
    entries: BTreeMap<JwksSource, Entry>,
    /// Sources wanted past `max_sources`, not fetched.
    pub(super) skipped: Vec<JwksSource>,
}

impl JwksState {
    pub(super) fn new(schedule: Schedule) -> JwksState {
        JwksState {
            schedule,
            entries: BTreeMap::new(),
            skipped: Vec::new(),
        }
    }

    /// The sources the built context's rules read, with their timeouts in nanoseconds: new
    /// ones are due now, those no longer wanted dropped. Whether the set of sources changed.
    pub(super) fn set_wanted(&mut self, wanted: &BTreeMap<JwksSource, i128>, now: Instant) -> bool {
        let before = self.entries.len();
        self.entries.retain(|s, _| wanted.contains_key(s));
        let mut changed = self.entries.len() != before;
        self.skipped.clear();
        for (i, (source, nanos)) in wanted.iter().enumerate() {
            if i >= self.schedule.max_sources {
                self.skipped.push(source.clone());
                continue;
            }
            let timeout = Duration::from_nanos(u64::try_from(*nanos).unwrap_or(u64::MAX))
                .min(self.schedule.max_timeout);
            match self.entries.get_mut(source) {
                Some(e) => e.timeout = timeout,
                None => {
                    changed = true;
                    self.entries.insert(
                        source.clone(),
                        Entry {
                            timeout,
                            keys: None,
                            due: now,
                            backoff: None,
                        },
                    );
                }
            }
        }
        changed
    }

    /// The sources due at `now`, with their fetch timeouts.
    pub(super) fn due(&self, now: Instant) -> Vec<(JwksSource, Duration)> {
        self.entries
            .iter()
            .filter(|(_, e)| e.due <= now)
            .map(|(s, e)| (s.clone(), e.timeout))
            .collect()
    }

    /// When the next source is due.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.entries.values().map(|e| e.due).min()
    }

    /// A fetch of `source` ended at `now`: its keys, or a failure. Whether its keys changed.
    pub(super) fn record(
        &mut self,
        source: &JwksSource,
        result: Option<String>,
        now: Instant,
    ) -> bool {
        let schedule = self.schedule;
        let Some(entry) = self.entries.get_mut(source) else {
            return false;
        };
        match result {
            Some(keys) => {
                entry.backoff = None;
                entry.due = now + schedule.refresh_interval;
                if entry.keys.as_deref() == Some(keys.as_str()) {
                    return false;
                }
                entry.keys = Some(keys);
                true
            }
            None => {
                let wait = entry
                    .backoff
                    .map_or(schedule.on_failure, |b| (b * 2).min(MAX_FAILURE_INTERVAL));
                entry.backoff = Some(wait);
                entry.due = now + wait;
                false
            }
        }
    }

    /// One `Jwks` config per source (its keys, or none before a first success).
    pub(super) fn configs(&self) -> ConfigSet {
        self.entries
            .iter()
            .map(|(source, entry)| {
                let key = jwks_config_key(source);
                let config = Config {
                    key: key.clone(),
                    labels: Default::default(),
                    created: None,
                    spec: axon_config::config::Spec::Jwks(FetchedJwks {
                        source: source.clone(),
                        keys: entry.keys.clone(),
                    }),
                    not_applied: Vec::new(),
                };
                (key, Arc::new(config))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        Schedule {
            refresh_interval: Duration::from_secs(1200),
            on_failure: Duration::from_secs(60),
            max_timeout: Duration::from_secs(30),
            max_sources: 2,
        }
    }

    fn uri(u: &str) -> JwksSource {
        JwksSource::Uri(u.to_string())
    }

    #[test]
    fn fetched_at_once_then_on_the_interval_with_backoff_after_failures() {
        let t0 = Instant::now();
        let mut state = JwksState::new(schedule());
        let wanted = BTreeMap::from([
            (uri("http://a/k"), 5_000_000_000),
            (uri("http://b/k"), 60_000_000_000),
        ]);
        assert!(state.set_wanted(&wanted, t0));
        assert_eq!(
            state.due(t0),
            [
                (uri("http://a/k"), Duration::from_secs(5)),
                (uri("http://b/k"), Duration::from_secs(30))
            ]
        );
        assert!(state.record(&uri("http://a/k"), Some("{\"keys\":[]}".into()), t0));
        assert!(!state.record(&uri("http://b/k"), None, t0));
        assert_eq!(state.next_due(), Some(t0 + Duration::from_secs(60)));
        // Failures double the wait, up to an hour; a success resets it.
        let mut now = t0 + Duration::from_secs(60);
        for expected in [120, 240, 480, 960, 1920, 3600, 3600] {
            state.record(&uri("http://b/k"), None, now);
            let b_due = |at: Instant| state.due(at).iter().any(|(s, _)| *s == uri("http://b/k"));
            assert!(b_due(now + Duration::from_secs(expected)));
            assert!(!b_due(now + Duration::from_secs(expected - 1)));
            now += Duration::from_secs(expected);
        }
        // The same keys again: no change; new keys: a change.
        assert!(!state.record(&uri("http://a/k"), Some("{\"keys\":[]}".into()), now));
        assert!(state.record(&uri("http://a/k"), Some("{\"keys\":[1]}".into()), now));
        let configs = state.configs();
        let keys: Vec<Option<String>> = configs
            .values()
            .map(|c| match &c.spec {
                axon_config::config::Spec::Jwks(j) => j.keys.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(keys, [Some("{\"keys\":[1]}".to_string()), None]);
        // A failed refresh keeps what was fetched.
        state.record(&uri("http://a/k"), None, now);
        assert!(matches!(&state.configs().values().next().unwrap().spec,
            axon_config::config::Spec::Jwks(j) if j.keys.is_some()));
    }

    #[test]
    fn sources_past_the_bound_are_skipped_and_unwanted_ones_dropped() {
        let t0 = Instant::now();
        let mut state = JwksState::new(schedule());
        let wanted = BTreeMap::from([
            (uri("http://a/k"), 1),
            (uri("http://b/k"), 1),
            (uri("http://c/k"), 1),
        ]);
        state.set_wanted(&wanted, t0);
        assert_eq!(state.skipped, [uri("http://c/k")]);
        assert_eq!(state.configs().len(), 2);
        assert!(state.set_wanted(&BTreeMap::from([(uri("http://b/k"), 1)]), t0));
        assert_eq!(state.configs().len(), 1);
        assert!(!state.set_wanted(&BTreeMap::from([(uri("http://b/k"), 1)]), t0));
    }
}
