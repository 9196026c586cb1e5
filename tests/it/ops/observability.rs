//! Observability, driven by scripted ADS clients against a real `axon serve`: config
//! distribution status, every debug endpoint, the metrics a scenario implies, JSON logs.

use crate::support;
use crate::support::ads_client;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ads_client::{
    CDS, Client, LDS, RDS, debug_json, documents, istio_node, own_namespace_sidecar, runtime,
    svc_destination_rule, svc_service_entry, svc_virtual_service,
};
use support::{Axon, ConfigDir, wait_until};

/// Service `svc` in `ns` with a mesh VirtualService sending `weight_v2` to v2, and a Sidecar
/// importing only `ns`.
fn namespace(ns: &str, weight_v2: u32) -> String {
    documents(&[
        svc_service_entry(ns),
        svc_destination_rule(ns),
        svc_virtual_service(ns, false, 100 - weight_v2),
        own_namespace_sidecar(ns),
    ])
}

fn sidecar(ns: &str) -> envoy_types::pb::envoy::config::core::v3::Node {
    istio_node(
        &format!("sidecar~10.9.0.1~app-1.{ns}~{ns}.svc.cluster.local"),
        ns,
        &[("app", "app")],
    )
}

/// istiod's short name of a type URL (`cds`, `eds`, `lds`, `rds`).
fn short_type(type_url: &str) -> &'static str {
    match type_url {
        CDS => "cds",
        LDS => "lds",
        ads_client::EDS => "eds",
        ads_client::RDS => "rds",
        other => panic!("unexpected type {other}"),
    }
}

fn metric(metrics: &str, line_prefix: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric line starting {line_prefix:?} in\n{metrics}"))
}

#[test]
fn distribution_status_debug_endpoints_and_metrics() {
    let dir = ConfigDir::new();
    dir.write("a.yaml", &namespace("a", 0));
    dir.write("b.yaml", &namespace("b", 0));
    let axon = Axon::start(dir.path());
    runtime().block_on(async {
        let mut in_a = Client::connect(&axon).await;
        in_a.subscribe_wildcards(sidecar("a")).await;
        in_a.request(RDS, &["80"], "", None).await;
        let rds = in_a.next().await;
        in_a.ack(&rds, &["80"]).await;
        let mut in_b = Client::connect(&axon).await;
        in_b.subscribe_wildcards(sidecar("b")).await;

        // A VirtualService change in a reaches the proxy in a (its routes: the only type
        // that changed); b's proxy is not affected.
        dir.write("a.yaml", &namespace("a", 30));
        let r = in_a.next().await;
        assert_eq!(r.type_url, RDS);
        in_a.ack(&r, &["80"]).await;
        let key = "VirtualService/a/svc";
        let mut last = serde_json::Value::Null;
        let complete = wait_until(Duration::from_secs(30), || {
            last = debug_json(&axon, &format!("/debug/distribution?key={key}"));
            last[0]["complete"] == true
        });
        assert!(complete, "the change reached every affected proxy: {last}");
        assert_eq!(last[0]["affected"], 1, "only the proxy in a: {last}");
        assert_eq!(last[0]["acked"], 1);
        assert_eq!(last[0]["pending"], serde_json::json!([]));
        assert!(last[0]["seconds_to_last_ack"].as_f64().is_some(), "{last}");

        // A NACK shows as such, with its error.
        dir.write("a.yaml", &namespace("a", 60));
        let r = in_a.next().await;
        let nacked_type = short_type(&r.type_url);
        in_a.nack(&r, &["80"], "scripted rejection").await;
        let nacked = wait_until(Duration::from_secs(30), || {
            last = debug_json(&axon, &format!("/debug/distribution?key={key}"));
            last[0]["nacked"][0][1]
                .as_str()
                .is_some_and(|e| e.contains("scripted rejection"))
        });
        assert!(nacked, "{last}");
        assert_eq!(last[0]["complete"], false);

        // Every debug endpoint answers JSON.
        let syncz = debug_json(&axon, "/debug/syncz");
        assert_eq!(syncz.as_array().map(Vec::len), Some(2), "{syncz}");
        let proxy_a = "sidecar~10.9.0.1~app-1.a~a.svc.cluster.local";
        let entry = syncz
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["proxy"] == proxy_a)
            .expect("proxy a in syncz");
        assert!(
            entry["types"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("scripted"))),
            "{entry}"
        );
        let dump = debug_json(
            &axon,
            &format!("/debug/config_dump?proxyID={proxy_a}&types=cds"),
        );
        let clusters: Vec<&str> = dump["configs"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["name"].as_str())
            .collect();
        assert!(
            clusters.contains(&"outbound|80|v1|svc.a.svc.cluster.local"),
            "{dump}"
        );
        assert!(
            !clusters
                .iter()
                .any(|c| c.ends_with("svc.b.svc.cluster.local")),
            "{dump}"
        );
        assert!(
            dump["configs"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["@type"] == "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
            "only the types asked, as Envoy's JSON: {dump}"
        );
        dir.write("broken.yaml", "kind: [unclosed");
        let configz = wait_until(Duration::from_secs(10), || {
            last = debug_json(&axon, "/debug/configz");
            last["errors"].as_array().is_some_and(|e| !e.is_empty())
        });
        assert!(configz, "{last}");
        assert!(
            last["errors"][0].as_str().unwrap().contains("broken.yaml"),
            "{last}"
        );
        assert_eq!(last["configs"].as_array().map(Vec::len), Some(8), "{last}");
        let status = debug_json(&axon, "/debug/push_status");
        assert!(status["version"].as_u64().unwrap() >= 3, "{status}");
        let connections = debug_json(&axon, "/debug/connections");
        assert_eq!(connections["total"], 2, "{connections}");
        let version = debug_json(&axon, "/version");
        assert_eq!(version["name"], "axon");

        // A forced push reaches every proxy, b's too.
        let before: u64 = status["version"].as_u64().unwrap();
        assert_eq!(
            axon.debug_post_json("/debug/adsz?push=true")["pushed"],
            true
        );
        // Sent although nothing changed (at the same content version).
        let r = in_b.next().await;
        assert!(
            axon.built_version().is_some_and(|v| v > before),
            "forced: {}",
            r.version_info
        );

        // The metrics the scenario implies.
        let metrics = axon.metrics();
        assert_eq!(metric(&metrics, "pilot_xds "), 2.0);
        // CDS: the two first answers and the forced push (the VirtualService edits changed
        // routes only, and sent RDS alone).
        assert!(
            metric(&metrics, "pilot_xds_pushes{type=\"cds\"}") >= 3.0,
            "{metrics}"
        );
        // Exactly the one scripted NACK, counted under its type.
        for t in ["cds", "eds", "lds", "rds"] {
            let want = if t == nacked_type { 1.0 } else { 0.0 };
            assert_eq!(
                metric(
                    &metrics,
                    &format!("pilot_total_xds_rejects{{type=\"{t}\"}}")
                ),
                want,
                "one NACK, of {nacked_type}\n{metrics}"
            );
        }
        assert!(metric(&metrics, "pilot_inbound_updates{type=\"config\"}") >= 3.0);
        assert!(metric(&metrics, "pilot_push_triggers{type=\"forced\"}") >= 1.0);
        assert!(metric(&metrics, "axon_config_distribution_seconds_count") >= 1.0);
        assert!(metric(&metrics, "pilot_proxy_convergence_time_count") >= 3.0);
        assert!(metric(&metrics, "pilot_pushcontext_init_seconds_count") >= 3.0);
        assert!(metric(&metrics, "pilot_debounce_time_count") >= 3.0);
        assert!(metric(&metrics, "pilot_xds_send_time_count") >= 5.0);
        assert!(metric(&metrics, "pilot_xds_config_size_bytes_count{type=\"cds\"}") >= 3.0);
        assert!(metric(&metrics, "pilot_services ") == 2.0);
        assert!(
            metric(
                &metrics,
                "axon_actor_handle_seconds_count{actor=\"connection\"}"
            ) >= 1.0
        );
        // The scripted clients never answer a stale nonce, always read, and nothing fails.
        for t in ["cds", "eds", "lds", "rds"] {
            assert_eq!(
                metric(
                    &metrics,
                    &format!("pilot_xds_expired_nonce{{type=\"{t}\"}}")
                ),
                0.0,
                "{metrics}"
            );
        }
        assert_eq!(metric(&metrics, "pilot_xds_write_timeout "), 0.0);
        assert_eq!(metric(&metrics, "pilot_total_xds_internal_errors "), 0.0);
        // Three pushes reached proxy a (its VirtualService twice, the forced one): each
        // waited in the PushQueue.
        assert!(metric(&metrics, "pilot_proxy_queue_time_count ") >= 3.0);
        // A response is counted, then timed: once the pushes are over, as many timings as
        // responses (read again, as the forced push may still be reported on proxy a).
        for t in ["cds", "lds"] {
            let (mut timed, mut sent) = (None, None);
            let equal = wait_until(Duration::from_secs(10), || {
                let metrics = axon.metrics();
                timed = Some(metric(
                    &metrics,
                    &format!("pilot_xds_push_time_count{{type=\"{t}\"}}"),
                ));
                sent = Some(metric(
                    &metrics,
                    &format!("pilot_xds_pushes{{type=\"{t}\"}}"),
                ));
                timed == sent
            });
            assert!(
                equal,
                "one push_time observation per {t} response: {timed:?} timed, {sent:?} sent"
            );
        }
        // Every message sent to the PushQueue is handled: its depth is never negative and is
        // back to 0 once the pushes are done. (Red until src stops the gauge drifting below 0.)
        let mut depth = f64::NAN;
        let drained = wait_until(Duration::from_secs(10), || {
            depth = metric(&axon.metrics(), "axon_mailbox_depth{actor=\"push_queue\"} ");
            assert!(
                depth >= 0.0,
                "axon_mailbox_depth{{actor=\"push_queue\"}} = {depth}"
            );
            depth == 0.0
        });
        assert!(
            drained,
            "axon_mailbox_depth{{actor=\"push_queue\"}} stays at {depth} when idle"
        );
    });
}

#[test]
fn json_logs() {
    let dir = ConfigDir::new();
    dir.write("a.yaml", &namespace("a", 0));
    let mut child = Command::new(env!("CARGO_BIN_EXE_axon"))
        .args(["--log-format", "json", "serve", "--config-dir"])
        .arg(dir.path())
        .args([
            "--xds-addr",
            "127.0.0.1:0",
            "--monitoring-addr",
            "127.0.0.1:0",
            "--debug-addr",
            "127.0.0.1:0",
        ])
        .env_remove("RUST_LOG")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("axon starts");
    let stderr = child.stderr.take().unwrap();
    let mut found = None;
    for line in BufReader::new(stderr).lines().take(50) {
        let line = line.unwrap();
        let value: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        if value["fields"]["message"] == "axon listening" {
            found = Some(value);
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let line = found.expect("the listening line, as JSON");
    assert_eq!(line["level"], "INFO");
    assert!(
        line["fields"]["xds_addr"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
}

/// axon turns transparent huge pages off for itself (`src/main.rs`): with them a cold storm
/// spent a third of its CPU zeroing 2 MiB pages. The kernel says so in the process's status.
#[test]
#[cfg(target_os = "linux")]
fn the_process_runs_without_transparent_huge_pages() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let status = std::fs::read_to_string(format!("/proc/{}/status", axon.pid())).expect("status");
    let thp = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(str::trim);
    assert_eq!(thp, Some("0"), "{status}");
}
