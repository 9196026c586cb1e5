//! [`Envoy`]: a running Envoy (the pinned release from the test venv, see `tools.rs`) with
//! the bootstrap [`EnvoyOptions`] makes, and its admin API (`/config_dump`, `/stats`; what
//! a dump says is read in `config_dump.rs`). Killed on drop; its xDS stats and log are
//! printed if the test panics. A mesh pod's sidecar (`mesh/`) is the same Envoy started
//! inside the pod ([`InPod`]).

use std::collections::BTreeMap;
use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::http::{HttpResponse, http_request};
use super::process::{LOG_TAIL_LINES, keep_dir_on_panic, kill_child, new_temp_dir, tail_lines};
use super::tools::ensure_envoy;

/// How an Envoy is started. `EnvoyOptions::gateway(..)` gives the ingress
/// gateway defaults; tweak fields for sidecars or delta xDS.
#[derive(Debug, Clone)]
pub struct EnvoyOptions {
    /// e.g. `router~127.0.0.1~ingress-1.istio-system~istio-system.svc.cluster.local`
    /// or `sidecar~10.0.0.1~app-1.demo~demo.svc.cluster.local`.
    pub node_id: String,
    /// Envoy's `node.cluster`.
    pub cluster: String,
    pub namespace: String,
    pub labels: Vec<(String, String)>,
    /// Extra node metadata fields (string values), next to NAMESPACE and LABELS.
    pub extra_metadata: Vec<(String, serde_json::Value)>,
    /// `GRPC` (state of the world) or `DELTA_GRPC`.
    pub api_type: String,
    pub log_level: String,
    /// `--concurrency` (worker threads); `None` = Envoy's default.
    pub concurrency: Option<u32>,
    /// `initial_fetch_timeout` for CDS/LDS (`None` = Envoy's default, 15 s).
    pub initial_fetch_timeout: Option<String>,
    /// Wait for `/ready` to answer 200 (server LIVE) rather than any answer.
    pub wait_live: bool,
    /// Extra `static_resources.listeners` entries.
    pub static_listeners: Vec<serde_json::Value>,
    /// Extra `static_resources.clusters` entries (after `xds-grpc`).
    pub static_clusters: Vec<serde_json::Value>,
    /// `(base_interval, max_interval)` of the ADS stream's reconnect backoff
    /// (`envoy_grpc.retry_policy.retry_back_off`), e.g. `("0.1s", "0.5s")`;
    /// `None` = Envoy's default (0.5 s base, 30 s max, jittered).
    pub xds_retry_back_off: Option<(String, String)>,
    /// More control-plane addresses in the `xds-grpc` cluster, after the one given to
    /// `start` (round robin: e.g. a second axon replica).
    pub more_xds: Vec<SocketAddr>,
    /// Connect to the control plane over TLS.
    pub xds_tls: Option<XdsTls>,
    /// Envoy's `node.locality` (`region`, `zone`, `sub_zone`).
    pub locality: Option<(String, String, String)>,
    /// A whole bootstrap to run instead of the one the options make (e.g. one of
    /// `config/`'s examples, its addresses and paths rewritten by the test).
    pub bootstrap_override: Option<serde_json::Value>,
    /// Run inside a mesh pod rather than beside the test (`None`).
    pub pod: Option<InPod>,
}

/// How a sidecar runs inside a mesh pod (`mesh/`): started under `wrapper` (e.g. `ip netns
/// exec NS setpriv --reuid=1337 ... --`, which execs Envoy), its temp directory owned by
/// `uid`:`gid` (the user the wrapper runs it as), its admin API on the pod's
/// `127.0.0.1:admin_port`, which the test reaches through `admin_relay` (the pod's loopback
/// is not the test's).
#[derive(Debug, Clone)]
pub struct InPod {
    pub wrapper: Vec<String>,
    pub uid: u32,
    pub gid: u32,
    pub admin_port: u16,
    pub admin_relay: SocketAddr,
}

/// The TLS of the `xds-grpc` cluster: the CA to verify axon with, the SNI, and a client
/// certificate (if any).
#[derive(Debug, Clone)]
pub struct XdsTls {
    pub ca: std::path::PathBuf,
    pub sni: String,
    pub client: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// A bearer token sent on the ADS stream (`initial_metadata` `authorization`), as
    /// pilot-agent sends the pod's service-account token.
    pub token: Option<String>,
}

impl EnvoyOptions {
    pub fn gateway(node_id: &str, labels: &[(&str, &str)], namespace: &str) -> Self {
        EnvoyOptions {
            node_id: node_id.to_string(),
            cluster: "istio-ingressgateway".to_string(),
            namespace: namespace.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_metadata: Vec::new(),
            api_type: "GRPC".to_string(),
            log_level: "info".to_string(),
            concurrency: Some(1),
            initial_fetch_timeout: None,
            wait_live: false,
            static_listeners: Vec::new(),
            static_clusters: Vec::new(),
            xds_retry_back_off: None,
            more_xds: Vec::new(),
            xds_tls: None,
            locality: None,
            bootstrap_override: None,
            pod: None,
        }
    }

    /// Sidecar-flavoured defaults (cluster `NAME.NAMESPACE`).
    pub fn sidecar(node_id: &str, labels: &[(&str, &str)], namespace: &str) -> Self {
        let mut o = Self::gateway(node_id, labels, namespace);
        let app = labels
            .iter()
            .find(|(k, _)| *k == "app")
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| "app".to_string());
        o.cluster = format!("{app}.{namespace}");
        o
    }

    pub fn delta(mut self) -> Self {
        self.api_type = "DELTA_GRPC".to_string();
        self
    }

    /// The bootstrap (JSON, which is valid YAML).
    pub fn bootstrap(&self, xds_addr: SocketAddr) -> serde_json::Value {
        use serde_json::json;
        let mut labels = serde_json::Map::new();
        for (k, v) in &self.labels {
            labels.insert(k.clone(), json!(v));
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("NAMESPACE".into(), json!(self.namespace));
        metadata.insert("LABELS".into(), serde_json::Value::Object(labels));
        for (k, v) in &self.extra_metadata {
            metadata.insert(k.clone(), v.clone());
        }
        let mut cds = json!({"ads": {}, "resource_api_version": "V3"});
        let mut lds = json!({"ads": {}, "resource_api_version": "V3"});
        if let Some(t) = &self.initial_fetch_timeout {
            cds["initial_fetch_timeout"] = json!(t);
            lds["initial_fetch_timeout"] = json!(t);
        }
        let mut node = json!({
            "id": self.node_id,
            "cluster": self.cluster,
            "metadata": metadata,
        });
        if let Some((region, zone, sub_zone)) = &self.locality {
            node["locality"] = json!({"region": region, "zone": zone, "sub_zone": sub_zone});
        }
        let admin_port = self.pod.as_ref().map_or(0, |p| p.admin_port);
        let mut bootstrap = json!({
            "node": node,
            "admin": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}
            },
            "static_resources": {
                "clusters": [{
                    "name": "xds-grpc",
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": {"http2_protocol_options": {}}
                        }
                    },
                    "load_assignment": {
                        "cluster_name": "xds-grpc",
                        "endpoints": [{"lb_endpoints": std::iter::once(&xds_addr)
                            .chain(&self.more_xds)
                            .map(|addr| json!({"endpoint": {"address": {
                                "socket_address": {
                                    "address": addr.ip().to_string(),
                                    "port_value": addr.port()
                                }
                            }}}))
                            .collect::<Vec<_>>()}]
                    }
                }]
            },
            "dynamic_resources": {
                "ads_config": {
                    "api_type": self.api_type,
                    "transport_api_version": "V3",
                    "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
                    "set_node_on_first_message_only": true
                },
                "cds_config": cds,
                "lds_config": lds
            }
        });
        if let Some((base, max)) = &self.xds_retry_back_off {
            bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["envoy_grpc"]["retry_policy"] = json!({
                "retry_back_off": {"base_interval": base, "max_interval": max}
            });
        }
        if let Some(token) = self.xds_tls.as_ref().and_then(|t| t.token.as_ref()) {
            bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["initial_metadata"] =
                json!([{"key": "authorization", "value": format!("Bearer {token}")}]);
        }
        if let Some(tls) = &self.xds_tls {
            let mut common = json!({
                "alpn_protocols": ["h2"],
                "validation_context": {"trusted_ca": {"filename": tls.ca}}
            });
            if let Some((cert, key)) = &tls.client {
                common["tls_certificates"] = json!([{
                    "certificate_chain": {"filename": cert},
                    "private_key": {"filename": key}
                }]);
            }
            bootstrap["static_resources"]["clusters"][0]["transport_socket"] = json!({
                "name": "envoy.transport_sockets.tls",
                "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "sni": tls.sni,
                    "common_tls_context": common
                }
            });
        }
        let statics = &mut bootstrap["static_resources"];
        if let Some(cs) = statics["clusters"].as_array_mut() {
            cs.extend(self.static_clusters.iter().cloned());
        }
        if !self.static_listeners.is_empty() {
            statics["listeners"] = json!(self.static_listeners);
        }
        bootstrap
    }
}

/// A running Envoy.
pub struct Envoy {
    child: Child,
    admin_addr: SocketAddr,
    log_path: PathBuf,
    dir: Option<tempfile::TempDir>,
    pub options: EnvoyOptions,
}

impl Envoy {
    /// An ingress gateway Envoy (cluster `istio-ingressgateway`) on `xds_addr`.
    pub fn start_gateway(
        xds_addr: SocketAddr,
        node_id: &str,
        labels: &[(&str, &str)],
        namespace: &str,
    ) -> Envoy {
        Self::start(xds_addr, EnvoyOptions::gateway(node_id, labels, namespace))
    }

    pub fn start(xds_addr: SocketAddr, options: EnvoyOptions) -> Envoy {
        let envoy_bin = ensure_envoy();
        let dir = new_temp_dir("axon-e2e-envoy-");
        let bootstrap_path = dir.path().join("bootstrap.yaml");
        let admin_path = dir.path().join("admin-address.txt");
        let log_path = dir.path().join("envoy.log");
        let bootstrap = match &options.bootstrap_override {
            Some(b) => serde_json::to_string_pretty(b).unwrap(),
            None => serde_json::to_string_pretty(&options.bootstrap(xds_addr)).unwrap(),
        };
        fs::write(&bootstrap_path, &bootstrap).expect("write bootstrap");
        let log_file = fs::File::create(&log_path).expect("create envoy log");
        let mut cmd = match &options.pod {
            Some(pod) => {
                std::os::unix::fs::chown(dir.path(), Some(pod.uid), Some(pod.gid))
                    .unwrap_or_else(|e| panic!("chown {}: {e}", dir.path().display()));
                let (program, args) = pod.wrapper.split_first().expect("a wrapper command");
                let mut cmd = Command::new(program);
                cmd.args(args).arg(&envoy_bin);
                cmd
            }
            None => Command::new(&envoy_bin),
        };
        cmd.arg("-c")
            .arg(&bootstrap_path)
            .arg("--admin-address-path")
            .arg(&admin_path)
            // No hot restart: its shared memory region (/dev/shm/envoy_shared_memory_N) is
            // left behind by every Envoy a test kills, /dev/shm is shared by the pods'
            // network namespaces, and a later Envoy that draws a leftover's base id aborts
            // ("cannot open shared memory region … File exists").
            .arg("--disable-hot-restart")
            .args(["--log-level", &options.log_level]);
        if let Some(c) = options.concurrency {
            cmd.args(["--concurrency", &c.to_string()]);
        }
        cmd.stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", envoy_bin.display()));

        let deadline = Instant::now() + Duration::from_secs(30);
        let mut admin_addr: Option<SocketAddr> = None;
        let mut last_ready = String::new();
        let failure = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break format!("envoy exited early with {status}");
            }
            if admin_addr.is_none() {
                admin_addr = fs::read_to_string(&admin_path)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .map(|a| options.pod.as_ref().map_or(a, |p| p.admin_relay));
            }
            if let Some(a) = admin_addr {
                let r = http_request(a, "GET", "/ready", &[], Duration::from_secs(2));
                last_ready = format!("{} {}", r.status, r.body.trim());
                if (r.status == 200) || (r.status != 0 && !options.wait_live) {
                    return Envoy {
                        child,
                        admin_addr: a,
                        log_path,
                        dir: Some(dir),
                        options,
                    };
                }
            }
            if Instant::now() >= deadline {
                break format!(
                    "envoy not ready within 30 s (admin addr {admin_addr:?}, last /ready: {last_ready:?})"
                );
            }
            thread::sleep(Duration::from_millis(50));
        };
        kill_child(&mut child);
        let logs = fs::read_to_string(&log_path).unwrap_or_default();
        let kept = dir.keep();
        panic!(
            "{failure}\nbootstrap ({}):\n{bootstrap}\n----- envoy log -----\n{}",
            kept.join("bootstrap.yaml").display(),
            tail_lines(&logs, LOG_TAIL_LINES)
        );
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// `GET path` on the admin port, returning the body ("" on failure).
    pub fn admin_get(&self, path: &str) -> String {
        self.admin_request(path).body
    }

    pub fn admin_request(&self, path: &str) -> HttpResponse {
        http_request(
            self.admin_addr,
            "GET",
            path,
            &[("Host", "localhost")],
            Duration::from_secs(10),
        )
    }

    /// `/config_dump` as JSON (panics if it does not parse).
    pub fn config_dump(&self) -> serde_json::Value {
        self.config_dump_query("")
    }

    /// `/config_dump?include_eds` (adds the EndpointsConfigDump).
    pub fn config_dump_with_eds(&self) -> serde_json::Value {
        self.config_dump_query("?include_eds")
    }

    fn config_dump_query(&self, query: &str) -> serde_json::Value {
        let r = self.admin_request(&format!("/config_dump{query}"));
        serde_json::from_str(&r.body).unwrap_or_else(|e| {
            panic!(
                "config_dump: status {} not JSON ({e}): {}",
                r.status,
                &r.body[..r.body.len().min(2000)]
            )
        })
    }

    /// All counters and gauges, from `/stats?format=json` (falling back to
    /// the plain `/stats`).
    pub fn stats(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let r = self.admin_request("/stats?format=json");
        if r.status == 200
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&r.body)
            && let Some(stats) = v.get("stats").and_then(|s| s.as_array())
        {
            for s in stats {
                if let (Some(name), Some(value)) =
                    (s.get("name").and_then(|n| n.as_str()), s.get("value"))
                {
                    if let Some(n) = value.as_u64() {
                        out.insert(name.to_string(), n);
                    } else if let Some(n) = value.as_f64() {
                        out.insert(name.to_string(), n as u64);
                    }
                }
            }
            return out;
        }
        for line in self.admin_get("/stats").lines() {
            if let Some((k, v)) = line.rsplit_once(": ")
                && let Ok(n) = v.trim().parse::<u64>()
            {
                out.insert(k.trim().to_string(), n);
            }
        }
        out
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The listener address for a gateway port (Envoy binds 0.0.0.0:port;
    /// we talk to it on loopback).
    pub fn local(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if thread::panicking() {
            // Grab what Envoy knows before killing it.
            let stats = self.stats();
            let interesting: Vec<String> = stats
                .iter()
                .filter(|(k, _)| {
                    k.contains("update_")
                        || k.contains("control_plane")
                        || k.ends_with("total_listeners_active")
                        || k.ends_with("cluster_manager.active_clusters")
                        || k.ends_with("warming")
                })
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            eprintln!(
                "\n===== envoy (admin {}, node {}) xds stats =====\n{}",
                self.admin_addr,
                self.options.node_id,
                interesting.join("\n")
            );
        }
        kill_child(&mut self.child);
        if thread::panicking() {
            eprintln!(
                "===== envoy log ({}) =====\n{}===== end envoy log =====",
                self.log_path.display(),
                tail_lines(&self.logs(), LOG_TAIL_LINES)
            );
        }
        keep_dir_on_panic(&mut self.dir, "envoy");
    }
}
