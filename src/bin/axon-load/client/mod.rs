//! The simulated proxies: one TCP connection and one raw-h2 ADS stream each, subscribing as
//! Envoy does (CDS wildcard → EDS for the EDS clusters → LDS wildcard → RDS for the route
//! names the listeners reference), ACKing every response, recording when each version of
//! each type was ACKed.
//!
//! Cheap per stream: no tonic codec buffers; responses are reassembled only while they
//! arrive and decoded with minimal messages (`wire`); the name lists a proxy must repeat
//! in its requests are interned, so that proxies with the same view share them.

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use prost::Message;

use crate::wire::{self, CDS, LDS};

mod stats;
pub use stats::{acks_after, bytes_by_type, quantile, sync_times_ms};

/// One ACK: which type, which version (for `run --hold` and debugging), when (µs since `Shared::epoch`).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)]
pub struct Ack {
    pub at_us: u64,
    /// SotW: the `version_info`, axon's content hash (16 hex digits); Delta: the
    /// `system_version_info`, axon's push number.
    pub version: u64,
    pub ty: u8,
}

#[derive(Default)]
pub struct ProxyStat {
    /// µs since the epoch when all four types were first ACKed; 0 until then.
    pub synced_us: AtomicU64,
    pub acks: Mutex<Vec<Ack>>,
    pub error: Mutex<Option<String>>,
    /// Response bytes (gRPC payloads) received.
    pub bytes: AtomicU64,
    /// The same, per type (CDS, EDS, LDS, RDS).
    pub bytes_by_type: [AtomicU64; 4],
    /// For capture proxies: the first response of each type, as received.
    pub captured: Option<Mutex<[Option<Bytes>; 4]>>,
}

/// What all simulated proxies share with the bench.
pub struct Shared {
    pub epoch: Instant,
    pub proxies: Vec<ProxyStat>,
    pub total_acks: AtomicU64,
    pub synced: AtomicU64,
    pub errors: AtomicU64,
    /// Reconnects before a first response.
    pub retries: AtomicU64,
    interner: Mutex<HashMap<u64, Arc<Vec<String>>>>,
}

impl Shared {
    /// `capture(j)` says whether proxy `j` keeps its first responses.
    pub fn new(n: usize, capture: impl Fn(usize) -> bool) -> Arc<Shared> {
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
            interner: Mutex::new(HashMap::new()),
        })
    }

    pub fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    pub fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_micros() as u64
    }

    /// One shared copy of each distinct name list.
    fn intern(&self, names: Vec<String>) -> Arc<Vec<String>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        names.hash(&mut h);
        let key = h.finish();
        let mut map = self.interner.lock().unwrap();
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
        let mut slot = self.proxies[j].error.lock().unwrap();
        if slot.is_none() {
            *slot = Some(e);
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn first_errors(&self, max: usize) -> Vec<String> {
        self.proxies
            .iter()
            .enumerate()
            .filter_map(|(j, p)| {
                p.error
                    .lock()
                    .unwrap()
                    .as_ref()
                    .map(|e| format!("proxy {j}: {e}"))
            })
            .take(max)
            .collect()
    }
}

/// How a simulated proxy connects.
#[derive(Clone, Debug)]
pub struct ClientConfig {
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
pub fn node_bytes(j: usize, namespaces: usize) -> Vec<u8> {
    let (id, ns) = crate::mesh::proxy_identity(j, namespaces);
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

/// Per-type protocol state of one stream.
#[derive(Default)]
struct TypeState {
    version: String,
    nonce: String,
    /// Subscribed names (EDS, RDS); shared between proxies with the same list.
    names: Option<Arc<Vec<String>>>,
    acked: bool,
}

/// Runs proxy `j` until its stream ends or the task is aborted.
///
/// Like Envoy, a proxy whose connection fails before its first response reconnects with
/// backoff (100 ms doubling to 2 s, at most 10 times; counted in `Shared::retries`).
pub async fn run(j: usize, cfg: ClientConfig, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    for attempt in 0.. {
        match run_inner(j, &cfg, &shared).await {
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
/// doubling to 1 s (counted in `Shared::retries`), on a fresh stream.
pub async fn run_forever(j: usize, cfg: ClientConfig, shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let started = Instant::now();
        let _ = run_inner(j, &cfg, &shared).await;
        if started.elapsed() > Duration::from_secs(5) {
            backoff = Duration::from_millis(100);
        }
        shared.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}

async fn run_inner(j: usize, cfg: &ClientConfig, shared: &Shared) -> anyhow::Result<()> {
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
    let first = if cfg.delta {
        wire::delta_request(CDS, "", &[], &[], Some(&node))
    } else {
        wire::sotw_request(CDS, "", "", &[], Some(&node))
    };
    drop(node);
    tx.send_data(first, false)?;
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
    let mut body = response.into_body();
    let mut deframer = wire::Deframer::default();
    let mut proxy = Proxy {
        j,
        shared,
        delta: cfg.delta,
        types: Default::default(),
        delta_eds: None,
        delta_rds: None,
        lds_requested: false,
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

struct Proxy<'a> {
    j: usize,
    shared: &'a Shared,
    delta: bool,
    types: [TypeState; 4],
    /// Delta: the subscribed EDS and RDS names.
    delta_eds: Option<Arc<Vec<String>>>,
    delta_rds: Option<Arc<Vec<String>>>,
    lds_requested: bool,
}

impl Proxy<'_> {
    /// Handles one response; returns the requests to send, in order.
    fn on_message(&mut self, msg: Bytes) -> anyhow::Result<Vec<Bytes>> {
        let stat = &self.shared.proxies[self.j];
        stat.bytes.fetch_add(msg.len() as u64, Ordering::Relaxed);
        let (version, type_url, nonce) = if self.delta {
            let h = wire::DeltaHeader::decode(msg.clone())?;
            (h.system_version_info, h.type_url, h.nonce)
        } else {
            let h = wire::SotwHeader::decode(msg.clone())?;
            (h.version_info, h.type_url, h.nonce)
        };
        let Some(ty) = wire::type_index(&type_url) else {
            anyhow::bail!("unexpected type {type_url}");
        };
        stat.bytes_by_type[ty].fetch_add(msg.len() as u64, Ordering::Relaxed);
        if let Some(cap) = &stat.captured {
            let mut cap = cap.lock().unwrap();
            if cap[ty].is_none() {
                cap[ty] = Some(msg.clone());
            }
        }
        let mut out = Vec::new();
        if self.delta {
            self.on_delta(ty, &msg, &mut out)?;
            out.push(wire::delta_request(TYPES[ty], &nonce, &[], &[], None));
        } else {
            self.on_sotw(ty, &msg, &mut out)?;
            // Wildcard types (CDS, LDS) are ACKed with no names.
            let names = match ty {
                1 | 3 => self.types[ty].names.clone().unwrap_or_default(),
                _ => Arc::default(),
            };
            out.push(wire::sotw_request(
                TYPES[ty], &version, &nonce, &names, None,
            ));
        }
        drop(msg);
        let st = &mut self.types[ty];
        st.version = version;
        st.nonce = nonce;
        st.acked = true;
        // After the first EDS (clusters warmed), or a CDS without EDS clusters, ask for
        // listeners.
        let no_eds = !self.eds_needed();
        if (ty == 1 || (ty == 0 && no_eds)) && !self.lds_requested {
            self.lds_requested = true;
            out.push(if self.delta {
                wire::delta_request(LDS, "", &[], &[], None)
            } else {
                wire::sotw_request(LDS, "", "", &[], None)
            });
        }
        self.record(ty);
        Ok(out)
    }

    fn eds_needed(&self) -> bool {
        self.types[1].names.as_ref().is_some_and(|n| !n.is_empty())
            || self.delta_eds.as_ref().is_some_and(|n| !n.is_empty())
    }

    fn record(&mut self, ty: usize) {
        let shared = self.shared;
        let stat = &shared.proxies[self.j];
        let v = &self.types[ty].version;
        let version = if self.delta {
            v.parse::<u64>().unwrap_or(0)
        } else {
            u64::from_str_radix(v, 16).unwrap_or(0)
        };
        stat.acks.lock().unwrap().push(Ack {
            at_us: shared.now_us(),
            version,
            ty: ty as u8,
        });
        shared.total_acks.fetch_add(1, Ordering::Relaxed);
        let eds_needed = self.eds_needed();
        let rds_needed = self.types[3].names.as_ref().is_some_and(|n| !n.is_empty())
            || self.delta_rds.as_ref().is_some_and(|n| !n.is_empty());
        let synced = self.types[0].acked
            && (self.types[1].acked || !eds_needed)
            && self.types[2].acked
            && (self.types[3].acked || !rds_needed);
        if synced && stat.synced_us.load(Ordering::Relaxed) == 0 {
            stat.synced_us
                .store(shared.now_us().max(1), Ordering::Relaxed);
            shared.synced.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// SotW: on CDS, (re)subscribe EDS if the EDS names changed; on LDS, RDS likewise.
    /// `types[0].names` / `types[2].names` keep the referenced names (the wildcard types
    /// themselves are ACKed with no names).
    fn on_sotw(&mut self, ty: usize, msg: &Bytes, out: &mut Vec<Bytes>) -> anyhow::Result<()> {
        let (target, names) = match ty {
            0 => {
                let r = wire::SotwResources::decode(msg.clone())?;
                let mut names: Vec<String> = r
                    .resources
                    .iter()
                    .filter_map(|a| wire::eds_name(&a.value))
                    .collect();
                names.sort();
                (1, names)
            }
            2 => {
                let r = wire::SotwResources::decode(msg.clone())?;
                let mut names = Vec::new();
                for a in &r.resources {
                    wire::route_names(&a.value, &mut names);
                }
                names.sort();
                names.dedup();
                (3, names)
            }
            _ => return Ok(()),
        };
        let changed = self.types[target]
            .names
            .as_ref()
            .is_none_or(|old| **old != names);
        if changed {
            let names = self.shared.intern(names);
            let t = &self.types[target];
            if !names.is_empty() || t.names.is_some() {
                out.push(wire::sotw_request(
                    TYPES[target],
                    &t.version,
                    &t.nonce,
                    &names,
                    None,
                ));
            }
            self.types[target].names = Some(names);
        }
        Ok(())
    }

    /// Delta: on CDS, subscribe new EDS names and unsubscribe removed ones; LDS → RDS.
    fn on_delta(&mut self, ty: usize, msg: &Bytes, out: &mut Vec<Bytes>) -> anyhow::Result<()> {
        let shared = self.shared;
        let (target, slot) = match ty {
            0 => (1, &mut self.delta_eds),
            2 => (3, &mut self.delta_rds),
            _ => return Ok(()),
        };
        let r = wire::DeltaResources::decode(msg.clone())?;
        let old: BTreeSet<String> = slot
            .as_ref()
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        let mut new = old.clone();
        for name in &r.removed_resources {
            new.remove(name);
        }
        for res in &r.resources {
            let Some(any) = &res.resource else { continue };
            if ty == 0 {
                match wire::eds_name(&any.value) {
                    Some(n) => {
                        new.insert(n);
                    }
                    None => {
                        new.remove(&res.name);
                    }
                }
            } else {
                let mut names = Vec::new();
                wire::route_names(&any.value, &mut names);
                new.extend(names);
            }
        }
        let subscribe: Vec<String> = new.difference(&old).cloned().collect();
        let unsubscribe: Vec<String> = old.difference(&new).cloned().collect();
        if !subscribe.is_empty() || !unsubscribe.is_empty() || slot.is_none() {
            if !subscribe.is_empty() || !unsubscribe.is_empty() {
                out.push(wire::delta_request(
                    TYPES[target],
                    "",
                    &subscribe,
                    &unsubscribe,
                    None,
                ));
            }
            *slot = Some(shared.intern(new.into_iter().collect()));
        }
        Ok(())
    }
}

use wire::TYPES;
