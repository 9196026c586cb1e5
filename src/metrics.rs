//! Prometheus metrics, with istiod's names and labels.
//!
//! One [`Metrics`] is made at startup and handed to every actor that counts something; the
//! monitoring server renders it on `/metrics`.

use prometheus::{Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

/// The `type` label values of the per-type xDS families (istiod's short names).
pub const XDS_TYPES: [&str; 4] = ["cds", "eds", "lds", "rds"];

#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// `pilot_xds`: connected proxies.
    pub xds_clients: IntGauge,
    /// `pilot_xds_pushes{type}`: responses sent, by type.
    pub xds_pushes: IntCounterVec,
    /// `pilot_total_xds_rejects{type}`: NACKs received, by type.
    pub xds_rejects: IntCounterVec,
    /// `pilot_xds_expired_nonce{type}`: requests with a stale nonce.
    pub expired_nonce: IntCounterVec,
    /// `pilot_services`: services known.
    pub services: IntGauge,
    /// `pilot_push_triggers{type}`: pushes by reason.
    pub push_triggers: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let gauge = |name: &str, help: &str| {
            let g = IntGauge::new(name, help).expect("valid metric");
            registry.register(Box::new(g.clone())).expect("unique metric");
            g
        };
        let counter = |name: &str, help: &str| {
            let c = IntCounterVec::new(Opts::new(name, help), &["type"]).expect("valid metric");
            registry.register(Box::new(c.clone())).expect("unique metric");
            c
        };
        let m = Metrics {
            xds_clients: gauge("pilot_xds", "Number of endpoints connected to this pilot using XDS."),
            xds_pushes: counter("pilot_xds_pushes", "Pilot build and send errors for lds, rds, cds and eds."),
            xds_rejects: counter("pilot_total_xds_rejects", "Total number of XDS responses from pilot rejected by proxy."),
            expired_nonce: counter("pilot_xds_expired_nonce", "Total number of XDS requests with an expired nonce."),
            services: gauge("pilot_services", "Total services known to pilot."),
            push_triggers: counter("pilot_push_triggers", "Total number of times a push was triggered, labeled by reason for the push."),
            registry,
        };
        // Typed families start at 0 for every xDS type, so that dashboards see them at once.
        for t in XDS_TYPES {
            m.xds_pushes.with_label_values(&[t]);
            m.xds_rejects.with_label_values(&[t]);
            m.expired_nonce.with_label_values(&[t]);
        }
        m
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
        assert!(text.contains("pilot_total_xds_rejects{type=\"lds\"} 1"), "{text}");
        assert!(text.contains("pilot_total_xds_rejects{type=\"cds\"} 0"), "{text}");
    }
}
