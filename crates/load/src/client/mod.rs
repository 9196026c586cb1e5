//! The simulated proxies: one TCP connection and one raw-h2 ADS stream each, subscribing as
//! Envoy does (CDS wildcard → EDS for the EDS clusters → LDS wildcard → RDS for the route
//! names the listeners reference), ACKing every response, recording when each version of
//! each type was ACKed.
//!
//! The protocol state machine is `proxy`; `run_forever` keeps each proxy's state across its
//! streams and resumes with it.
//!
//! Cheap per stream: no tonic codec buffers; responses are reassembled only while they
//! arrive and decoded with minimal messages (`wire`); the name lists a proxy must repeat
//! in its requests are interned, so that proxies with the same view share them.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use prost::Message;

use crate::wire;

mod proxy;

mod stats;
pub(crate) use stats::{acks_after, bytes_by_type, quantile, resume_totals, sync_times_ms};

/// One ACK: which type, which version (for `run --hold` and debugging), when (µs since `Shared::epoch`).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub(crate) struct Ack {
    pub at_us: u64,
    /// SotW: the `version_info`, axon's content hash (16 hex digits); Delta: the
    /// `system_version_info`, axon's push number.
    pub version: u64,
    pub ty: u8,
}

#[derive(Default)]
pub(crate) struct ProxyStat {
    /// µs since the epoch when all four types were first ACKed; 0 until then.
    pub synced_us: AtomicU64,
    pub acks: Mutex<Vec<Ack>>,
    pub error: Mutex<Option<String>>,
    /// Response bytes (gRPC payloads) received.
    pub bytes: AtomicU64,
    /// The same, per type (CDS, EDS, LDS, RDS).
    pub bytes_by_type: [AtomicU64; 4],
    /// Response bytes received on streams after the proxy's first (`run_forever`'s
    /// resumed streams).
    pub resume_bytes: AtomicU64,
    /// Resources in those responses.
    pub resume_resources: AtomicU64,
    /// `bytes` when the proxy was first synced: the cost of a full sync.
    pub sync_bytes: AtomicU64,
    /// For capture proxies: the first response of each type, as received.
    pub captured: Option<Mutex<[Option<Bytes>; 4]>>,
}

/// What all simulated proxies share with the bench.
pub(crate) struct Shared {
    pub epoch: Instant,
    pub proxies: Vec<ProxyStat>,
    pub total_acks: AtomicU64,
    pub synced: AtomicU64,
    pub errors: AtomicU64,
    /// Reconnects before a first response.
    pub retries: AtomicU64,
    /// Resumed streams (`run_forever`) that the server accepted.
    pub resumed: AtomicU64,
    /// The sum, over those streams, of their proxy's `sync_bytes`: what full re-pushes
    /// would have cost.
    pub full_resync_bytes: AtomicU64,
    interner: Mutex<HashMap<u64, Arc<Vec<String>>>>,
}

impl Shared {
    /// `capture(j)` says whether proxy `j` keeps its first responses.
    pub(crate) fn new(n: usize, capture: impl Fn(usize) -> bool) -> Arc<Shared> {
        Arc::new(Shared {
            epoch: Instant::now(),
            proxies: (0..n)
                .map(|j| ProxyStat {
                    captured: capture(j).then(|| Mutex::new(Default::default())),
                    ..Default::default()
                })
                .collect(),
            total_acks: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            full_resync_bytes: AtomicU64::new(0),
            interner: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    pub(crate) fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// One shared copy of each distinct name list.
    pub(super) fn intern(&self, names: Vec<String>) -> Arc<Vec<String>> {
        // SipHash-1-3 with fixed keys, as axon's own (`axon_config::hash`).
        let mut h = siphasher::sip::SipHasher13::new_with_keys(0, 0);
        names.hash(&mut h);
        let key = h.finish();
        let mut map = self.interner.lock().unwrap_or_else(PoisonError::into_inner);
        match map.get(&key) {
            Some(a) if **a == names => a.clone(),
            _ => {
                let a = Arc::new(names);
                map.insert(key, a.clone());
                a
            }
        }
    }

    fn fail(&self, j: usize, e: String) {
        let mut slot = self.proxies[j]
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn first_errors(&self, max: usize) -> Vec<String> {
        self.proxies
            .iter()
            .enumerate()
            .filter_map(|(j, p)| {
                p.error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .map(|e| format!("proxy {j}: {e}"))
            })
            .take(max)
            .collect()
    }
}

/// How a simulated proxy connects.
#[derive(Clone, Debug)]
pub(crate) struct ClientConfig {
    pub addr: SocketAddr,
    pub delta: bool,
    pub namespaces: usize,
    /// HTTP/2 receive windows (stream and connection).
    pub window: u32,
}

fn string(v: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(v.to_string())),
    }
}

/// The encoded `Node` of proxy `j` (Istio id, metadata NAMESPACE and LABELS).
pub(crate) fn node_bytes(j: usize, namespaces: usize) -> Vec<u8> {
    let (id, ns) = axon_load::mesh::proxy_identity(j, namespaces);
    Node {
        id,
        cluster: format!("proxy-{j}.{ns}"),
        metadata: Some(Struct {
            fields: [
                ("NAMESPACE".to_string(), string(&ns)),
                (
                    "LABELS".to_string(),
                    Value {
                        kind: Some(Kind::StructValue(Struct {
                            fields: [("app".to_string(), string(&format!("proxy-{j}")))].into(),
                        })),
                    },
                ),
            ]
            .into(),
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// Runs proxy `j` until its stream ends or the task is aborted.
///
/// Like Envoy, a proxy whose connection fails before its first response reconnects with
/// backoff (100 ms doubling to 2 s, at most 10 times; counted in `Shared::retries`).
pub(crate) async fn run(j: usize, cfg: ClientConfig, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    for attempt in 0.. {
        match run_inner(j, &cfg, &shared, &mut proxy::State::default()).await {
            Ok(()) => return,
            Err(_) if attempt < 10 && shared.proxies[j].bytes.load(Ordering::Relaxed) == 0 => {
                shared.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                shared.fail(j, format!("{e:#}"));
                return;
            }
        }
    }
}

/// Runs proxy `j` for ever: like Envoy, a proxy whose stream ends (GOAWAY from a draining
/// or rebalancing axon, a killed one) or that cannot connect reconnects, after 100 ms
/// doubling to 1 s (counted in `Shared::retries`), on a new stream that resumes with
/// what it has (`proxy::State::first_requests`).
pub(crate) async fn run_forever(j: usize, cfg: ClientConfig, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    let mut state = proxy::State::resuming();
    loop {
        let started = Instant::now();
        let _ = run_inner(j, &cfg, &shared, &mut state).await;
        if started.elapsed() > Duration::from_secs(5) {
            backoff = Duration::from_millis(100);
        }
        shared.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn run_inner(
    j: usize,
    cfg: &ClientConfig,
    shared: &Shared,
    state: &mut proxy::State,
) -> anyhow::Result<()> {
    let tcp = connect_retry(cfg.addr).await?;
    tcp.set_nodelay(true)?;
    let (send_request, conn) = h2::client::Builder::new()
        .initial_window_size(cfg.window)
        .initial_connection_window_size(cfg.window)
        .max_frame_size(64 * 1024)
        .handshake::<_, Bytes>(tcp)
        .await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut send_request = send_request.ready().await?;
    let path = if cfg.delta {
        wire::DELTA_PATH
    } else {
        wire::SOTW_PATH
    };
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}{path}", cfg.addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())?;
    let (response, mut tx) = send_request.send_request(request, false)?;
    let node = node_bytes(j, cfg.namespaces);
    let resumed = state.has_any();
    for first in state.first_requests(cfg.delta, &node) {
        tx.send_data(first, false)?;
    }
    drop(node);
    let response = response.await?;
    if let Some(status) = response.headers().get("grpc-status")
        && status != "0"
    {
        let msg = response
            .headers()
            .get("grpc-message")
            .and_then(|m| m.to_str().ok())
            .unwrap_or("");
        anyhow::bail!("grpc-status {status:?} {msg}");
    }
    anyhow::ensure!(response.status() == 200, "HTTP {}", response.status());
    if resumed {
        let stat = &shared.proxies[j];
        shared.resumed.fetch_add(1, Ordering::Relaxed);
        shared
            .full_resync_bytes
            .fetch_add(stat.sync_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
    }
    let mut body = response.into_body();
    let mut deframer = wire::Deframer::default();
    let mut proxy = proxy::Proxy {
        j,
        shared,
        delta: cfg.delta,
        state,
        resumed,
    };
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        deframer.push(&chunk);
        drop(chunk);
        while let Some(msg) = deframer.next()? {
            for out in proxy.on_message(msg)? {
                tx.send_data(out, false)?;
            }
        }
    }
    let trailers = body.trailers().await?;
    let status = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-status"))
        .and_then(|s| s.to_str().ok())
        .unwrap_or("none")
        .to_string();
    let msg = trailers
        .as_ref()
        .and_then(|t| t.get("grpc-message"))
        .and_then(|s| s.to_str().ok())
        .unwrap_or("")
        .to_string();
    anyhow::bail!("stream ended by the server: grpc-status {status} {msg}")
}

async fn connect_retry(addr: SocketAddr) -> anyhow::Result<tokio::net::TcpStream> {
    let mut wait = Duration::from_millis(10);
    for _ in 0..8 {
        match tokio::net::TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Err(e.into()),
            Err(_) => {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
        }
    }
    Ok(tokio::net::TcpStream::connect(addr).await?)
}
