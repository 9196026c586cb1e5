//! The ADS server's limits, driven by in-process tonic clients against a real `axon serve`:
//! a proxy that stops reading is disconnected after `write_timeout` without slowing the
//! others or growing memory; `max_streams` and `max_requests_per_second` refuse new streams
//! with RESOURCE_EXHAUSTED (counted in `axon_rejected_streams`).

use crate::support;
use crate::support::ads_client;

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ads_client::{CDS, EDS, ack_request, discovery_request, gateway_node, runtime_with_threads};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
};
use support::{Axon, ConfigDir};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tonic::transport::{Channel, Endpoint};

const CHURN_HOST: &str = "churn.demo.svc.cluster.local";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    runtime_with_threads(4)
}

/// A gateway node (`router~IP~POD.NS~NS.svc.cluster.local`) in istio-system.
fn gateway_at(ip: &str, pod: &str) -> Node {
    gateway_node(&format!(
        "router~{ip}~{pod}.istio-system~istio-system.svc.cluster.local"
    ))
}

fn request(type_url: &str, names: &[&str], node: Option<Node>) -> DiscoveryRequest {
    discovery_request(type_url, names, "", node)
}

fn ads_client(channel: Channel) -> AggregatedDiscoveryServiceClient<Channel> {
    AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(256 * 1024 * 1024)
}

async fn connect(addr: SocketAddr) -> AggregatedDiscoveryServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connecting to axon");
    ads_client(channel)
}

/// Opens an ADS stream, sending `first` (if any) as its first request.
async fn open_stream(
    client: &mut AggregatedDiscoveryServiceClient<Channel>,
    first: Option<DiscoveryRequest>,
) -> Result<(mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>), tonic::Status> {
    let (tx, rx) = mpsc::channel(64);
    if let Some(first) = first {
        tx.send(first).await.unwrap();
    }
    let stream = client
        .stream_aggregated_resources(ReceiverStream::new(rx))
        .await?
        .into_inner();
    Ok((tx, stream))
}

/// The value of an unlabelled metric (`name N`) in a Prometheus text page.
fn metric(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        let rest = rest.strip_prefix("{}").unwrap_or(rest);
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// Writes an actor-limits TOML file in its own temp dir (kept alive by the returned guard).
fn limits_file(toml: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::Builder::new()
        .prefix("axon-limits-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("limits.toml");
    std::fs::write(&path, toml).unwrap();
    (dir, path.display().to_string())
}

/// Polls `cond` every 5 ms (finer than `support::wait_until`, for timings).
fn wait_fine(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

// ---------------------------------------------------------------------------
// A large mesh
// ---------------------------------------------------------------------------

const SERVICES: usize = 300;
const NAMESPACES: usize = 10;

fn svc_host(i: usize) -> String {
    format!("svc-{i}.mesh-{}.svc.cluster.local", i % NAMESPACES)
}

/// `SERVICES` ServiceEntries, each with two ports and three endpoints.
fn large_mesh() -> String {
    let mut out = String::new();
    for i in 0..SERVICES {
        let ns = i % NAMESPACES;
        let (a, b) = (i / 200, i % 200);
        write!(
            out,
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: svc-{i}, namespace: mesh-{ns}}}
spec:
  hosts: [{host}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}, {{number: 9090, name: grpc, protocol: GRPC}}]
  endpoints:
  - {{address: 10.{a}.{b}.1, labels: {{version: v1}}}}
  - {{address: 10.{a}.{b}.2, labels: {{version: v1}}}}
  - {{address: 10.{a}.{b}.3, labels: {{version: v2}}}}
---
"#,
            host = svc_host(i)
        )
        .unwrap();
    }
    out
}

/// A ServiceEntry whose port number marks the config generation.
fn churn_yaml(port: u64) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: churn, namespace: demo}}
spec:
  hosts: [{CHURN_HOST}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  endpoints: [{{address: 10.250.0.1}}]
"#
    )
}

/// The cluster names the stalled client subscribes to over EDS.
fn all_eds_names() -> Vec<String> {
    (0..SERVICES)
        .flat_map(|i| {
            let h = svc_host(i);
            [format!("outbound|80||{h}"), format!("outbound|9090||{h}")]
        })
        .collect()
}

/// Field 1 (`name`) of an encoded `Cluster`; prost writes fields in number order, so it
/// comes first.
fn cluster_name(bytes: &[u8]) -> Option<&str> {
    if bytes.first() != Some(&0x0a) {
        return None;
    }
    let (mut len, mut shift, mut i) = (0usize, 0u32, 1usize);
    loop {
        let b = *bytes.get(i)?;
        len |= usize::from(b & 0x7f) << shift;
        i += 1;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    std::str::from_utf8(bytes.get(i..i + len)?).ok()
}

/// The churn port in a CDS response (from `outbound|PORT||churn...`).
fn churn_port(r: &DiscoveryResponse) -> Option<u64> {
    let suffix = format!("||{CHURN_HOST}");
    r.resources.iter().find_map(|any| {
        let name = cluster_name(&any.value)?;
        name.strip_suffix(&suffix)?
            .strip_prefix("outbound|")?
            .parse()
            .ok()
    })
}

/// What the reading clients share with the test.
struct Readers {
    /// Per client: the churn port in the latest CDS response.
    seen: Vec<AtomicU64>,
    /// Size of the largest CDS response seen (sum of encoded resources).
    cds_bytes: AtomicU64,
    cds_clusters: AtomicU64,
    errors: Mutex<Vec<String>>,
}

impl Readers {
    fn converged_on(&self, port: u64) -> usize {
        self.seen
            .iter()
            .filter(|s| s.load(Ordering::SeqCst) == port)
            .count()
    }
}

/// A gateway that subscribes to CDS, reads every response and ACKs it.
async fn reading_client(addr: SocketAddr, i: usize, shared: Arc<Readers>) {
    let result: Result<(), String> = async {
        let mut client = connect(addr).await;
        let node = gateway_at(
            &format!("10.1.{}.{}", i / 200, i % 200 + 1),
            &format!("gw-{i}"),
        );
        let (tx, mut rx) = open_stream(&mut client, Some(request(CDS, &[], Some(node))))
            .await
            .map_err(|s| format!("open: {s}"))?;
        while let Some(r) = rx.message().await.map_err(|s| format!("stream: {s}"))? {
            if r.type_url == CDS {
                let bytes: usize = r.resources.iter().map(|a| a.value.len()).sum();
                shared.cds_bytes.fetch_max(bytes as u64, Ordering::SeqCst);
                shared
                    .cds_clusters
                    .fetch_max(r.resources.len() as u64, Ordering::SeqCst);
                if let Some(p) = churn_port(&r) {
                    shared.seen[i].store(p, Ordering::SeqCst);
                }
            }
            tx.send(ack_request(&r, &[]))
                .await
                .map_err(|_| "ack: closed")?;
        }
        Err("the stream ended".to_string())
    }
    .await;
    if let Err(e) = result {
        shared
            .errors
            .lock()
            .unwrap()
            .push(format!("client {i}: {e}"));
    }
}

/// Samples a process's RSS every 20 ms, keeping the maximum, until stopped.
struct RssSampler {
    stop: Arc<AtomicBool>,
    max: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicU64::new(support::rss_kib(pid)));
        let thread = {
            let (stop, max) = (stop.clone(), max.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    max.fetch_max(support::rss_kib(pid), Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(20));
                }
            })
        };
        RssSampler {
            stop,
            max,
            thread: Some(thread),
        }
    }

    fn max_kib(&self) -> u64 {
        self.max.load(Ordering::SeqCst)
    }
}

impl Drop for RssSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

// ---------------------------------------------------------------------------
// (a) A proxy that stops reading
// ---------------------------------------------------------------------------

const READERS: usize = 100;

#[test]
fn a_stalled_proxy_is_disconnected_and_never_slows_the_others() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &large_mesh());
    let mut port = 1000u64;
    dir.write("churn.yaml", &churn_yaml(port));
    let (_limits_dir, limits) = limits_file("write_timeout = \"1s\"\nstream_queue_capacity = 2\n");
    let axon = Axon::start_with_args(dir.path(), &["--limits", &limits]);
    let addr = axon.xds_addr();
    assert!(
        axon.wait_built_after(None, Duration::from_secs(30))
            .is_some(),
        "the large mesh is never built: {}",
        axon.push_status()
    );
    let rss_start = axon.rss_kib();
    let rt = runtime();

    // 100 reading gateways, fully synced.
    let shared = Arc::new(Readers {
        seen: (0..READERS).map(|_| AtomicU64::new(0)).collect(),
        cds_bytes: AtomicU64::new(0),
        cds_clusters: AtomicU64::new(0),
        errors: Mutex::new(Vec::new()),
    });
    let started = Instant::now();
    for i in 0..READERS {
        rt.spawn(reading_client(addr, i, shared.clone()));
    }
    let check_errors = || {
        let errors = shared.errors.lock().unwrap();
        assert!(
            errors.is_empty(),
            "reading clients failed: {:?}",
            &errors[..errors.len().min(10)]
        );
    };
    let synced = wait_fine(Duration::from_secs(60), || {
        shared.converged_on(port) == READERS
    });
    check_errors();
    assert!(
        synced,
        "only {}/{READERS} reading clients got the first CDS",
        shared.converged_on(port)
    );
    let initial_sync = started.elapsed();
    let cds_kib = shared.cds_bytes.load(Ordering::SeqCst) / 1024;
    let clusters = shared.cds_clusters.load(Ordering::SeqCst);
    let rss_readers = axon.rss_kib();
    eprintln!(
        "[limits] {READERS} readers synced in {initial_sync:?}; CDS = {clusters} clusters, \
         {cds_kib} KiB; axon RSS {:.1} MiB before, {:.1} MiB with the readers",
        mib(rss_start),
        mib(rss_readers)
    );

    // A change, converged by all 100, with no stalled client.
    // Returns (write -> all converged, write -> the context built, by the `built_at_unix_ms`
    // of axon's /debug/push_status: asked once, after, so as not to load axon meanwhile).
    let change = |port: u64| -> (Duration, Option<Duration>) {
        let before = axon.built_version();
        let written = Instant::now();
        let written_unix = std::time::SystemTime::now();
        dir.write("churn.yaml", &churn_yaml(port));
        let ok = wait_fine(Duration::from_secs(30), || {
            shared.converged_on(port) == READERS
        });
        let took = written.elapsed();
        let status = axon.push_status();
        let built = status["built_at_unix_ms"]
            .as_u64()
            .filter(|_| status["version"].as_u64() > before)
            .and_then(|ms| {
                let at = std::time::UNIX_EPOCH + Duration::from_millis(ms);
                at.duration_since(written_unix).ok()
            });
        check_errors();
        assert!(
            ok,
            "after change to port {port}, only {}/{READERS} readers got the new CDS within 30 s",
            shared.converged_on(port)
        );
        (took, built)
    };
    port += 1;
    let (without_stall, built) = change(port);
    eprintln!(
        "[limits] change without a stalled client: all {READERS} converged in \
         {without_stall:?} (push context built after {built:?})"
    );

    // The stalled client: tiny HTTP/2 windows, subscribes CDS + EDS for every cluster and
    // never reads its response stream.
    let rss_before_stall = axon.rss_kib();
    let sampler = RssSampler::start(axon.pid());
    let eds_names = all_eds_names();
    let (stalled_tx, mut stalled_rx) = rt.block_on(async {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .unwrap()
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .expect("connecting the stalled client");
        let mut client = ads_client(channel);
        let node = gateway_at("10.9.9.9", "stalled");
        let (tx, rx) = open_stream(&mut client, Some(request(CDS, &[], Some(node))))
            .await
            .expect("the stalled client's stream is admitted");
        let eds_names: Vec<&str> = eds_names.iter().map(String::as_str).collect();
        tx.send(request(EDS, &eds_names, None)).await.unwrap();
        (tx, rx)
    });
    assert!(
        support::wait_until(Duration::from_secs(10), || axon.connections().iter().any(
            |c| c["proxy"]
                .as_str()
                .is_some_and(|p| p.contains("stalled.istio-system"))
        )),
        "the stalled client never connected: {:?}",
        axon.connections()
    );

    // Changes while it stalls: the 100 readers converge on each; stop once the stalled
    // stream has been closed for its write timeout (at least 2 changes, at most 8).
    let mut with_stall = Vec::new();
    let mut write_timeouts = 0.0;
    let mut built_with_stall = Vec::new();
    for n in 0..8 {
        port += 1;
        let (took, built) = change(port);
        with_stall.push(took);
        built_with_stall.push(built);
        write_timeouts = metric(&axon.metrics(), "pilot_xds_write_timeout").unwrap_or(0.0);
        if n >= 1 && write_timeouts >= 1.0 {
            break;
        }
    }
    eprintln!(
        "[limits] changes with the stalled client: all {READERS} converged in {with_stall:?} \
         (push contexts built after {built_with_stall:?})"
    );
    let mut metrics = String::new();
    let timed_out = support::wait_until(Duration::from_secs(15), || {
        metrics = axon.metrics();
        metric(&metrics, "pilot_xds_write_timeout").unwrap_or(0.0) >= 1.0
    });
    assert!(
        timed_out,
        "the stalled stream was never closed for its write timeout \
         (pilot_xds_write_timeout {write_timeouts}):\n{metrics}"
    );
    // The documented `ADS: disconnected` line gives the reason.
    assert!(
        axon.logs().contains("did not read its responses within"),
        "axon logs why it closed the stalled stream"
    );
    // One more change after the disconnect: still converges.
    port += 1;
    let (after_disconnect, _) = change(port);
    let rss_max = sampler.max_kib();
    drop(sampler);
    let rss_end = axon.rss_kib();

    // Reading the stalled stream now yields what was queued, then its end.
    let (drained, end) = rt.block_on(async {
        let mut drained = 0usize;
        let end = loop {
            match tokio::time::timeout(Duration::from_secs(10), stalled_rx.message()).await {
                Err(_) => break "still open after 10 s of silence".to_string(),
                Ok(Ok(Some(_))) => drained += 1,
                Ok(Ok(None)) => break "ended".to_string(),
                Ok(Err(status)) => break format!("closed with {status}"),
            }
        };
        (drained, end)
    });
    drop(stalled_tx);
    eprintln!("[limits] the stalled stream, once read: {drained} queued responses, then {end}");
    assert_ne!(
        end, "still open after 10 s of silence",
        "the stalled stream must be closed"
    );

    // The readers are all still connected; the stalled one is gone.
    assert!(
        support::wait_until(Duration::from_secs(10), || {
            metrics = axon.metrics();
            metric(&metrics, "pilot_xds") == Some(READERS as f64)
        }),
        "pilot_xds must count the {READERS} readers only:\n{metrics}"
    );
    check_errors();

    let growth = rss_max.saturating_sub(rss_before_stall);
    eprintln!(
        "[limits] axon RSS: start {:.1} MiB, with readers {:.1} MiB, before stall {:.1} MiB, \
         max during stall {:.1} MiB (growth {:.1} MiB), end {:.1} MiB",
        mib(rss_start),
        mib(rss_readers),
        mib(rss_before_stall),
        mib(rss_max),
        mib(growth),
        mib(rss_end)
    );
    eprintln!(
        "[limits] convergence of {READERS} readers: without stall {without_stall:?}, with stall \
         {with_stall:?}, after the disconnect {after_disconnect:?}; write timeouts {}",
        metric(&metrics, "pilot_xds_write_timeout").unwrap_or(0.0)
    );
    assert!(rss_max > 0, "RSS could not be read");
    assert!(
        rss_max < 300 * 1024,
        "axon RSS peaked at {:.1} MiB (>= 300 MiB)",
        mib(rss_max)
    );
    assert!(
        growth < 100 * 1024,
        "axon RSS grew {:.1} MiB during the stalled-client phase (>= 100 MiB)",
        mib(growth)
    );
    let bound = without_stall * 5 + Duration::from_secs(2);
    let first_with = with_stall[0];
    assert!(
        first_with < bound,
        "with a stalled client the readers took {first_with:?} to converge, more than \
         5x {without_stall:?} + 2 s"
    );
    drop(rt);
}

// ---------------------------------------------------------------------------
// (b), (c) Stream admission
// ---------------------------------------------------------------------------

fn small_mesh() -> &'static str {
    r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: demo}
spec:
  hosts: [svc.demo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 10.0.0.9}]
"#
}

/// Opens a stream and sends its first CDS request (a stream is admitted, or refused, once its
/// first request is in): the stream once its CDS answer came, or the status it was refused
/// with.
async fn admitted(
    client: &mut AggregatedDiscoveryServiceClient<Channel>,
    pod: &str,
) -> Result<(mpsc::Sender<DiscoveryRequest>, Streaming<DiscoveryResponse>), tonic::Status> {
    let first = request(CDS, &[], Some(gateway_at("10.0.0.1", pod)));
    let (tx, mut rx) = open_stream(client, Some(first)).await?;
    let r = tokio::time::timeout(Duration::from_secs(15), rx.message())
        .await
        .expect("an answer within 15 s")?
        .expect("stream open");
    assert_eq!(r.type_url, CDS);
    Ok((tx, rx))
}

#[test]
fn max_streams_refuses_the_stream_beyond_it() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", small_mesh());
    let (_limits_dir, limits) = limits_file("max_streams = 3\n");
    let axon = Axon::start_with_args(dir.path(), &["--limits", &limits]);
    let rt = runtime();
    rt.block_on(async {
        let mut client = connect(axon.xds_addr()).await;
        let mut open = Vec::new();
        for i in 0..3 {
            let stream = admitted(&mut client, &format!("gw-{i}"))
                .await
                .unwrap_or_else(|s| panic!("stream {i} of 3 refused: {s}"));
            open.push(stream);
        }

        // The 4th is refused.
        let Err(status) = admitted(&mut client, "gw-3").await else {
            panic!("the 4th stream must be refused");
        };
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(
            status.message().contains("max_streams"),
            "the message names the limit: {}",
            status.message()
        );
        eprintln!(
            "[limits] 4th stream: {:?} {}",
            status.code(),
            status.message()
        );

        // One of the 3 closes: a new stream is admitted (once axon has noticed).
        drop(open.remove(1));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match admitted(&mut client, "gw-new").await {
                Ok(s) => break open.push(s),
                Err(s)
                    if s.code() == tonic::Code::ResourceExhausted && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(s) => panic!("after a stream closed, a new one is still refused: {s}"),
            }
        }
        // The others are undisturbed: still 3 open, the 4th again refused.
        let Err(status) = admitted(&mut client, "gw-4").await else {
            panic!("a 4th stream must be refused again");
        };
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
    });
    let rejected = metric(
        &axon.metrics(),
        "axon_rejected_streams{reason=\"max_streams\"}",
    )
    .unwrap_or(0.0);
    eprintln!("[limits] axon_rejected_streams = {rejected}");
    assert!(rejected >= 2.0, "axon_rejected_streams = {rejected}");
}

#[test]
fn max_requests_per_second_refuses_a_burst_beyond_it() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", small_mesh());
    let (_limits_dir, limits) =
        limits_file("max_requests_per_second = 5\nmax_stream_wait = \"100ms\"\n");
    let axon = Axon::start_with_args(dir.path(), &["--limits", &limits]);
    let rt = runtime();
    let (streams, refused) = rt.block_on(async {
        let addr = axon.xds_addr();
        // 20 connections first, then 20 streams opened at once.
        let mut clients = Vec::new();
        for _ in 0..20 {
            clients.push(connect(addr).await);
        }
        let opens = clients
            .iter_mut()
            .enumerate()
            .map(|(i, c)| async move { admitted(c, &format!("gw-{i}")).await });
        let results = futures::future::join_all(opens).await;
        let mut admitted = Vec::new();
        let mut refused = Vec::new();
        for r in results {
            match r {
                Ok(s) => admitted.push(s),
                Err(status) => refused.push(status),
            }
        }
        for status in &refused {
            assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
            assert!(
                status.message().contains("max_requests_per_second"),
                "the message names the limit: {}",
                status.message()
            );
        }
        if let Some(s) = refused.first() {
            eprintln!("[limits] refused: {:?} {}", s.code(), s.message());
        }
        (admitted, refused.len())
    });
    let admitted = streams.len();
    eprintln!(
        "[limits] 20 streams at once with max_requests_per_second = 5: {admitted} admitted, {refused} refused"
    );
    assert!(admitted >= 1, "none admitted");
    assert!(refused >= 1, "none refused");
    assert_eq!(admitted + refused, 20);
    let mut metrics = String::new();
    let counted = support::wait_until(Duration::from_secs(5), || {
        metrics = axon.metrics();
        metric(
            &metrics,
            "axon_rejected_streams{reason=\"max_requests_per_second\"}",
        ) == Some(refused as f64)
    });
    assert!(
        counted,
        "axon_rejected_streams must be {refused}: {:?}",
        metric(
            &metrics,
            "axon_rejected_streams{reason=\"max_requests_per_second\"}"
        )
    );
    assert_eq!(
        metric(&metrics, "pilot_xds"),
        Some(admitted as f64),
        "the admitted streams are connected proxies"
    );
    drop(streams);
}
