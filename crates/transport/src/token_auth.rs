//! Bearer-token authentication on the xDS TLS port (`--token-auth kubernetes`): a stream's
//! `authorization: Bearer TOKEN` is reviewed by a [`TokenReviewer`] (the wiring's, over the
//! Kubernetes TokenReview API) and the answer turned into an identity by
//! [`axon_model::token_review`].
//!
//! Answers are cached by the token's SHA-256 (never the token itself): an identity until the
//! token's `exp`, at most `token_cache_ttl`; a rejection for at most 30 s of that; an error
//! of the reviewer not at all. The cache holds at most `token_cache_entries` (expired ones
//! go first, then the oldest), and at most `max_token_reviews` reviews run at once, each
//! within `token_review_timeout` (waiting for its turn included).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use tokio::time::Instant;

use axon_model::identity::Identity;
use axon_model::token_review::{self, ReviewStatus, TokenRejected};

/// Reviews a token for some audiences (implemented by the wiring over the Kubernetes API);
/// an `Err` is a failure to get an answer, not a rejection.
pub trait TokenReviewer: Send + Sync + 'static {
    fn review(
        &self,
        token: String,
        audiences: Vec<String>,
    ) -> BoxFuture<'static, Result<ReviewStatus, String>>;
}

/// The bounds of token authentication, from the limits file.
#[derive(Debug, Clone)]
pub struct TokenAuthLimits {
    pub cache_entries: usize,
    pub cache_ttl: Duration,
    pub max_reviews: usize,
    pub review_timeout: Duration,
}

/// Rejections are kept at most this long.
const REJECTION_TTL: Duration = Duration::from_secs(30);

/// Why a token gave no identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenAuthError {
    /// The token proves nothing: UNAUTHENTICATED.
    #[error(transparent)]
    Rejected(#[from] TokenRejected),
    /// No answer could be had: UNAVAILABLE, the client retries.
    #[error("the token could not be reviewed: {0}")]
    Unavailable(String),
}

/// Where reviews are counted (`axon_token_reviews{type}`).
pub type ReviewCounter = Option<prometheus::IntCounterVec>;

/// The token authenticator of the TLS port.
pub struct TokenAuth {
    reviewer: Arc<dyn TokenReviewer>,
    trust_domain: String,
    audiences: Vec<String>,
    limits: TokenAuthLimits,
    reviews: tokio::sync::Semaphore,
    cache: Mutex<Cache>,
    counter: ReviewCounter,
}

impl TokenAuth {
    pub fn new(
        reviewer: Arc<dyn TokenReviewer>,
        trust_domain: &str,
        audiences: Vec<String>,
        limits: TokenAuthLimits,
        counter: ReviewCounter,
    ) -> TokenAuth {
        TokenAuth {
            reviewer,
            trust_domain: trust_domain.to_string(),
            audiences,
            reviews: tokio::sync::Semaphore::new(limits.max_reviews.max(1)),
            cache: Mutex::new(Cache::new(limits.cache_entries)),
            limits,
            counter,
        }
    }

    fn count(&self, result: &str) {
        if let Some(counter) = &self.counter {
            counter.with_label_values(&[result]).inc();
        }
    }

    /// The identity `token` proves: from the cache, or reviewed.
    pub async fn authenticate(&self, token: &str) -> Result<Identity, TokenAuthError> {
        let key = digest(token);
        if let Some(outcome) = self.lock().get(&key, Instant::now()) {
            self.count("cached");
            return outcome.map_err(TokenAuthError::from);
        }
        let review = async {
            let _turn = self
                .reviews
                .acquire()
                .await
                .map_err(|_| "the reviewer is shut down".to_string())?;
            self.reviewer
                .review(token.to_string(), self.audiences.clone())
                .await
        };
        let status = match tokio::time::timeout(self.limits.review_timeout, review).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => {
                self.count("error");
                return Err(TokenAuthError::Unavailable(e));
            }
            Err(_) => {
                self.count("error");
                return Err(TokenAuthError::Unavailable(format!(
                    "no answer within {:?} (token_review_timeout)",
                    self.limits.review_timeout
                )));
            }
        };
        let outcome =
            token_review::identity_from_review(&status, &self.trust_domain, &self.audiences);
        let now = Instant::now();
        let keep = match &outcome {
            Ok(_) => self.lifetime(token),
            Err(_) => Some(self.limits.cache_ttl.min(REJECTION_TTL)),
        };
        self.count(if outcome.is_ok() {
            "authenticated"
        } else {
            "rejected"
        });
        if let Some(keep) = keep.filter(|k| !k.is_zero()) {
            self.lock().insert(key, outcome.clone(), now + keep, now);
        }
        outcome.map_err(TokenAuthError::from)
    }

    /// How long an identity proved by `token` may be kept: until its `exp`, at most
    /// `token_cache_ttl`; `None` once expired.
    fn lifetime(&self, token: &str) -> Option<Duration> {
        let Some(exp) = token_review::jwt_expiry(token) else {
            return Some(self.limits.cache_ttl);
        };
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        exp.checked_sub(now)
            .filter(|left| *left > 0)
            .map(|left| Duration::from_secs(left).min(self.limits.cache_ttl))
    }

    /// Entries held now.
    pub fn cached(&self) -> usize {
        self.lock().entries.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }
}

type Key = [u8; 32];

fn digest(token: &str) -> Key {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0; 32];
    key.copy_from_slice(d.as_ref());
    key
}

type Outcome = Result<Identity, TokenRejected>;

/// A bounded map of answers, oldest out first.
struct Cache {
    capacity: usize,
    entries: HashMap<Key, (Outcome, Instant, u64)>,
    /// Keys in insertion order, with the insertion's number (a key inserted again has a
    /// newer number; its older place in the queue is skipped).
    order: VecDeque<(Key, u64)>,
    inserted: u64,
}

impl Cache {
    fn new(capacity: usize) -> Cache {
        Cache {
            capacity,
            entries: HashMap::new(),
            order: VecDeque::new(),
            inserted: 0,
        }
    }

    fn get(&mut self, key: &Key, now: Instant) -> Option<Outcome> {
        match self.entries.get(key) {
            Some((outcome, until, _)) if *until > now => Some(outcome.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, key: Key, outcome: Outcome, until: Instant, now: Instant) {
        if self.capacity == 0 {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, until, _)| *until > now);
        }
        while self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            let Some((old, n)) = self.order.pop_front() else {
                break;
            };
            if self.entries.get(&old).is_some_and(|(_, _, at)| *at == n) {
                self.entries.remove(&old);
            }
        }
        self.inserted += 1;
        self.entries.insert(key, (outcome, until, self.inserted));
        self.order.push_back((key, self.inserted));
        // The queue keeps skipped places only while they are few.
        if self.order.len() > 2 * self.capacity.max(16) {
            let entries = &self.entries;
            self.order
                .retain(|(k, n)| entries.get(k).is_some_and(|(_, _, at)| at == n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Accepts `good-*` tokens as `system:serviceaccount:demo:NAME`; fails `down`.
    struct Fake {
        calls: AtomicUsize,
    }

    impl TokenReviewer for Fake {
        fn review(
            &self,
            token: String,
            _: Vec<String>,
        ) -> BoxFuture<'static, Result<ReviewStatus, String>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if token == "down" {
                    return Err("connection refused".into());
                }
                if token == "slow" {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                }
                Ok(match token.strip_prefix("good-") {
                    Some(name) => ReviewStatus {
                        authenticated: true,
                        username: format!("system:serviceaccount:demo:{name}"),
                        groups: vec!["system:serviceaccounts".into()],
                        ..Default::default()
                    },
                    None => ReviewStatus::default(),
                })
            })
        }
    }

    fn auth(entries: usize) -> (Arc<Fake>, TokenAuth) {
        let fake = Arc::new(Fake {
            calls: AtomicUsize::new(0),
        });
        let auth = TokenAuth::new(
            fake.clone(),
            "cluster.local",
            vec!["istio-ca".into()],
            TokenAuthLimits {
                cache_entries: entries,
                cache_ttl: Duration::from_secs(300),
                max_reviews: 4,
                review_timeout: Duration::from_secs(10),
            },
            None,
        );
        (fake, auth)
    }

    #[tokio::test(start_paused = true)]
    async fn answers_are_cached_for_their_time_and_errors_are_not() {
        let (fake, auth) = auth(100);
        let calls = || fake.calls.load(Ordering::SeqCst);
        let id = auth.authenticate("good-web").await.unwrap();
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/demo/sa/web");
        auth.authenticate("good-web").await.unwrap();
        assert_eq!(calls(), 1, "the second stream is answered from the cache");

        assert!(matches!(
            auth.authenticate("forged").await,
            Err(TokenAuthError::Rejected(TokenRejected::NotAuthenticated))
        ));
        auth.authenticate("forged").await.unwrap_err();
        assert_eq!(calls(), 2, "a rejection is cached too");

        for _ in 0..2 {
            assert!(matches!(
                auth.authenticate("down").await,
                Err(TokenAuthError::Unavailable(_))
            ));
        }
        assert_eq!(calls(), 4, "an unanswered review is asked again");

        // A rejection is kept 30 s, an identity token_cache_ttl.
        tokio::time::advance(Duration::from_secs(31)).await;
        auth.authenticate("forged").await.unwrap_err();
        auth.authenticate("good-web").await.unwrap();
        assert_eq!(calls(), 5);
        tokio::time::advance(Duration::from_secs(300)).await;
        auth.authenticate("good-web").await.unwrap();
        assert_eq!(calls(), 6);
    }

    #[tokio::test(start_paused = true)]
    async fn a_review_with_no_answer_in_time_is_unavailable() {
        let (_, auth) = auth(100);
        let err = auth.authenticate("slow").await.unwrap_err();
        assert!(err.to_string().contains("token_review_timeout"), "{err}");
    }

    #[tokio::test(start_paused = true)]
    async fn the_cache_holds_its_bound_and_drops_the_oldest() {
        let (fake, auth) = auth(3);
        for name in ["a", "b", "c", "d", "e"] {
            auth.authenticate(&format!("good-{name}")).await.unwrap();
        }
        assert_eq!(auth.cached(), 3);
        let before = fake.calls.load(Ordering::SeqCst);
        auth.authenticate("good-e").await.unwrap();
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            before,
            "the newest is kept"
        );
        auth.authenticate("good-a").await.unwrap();
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            before + 1,
            "the oldest went"
        );
        // Many re-insertions of one key do not grow the queue without bound.
        for _ in 0..1000 {
            let mut cache = auth.lock();
            let now = Instant::now();
            cache.insert([7; 32], Err(TokenRejected::NotAuthenticated), now, now);
        }
        assert!(auth.lock().order.len() <= 32);
    }

    #[test]
    fn an_expired_jwt_is_not_kept() {
        use base64::Engine;
        let (_, auth) = auth(10);
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let expired = format!("{}.{}.s", b64("{}"), b64(r#"{"exp":1000}"#));
        assert_eq!(auth.lifetime(&expired), None);
        let soon = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 60;
        let fresh = format!("{}.{}.s", b64("{}"), b64(&format!(r#"{{"exp":{soon}}}"#)));
        let left = auth.lifetime(&fresh).unwrap();
        assert!(left <= Duration::from_secs(60) && left >= Duration::from_secs(58));
        assert_eq!(auth.lifetime("opaque"), Some(Duration::from_secs(300)));
    }
}
