//! Access log files written by real Envoys, read back: istiod's TEXT format and JSON labels
//! parsed field by field, lines waited for while Envoy is asked to flush (it writes every
//! 10 s otherwise), and the log paths a listener's filters name in a config dump.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::scenario::describe_envoy;
use super::{Envoy, dynamic_listener, http_request, wait_until};

/// How long a line may take to be written.
const CONVERGE: Duration = Duration::from_secs(30);

/// istiod's JSON labels (`EnvoyJSONLogFormatIstio`), which also name the TEXT format's fields.
pub const LABELS: &str = "start_time route_name method path protocol response_code response_flags \
    response_code_details connection_termination_details bytes_received bytes_sent duration \
    upstream_service_time x_forwarded_for user_agent request_id authority upstream_host \
    upstream_cluster upstream_local_address downstream_local_address downstream_remote_address \
    requested_server_name upstream_transport_failure_reason";

/// istiod's `EnvoyTextLogFormat`, its fields named by [`LABELS`].
const TEXT_LINE: &str = r#"^\[(?P<start_time>[^\]]+)\] "(?P<method>\S+) (?P<path>\S+) (?P<protocol>\S+)" (?P<response_code>\d+) (?P<response_flags>\S+) (?P<response_code_details>\S+) (?P<connection_termination_details>\S+) "(?P<upstream_transport_failure_reason>[^"]*)" (?P<bytes_received>\d+) (?P<bytes_sent>\d+) (?P<duration>\d+) (?P<upstream_service_time>\S+) "(?P<x_forwarded_for>[^"]*)" "(?P<user_agent>[^"]*)" "(?P<request_id>[^"]*)" "(?P<authority>[^"]*)" "(?P<upstream_host>[^"]*)" (?P<upstream_cluster>\S+) (?P<upstream_local_address>\S+) (?P<downstream_local_address>\S+) (?P<downstream_remote_address>\S+) (?P<requested_server_name>\S+) (?P<route_name>\S+)$"#;

/// One access log line, field by field (a JSON `null` or number as TEXT writes it).
pub type Entry = BTreeMap<String, String>;

pub fn parse_text(line: &str) -> Option<Entry> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let caps = RE
        .get_or_init(|| regex::Regex::new(TEXT_LINE).unwrap())
        .captures(line)?;
    Some(
        LABELS
            .split_whitespace()
            .map(|l| (l.to_string(), caps[l].to_string()))
            .collect(),
    )
}

pub fn parse_json(line: &str) -> Option<Entry> {
    let v: serde_json::Map<String, Value> = serde_json::from_str(line).ok()?;
    let text = |v: Value| match v {
        Value::String(s) => s,
        Value::Null => "-".to_string(),
        other => other.to_string(),
    };
    Some(v.into_iter().map(|(k, v)| (k, text(v))).collect())
}

/// The whole lines of `path` (none before it exists; a line still being written is left out).
pub fn lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.split_inclusive('\n')
        .filter(|l| l.ends_with('\n'))
        .map(|l| l.trim_end_matches('\n').to_string())
        .collect()
}

/// Asks `envoy` to write its access logs now (they are reopened, so flushed), not in 10 s.
pub fn flush_logs(envoy: &Envoy) {
    let _ = http_request(
        envoy.admin_addr(),
        "POST",
        "/reopen_logs",
        &[("Host", "localhost")],
        Duration::from_secs(5),
    );
}

/// Waits until `path` has a line for which `pick` says `true`, flushing `envoys`' logs as it
/// polls; returns it. Panics with the file and the Envoys' state otherwise.
pub fn wait_line(
    path: &Path,
    envoys: &[&Envoy],
    what: &str,
    pick: impl Fn(&str) -> bool,
) -> String {
    let mut found = None;
    let mut flushed: Option<Instant> = None;
    wait_until(CONVERGE, || {
        if flushed.is_none_or(|at| at.elapsed() >= Duration::from_millis(300)) {
            envoys.iter().for_each(|e| flush_logs(e));
            flushed = Some(Instant::now());
        }
        found = lines(path).into_iter().find(|l| pick(l));
        found.is_some()
    });
    found.unwrap_or_else(|| {
        let states: Vec<String> = envoys.iter().map(|e| describe_envoy(e)).collect();
        panic!(
            "no line of {what} in {} within {CONVERGE:?}; the file:\n{}\n{}",
            path.display(),
            lines(path).join("\n"),
            states.join("\n")
        )
    })
}

/// The first entry whose `key` is `value`, once it is logged (`json`: JSON lines, else TEXT).
pub fn wait_entry(path: &Path, envoys: &[&Envoy], (key, value): (&str, &str), json: bool) -> Entry {
    let parse = |l: &str| if json { parse_json(l) } else { parse_text(l) };
    let what = format!("{key}={value}");
    let line = wait_line(path, envoys, &what, |l| {
        parse(l).is_some_and(|e| e.get(key).map(String::as_str) == Some(value))
            // A line of another format names it too: reported below, not waited out.
            || l.contains(value) && parse(l).is_none()
    });
    parse(&line).unwrap_or_else(|| {
        panic!(
            "the line of {what} is not in istiod's {} format:\n{line}",
            if json { "JSON" } else { "TEXT" }
        )
    })
}

pub fn field<'a>(e: &'a Entry, key: &str) -> &'a str {
    e.get(key).map_or("<missing>", String::as_str)
}

/// The `path`s of the access logs of listener `name`'s filters (its connection managers').
pub fn hcm_log_paths(dump: &Value, name: &str) -> Vec<String> {
    let listener = dynamic_listener(dump, name).unwrap_or_default();
    let all = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let chains = all(&listener["active_state"]["listener"]["filter_chains"]);
    let filters = chains.iter().flat_map(|c| all(&c["filters"]));
    let logs = filters.flat_map(|f| all(&f["typed_config"]["access_log"]));
    let path = |log: Value| {
        log["typed_config"]["path"]
            .as_str()
            .unwrap_or("?")
            .to_string()
    };
    logs.map(path).collect()
}
