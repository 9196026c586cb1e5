//! End-to-end: no generated cluster is one Envoy rejects (a rejected cluster fails the whole
//! CDS update of its proxy). A gateway Envoy and a sidecar Envoy load, one config set at a
//! time, what axon generates for: every DestinationRule policy axon translates (load
//! balancers, connection pools, outlier detection, upstream TLS with certificate files that
//! do not exist, ISTIO_MUTUAL and credentialName, ports and subsets), the sidecar's inbound
//! clusters with the pools of its own service's rule and of its Sidecar, DNS and DNS_ROUND_ROBIN
//! ServiceEntries without endpoints (the host resolves itself) and with a subset that selects
//! none, the demo mesh (`config/demo/`), and, with `AXON_ISTIO_CORPUS` set, every valid file of
//! the Istio corpus. After each set both Envoys have answered every push, and neither has
//! rejected a CDS, EDS, LDS or RDS update. (A certificate file Envoy cannot read fails only
//! its SDS secret, as with istiod's agent.)
//!
//! The sidecar Envoy runs outside the namespace mesh, with no traffic: what is checked is
//! xDS acceptance (Envoy's `update_rejected` counters), which capture does not change.

use crate::support;
use crate::support::scenario;

use std::path::{Path, PathBuf};
use std::time::Duration;

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(60);
const SIDECAR_NODE_ID: &str = "sidecar~10.0.0.9~app-1.default~default.svc.cluster.local";

/// Every policy axon translates, on STATIC, DNS and DNS_ROUND_ROBIN services.
const POLICIES: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: static, namespace: default}
spec:
  hosts: [static.example.com]
  ports: [{number: 80, name: http, protocol: HTTP}, {number: 81, name: grpc, protocol: GRPC}, {number: 82, name: tcp, protocol: TCP}]
  resolution: STATIC
  endpoints: [{address: 127.0.0.1, labels: {version: v1}}, {address: 127.0.0.2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: default}
spec:
  hosts: [localhost]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns-rr, namespace: default}
spec:
  hosts: [rr.localhost]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: static, namespace: default}
spec:
  host: static.example.com
  trafficPolicy:
    loadBalancer: {simple: ROUND_ROBIN, warmup: {duration: 30s, minimumPercent: 20, aggression: 2}, localityLbSetting: {failover: [{from: r1, to: r2}], failoverPriority: [version]}}
    connectionPool:
      tcp: {maxConnections: 10, connectTimeout: 1s, tcpKeepalive: {time: 10s, interval: 2s, probes: 3}, maxConnectionDuration: 1h, idleTimeout: 0s}
      http: {http1MaxPendingRequests: 5, http2MaxRequests: 50, maxRequestsPerConnection: 3, maxRetries: 2, idleTimeout: 60s, maxConcurrentStreams: 10, http2KeepAlive: {interval: 30s, timeout: 5s}}
    outlierDetection: {consecutive5xxErrors: 3, consecutiveGatewayErrors: 2, consecutiveLocalOriginFailures: 4, splitExternalLocalOriginErrors: true, interval: 5s, baseEjectionTime: 30s, maxEjectionPercent: 50, minHealthPercent: 10, outlierDetectionHttpErrorCodes: [500, 503]}
    retryBudget: {percent: 25, minRetryConcurrency: 5, budgetInterval: 10s}
    proxyProtocol: {version: V2}
    tls: {mode: SIMPLE, caCertificates: /nonexistent/ca.pem, subjectAltNames: [static.example.com], caCrl: /etc/hostname}
    portLevelSettings:
    - port: {number: 81}
      loadBalancer: {consistentHash: {httpHeaderName: x-user, maglev: {tableSize: 65537}}}
      connectionPool: {http: {h2UpgradePolicy: UPGRADE}}
      tls: {mode: MUTUAL, clientCertificate: /nonexistent/c.pem, privateKey: /nonexistent/k.pem}
    - port: {number: 82}
      loadBalancer: {consistentHash: {useSourceIp: true, ringHash: {minimumRingSize: 2048}}}
      tls: {mode: SIMPLE, insecureSkipVerify: true}
  subsets:
  - name: v1
    labels: {version: v1}
    trafficPolicy:
      loadBalancer: {consistentHash: {httpCookie: {name: session, path: /, ttl: 60s, attributes: [{name: SameSite, value: Strict}]}}}
      connectionPool: {http: {useClientProtocol: true}}
      tls: {mode: ISTIO_MUTUAL}
  - name: v2
    labels: {version: v2}
    trafficPolicy:
      loadBalancer: {simple: PASSTHROUGH}
      tls: {mode: SIMPLE, credentialName: some-secret}
  - name: random
    labels: {version: v2}
    trafficPolicy:
      loadBalancer: {simple: RANDOM, warmupDurationSecs: 10s}
      tls: {mode: DISABLE}
  - name: query
    labels: {version: v1}
    trafficPolicy:
      loadBalancer: {consistentHash: {httpQueryParameterName: u, minimumRingSize: 64}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dns-rr, namespace: default}
spec:
  host: rr.localhost
  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST, zoneAwareLbSetting: {failover: [{from: r1, to: r2}], minClusterSize: 2}}
    outlierDetection: {consecutive5xxErrors: 1, outlierDetectionHttpErrorCodes: [502]}
    retryBudget: {}
  subsets:
  - name: none
    labels: {version: nothing-has-this}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dns, namespace: default}
spec:
  host: localhost
  trafficPolicy: {tls: {mode: SIMPLE, sni: localhost}, loadBalancer: {localityLbSetting: {distribute: [{from: "*", to: {"*": 100}}]}}}
  subsets:
  - name: none
    labels: {version: nothing-has-this}
"#;

/// The sidecar's own service (its endpoint at the sidecar's IP) with a DestinationRule whose
/// pools reach its inbound clusters, and a Sidecar with an ingress listener's pool and an
/// `inboundConnectionPool` (istiod's `buildInboundCluster`).
const INBOUND: &str = r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: default}
spec:
  hosts: [app.default.svc.cluster.local]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP, targetPort: 8080}, {number: 81, name: grpc, protocol: GRPC, targetPort: 8081}]
  resolution: STATIC
  endpoints: [{address: 10.0.0.9}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: app, namespace: default}
spec:
  host: app.default.svc.cluster.local
  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: 10, connectTimeout: 1s, tcpKeepalive: {time: 10s}, maxConnectionDuration: 1h, idleTimeout: 5s}
      http: {http1MaxPendingRequests: 5, http2MaxRequests: 50, maxRequestsPerConnection: 3, maxRetries: 2, idleTimeout: 60s, maxConcurrentStreams: 10, http2KeepAlive: {interval: 30s}, useClientProtocol: true}
    retryBudget: {percent: 25}
    portLevelSettings:
    - port: {number: 81}
      connectionPool: {http: {http2MaxRequests: 7, idleTimeout: 1s}}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: default}
spec:
  inboundConnectionPool: {tcp: {maxConnections: 3}, http: {http1MaxPendingRequests: 2}}
  ingress:
  - port: {number: 8080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:18080
    connectionPool: {http: {idleTimeout: 30s, maxRequestsPerConnection: 1}}
  - port: {number: 8081, protocol: GRPC, name: grpc}
    defaultEndpoint: 127.0.0.1:18081
  - port: {number: 8082, protocol: TCP, name: tcp}
"#;

/// Waits until the proxy `id` (`envoy`) has handled the context `version` and answered every
/// type axon sent it (each type's last nonce acknowledged, or refused: then axon counted it).
/// An SDS response that reaches an Envoy holding no secret any more (the listener that
/// watched one was just removed) is not acknowledged: Envoy answers a response of a type it
/// no longer watches only when it has resources (`GrpcMuxImpl::onDiscoveryResponse`).
fn wait_answered(axon: &Axon, envoy: &Envoy, id: &str, version: u64, what: &str) {
    assert!(
        axon.wait_push_reached(id, version, CONVERGE),
        "{id} never reached version {version} ({what})"
    );
    let ok = wait_until(CONVERGE, || {
        axon.syncz_of(id).is_some_and(|c| {
            c["types"].as_array().into_iter().flatten().all(|t| {
                t["nonce_sent"] == t["nonce_acked"]
                    || !t["last_error"].is_null()
                    || (t["type"] == "sds" && holds_no_secret(envoy))
            })
        })
    });
    assert!(
        ok,
        "{id} never answered every type ({what}): {:?}",
        axon.syncz_of(id)
    );
}

/// Asserts that `envoy` rejected no cluster, endpoint, listener or route update.
fn assert_no_rejects(envoy: &Envoy, what: &str) {
    let stats = envoy.stats();
    let rejected: Vec<_> = stats
        .iter()
        .filter(|(k, v)| {
            **v != 0
                && k.ends_with("update_rejected")
                && !k.starts_with("sds.")
                && !k.contains(".sds.")
        })
        .collect();
    assert!(
        rejected.is_empty(),
        "{} rejected updates of {what}: {rejected:?}\n{}",
        envoy.options.node_id,
        envoy
            .logs()
            .lines()
            .filter(|l| l.contains("rejected") || l.contains("gRPC config"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The config sets: the policies, the demo mesh, the corpus's valid files.
fn config_sets() -> Vec<(String, String)> {
    let mut sets = vec![
        ("policies".to_string(), POLICIES.to_string()),
        ("inbound pools".to_string(), INBOUND.to_string()),
        (
            "inbound pools of the own service".to_string(),
            // Without the Sidecar: the service endpoints' ports, the rule's pools.
            INBOUND[..INBOUND.rfind("---").unwrap()].to_string(),
        ),
    ];
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo");
    let mut demo_files: Vec<PathBuf> = std::fs::read_dir(&demo)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    demo_files.sort();
    let demo_yaml: Vec<String> = demo_files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    sets.push(("config/demo".to_string(), demo_yaml.join("\n---\n")));
    if let Some(dir) = std::env::var_os("AXON_ISTIO_CORPUS") {
        let mut files = Vec::new();
        walk(Path::new(&dir), &mut files);
        files.sort();
        for file in files {
            let name = file.display().to_string();
            if name.ends_with("-invalid.yaml") {
                continue;
            }
            sets.push((name, std::fs::read_to_string(&file).unwrap()));
        }
    }
    sets
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Whether Envoy's config_dump shows no dynamic secret, active or warming.
fn holds_no_secret(envoy: &Envoy) -> bool {
    let dump = envoy.config_dump();
    let Some(secrets) = dump_section(&dump, "SecretsConfigDump") else {
        return true;
    };
    ["dynamic_active_secrets", "dynamic_warming_secrets"]
        .iter()
        .all(|k| {
            secrets
                .get(*k)
                .and_then(|v| v.as_array())
                .is_none_or(Vec::is_empty)
        })
}

/// Starts axon (with `mesh` as its mesh config, if any), a gateway and a sidecar Envoy, and
/// loads each of `sets` in turn, checking that both Envoys took every update.
fn load_every_set(
    mesh: Option<&str>,
    sets: Vec<(String, String)>,
) -> (ConfigDir, Axon, Envoy, Envoy) {
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    let mesh_dir = tempfile::tempdir().unwrap();
    let mesh_path = mesh_dir.path().join("mesh.yaml");
    let axon = match mesh {
        Some(text) => {
            std::fs::write(&mesh_path, text).unwrap();
            Axon::start_with_args(
                config.path(),
                &["--mesh-config", mesh_path.to_str().unwrap()],
            )
        }
        None => Axon::start(config.path()),
    };
    let (gateway, _) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let sidecar = Envoy::start(
        axon.xds_addr(),
        EnvoyOptions::sidecar(SIDECAR_NODE_ID, &[("app", "app")], "default"),
    );
    let ids = [gateway.options.node_id.clone(), SIDECAR_NODE_ID.to_string()];
    for (what, yaml) in sets {
        let before = axon.built_version();
        config.write("set.yaml", &yaml);
        let status = axon
            .wait_built_after(before, CONVERGE)
            .unwrap_or_else(|| panic!("no context built for {what}"));
        let version = status["version"].as_u64().unwrap();
        let errors = axon.config_errors();
        assert!(errors.is_empty(), "{what} did not load whole: {errors:?}");
        for (id, envoy) in ids.iter().zip([&gateway, &sidecar]) {
            wait_answered(&axon, envoy, id, version, &what);
        }
        assert_no_rejects(&gateway, &what);
        assert_no_rejects(&sidecar, &what);
        for t in ["cds", "eds", "lds", "rds"] {
            let rejects = axon
                .metric(&format!("pilot_total_xds_rejects{{type=\"{t}\"}}"))
                .unwrap_or(0.0);
            assert_eq!(rejects, 0.0, "{t} rejected after {what}");
        }
    }
    (config, axon, gateway, sidecar)
}

/// The mesh's `defaultTrafficPolicy` with every field axon applies, below the policies'
/// clusters, the inbound ones and the PassthroughCluster.
#[test]
fn envoy_accepts_the_clusters_of_the_meshs_default_traffic_policy() {
    let mesh = "defaultTrafficPolicy:\n  connectionPool:\n    tcp: {maxConnections: 10, connectTimeout: 1s, tcpKeepalive: {time: 10s, interval: 2s, probes: 3}, maxConnectionDuration: 1h, idleTimeout: 5s}\n    http: {http1MaxPendingRequests: 5, http2MaxRequests: 50, maxRequestsPerConnection: 3, maxRetries: 2, idleTimeout: 60s, maxConcurrentStreams: 10, http2KeepAlive: {interval: 30s, timeout: 5s}, h2UpgradePolicy: UPGRADE}\n  outlierDetection: {consecutive5xxErrors: 3, consecutiveGatewayErrors: 2, interval: 5s, baseEjectionTime: 30s, maxEjectionPercent: 50, minHealthPercent: 10, outlierDetectionHttpErrorCodes: [500]}\n";
    let sets = config_sets().into_iter().take(3).collect();
    let (_config, _axon, _gateway, sidecar) = load_every_set(Some(mesh), sets);
    let names = dynamic_cluster_names(&sidecar.config_dump());
    assert!(names.iter().any(|n| n.starts_with("inbound|")), "{names:?}");
}

#[test]
fn envoy_accepts_every_cluster_axon_generates() {
    let (config, _axon, _gateway, sidecar) = load_every_set(None, config_sets());
    // The policies' clusters were there: a subset that selects no endpoint of a DNS service
    // has none (istiod leaves it out), the DNS_ROUND_ROBIN host resolves itself.
    config.write("set.yaml", POLICIES);
    let ok = wait_until(CONVERGE, || {
        let names = dynamic_cluster_names(&sidecar.config_dump());
        names.iter().any(|n| n == "outbound|80||rr.localhost")
            && names
                .iter()
                .any(|n| n == "outbound|81|v1|static.example.com")
            && !names.iter().any(|n| n == "outbound|80|none|rr.localhost")
    });
    assert!(ok, "{}", describe_envoy(&sidecar));
}
