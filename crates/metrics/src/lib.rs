//! Prometheus metrics, with istiod's names and labels.
//!
//! One [`Metrics`] is made at startup and handed to every actor that counts something; the
//! monitoring server renders it on `/metrics`.

mod ca;

pub use ca::CaMetrics;

use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// The counter type of the families, for holders of one resolved child.
pub use prometheus::IntCounter;

/// istiod's buckets for latencies in seconds.
const LATENCY_BUCKETS: [f64; 11] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 3.0, 5.0, 10.0, 30.0,
];

/// The `type` label values of the per-type xDS families (istiod's short names).
pub const XDS_TYPES: [&str; 5] = ["cds", "eds", "lds", "rds", "sds"];

/// The `actor` label values of the mailbox families.
pub const ACTOR_KINDS: [&str; 5] = [
    "file_registry",
    "debouncer",
    "snapshot_builder",
    "push_queue",
    "connection",
];

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// The CA's families (`citadel_server_*`).
    pub ca: CaMetrics,
    /// `pilot_xds`: connected proxies.
    pub xds_clients: IntGauge,
    /// `pilot_xds_pushes{type}`: responses sent, by type.
    pub xds_pushes: IntCounterVec,
    /// `pilot_total_xds_rejects{type}`: NACKs received, by type.
    pub xds_rejects: IntCounterVec,
    /// `pilot_xds_expired_nonce{type}`: requests with a stale nonce.
    pub expired_nonce: IntCounterVec,
    /// `axon_endpoint_index_swaps`: contexts made for endpoint-only changes (no rebuild).
    pub endpoint_swaps: prometheus::IntCounter,
    /// `axon_config_read_errors`: config files that could not be read (permission denied,
    /// an I/O error, invalid UTF-8); their last good configs were kept.
    pub config_read_errors: prometheus::IntCounter,
    /// `pilot_xds_write_timeout`: streams closed because the proxy did not read in time.
    pub write_timeout: prometheus::IntCounter,
    /// `axon_rejected_streams{reason}`: new streams refused or closed before admission, by
    /// the limit's key: `max_requests_per_second`, `max_streams`, `first_request_timeout`
    /// (no first request in time), `max_pending_streams` (closed to make room for newer
    /// ones: a connection's waiting streams, or the oldest waiting stream).
    pub rejected_streams: IntCounterVec,
    /// `axon_request_errors{reason}`: streams ended for a request they sent: `malformed`,
    /// `max_message_size`, `message_timeout` (not whole in time, waiting for room in a
    /// buffer budget included), `transport` (the HTTP/2 stream failed).
    pub request_errors: IntCounterVec,
    /// `axon_pending_streams`: streams open and waiting for their first request.
    pub pending_streams: IntGauge,
    /// `axon_pending_request_buffer_bytes`: bytes of partial requests buffered over the
    /// streams not yet admitted.
    pub pending_request_buffer_bytes: IntGauge,
    /// `pilot_xds_auth_failures{type}`: streams refused on the TLS port, by reason
    /// (`unauthenticated`, `namespace`, `service_account`, `trust_domain`).
    pub xds_auth_failures: IntCounterVec,
    /// `axon_token_reviews{type}`: bearer tokens checked on the TLS port (`authenticated`,
    /// `rejected`, `error`: no answer from the API server, `cached`: answered from the cache).
    pub token_reviews: IntCounterVec,
    /// `axon_request_buffer_bytes`: bytes of partial requests buffered over every stream.
    pub request_buffer_bytes: IntGauge,
    /// `axon_xds_accept_errors`: failed accepts on the xDS listener (out of descriptors).
    pub accept_errors: prometheus::IntCounter,
    /// `axon_xds_refused_connections`: xDS connections closed at once for `max_connections`.
    pub refused_connections: prometheus::IntCounter,
    /// `axon_config_unchanged_updates{source}`: registry updates that changed no config (a
    /// file saved again as it was, a Kubernetes event of `resourceVersion` or status only):
    /// nothing was sent to the Debouncer.
    pub unchanged_updates: IntCounterVec,
    /// `axon_kubernetes_relists{reason}`: Kubernetes watches listed again: `expired` (410
    /// Gone) or `namespaces` (the selected namespaces changed).
    pub kubernetes_relists: IntCounterVec,
    /// `axon_xds_max_connections`: the xDS connections axon accepts at once (the limit, or
    /// what the descriptor limit leaves).
    pub xds_max_connections: IntGauge,
    /// `axon_rebalance_closed_connections`: connections closed (GOAWAY) to bring this replica
    /// back to the even share of the fleet's streams.
    pub rebalance_closed: prometheus::IntCounter,
    /// `axon_fleet_peers`: peer replicas that answered their last poll.
    pub fleet_peers: IntGauge,
    /// `pilot_services`: services known.
    pub services: IntGauge,
    /// `pilot_vservice_dup_domain`: hosts several mesh VirtualServices name (a sidecar
    /// serves one of them).
    pub vservice_dup_domain: IntGauge,
    /// `pilot_conflict_outbound_listener_tcp_over_current_tcp`: listener addresses and ports
    /// that several services' TCP ports share with nothing to tell them apart (the first
    /// service in host order gets the traffic).
    pub outbound_listener_conflicts: IntGauge,
    /// `pilot_push_triggers{type}`: pushes by reason.
    pub push_triggers: IntCounterVec,
    /// `pilot_inbound_updates{type}`: registry changes received (`config`, `eds`).
    pub inbound_updates: IntCounterVec,
    /// `pilot_debounce_time`: first event of a batch to its flush.
    pub debounce_time: Histogram,
    /// `pilot_pushcontext_init_seconds`: building a PushContext.
    pub pushcontext_init: Histogram,
    /// `pilot_proxy_queue_time`: a request's wait in the PushQueue.
    pub proxy_queue_time: Histogram,
    /// `pilot_proxy_convergence_time`: first event of a change to its push to one proxy.
    pub proxy_convergence_time: Histogram,
    /// `pilot_xds_push_time{type}`: generating and queueing one response.
    pub xds_push_time: HistogramVec,
    /// `pilot_xds_send_time`: writing one response to its stream.
    pub xds_send_time: Histogram,
    /// `pilot_xds_config_size_bytes{type}`: the size of each response.
    pub config_size: HistogramVec,
    /// `pilot_sds_certificate_errors_total`: Secrets asked for and not served (missing,
    /// invalid, of another namespace), and Secrets refused at load.
    pub sds_certificate_errors: prometheus::IntCounter,
    /// `pilot_jwks_resolver_network_fetch_success_total`: JWKS (or OpenID discovery
    /// documents) fetched for RequestAuthentications.
    pub jwks_fetch_success: prometheus::IntCounter,
    /// `pilot_jwks_resolver_network_fetch_fail_total`: JWKS fetches that failed (network,
    /// status, size, time, not a JWKS).
    pub jwks_fetch_fail: prometheus::IntCounter,
    /// `galley_validation_passed{group,version,resource}`: objects the validating webhook
    /// allowed (istiod's name).
    pub validation_passed: IntCounterVec,
    /// `galley_validation_failed{group,version,resource,reason}`: objects it refused
    /// (`invalid_config`, `yaml_decode_error`).
    pub validation_failed: IntCounterVec,
    /// `galley_validation_http_error{status}`: webhook requests answered with an HTTP error.
    pub validation_http_error: IntCounterVec,
    /// `pilot_total_xds_internal_errors`: failures inside axon while serving xDS.
    pub internal_errors: prometheus::IntCounter,
    /// `axon_config_distribution_seconds`: a config change to the last affected proxy's ACK.
    pub config_distribution: Histogram,
    /// `axon_mailbox_depth{actor}`: messages sent to an actor kind and not handled yet.
    pub mailbox_depth: prometheus::IntGaugeVec,
    /// `axon_actor_handle_seconds{actor}`: time an actor kind spends handling one message.
    pub handle_time: HistogramVec,
    /// The children of the per-type and per-actor families above, resolved once.
    resolved: std::sync::Arc<Resolved>,
}

/// The children of the labelled families that are counted per proxy on every push, looked
/// up once: `with_label_values` takes the family's lock, hashes the label and clones the
/// child on every call, from every connection thread.
struct Resolved {
    /// By [`XDS_TYPES`].
    pushes: [prometheus::IntCounter; 5],
    push_time: [Histogram; 5],
    config_size: [Histogram; 5],
    /// By [`ACTOR_KINDS`].
    depth: [IntGauge; 5],
    handle_time: [Histogram; 5],
}

impl Resolved {
    fn new(
        pushes: &IntCounterVec,
        push_time: &HistogramVec,
        config_size: &HistogramVec,
        depth: &prometheus::IntGaugeVec,
        handle_time: &HistogramVec,
    ) -> Resolved {
        Resolved {
            pushes: XDS_TYPES.map(|t| pushes.with_label_values(&[t])),
            push_time: XDS_TYPES.map(|t| push_time.with_label_values(&[t])),
            config_size: XDS_TYPES.map(|t| config_size.with_label_values(&[t])),
            depth: ACTOR_KINDS.map(|a| depth.with_label_values(&[a])),
            handle_time: ACTOR_KINDS.map(|a| handle_time.with_label_values(&[a])),
        }
    }
}

/// The child of `family` for `label`: the one resolved at start when `label` is one of
/// `labels` (the order of `resolved`), else looked up in the family.
fn child<'a, P: prometheus::core::MetricVecBuilder>(
    resolved: &'a [P::M; 5],
    labels: &[&str; 5],
    family: &prometheus::core::MetricVec<P>,
    label: &str,
) -> std::borrow::Cow<'a, P::M> {
    match labels.iter().position(|l| *l == label) {
        Some(i) => std::borrow::Cow::Borrowed(&resolved[i]),
        None => std::borrow::Cow::Owned(family.with_label_values(&[label])),
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let by_label = |name: &str, help: &str, label: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let labelled = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let counter = |name: &str, help: &str| by_label(name, help, "type");
        let by_reason = |name: &str, help: &str| by_label(name, help, "reason");
        let histogram = |name: &str, help: &str| {
            let h = Histogram::with_opts(
                HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
            )
            .expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let xds_push_time = HistogramVec::new(
            HistogramOpts::new(
                "pilot_xds_push_time",
                "Total time in seconds Pilot takes to push lds, rds, cds and eds.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["type"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(xds_push_time.clone()))
            .expect("unique metric");
        let config_size = HistogramVec::new(
            HistogramOpts::new(
                "pilot_xds_config_size_bytes",
                "Distribution of configuration sizes pushed to clients.",
            )
            .buckets(vec![1e3, 1e4, 1e5, 1e6, 1e7, 4e7]),
            &["type"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(config_size.clone()))
            .expect("unique metric");
        let mailbox_depth = prometheus::IntGaugeVec::new(
            Opts::new(
                "axon_mailbox_depth",
                "Messages sent to an actor kind and not handled yet.",
            ),
            &["actor"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(mailbox_depth.clone()))
            .expect("unique metric");
        let handle_time = HistogramVec::new(
            HistogramOpts::new(
                "axon_actor_handle_seconds",
                "Time an actor kind spends handling one message.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["actor"],
        )
        .expect("valid metric");
        registry
            .register(Box::new(handle_time.clone()))
            .expect("unique metric");
        let plain_counter = |name: &str, help: &str| {
            let c = prometheus::IntCounter::new(name, help).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let xds_pushes = counter(
            "pilot_xds_pushes",
            "Pilot build and send errors for lds, rds, cds and eds.",
        );
        let resolved = std::sync::Arc::new(Resolved::new(
            &xds_pushes,
            &xds_push_time,
            &config_size,
            &mailbox_depth,
            &handle_time,
        ));
        let m = Metrics {
            ca: CaMetrics::register(&registry),
            endpoint_swaps: plain_counter(
                "axon_endpoint_index_swaps",
                "Contexts made for endpoint-only changes: the endpoint index swapped, nothing rebuilt.",
            ),
            config_read_errors: plain_counter(
                "axon_config_read_errors",
                "Config files that could not be read (permission, I/O, invalid UTF-8); their last good configs were kept.",
            ),
            sds_certificate_errors: plain_counter(
                "pilot_sds_certificate_errors_total",
                "Total number of failures to fetch SDS key and certificate.",
            ),
            jwks_fetch_success: plain_counter(
                "pilot_jwks_resolver_network_fetch_success_total",
                "Total number of successfully network fetch by pilot jwks resolver",
            ),
            jwks_fetch_fail: plain_counter(
                "pilot_jwks_resolver_network_fetch_fail_total",
                "Total number of failed network fetch by pilot jwks resolver",
            ),
            validation_passed: labelled(
                "galley_validation_passed",
                "Resource is valid.",
                &["group", "version", "resource"],
            ),
            validation_failed: labelled(
                "galley_validation_failed",
                "Resource validation failed.",
                &["group", "version", "resource", "reason"],
            ),
            validation_http_error: labelled(
                "galley_validation_http_error",
                "Resource validation http serve errors.",
                &["status"],
            ),
            write_timeout: plain_counter(
                "pilot_xds_write_timeout",
                "Pilot XDS response write timeouts.",
            ),
            rejected_streams: by_reason(
                "axon_rejected_streams",
                "ADS streams refused or closed before admission, by the limit (max_requests_per_second, max_streams, first_request_timeout, max_pending_streams).",
            ),
            request_errors: by_reason(
                "axon_request_errors",
                "ADS streams ended for a request they sent (malformed, max_message_size, message_timeout, transport).",
            ),
            pending_streams: gauge(
                "axon_pending_streams",
                "ADS streams open and waiting for their first request (bounded by max_pending_streams).",
            ),
            pending_request_buffer_bytes: gauge(
                "axon_pending_request_buffer_bytes",
                "Bytes of partial ADS requests buffered over the streams not yet admitted (bounded by max_pending_request_buffer_bytes).",
            ),
            xds_auth_failures: counter(
                "pilot_xds_auth_failures",
                "ADS streams refused on the TLS port: no identity, or one that may not be the proxy it claims.",
            ),
            token_reviews: counter(
                "axon_token_reviews",
                "Bearer tokens checked on the xDS TLS port, by outcome (authenticated, rejected, error, cached).",
            ),
            request_buffer_bytes: gauge(
                "axon_request_buffer_bytes",
                "Bytes of partial ADS requests buffered over every stream (bounded by max_request_buffer_bytes).",
            ),
            accept_errors: plain_counter(
                "axon_xds_accept_errors",
                "Failed accepts on the xDS listener (out of file descriptors); the loop backs off.",
            ),
            refused_connections: plain_counter(
                "axon_xds_refused_connections",
                "xDS connections closed as soon as accepted: max_connections were open.",
            ),
            unchanged_updates: by_label(
                "axon_config_unchanged_updates",
                "Registry updates that changed no config (a file saved again as it was, a Kubernetes event of resourceVersion or status only): nothing was pushed.",
                "source",
            ),
            kubernetes_relists: by_reason(
                "axon_kubernetes_relists",
                "Kubernetes watches listed again: expired (410 Gone) or namespaces (the selected namespaces changed).",
            ),
            xds_max_connections: gauge(
                "axon_xds_max_connections",
                "The xDS connections accepted at once: max_connections, or what the descriptor limit leaves.",
            ),
            rebalance_closed: plain_counter(
                "axon_rebalance_closed_connections",
                "xDS connections closed (GOAWAY, oldest first) to bring this replica back to the even share of the fleet's streams.",
            ),
            fleet_peers: gauge(
                "axon_fleet_peers",
                "Peer replicas (--peers, --peer-service) that answered their last poll.",
            ),
            xds_clients: gauge(
                "pilot_xds",
                "Number of endpoints connected to this pilot using XDS.",
            ),
            xds_pushes: xds_pushes.clone(),
            xds_rejects: counter(
                "pilot_total_xds_rejects",
                "Total number of XDS responses from pilot rejected by proxy.",
            ),
            expired_nonce: counter(
                "pilot_xds_expired_nonce",
                "Total number of XDS requests with an expired nonce.",
            ),
            services: gauge("pilot_services", "Total services known to pilot."),
            vservice_dup_domain: gauge(
                "pilot_vservice_dup_domain",
                "Virtual services with dup domains.",
            ),
            outbound_listener_conflicts: gauge(
                "pilot_conflict_outbound_listener_tcp_over_current_tcp",
                "Number of conflicting tcp listeners with current tcp listener.",
            ),
            push_triggers: counter(
                "pilot_push_triggers",
                "Total number of times a push was triggered, labeled by reason for the push.",
            ),
            inbound_updates: counter(
                "pilot_inbound_updates",
                "Total number of updates received by pilot.",
            ),
            debounce_time: histogram(
                "pilot_debounce_time",
                "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue.",
            ),
            pushcontext_init: histogram(
                "pilot_pushcontext_init_seconds",
                "Total time in seconds Pilot takes to init pushContext.",
            ),
            proxy_queue_time: histogram(
                "pilot_proxy_queue_time",
                "Time in seconds, a proxy is in the push queue before being dequeued.",
            ),
            proxy_convergence_time: histogram(
                "pilot_proxy_convergence_time",
                "Delay in seconds between config change and a proxy receiving all required configuration.",
            ),
            xds_push_time,
            xds_send_time: histogram(
                "pilot_xds_send_time",
                "Total time in seconds Pilot takes to send generated configuration.",
            ),
            config_size,
            internal_errors: plain_counter(
                "pilot_total_xds_internal_errors",
                "Total number of internal XDS errors in pilot (always 0 in axon: its generators return no errors).",
            ),
            config_distribution: histogram(
                "axon_config_distribution_seconds",
                "Time from a config change to the ACK of the last proxy it affects.",
            ),
            resolved,
            mailbox_depth,
            handle_time,
            registry,
        };
        // Typed families start at 0 for every xDS type, so that dashboards see them at once.
        for actor in ACTOR_KINDS {
            m.mailbox_depth.with_label_values(&[actor]);
            m.handle_time.with_label_values(&[actor]);
        }
        for reason in ["config", "endpoint", "service", "proxy", "forced"] {
            m.push_triggers.with_label_values(&[reason]);
        }
        for kind in ["config", "eds"] {
            m.inbound_updates.with_label_values(&[kind]);
        }
        for reason in [
            "max_requests_per_second",
            "max_streams",
            "first_request_timeout",
            "max_pending_streams",
        ] {
            m.rejected_streams.with_label_values(&[reason]);
        }
        for reason in [
            "malformed",
            "max_message_size",
            "message_timeout",
            "transport",
        ] {
            m.request_errors.with_label_values(&[reason]);
        }
        for t in XDS_TYPES {
            m.xds_push_time.with_label_values(&[t]);
            m.config_size.with_label_values(&[t]);
            m.xds_pushes.with_label_values(&[t]);
            m.xds_rejects.with_label_values(&[t]);
            m.expired_nonce.with_label_values(&[t]);
        }
        for reason in ["expired", "namespaces"] {
            m.kubernetes_relists.with_label_values(&[reason]);
        }
        m
    }

    /// A message was sent to an actor of `kind`.
    pub fn sent(&self, kind: &str) {
        let r = &self.resolved;
        child(&r.depth, &ACTOR_KINDS, &self.mailbox_depth, kind).inc();
    }

    /// An actor of `kind` handled a message that it started handling at `started`.
    pub fn handled(&self, kind: &str, started: std::time::Instant) {
        let r = &self.resolved;
        child(&r.depth, &ACTOR_KINDS, &self.mailbox_depth, kind).dec();
        child(&r.handle_time, &ACTOR_KINDS, &self.handle_time, kind)
            .observe(started.elapsed().as_secs_f64());
    }

    /// A response of type `t` (a short name) was generated and queued in `took` seconds:
    /// `pilot_xds_pushes` and `pilot_xds_push_time`.
    pub fn pushed(&self, t: &str, took: f64) {
        let r = &self.resolved;
        child(&r.pushes, &XDS_TYPES, &self.xds_pushes, t).inc();
        child(&r.push_time, &XDS_TYPES, &self.xds_push_time, t).observe(took);
    }

    /// `pilot_xds_config_size_bytes{type}`.
    pub fn config_sized(&self, t: &str, bytes: usize) {
        let r = &self.resolved;
        child(&r.config_size, &XDS_TYPES, &self.config_size, t).observe(bytes as f64);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        // Encoding into a Vec cannot fail for well-formed families.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_istiod_names() {
        let m = Metrics::new();
        m.xds_clients.set(2);
        m.xds_pushes.with_label_values(&["cds"]).inc();
        m.xds_rejects.with_label_values(&["lds"]).inc();
        let text = m.render();
        assert!(text.contains("pilot_xds 2"), "{text}");
        assert!(text.contains("pilot_xds_pushes{type=\"cds\"} 1"), "{text}");
        assert!(
            text.contains("pilot_total_xds_rejects{type=\"lds\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("pilot_total_xds_rejects{type=\"cds\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn the_resolved_children_count_in_their_families() {
        let m = Metrics::new();
        m.pushed("rds", 0.01);
        m.pushed("not-a-type", 0.01);
        m.config_sized("rds", 2048);
        m.sent("debouncer");
        m.sent("debouncer");
        m.handled("debouncer", std::time::Instant::now());
        let text = m.render();
        for line in [
            "pilot_xds_pushes{type=\"rds\"} 1",
            "pilot_xds_pushes{type=\"not-a-type\"} 1",
            "pilot_xds_push_time_count{type=\"rds\"} 1",
            "pilot_xds_config_size_bytes_count{type=\"rds\"} 1",
            "axon_mailbox_depth{actor=\"debouncer\"} 1",
            "axon_actor_handle_seconds_count{actor=\"debouncer\"} 1",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[test]
    fn the_dashboard_queries_only_exported_metrics() {
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../config/grafana/axon-dashboard.json"))
                .expect("the dashboard is JSON");
        let exported = Metrics::new().render();
        let name = regex::Regex::new(r"\b((?:pilot|axon)_[a-z_]+)").expect("valid regex");
        let mut checked = 0;
        for panel in dashboard["panels"].as_array().expect("panels") {
            for target in panel["targets"].as_array().expect("targets") {
                let expr = target["expr"].as_str().expect("an expr");
                for m in name.captures_iter(expr) {
                    let metric = m[1]
                        .trim_end_matches("_bucket")
                        .trim_end_matches("_count")
                        .trim_end_matches("_sum");
                    assert!(
                        exported.contains(&format!("# TYPE {metric} ")),
                        "{metric} (panel {}) is not exported",
                        panel["title"]
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 20, "checked {checked} metric references");
    }
}
