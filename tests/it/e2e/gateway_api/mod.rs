//! End-to-end: the Gateway API conformance suite's cases, as kubernetes-sigs/gateway-api
//! writes them (`conformance/tests/*.yaml` in the real-world corpus, read through
//! `AXON_REALWORLD_CORPUS` as the corpus suites read it) and sends them (`*.go`: the
//! requests each case makes and what it expects), played through a real gateway Envoy that
//! axon serves from a config directory.
//!
//! The harness ([`Conformance`]) writes the suite's base manifests and the case's into the
//! directory (the class placeholder made `istio`), moves each Gateway listener port to a
//! free one, starts an echo upstream per backend Service (it answers with its name and what
//! it received) with an EndpointSlice pointing at it, and starts the gateway Envoy as the
//! automated deployment labels it (`gateway.networking.k8s.io/gateway-name`). Without the
//! variable each test prints that it was not run, and passes.

mod backend_tls;
mod filters;
mod grpc;
mod http;
mod https;
mod tls;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize as _;

use crate::support::{
    self, Axon, ConfigDir, EchoUpstream, Envoy, EnvoyOptions, HttpResponse, free_port,
    http_request, wait_until,
};

const CORPUS_VAR: &str = "AXON_REALWORLD_CORPUS";
pub(super) const CONVERGE: Duration = Duration::from_secs(30);
const INFRA: &str = "gateway-conformance-infra";

/// The text of `gateway-api/NAME` of the corpus; `None` (with a line saying the suite was
/// not run) when the variable is unset. A set variable naming no such file fails.
fn corpus_file(name: &str) -> Option<String> {
    let Some(dir) = std::env::var_os(CORPUS_VAR) else {
        let line = format!(
            "Gateway API conformance case {name} not run: {CORPUS_VAR} is not set; run it with \
             `{CORPUS_VAR}=/path/to/realworld-corpus cargo test --test it e2e::gateway_api`\n"
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
        return None;
    };
    let path = PathBuf::from(dir).join("gateway-api").join(name);
    Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Every document of a YAML text, the class placeholder replaced.
fn documents(text: &str) -> Vec<serde_json::Value> {
    let text = text.replace("{GATEWAY_CLASS_NAME}", "istio");
    serde_norway::Deserializer::from_str(&text)
        .map(|d| serde_json::Value::deserialize(d).expect("valid YAML"))
        .filter(|v| !v.is_null())
        .collect()
}

fn write_documents(config: &ConfigDir, file: &str, docs: &[serde_json::Value]) {
    let text: Vec<String> = docs
        .iter()
        .map(|d| serde_norway::to_string(d).expect("YAML"))
        .collect();
    config.write(file, &text.join("---\n"));
}

/// A conformance case's world: axon on its directory, the echo upstreams, and the gateway
/// Envoy of one Gateway of the base manifests.
pub(super) struct Conformance {
    pub config: ConfigDir,
    pub axon: Axon,
    pub envoy: Envoy,
    /// Gateway listener port (as the manifests write it) → the port Envoy listens on.
    pub ports: BTreeMap<u64, u16>,
    pub backends: BTreeMap<String, EchoUpstream>,
}

impl Conformance {
    /// The world of `case` (a file of the corpus's `gateway-api/`), served by the Envoy of
    /// Gateway `gateway` of `gateway-conformance-infra`; `None` when the corpus is not set.
    pub fn start(case: &str, gateway: &str) -> Option<Conformance> {
        Self::start_with(case, gateway, Vec::new())
    }

    /// [`Conformance::start`] with `extra` objects (the Secrets the suite makes).
    pub fn start_with(
        case: &str,
        gateway: &str,
        extra: Vec<serde_json::Value>,
    ) -> Option<Conformance> {
        Self::start_full(case, gateway, extra, &[])
    }

    /// [`Conformance::start_with`], with the ports of `upstreams` `(service, port name,
    /// port)` served by the test's own upstreams (a TLS or TCP echo) instead of the echo.
    pub fn start_full(
        case: &str,
        gateway: &str,
        extra: Vec<serde_json::Value>,
        upstreams: &[(&str, &str, u16)],
    ) -> Option<Conformance> {
        let mut docs = documents(&corpus_file("base__manifests.yaml")?);
        docs.extend(extra);
        docs.extend(documents(&corpus_file(case)?));
        let config = ConfigDir::new();
        let mut ports = BTreeMap::new();
        let mut backends = BTreeMap::new();
        let mut slices = Vec::new();
        for doc in &mut docs {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let ns = doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if kind == "Gateway" {
                for l in doc["spec"]["listeners"]
                    .as_array_mut()
                    .into_iter()
                    .flatten()
                {
                    let port = l["port"].as_u64().unwrap_or_default();
                    let free = *ports.entry(port).or_insert_with(free_port);
                    l["port"] = serde_json::json!(free);
                }
            }
            if kind == "Service" && ns.starts_with("gateway-conformance") {
                let echo = EchoUpstream::start(&name);
                let slice_ports: Vec<serde_json::Value> = doc["spec"]["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| {
                        let port_name = p["name"].as_str().unwrap_or_default();
                        let port = upstreams
                            .iter()
                            .find(|(s, n, _)| *s == name && *n == port_name)
                            .map_or(echo.port(), |(_, _, port)| *port);
                        let mut out = serde_json::json!({"port": port, "protocol": "TCP"});
                        if !port_name.is_empty() {
                            out["name"] = serde_json::json!(port_name);
                        }
                        out
                    })
                    .collect();
                slices.push(serde_json::json!({
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {"name": format!("{name}-slice"), "namespace": ns, "labels": {"kubernetes.io/service-name": name}},
                    "addressType": "IPv4",
                    "ports": slice_ports,
                    "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": true}}],
                }));
                backends.insert(name, echo);
            }
        }
        write_documents(&config, "manifests.yaml", &docs);
        write_documents(&config, "endpoints.yaml", &slices);
        let axon = Axon::start(config.path());
        let node = format!("router~127.0.0.1~{gateway}-istio-0.{INFRA}~{INFRA}.svc.cluster.local");
        let envoy = Envoy::start(
            axon.xds_addr(),
            EnvoyOptions::gateway(
                &node,
                &[("gateway.networking.k8s.io/gateway-name", gateway)],
                INFRA,
            ),
        );
        Some(Conformance {
            config,
            axon,
            envoy,
            ports,
            backends,
        })
    }

    /// The address of the gateway's listener on `port` (as the manifests write it).
    pub fn addr(&self, port: u64) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ports[&port]))
    }

    /// Sends a request to the gateway's `port` with `host`.
    pub fn request(
        &self,
        port: u64,
        method: &str,
        host: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> HttpResponse {
        let mut all: Vec<(&str, &str)> = vec![("host", host)];
        all.extend_from_slice(headers);
        http_request(self.addr(port), method, path, &all, Duration::from_secs(10))
    }

    /// Waits until `method path` on port 80 for `example.com` is answered 200 by `backend`.
    pub fn wait_for_method(&self, method: &str, path: &str, backend: &str) {
        let mut last = HttpResponse::default();
        let ok = wait_until(CONVERGE, || {
            last = self.request(80, method, "example.com", path, &[]);
            last.status == 200 && answered_by(&last) == Some(backend.to_string())
        });
        assert!(
            ok,
            "{method} {path} never reached {backend}: last {} {}\n{}",
            last.status,
            last.body,
            support::scenario::describe_envoy(&self.envoy)
        );
    }

    /// Waits until `GET path` with `headers` on `port` for `example.com` is answered 200 by
    /// `backend`.
    pub fn wait_for_with(&self, port: u64, path: &str, headers: &[(&str, &str)], backend: &str) {
        let mut last = HttpResponse::default();
        let ok = wait_until(CONVERGE, || {
            last = self.request(port, "GET", "example.com", path, headers);
            last.status == 200 && answered_by(&last) == Some(backend.to_string())
        });
        assert!(
            ok,
            "GET {path} {headers:?} never reached {backend}: last {} {}\n{}",
            last.status,
            last.body,
            support::scenario::describe_envoy(&self.envoy)
        );
    }

    /// Waits until `GET path` on `port` is answered 200 by any backend.
    pub fn wait_for_any(&self, port: u64, path: &str) {
        let mut last = HttpResponse::default();
        let ok = wait_until(CONVERGE, || {
            last = self.request(port, "GET", "example.com", path, &[]);
            last.status == 200 && answered_by(&last).is_some()
        });
        assert!(
            ok,
            "GET {path} never answered: last {} {}\n{}",
            last.status,
            last.body,
            support::scenario::describe_envoy(&self.envoy)
        );
    }

    /// Waits until `GET path` on `port` for `host` is answered 200 by `backend`.
    pub fn wait_for(&self, port: u64, host: &str, path: &str, backend: &str) {
        let mut last = HttpResponse::default();
        let ok = wait_until(CONVERGE, || {
            last = self.request(port, "GET", host, path, &[]);
            last.status == 200 && answered_by(&last) == Some(backend.to_string())
        });
        assert!(
            ok,
            "GET {host}{path} never reached {backend}: last {} {}\n{}",
            last.status,
            last.body,
            support::scenario::describe_envoy(&self.envoy)
        );
    }
}

/// The backend that answered (the echo's name), if an echo did.
pub(super) fn answered_by(r: &HttpResponse) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(&r.body)
        .ok()?
        .get("upstream")?
        .as_str()
        .map(String::from)
}

/// What the backend received, as the echo reports it.
pub(super) fn received(r: &HttpResponse) -> serde_json::Value {
    serde_json::from_str(&r.body).unwrap_or_default()
}
