//! What a test asks a running [`Axon`] about its state, instead of reading its log: the debug
//! address (`/debug/push_status`: the last built context; `/debug/syncz`: per proxy and type,
//! the nonces and versions sent and acked; `/debug/connections`; `/debug/configz`) and the
//! monitoring address's `/metrics`.

use std::time::Duration;

use serde_json::Value;

use super::axon::Axon;
use super::http::{HttpResponse, http_request};
use super::wait::wait_until;

/// Per xDS type (`cds`, `eds`, `lds`, `rds`) of one proxy, the nonce axon last sent it
/// (from `/debug/syncz`). A response always carries a fresh nonce, so two equal
/// `SentNonces` mean that nothing was sent in between.
pub type SentNonces = std::collections::BTreeMap<String, Option<String>>;

impl Axon {
    /// `GET path` on the debug address.
    pub fn debug_get(&self, path: &str) -> HttpResponse {
        self.debug_request("GET", path)
    }

    fn debug_request(&self, method: &str, path: &str) -> HttpResponse {
        http_request(
            self.debug_addr(),
            method,
            path,
            &[("Host", "localhost")],
            Duration::from_secs(5),
        )
    }

    /// `method path` on the debug address as JSON; panics unless it answers 200 with JSON.
    fn debug_json_by(&self, method: &str, path: &str) -> Value {
        let r = self.debug_request(method, path);
        assert_eq!(
            r.status, 200,
            "{method} {path} on axon's debug address: {}",
            r.body
        );
        serde_json::from_str(&r.body)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {}", r.body))
    }

    /// `POST path` on the debug address as JSON; panics unless it answers 200 with JSON.
    pub fn debug_post_json(&self, path: &str) -> Value {
        self.debug_json_by("POST", path)
    }

    /// `GET path` on the debug address as JSON; panics unless it answers 200 with JSON.
    pub fn debug_json(&self, path: &str) -> Value {
        self.debug_json_by("GET", path)
    }

    /// `/debug/push_status`: the last built context (`version`, `request.full`,
    /// `request.configs_updated`, ...).
    pub fn push_status(&self) -> Value {
        self.debug_json("/debug/push_status")
    }

    /// The version of the last built context, `None` before the first.
    pub fn built_version(&self) -> Option<u64> {
        self.push_status()["version"].as_u64()
    }

    /// Waits (up to `timeout`) until a context newer than `after` (any, for `None`) is built,
    /// and returns its `/debug/push_status`.
    pub fn wait_built_after(&self, after: Option<u64>, timeout: Duration) -> Option<Value> {
        let mut status = Value::Null;
        let built = wait_until(timeout, || {
            status = self.push_status();
            status["version"]
                .as_u64()
                .is_some_and(|v| after.is_none_or(|a| v > a))
        });
        built.then_some(status)
    }

    /// The `/debug/syncz` entry of the connected proxy `proxy_id`.
    pub fn syncz_of(&self, proxy_id: &str) -> Option<Value> {
        self.debug_json("/debug/syncz")
            .as_array()?
            .iter()
            .find(|c| c["proxy"] == proxy_id)
            .cloned()
    }

    /// The nonce last sent to `proxy_id` per type (panics if it is not connected).
    pub fn sent_nonces(&self, proxy_id: &str) -> SentNonces {
        let entry = self
            .syncz_of(proxy_id)
            .unwrap_or_else(|| panic!("{proxy_id} is not in /debug/syncz"));
        entry["types"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                (
                    t["type"].as_str().unwrap_or_default().to_string(),
                    t["nonce_sent"].as_str().map(str::to_string),
                )
            })
            .collect()
    }

    /// Waits (up to `timeout`) until the connection of `proxy_id` has handled the push of
    /// context `version` (or a later one): its `context_version` in `/debug/syncz`. A
    /// connection handles every push, and generates and queues what the push sends it in
    /// the same handler, so after this [`Axon::sent_nonces`] shows whether it sent anything.
    pub fn wait_push_reached(&self, proxy_id: &str, version: u64, timeout: Duration) -> bool {
        wait_until(timeout, || {
            self.syncz_of(proxy_id)
                .and_then(|c| c["context_version"].as_u64())
                .is_some_and(|v| v >= version)
        })
    }

    /// The `/debug/connections` entries.
    pub fn connections(&self) -> Vec<Value> {
        self.debug_json("/debug/connections")["connections"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (up to `timeout`) until every proxy of `proxy_ids` is connected and synced
    /// (every subscribed type ACKed at least once), per `/debug/connections`.
    pub fn wait_synced(&self, proxy_ids: &[&str], timeout: Duration) -> bool {
        wait_until(timeout, || {
            let connections = self.connections();
            proxy_ids.iter().all(|id| {
                connections
                    .iter()
                    .any(|c| c["proxy"] == *id && c["synced"] == true)
            })
        })
    }

    /// The validation errors `/debug/configz` holds for the config directory (each with
    /// the file's path, document and reason).
    pub fn config_errors(&self) -> Vec<String> {
        self.debug_json("/debug/configz")["errors"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e.as_str().map(str::to_string))
            .collect()
    }

    /// Waits (up to `timeout`) until `/debug/configz` holds an error mentioning `needle`.
    pub fn wait_config_error(&self, needle: &str, timeout: Duration) -> bool {
        wait_until(timeout, || {
            self.config_errors().iter().any(|e| e.contains(needle))
        })
    }

    /// The value of the first `/metrics` sample line starting with `line_prefix` (e.g.
    /// `pilot_xds ` or `pilot_total_xds_rejects{type="cds"}`).
    pub fn metric(&self, line_prefix: &str) -> Option<f64> {
        self.metrics()
            .lines()
            .find(|l| l.starts_with(line_prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    /// `pilot_total_xds_rejects` summed over the types: the NACKs axon received.
    pub fn total_rejects(&self) -> f64 {
        self.metrics()
            .lines()
            .filter(|l| l.starts_with("pilot_total_xds_rejects{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}
