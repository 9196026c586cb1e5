//! The hostile connections of `axon-load hostile`, one task each, on the runtime they are
//! started on: TCP connections that never send the HTTP/2 preface, HTTP/2 connections whose
//! streams never send a request, and HTTP/2 connections whose one stream sends a gRPC header
//! announcing a large message, part of its body, then nothing. Whatever axon closes is
//! reopened at once, so that the pressure holds; every closing is counted in [`Hostile`] with
//! its reason (`grpc-status` and the limit axon names) and how long the thing lived.
//!
//! Bounded: one task per connection, a fixed number of streams each, the stalled body built
//! once and shared by reference, at most [`MAX_REASONS`] distinct reasons kept.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncReadExt;

use crate::wire::SOTW_PATH;

/// Distinct closing reasons kept; past it they count as "other".
const MAX_REASONS: usize = 32;

/// A connection closed sooner than this without any stream answered counts as refused.
const REFUSED_WITHIN: Duration = Duration::from_secs(1);

/// The pause before reconnecting after a refused or failed connection.
const BACKOFF: Duration = Duration::from_millis(100);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    NoPreface,
    Silent,
    Stalled,
}

impl Kind {
    pub(super) const ALL: [Kind; 3] = [Kind::NoPreface, Kind::Silent, Kind::Stalled];

    pub(super) fn label(self) -> &'static str {
        match self {
            Kind::NoPreface => "TCP, no HTTP/2 preface",
            Kind::Silent => "HTTP/2, silent streams",
            Kind::Stalled => "HTTP/2, stalled partial message",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The counters of one kind of hostile connection.
pub(super) struct KindStats {
    /// Connections open now.
    pub open: AtomicI64,
    /// Connections made (first openings and reopenings).
    pub connects: AtomicU64,
    /// Connections axon closed after they lived (each reopened).
    pub closed: AtomicU64,
    /// Connections closed within [`REFUSED_WITHIN`] with no stream answered.
    pub refused: AtomicU64,
    /// Connects or handshakes that failed.
    pub failed: AtomicU64,
    /// Streams open now.
    pub streams_open: AtomicI64,
    /// Streams opened (first openings and reopenings).
    pub streams: AtomicU64,
    /// Streams axon ended (each reopened).
    pub streams_ended: AtomicU64,
    /// Shortest and longest life of what axon closed (the connection for `NoPreface`, the
    /// stream otherwise), ms.
    life_min_ms: AtomicU64,
    life_max_ms: AtomicU64,
}

impl Default for KindStats {
    fn default() -> Self {
        KindStats {
            open: AtomicI64::new(0),
            connects: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            streams_open: AtomicI64::new(0),
            streams: AtomicU64::new(0),
            streams_ended: AtomicU64::new(0),
            life_min_ms: AtomicU64::new(u64::MAX),
            life_max_ms: AtomicU64::new(0),
        }
    }
}

impl KindStats {
    /// The shortest and longest life of what axon closed, seconds; `None` before any.
    pub(super) fn lives(&self) -> Option<(f64, f64)> {
        let min = self.life_min_ms.load(Ordering::Relaxed);
        (min != u64::MAX).then(|| {
            (
                min as f64 / 1000.0,
                self.life_max_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            )
        })
    }

    fn lived(&self, life: Duration) {
        let ms = life.as_millis() as u64;
        self.life_min_ms.fetch_min(ms, Ordering::Relaxed);
        self.life_max_ms.fetch_max(ms, Ordering::Relaxed);
    }
}

/// What every hostile connection shares with the scenario.
#[derive(Default)]
pub(super) struct Hostile {
    pub kinds: [KindStats; 3],
    reasons: Mutex<BTreeMap<String, u64>>,
}

impl Hostile {
    pub(super) fn kind(&self, k: Kind) -> &KindStats {
        &self.kinds[k.index()]
    }

    /// Connections open now, over every kind.
    pub(super) fn held(&self) -> i64 {
        self.kinds
            .iter()
            .map(|k| k.open.load(Ordering::Relaxed))
            .sum()
    }

    /// Streams open now, over every kind.
    pub(super) fn streams_held(&self) -> i64 {
        self.kinds
            .iter()
            .map(|k| k.streams_open.load(Ordering::Relaxed))
            .sum()
    }

    /// The closing reasons seen, with their counts.
    pub(super) fn reasons(&self) -> Vec<(String, u64)> {
        let map = self.reasons.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }

    fn reason(&self, kind: Kind, reason: &str) {
        let mut map = self.reasons.lock().unwrap_or_else(|e| e.into_inner());
        let key = format!("{}: {reason}", kind.label());
        let key = if map.len() < MAX_REASONS || map.contains_key(&key) {
            key
        } else {
            "other".to_string()
        };
        *map.entry(key).or_default() += 1;
    }
}

/// The hostile connections to open.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub addr: SocketAddr,
    pub no_preface: usize,
    pub silent: usize,
    /// Streams per silent connection.
    pub silent_streams: usize,
    pub stalled: usize,
    /// What each stalled stream sends: a 5-byte gRPC header and part of the body.
    pub stall: Bytes,
    /// The connections are opened evenly over this long, so that their closings (and
    /// reopenings) spread out too.
    pub ramp: Duration,
}

impl Plan {
    pub(super) fn total(&self) -> usize {
        self.no_preface + self.silent + self.stalled
    }
}

/// A gRPC message head announcing `announce` bytes, followed by `body` bytes of it (fewer than
/// announced, so that it never completes).
pub(super) fn stalled_message(announce: u32, body: usize) -> Bytes {
    let body = body.min(announce.saturating_sub(1) as usize);
    let mut out = Vec::with_capacity(5 + body);
    out.push(0u8);
    out.extend_from_slice(&announce.to_be_bytes());
    out.resize(5 + body, 0x0a);
    Bytes::from(out)
}

/// Starts every hostile connection of `plan`, spread over `plan.ramp`, the kinds interleaved.
pub(super) fn start(
    rt: &tokio::runtime::Runtime,
    plan: &Plan,
    stats: Arc<Hostile>,
) -> Vec<tokio::task::JoinHandle<()>> {
    // Each kind's connections at evenly spaced points of [0, 1), merged by position.
    let mut order: Vec<(f64, Kind)> = Vec::with_capacity(plan.total());
    for (kind, n) in [
        (Kind::NoPreface, plan.no_preface),
        (Kind::Silent, plan.silent),
        (Kind::Stalled, plan.stalled),
    ] {
        order.extend((0..n).map(|m| ((m as f64 + 0.5) / n as f64, kind)));
    }
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    order
        .into_iter()
        .map(|(at, kind)| {
            let (stats, plan) = (stats.clone(), plan.clone());
            rt.spawn(async move {
                tokio::time::sleep(plan.ramp.mul_f64(at)).await;
                match kind {
                    Kind::NoPreface => no_preface(plan.addr, &stats).await,
                    Kind::Silent => h2_connection(kind, &plan, plan.silent_streams, &stats).await,
                    Kind::Stalled => h2_connection(kind, &plan, 1, &stats).await,
                }
            })
        })
        .collect()
}

/// A TCP connection that reads what axon sends and never writes; reopened when closed.
async fn no_preface(addr: SocketAddr, st: &Hostile) {
    let k = st.kind(Kind::NoPreface);
    let mut buf = [0u8; 512];
    loop {
        let opened = Instant::now();
        let Ok(mut tcp) = tokio::net::TcpStream::connect(addr).await else {
            k.failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        k.connects.fetch_add(1, Ordering::Relaxed);
        k.open.fetch_add(1, Ordering::Relaxed);
        while let Ok(n) = tcp.read(&mut buf).await
            && n > 0
        {}
        k.open.fetch_sub(1, Ordering::Relaxed);
        let life = opened.elapsed();
        if life < REFUSED_WITHIN {
            k.refused.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(BACKOFF).await;
        } else {
            k.closed.fetch_add(1, Ordering::Relaxed);
            k.lived(life);
            st.reason(Kind::NoPreface, "connection closed by axon");
        }
    }
}

/// An HTTP/2 connection with `streams` misbehaving streams, each reopened when axon ends it;
/// the connection is reopened when axon closes it.
async fn h2_connection(kind: Kind, plan: &Plan, streams: usize, st: &Hostile) {
    let k = st.kind(kind);
    let stall = (kind == Kind::Stalled).then(|| plan.stall.clone());
    loop {
        let opened = Instant::now();
        let handshake = async {
            let tcp = tokio::net::TcpStream::connect(plan.addr).await.ok()?;
            h2::client::handshake(tcp).await.ok()
        };
        let Some((send, conn)) = handshake.await else {
            k.failed.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        k.connects.fetch_add(1, Ordering::Relaxed);
        k.open.fetch_add(1, Ordering::Relaxed);
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let loops = (0..streams.max(1)).map(|_| stream_loop(kind, send.clone(), stall.clone(), st));
        let answered = futures::future::join_all(loops).await;
        drop(send);
        conn.abort();
        k.open.fetch_sub(1, Ordering::Relaxed);
        if opened.elapsed() < REFUSED_WITHIN && !answered.contains(&true) {
            k.refused.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(BACKOFF).await;
        } else {
            k.closed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Opens a stream (sending `stall` on it if given, then nothing) and waits for axon to end
/// it, again and again, until the connection fails; returns whether axon ever answered.
async fn stream_loop(
    kind: Kind,
    mut send: h2::client::SendRequest<Bytes>,
    stall: Option<Bytes>,
    st: &Hostile,
) -> bool {
    let k = st.kind(kind);
    let mut answered = false;
    loop {
        let Ok(ready) = send.ready().await else {
            return answered;
        };
        send = ready;
        let Ok(request) = http::Request::builder()
            .method("POST")
            .uri(format!("http://axon{SOTW_PATH}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
        else {
            return answered;
        };
        let Ok((response, mut body)) = send.send_request(request, false) else {
            return answered;
        };
        if let Some(stall) = &stall
            && body.send_data(stall.clone(), false).is_err()
        {
            return answered;
        }
        k.streams.fetch_add(1, Ordering::Relaxed);
        k.streams_open.fetch_add(1, Ordering::Relaxed);
        let opened = Instant::now();
        let ended = stream_end(response).await;
        k.streams_open.fetch_sub(1, Ordering::Relaxed);
        // Held until the stream ended: dropping it earlier could reset the stream.
        drop(body);
        let Some(reason) = ended else {
            return answered;
        };
        answered = true;
        k.streams_ended.fetch_add(1, Ordering::Relaxed);
        k.lived(opened.elapsed());
        st.reason(kind, &reason);
    }
}

/// How axon ended a stream (its `grpc-status` and the limit its message names, or the
/// RST_STREAM); `None` if the connection went away.
async fn stream_end(response: h2::client::ResponseFuture) -> Option<String> {
    let reset = |e: h2::Error| {
        e.is_reset().then(|| {
            format!(
                "RST_STREAM {:?}",
                e.reason().unwrap_or(h2::Reason::NO_ERROR)
            )
        })
    };
    let response = match response.await {
        Ok(r) => r,
        Err(e) => return reset(e),
    };
    if let Some(status) = grpc_status(response.headers()) {
        return Some(status);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(c) => {
                let _ = body.flow_control().release_capacity(c.len());
            }
            Err(e) => return reset(e),
        }
    }
    match body.trailers().await {
        Ok(Some(t)) => {
            Some(grpc_status(&t).unwrap_or_else(|| "trailers without grpc-status".into()))
        }
        Ok(None) => Some("ended without trailers".into()),
        Err(e) => reset(e),
    }
}

/// `grpc-status` by name, and the limit axon's message names in its last parentheses.
fn grpc_status(h: &http::HeaderMap) -> Option<String> {
    let code = h.get("grpc-status")?.to_str().ok()?;
    let name = match code {
        "0" => "OK",
        "3" => "INVALID_ARGUMENT",
        "4" => "DEADLINE_EXCEEDED",
        "8" => "RESOURCE_EXHAUSTED",
        "14" => "UNAVAILABLE",
        other => other,
    };
    let message = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("");
    let limit = message
        .rsplit_once('(')
        .and_then(|(_, r)| r.split_once(')'))
        .map(|(l, _)| l)
        .filter(|l| l.len() <= 40 && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    Some(match limit {
        Some(l) => format!("{name} ({l})"),
        None => name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_message_never_completes() {
        let m = stalled_message(4 << 20, 16 << 10);
        assert_eq!(m.len(), 5 + (16 << 10));
        assert_eq!(&m[..5], &[0, 0, 0x40, 0, 0]);
        assert_eq!(
            stalled_message(10, 100).len(),
            5 + 9,
            "fewer bytes than announced"
        );
    }

    #[test]
    fn the_reason_names_the_limit() {
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", "4".parse().unwrap());
        h.insert(
            "grpc-message",
            "no request within 10s (first_request_timeout)"
                .parse()
                .unwrap(),
        );
        assert_eq!(
            grpc_status(&h).as_deref(),
            Some("DEADLINE_EXCEEDED (first_request_timeout)")
        );
    }
}
