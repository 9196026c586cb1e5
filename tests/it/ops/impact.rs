//! `axon impact OLD NEW --proxies http://DEBUG` against a running axon with two connected
//! proxies (sidecars in namespaces a and b, each importing its own namespace): a
//! VirtualService edit in a names exactly the proxy the server then pushes to (its routes
//! alone), checked against `/debug/distribution` for that change; an unrelated change names
//! none and exits 0; the nodes written to a file give the same answer.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::ads_client::{
    Client, RDS, debug_json, documents, istio_node, own_namespace_sidecar, runtime,
    svc_destination_rule, svc_service_entry, svc_virtual_service,
};
use crate::support::{Axon, ConfigDir, wait_until};

const AXON: &str = env!("CARGO_BIN_EXE_axon");

fn namespace(ns: &str, weight_v2: u32) -> String {
    documents(&[
        svc_service_entry(ns),
        svc_destination_rule(ns),
        svc_virtual_service(ns, false, 100 - weight_v2),
        own_namespace_sidecar(ns),
    ])
}

fn sidecar_id(ns: &str) -> String {
    format!("sidecar~10.9.0.1~app-1.{ns}~{ns}.svc.cluster.local")
}

/// A config directory of namespaces a (its VirtualService at `weight_a` to v2) and b, and
/// `extra` documents.
fn tree(weight_a: u32, extra: &str) -> ConfigDir {
    let dir = ConfigDir::new();
    dir.write("a.yaml", &namespace("a", weight_a));
    dir.write("b.yaml", &namespace("b", 0));
    if !extra.is_empty() {
        dir.write("extra.yaml", extra);
    }
    dir
}

fn impact(old: &Path, new: &Path, proxies: &str) -> Output {
    Command::new(AXON)
        .args(["impact", old.to_str().unwrap(), new.to_str().unwrap()])
        .args(["--proxies", proxies, "--json"])
        .output()
        .expect("axon runs")
}

/// A proxy and the types it would be sent.
type Pushed = (String, Vec<String>);

/// (config, [(proxy, types)]) of a `--json` answer.
fn reached(out: &Output) -> Vec<(String, Vec<Pushed>)> {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    doc["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let proxies = c["proxies"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let types = p["types"].as_array().unwrap();
                    (
                        p["proxy"].as_str().unwrap().to_string(),
                        types
                            .iter()
                            .map(|t| t.as_str().unwrap().to_string())
                            .collect(),
                    )
                })
                .collect();
            (c["config"].as_str().unwrap().to_string(), proxies)
        })
        .collect()
}

#[test]
fn impact_names_the_proxies_the_server_then_pushes_to_and_none_for_an_unrelated_change() {
    let served = tree(0, "");
    let axon = Axon::start(served.path());
    let old = tree(0, "");
    let edited = tree(30, "");
    let unrelated = tree(0, &own_namespace_sidecar("elsewhere"));
    runtime().block_on(async {
        let mut in_a = Client::connect(&axon).await;
        in_a.subscribe_wildcards(istio_node(&sidecar_id("a"), "a", &[("app", "app")]))
            .await;
        in_a.request(RDS, &["80"], "", None).await;
        let rds = in_a.next().await;
        in_a.ack(&rds, &["80"]).await;
        let mut in_b = Client::connect(&axon).await;
        in_b.subscribe_wildcards(istio_node(&sidecar_id("b"), "b", &[("app", "app")]))
            .await;

        let debug = format!("http://{}", axon.debug_addr());
        // What the edit would do: a's proxy, its routes alone.
        let out = impact(old.path(), edited.path(), &debug);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let predicted = reached(&out);
        assert_eq!(
            predicted,
            [(
                "VirtualService/a/svc".to_string(),
                vec![(sidecar_id("a"), vec!["rds".to_string()])]
            )]
        );

        // The same from the nodes written to a file.
        let nodes = axon.debug_get("/debug/nodes").body;
        assert_eq!(nodes.lines().count(), 2, "{nodes}");
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &nodes).unwrap();
        let from_file = impact(old.path(), edited.path(), file.path().to_str().unwrap());
        assert_eq!(reached(&from_file), predicted);

        // An unrelated change: nothing, exit 0.
        let out = impact(old.path(), unrelated.path(), &debug);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for (_, proxies) in reached(&out) {
            assert!(proxies.is_empty());
        }

        // The server, given the edit, pushes to exactly those proxies.
        served.write("a.yaml", &namespace("a", 30));
        let r = in_a.next().await;
        assert_eq!(r.type_url, RDS, "the routes alone, as predicted");
        let key = "VirtualService/a/svc";
        let mut last = serde_json::Value::Null;
        let pending = wait_until(Duration::from_secs(30), || {
            last = debug_json(&axon, &format!("/debug/distribution?key={key}"));
            last[0]["affected"] == 1
        });
        assert!(pending, "{last}");
        assert_eq!(
            last[0]["pending"],
            serde_json::json!([sidecar_id("a")]),
            "{last}"
        );
        in_a.ack(&r, &["80"]).await;
        let complete = wait_until(Duration::from_secs(30), || {
            last = debug_json(&axon, &format!("/debug/distribution?key={key}"));
            last[0]["complete"] == true
        });
        assert!(complete, "{last}");
        assert_eq!(
            last[0]["affected"], 1,
            "only a's proxy, as predicted: {last}"
        );
        assert!(
            in_b.next_within(Duration::from_millis(300)).await.is_none(),
            "b's proxy is sent nothing"
        );
    });
}

#[test]
fn impact_reports_a_bad_source_or_directory_with_exit_2() {
    let old = tree(0, "");
    let out = impact(old.path(), Path::new("/nonexistent"), "/nonexistent-nodes");
    assert_eq!(out.status.code(), Some(2));
    let broken = tree(0, "kind: [unclosed");
    let nodes = tempfile::NamedTempFile::new().unwrap();
    let out = impact(old.path(), broken.path(), nodes.path().to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("extra.yaml"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(nodes.path(), "{\"id\": 3}\n").unwrap();
    let out = impact(old.path(), old.path(), nodes.path().to_str().unwrap());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
