//! The actor-limits file: every bound and window of the pipeline, from TOML.
//!
//! `config/actor-limits.toml` documents every key with its default. Unknown keys and bad
//! values stop startup with an error that names the key.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LimitsError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("{path}: key `{key}`: {message}")]
    Invalid {
        path: String,
        key: &'static str,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Quiet time after the last event before a push.
    #[serde(deserialize_with = "duration")]
    pub debounce_after: Duration,
    /// Longest a push waits while events keep coming.
    #[serde(deserialize_with = "duration")]
    pub debounce_max: Duration,
    /// A lone edit in a quiet mesh is flushed this long after it; zero: off.
    #[serde(deserialize_with = "duration")]
    pub debounce_lone: Duration,
    /// Whether endpoint-only changes wait for the debounce too.
    pub enable_eds_debounce: bool,
    /// How many connections are pushed at once.
    pub push_concurrency: usize,
    /// A connection that has not finished its push after this long gives its slot back.
    #[serde(deserialize_with = "duration")]
    pub push_timeout: Duration,
    /// Capacity of each pipeline actor's mailbox.
    pub mailbox_capacity: usize,
    /// Responses queued per ADS stream; a stream whose queue stays full past `write_timeout`
    /// is closed as too slow.
    pub stream_queue_capacity: usize,
    /// ADS streams served at once; more are refused with RESOURCE_EXHAUSTED.
    pub max_streams: usize,
    /// A proxy that does not read a response within this long is disconnected.
    #[serde(deserialize_with = "duration")]
    pub write_timeout: Duration,
    /// How long an xDS debug request (istioctl's `istio.io/debug/syncz`, `config_dump`) may
    /// take to gather its answer from the other streams (answered with what arrived in
    /// time); a stream has one in flight at most.
    #[serde(deserialize_with = "duration")]
    pub debug_query_timeout: Duration,
    /// The validating webhook (`--webhook-addr`): the largest AdmissionReview read, bytes
    /// (413 past it).
    pub max_webhook_request_bytes: usize,
    /// The webhook: a request's headers, and the whole request and its answer, within this
    /// long (408 past it).
    #[serde(deserialize_with = "duration")]
    pub webhook_request_timeout: Duration,
    /// The webhook: connections served at once; more are closed on accept.
    pub max_webhook_connections: usize,
    /// New ADS streams admitted per second (token bucket; bursts of the same size).
    pub max_requests_per_second: u32,
    /// How long a new stream waits for admission before RESOURCE_EXHAUSTED.
    #[serde(deserialize_with = "duration")]
    pub max_stream_wait: Duration,
    /// HTTP/2 keepalive ping interval on ADS connections.
    #[serde(deserialize_with = "duration")]
    pub keepalive_interval: Duration,
    /// How long a keepalive ping may go unanswered before the connection is closed.
    #[serde(deserialize_with = "duration")]
    pub keepalive_timeout: Duration,
    /// Connections older than this are closed gracefully, so that proxies rebalance across
    /// replicas ("0s": never).
    #[serde(deserialize_with = "duration")]
    pub max_connection_age: Duration,
    /// Threads that serve xDS connections and run their ConnectionActors (0: one per core).
    pub connection_threads: usize,
    /// How often the config directory is rescanned, beside file-system events.
    #[serde(deserialize_with = "duration")]
    pub file_rescan_interval: Duration,
    /// How long a config file that became empty or vanished (or a changed file still being
    /// written) must stay so before axon acts on it; a directory that disappeared is never
    /// acted on.
    #[serde(deserialize_with = "duration")]
    pub file_settle: Duration,
    /// Largest config file read; a larger one is rejected (its last good configs kept). Also
    /// the bound on a YAML document's size once its aliases are expanded.
    pub max_file_bytes: u64,
    /// Most config files read from the directory; those past it (in path order) are rejected.
    pub max_files: usize,
    /// Deepest nesting of a YAML document (flow and block collections); deeper is rejected
    /// before the parser sees it.
    pub max_yaml_depth: usize,
    /// On SIGTERM, how long the open ADS connections are given GOAWAY over (spread evenly, so
    /// that proxies reconnect elsewhere without a stampede) before axon exits.
    #[serde(deserialize_with = "duration")]
    pub drain_duration: Duration,
    /// How long a connection told to go away (GOAWAY, its streams ended) may stay open
    /// before it is dropped.
    #[serde(deserialize_with = "duration")]
    pub close_grace: Duration,
    /// A new stream must send its first request within this long; it holds no `max_streams`
    /// slot before.
    #[serde(deserialize_with = "duration")]
    pub first_request_timeout: Duration,
    /// A request must arrive whole within this long of its first bytes.
    #[serde(deserialize_with = "duration")]
    pub message_timeout: Duration,
    /// The largest request, bytes.
    pub max_message_size: usize,
    /// The bytes of partial requests buffered over every stream.
    pub max_request_buffer_bytes: usize,
    /// The bytes of partial requests buffered over one connection's streams. 0: twice
    /// `max_message_size`.
    pub max_connection_request_buffer_bytes: usize,
    /// The bytes of partial requests buffered over the streams not yet admitted (no first
    /// request read yet); the rest of `max_request_buffer_bytes` is kept for admitted
    /// streams. 0: a quarter of `max_request_buffer_bytes`.
    pub max_pending_request_buffer_bytes: usize,
    /// Streams open and waiting for their first request, over every connection; past it
    /// the connection holding the most of them (two or more) is closed, else the oldest that
    /// has waited `pending_stream_grace` (RESOURCE_EXHAUSTED); nothing is refused.
    pub max_pending_streams: usize,
    /// How long a stream waiting for its first request is safe from being closed to make
    /// room: a client that reopens what is closed recycles each place at most this often.
    #[serde(deserialize_with = "duration")]
    pub pending_stream_grace: Duration,
    /// A connection with no open stream for this long is closed.
    #[serde(deserialize_with = "duration")]
    pub idle_connection_timeout: Duration,
    /// Streams open at once on one xDS connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`;
    /// an Envoy or a gRPC client needs one ADS stream per connection). It bounds what
    /// streams that never send a request can hold on one connection.
    pub max_streams_per_connection: u32,
    /// The HTTP/2 receive window of an xDS connection and of each of its streams, bytes:
    /// what a client may send that axon has not read yet. It bounds what a stream waiting
    /// for room in the request buffers (or a connection axon is not reading) leaves in
    /// memory. 65,535 is HTTP/2's default and the least allowed.
    pub http2_receive_window: u32,
    /// xDS connections open at once over both ports; past it a new one is closed at once.
    /// 0: the file-descriptor limit (raised to its hard limit at start-up) less a reserve
    /// for the monitoring and debug ports, the registries and the config files (a quarter of
    /// the limit, at most 1024).
    pub max_connections: usize,
    /// Bearer-token answers (`--token-auth`) kept; past it expired ones go, then the oldest
    /// (0: none is kept, every stream's token is reviewed).
    pub token_cache_entries: usize,
    /// An identity a token proved is kept until the token expires, at most this long (a
    /// token revoked at the API server is refused at most this long after; rejections are
    /// kept at most 30 s of it).
    #[serde(deserialize_with = "duration")]
    pub token_cache_ttl: Duration,
    /// TokenReviews sent to the API server at once; more wait their turn.
    pub max_token_reviews: usize,
    /// A token must be reviewed within this long (its wait for a turn included), or the
    /// stream is refused with UNAVAILABLE.
    #[serde(deserialize_with = "duration")]
    pub token_review_timeout: Duration,
    /// How often each peer replica (`--peers`, `--peer-service`) is asked its stream count;
    /// also how long one answer may take (a peer slower than this is left out).
    #[serde(deserialize_with = "duration")]
    pub peer_poll_interval: Duration,
    /// Peer replicas known at once; addresses past it (in sorted order) are ignored.
    pub max_peers: usize,
    /// The largest answer read from a peer (its stream count, or its part of a fleet-wide
    /// debug answer), bytes; a larger one leaves the peer out of that answer.
    pub max_peer_answer_bytes: usize,
    /// A replica holding more than `ceil(total / replicas × (1 + rebalance_slack))` streams
    /// closes connections (GOAWAY, oldest first) down to the even share `ceil(total /
    /// replicas)`.
    pub rebalance_slack: f64,
    /// Connections closed to rebalance, at most this many per second (0: never rebalance).
    pub rebalance_rate: u32,
    /// A replica closes connections to rebalance only while the fleet's total of streams has
    /// moved by no more than the slack of the even share for this long: while proxies
    /// connect (a ramp) or the closed ones come back, an imbalance seen is not one.
    #[serde(deserialize_with = "duration")]
    pub rebalance_settle: Duration,
    /// A workload certificate's lifetime when its CSR asks none (istiod's
    /// `DEFAULT_WORKLOAD_CERT_TTL`); also the lifetime of axon's own serving certificate
    /// when its CA issues it (renewed at half of it).
    #[serde(deserialize_with = "duration")]
    pub workload_cert_ttl: Duration,
    /// The longest lifetime a CSR may ask (istiod's `MAX_WORKLOAD_CERT_TTL`); longer is
    /// refused with INVALID_ARGUMENT.
    #[serde(deserialize_with = "duration")]
    pub max_workload_cert_ttl: Duration,
    /// The lifetime of the self-signed root axon makes when `--ca-dir` holds no plug-in CA
    /// (istiod's `CITADEL_SELF_SIGNED_CA_CERT_TTL`).
    #[serde(deserialize_with = "duration")]
    pub self_signed_root_ttl: Duration,
    /// The largest `CreateCertificate` request, bytes (the CSR and the rest of the message);
    /// a larger one is refused with RESOURCE_EXHAUSTED.
    pub max_csr_bytes: usize,
    /// How often each JWKS a RequestAuthentication names by `jwksUri` (or its issuer's
    /// OpenID discovery) is fetched again (istiod's `PILOT_JWT_PUB_KEY_REFRESH_INTERVAL`).
    #[serde(deserialize_with = "duration")]
    pub jwks_refresh_interval: Duration,
    /// After a failed JWKS fetch, the next is this long after; each further failure doubles
    /// it, up to an hour (istiod's `JwtPubKeyRefreshIntervalOnFailure` and its threshold).
    #[serde(deserialize_with = "duration")]
    pub jwks_refresh_interval_on_failure: Duration,
    /// The longest one JWKS fetch may take, connection and body included; a rule's
    /// `timeout` (default 5s) longer than this is cut to it.
    #[serde(deserialize_with = "duration")]
    pub jwks_max_fetch_timeout: Duration,
    /// The largest JWKS (or OpenID discovery document) read, bytes; a larger one is a failed
    /// fetch.
    pub max_jwks_bytes: usize,
    /// JWKS sources fetched at once; past it (in URL order) a rule's keys are not fetched
    /// and its policy fails closed.
    pub max_jwks_sources: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            debounce_after: Duration::from_millis(100),
            debounce_max: Duration::from_secs(10),
            debounce_lone: Duration::from_millis(10),
            enable_eds_debounce: true,
            push_concurrency: 100,
            push_timeout: Duration::from_secs(5),
            mailbox_capacity: 1024,
            stream_queue_capacity: 16,
            max_streams: 10_000,
            write_timeout: Duration::from_secs(5),
            debug_query_timeout: Duration::from_secs(5),
            max_webhook_request_bytes: 4 << 20,
            webhook_request_timeout: Duration::from_secs(10),
            max_webhook_connections: 64,
            max_requests_per_second: 1000,
            max_stream_wait: Duration::from_secs(5),
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: Duration::from_secs(30 * 60),
            connection_threads: 0,
            file_rescan_interval: Duration::from_secs(5),
            file_settle: Duration::from_secs(1),
            max_file_bytes: 4 << 20,
            max_files: 10_000,
            max_yaml_depth: 64,
            drain_duration: Duration::from_secs(5),
            close_grace: Duration::from_secs(5),
            first_request_timeout: Duration::from_secs(10),
            message_timeout: Duration::from_secs(10),
            max_message_size: 4 << 20,
            max_request_buffer_bytes: 64 << 20,
            max_connection_request_buffer_bytes: 0,
            max_pending_request_buffer_bytes: 0,
            max_pending_streams: 16_384,
            pending_stream_grace: Duration::from_secs(1),
            idle_connection_timeout: Duration::from_secs(60),
            max_streams_per_connection: 16,
            http2_receive_window: 65_535,
            max_connections: 0,
            token_cache_entries: 10_000,
            token_cache_ttl: Duration::from_secs(5 * 60),
            max_token_reviews: 32,
            token_review_timeout: Duration::from_secs(10),
            peer_poll_interval: Duration::from_secs(1),
            max_peers: 64,
            max_peer_answer_bytes: 16 << 20,
            rebalance_slack: 0.1,
            rebalance_rate: 20,
            rebalance_settle: Duration::from_secs(2),
            workload_cert_ttl: Duration::from_secs(24 * 3600),
            max_workload_cert_ttl: Duration::from_secs(90 * 24 * 3600),
            self_signed_root_ttl: Duration::from_secs(3650 * 24 * 3600),
            max_csr_bytes: 64 << 10,
            jwks_refresh_interval: Duration::from_secs(20 * 60),
            jwks_refresh_interval_on_failure: Duration::from_secs(60),
            jwks_max_fetch_timeout: Duration::from_secs(30),
            max_jwks_bytes: 1 << 20,
            max_jwks_sources: 256,
        }
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map_err(|e| {
        serde::de::Error::custom(format!(
            "{text:?} is not a duration ({e}); write e.g. \"100ms\" or \"10s\""
        ))
    })
}

impl Limits {
    /// `max_connection_request_buffer_bytes`, its default (0) resolved.
    pub fn connection_request_buffer_bytes(&self) -> usize {
        match self.max_connection_request_buffer_bytes {
            0 => self.max_message_size.saturating_mul(2),
            n => n,
        }
    }

    /// `max_pending_request_buffer_bytes`, its default (0) resolved.
    pub fn pending_request_buffer_bytes(&self) -> usize {
        match self.max_pending_request_buffer_bytes {
            0 => (self.max_request_buffer_bytes / 4).max(1),
            n => n,
        }
    }

    pub fn load(path: &Path) -> Result<Limits, LimitsError> {
        let text = std::fs::read_to_string(path).map_err(|source| LimitsError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Limits::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, path: &str) -> Result<Limits, LimitsError> {
        let limits: Limits = toml::from_str(text).map_err(|e| LimitsError::Parse {
            path: path.to_string(),
            message: e.to_string().trim_end().replace('\n', " "),
        })?;
        limits.check(path)?;
        Ok(limits)
    }

    fn check(&self, path: &str) -> Result<(), LimitsError> {
        let invalid = |key, message: &str| LimitsError::Invalid {
            path: path.to_string(),
            key,
            message: message.to_string(),
        };
        if self.debounce_max < self.debounce_after {
            return Err(invalid(
                "debounce_max",
                "must not be shorter than debounce_after",
            ));
        }
        if self.debounce_lone > self.debounce_after {
            return Err(invalid(
                "debounce_lone",
                "must not be longer than debounce_after",
            ));
        }
        for (key, value) in [
            ("push_concurrency", self.push_concurrency),
            ("mailbox_capacity", self.mailbox_capacity),
            ("stream_queue_capacity", self.stream_queue_capacity),
            ("max_streams", self.max_streams),
            ("max_files", self.max_files),
            ("max_yaml_depth", self.max_yaml_depth),
            ("max_message_size", self.max_message_size),
            ("max_request_buffer_bytes", self.max_request_buffer_bytes),
            ("max_token_reviews", self.max_token_reviews),
            ("max_pending_streams", self.max_pending_streams),
            ("max_peers", self.max_peers),
            ("max_peer_answer_bytes", self.max_peer_answer_bytes),
            ("max_csr_bytes", self.max_csr_bytes),
            ("max_jwks_bytes", self.max_jwks_bytes),
            ("max_jwks_sources", self.max_jwks_sources),
            (
                "max_streams_per_connection",
                self.max_streams_per_connection as usize,
            ),
        ] {
            if value == 0 {
                return Err(invalid(key, "must be at least 1"));
            }
        }
        if self.max_pending_request_buffer_bytes > self.max_request_buffer_bytes {
            return Err(invalid(
                "max_pending_request_buffer_bytes",
                "must not be more than max_request_buffer_bytes",
            ));
        }
        if !(65_535..=(1 << 31) - 1).contains(&self.http2_receive_window) {
            return Err(invalid(
                "http2_receive_window",
                "must be between 65535 (HTTP/2's default) and 2147483647",
            ));
        }
        if self.max_requests_per_second == 0 {
            return Err(invalid("max_requests_per_second", "must be at least 1"));
        }
        for (key, value) in [
            ("write_timeout", self.write_timeout),
            ("debug_query_timeout", self.debug_query_timeout),
            ("webhook_request_timeout", self.webhook_request_timeout),
            ("keepalive_interval", self.keepalive_interval),
            ("keepalive_timeout", self.keepalive_timeout),
            ("close_grace", self.close_grace),
            ("first_request_timeout", self.first_request_timeout),
            ("message_timeout", self.message_timeout),
            ("idle_connection_timeout", self.idle_connection_timeout),
            ("token_review_timeout", self.token_review_timeout),
            ("peer_poll_interval", self.peer_poll_interval),
            ("workload_cert_ttl", self.workload_cert_ttl),
            ("self_signed_root_ttl", self.self_signed_root_ttl),
            ("jwks_refresh_interval", self.jwks_refresh_interval),
            (
                "jwks_refresh_interval_on_failure",
                self.jwks_refresh_interval_on_failure,
            ),
            ("jwks_max_fetch_timeout", self.jwks_max_fetch_timeout),
        ] {
            if value.is_zero() {
                return Err(invalid(key, "must be longer than 0"));
            }
        }
        if self.push_timeout.is_zero() {
            return Err(invalid("push_timeout", "must be longer than 0"));
        }
        if self.file_rescan_interval.is_zero() {
            return Err(invalid("file_rescan_interval", "must be longer than 0"));
        }
        if !(self.rebalance_slack.is_finite() && self.rebalance_slack >= 0.0) {
            return Err(invalid(
                "rebalance_slack",
                "must be a number at least 0 (0.1: 10 % above the even share)",
            ));
        }
        if self.max_workload_cert_ttl < self.workload_cert_ttl {
            return Err(invalid(
                "max_workload_cert_ttl",
                "must not be shorter than workload_cert_ttl",
            ));
        }
        if self.max_file_bytes == 0 {
            return Err(invalid("max_file_bytes", "must be at least 1"));
        }
        Ok(())
    }

    pub fn connection_threads(&self) -> usize {
        match self.connection_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_is_the_defaults() {
        let text = include_str!("../config/actor-limits.toml");
        assert_eq!(
            Limits::parse(text, "actor-limits.toml").unwrap(),
            Limits::default()
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = Limits::parse("debounce_aftr = \"1s\"", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("debounce_aftr"), "{e}");
        let e = Limits::parse("debounce_after = \"soon\"", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("debounce_after") && e.contains("soon"), "{e}");
        let e = Limits::parse("push_concurrency = 0", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("push_concurrency"), "{e}");
        let e = Limits::parse("max_streams = -1", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_streams"), "{e}");
        let e = Limits::parse("debounce_max = \"10ms\"", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("debounce_max"), "{e}");
    }

    #[test]
    fn the_buffer_shares_default_from_the_other_bounds() {
        let limits = Limits::parse("max_request_buffer_bytes = 8388608", "f").unwrap();
        assert_eq!(limits.pending_request_buffer_bytes(), 2 << 20, "a quarter");
        assert_eq!(
            limits.connection_request_buffer_bytes(),
            8 << 20,
            "2 × 4 MiB"
        );
        let limits = Limits::parse("max_pending_request_buffer_bytes = 1000", "f").unwrap();
        assert_eq!(limits.pending_request_buffer_bytes(), 1000);
        let e = Limits::parse(
            "max_request_buffer_bytes = 1000\nmax_pending_request_buffer_bytes = 2000",
            "f",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("max_pending_request_buffer_bytes"), "{e}");
        let e = Limits::parse("max_pending_streams = 0", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_pending_streams"), "{e}");
    }
}
