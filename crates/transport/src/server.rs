//! The ADS server's connections: the accept loop on the xDS listener, each connection's
//! HTTP/2 served on the h2 crate by one task (its streams' responses pumped by that task,
//! `streams.rs`; its keepalive pings), and how a connection is closed gracefully.
//!
//! A connection is closed at its `max_connection_age` (±10 % jitter, as grpc-go does, so that
//! connections made together do not all close together) and when axon drains: with an HTTP/2
//! GOAWAY, and every stream on it ended with UNAVAILABLE (an ADS stream never ends on its
//! own, so a GOAWAY alone would leave it open), so that the proxy reconnects, to another
//! replica if the Service has one. A connection that is still open `close_grace` later is
//! dropped. On drain ([`Drain::start`]) the listener stops accepting at once and the open
//! connections are closed one by one, spread evenly over `drain_duration`, so that their
//! proxies do not all reconnect in the same instant. A rebalance across replicas
//! (`AdsService::close_oldest`) closes the oldest connections by the same path.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tonic::body::Body;

use super::streams::{Out, Pump, RecvBody};
use super::{AdsService, Served};

/// How connections are kept and closed (from the limits file).
#[derive(Debug, Clone, Copy)]
pub struct ConnSettings {
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
    /// `None`: never closed for age.
    pub max_connection_age: Option<Duration>,
    /// How long a connection told to go away may stay open.
    pub close_grace: Duration,
    /// A connection with no open stream for this long is closed.
    pub idle_timeout: Duration,
    /// Streams open at once on one connection (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub max_streams_per_connection: u32,
    /// The HTTP/2 receive window of the connection and of each stream.
    pub receive_window: u32,
}

/// Put in each request's extensions on the TLS port: who the client proved to be, if its
/// certificate carries a SPIFFE identity. Its absence means the plaintext port (anonymous).
#[derive(Debug, Clone)]
pub struct Authn {
    /// The identity of the client certificate, if it presented one.
    pub identity: Option<axon_model::identity::Identity>,
    /// The stream's bearer token (set per stream from its `authorization` metadata).
    pub token: Option<String>,
}

/// Put in each request's extensions: resolves when the stream's connection is going away.
#[derive(Clone)]
pub struct GoingAway(watch::Receiver<bool>);

impl GoingAway {
    /// Resolves once the connection is closing.
    pub fn wait(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            let _ = rx.wait_for(|away| *away).await;
        }
    }
}

/// The drain of every connection: started once (SIGTERM), shared by the accept loops and the
/// connections.
#[derive(Clone, Default)]
pub struct Drain {
    inner: Arc<DrainInner>,
}

#[derive(Default)]
struct DrainInner {
    /// `Some(over)` once draining: close the open connections evenly over this long.
    started: watch::Sender<Option<Duration>>,
    live: AtomicUsize,
    /// The open connections when the drain started, and the next one's turn.
    total: AtomicUsize,
    turn: AtomicUsize,
    none_left: Notify,
}

impl Drain {
    /// Stops accepting and closes the open connections evenly over `over`.
    pub fn start(&self, over: Duration) {
        self.inner
            .total
            .store(self.inner.live.load(Ordering::SeqCst), Ordering::SeqCst);
        self.inner.started.send_replace(Some(over));
    }

    /// Open connections.
    pub fn live(&self) -> usize {
        self.inner.live.load(Ordering::SeqCst)
    }

    /// Resolves when no connection is open.
    pub async fn drained(&self) {
        loop {
            let notified = self.inner.none_left.notified();
            if self.live() == 0 {
                return;
            }
            notified.await;
        }
    }

    async fn started(&self) -> Duration {
        let mut rx = self.inner.started.subscribe();
        let over = rx
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|over| *over);
        match over {
            Some(over) => over,
            None => std::future::pending().await,
        }
    }

    /// Resolves at this connection's turn in the drain: the k-th of n closes at over × k / n.
    async fn my_turn(&self) {
        let over = self.started().await;
        let total = self.inner.total.load(Ordering::SeqCst).max(1);
        let k = self
            .inner
            .turn
            .fetch_add(1, Ordering::SeqCst)
            .min(total - 1);
        tokio::time::sleep(over.mul_f64(k as f64 / total as f64)).await;
    }

    fn enter(&self) -> LiveGuard {
        self.inner.live.fetch_add(1, Ordering::SeqCst);
        LiveGuard(self.inner.clone())
    }
}

struct LiveGuard(Arc<DrainInner>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        if self.0.live.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

/// Accepts connections on `listener` and serves ADS on each until the drain starts; resolves
/// then (dropping the listener). A connection past `max_connections` is closed at once
/// (counted in `axon_xds_refused_connections`, logged once per run). An accept error (out of file descriptors) is counted in
/// `axon_xds_accept_errors`, logged once per run of errors, and retried after a pause, so
/// that the loop never spins.
pub async fn serve(
    listener: TcpListener,
    ads: AdsService,
    settings: ConnSettings,
    drain: Drain,
    tls: Option<Arc<super::tls::TlsReloader>>,
) {
    let stop = drain.started();
    tokio::pin!(stop);
    let mut failing = false;
    let mut refusing = false;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if std::mem::take(&mut failing) {
                        tracing::info!("xDS accepts succeed again");
                    }
                    let Some(slot) = ads.take_connection() else {
                        ads.metrics().refused_connections.inc();
                        if !std::mem::replace(&mut refusing, true) {
                            tracing::warn!(
                                max_connections = ads.max_connections(),
                                "xDS connections at max_connections: new ones are closed at once (counted in axon_xds_refused_connections)"
                            );
                        }
                        drop(stream);
                        continue;
                    };
                    if std::mem::take(&mut refusing) {
                        tracing::info!("xDS connections below max_connections again");
                    }
                    let _ = stream.set_nodelay(true);
                    match &tls {
                        None => {
                            let (ads, drain) = (ads.clone(), drain.clone());
                            tokio::spawn(async move {
                                let _slot = slot;
                                connection(stream, None, ads, settings, drain).await
                            });
                        }
                        Some(tls) => {
                            let acceptor = tls.acceptor();
                            let (ads, drain) = (ads.clone(), drain.clone());
                            tokio::spawn(async move {
                                let _slot = slot;
                                let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                                match handshake.await {
                                    Ok(Ok(tls)) => {
                                        let identity = tls
                                            .get_ref()
                                            .1
                                            .peer_certificates()
                                            .and_then(|certs| certs.first())
                                            .and_then(super::tls::peer_identity);
                                        let authn = Authn {
                                            identity,
                                            token: None,
                                        };
                                        connection(tls, Some(authn), ads, settings, drain).await;
                                    }
                                    Ok(Err(e)) => tracing::debug!(error = %e, "xDS TLS handshake failed"),
                                    Err(_) => tracing::debug!("xDS TLS handshake timed out"),
                                }
                            });
                        }
                    }
                }
                Err(e) => {
                    ads.metrics().accept_errors.inc();
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(error = %e, "xDS accept failed; retrying every 100 ms (counted in axon_xds_accept_errors)");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What each request of one connection is given: its [`GoingAway`], its
/// [`ConnectionHandle`](super::ConnectionHandle) and, on the TLS port, its [`Authn`]; and
/// the count of its open streams.
struct ConnStreams {
    ads: AdsService,
    away: watch::Receiver<bool>,
    open: Arc<watch::Sender<usize>>,
    authn: Option<Authn>,
    /// What the transport keeps of this connection.
    handle: super::ConnectionHandle,
}

/// One open stream of a connection, for as long as its response is being written.
struct OpenStream(Arc<watch::Sender<usize>>);

impl OpenStream {
    fn new(open: &Arc<watch::Sender<usize>>) -> OpenStream {
        open.send_modify(|n| *n += 1);
        OpenStream(open.clone())
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

type Pumps = FuturesUnordered<Pump<OpenStream>>;

impl ConnStreams {
    /// Serves a new stream: an ADS stream's responses are pumped by the connection's task
    /// (`pumps`); an answer that must be waited for (the CA's) by a task of its own.
    fn serve(
        &self,
        request: http::Request<h2::RecvStream>,
        respond: h2::server::SendResponse<Bytes>,
        pumps: &mut Pumps,
    ) {
        let mut request = request.map(RecvBody::new);
        request
            .extensions_mut()
            .insert(GoingAway(self.away.clone()));
        request.extensions_mut().insert(self.handle.clone());
        if let Some(authn) = &self.authn {
            request.extensions_mut().insert(authn.clone());
        }
        let open = OpenStream::new(&self.open);
        match self.ads.inner.serve(request) {
            Served::Ads(body) => {
                let mut head = http::Response::new(());
                head.headers_mut().insert(
                    http::header::CONTENT_TYPE,
                    http::HeaderValue::from_static("application/grpc"),
                );
                pumps.extend(Pump::start(respond, head, Out::Ads(body), open));
            }
            Served::Now(response) => {
                let (head, body) = split(response);
                pumps.extend(Pump::start(respond, head, Out::Other(body), open));
            }
            Served::Later(answer) => {
                let mut respond = respond;
                tokio::spawn(async move {
                    // A call the client resets is given up (its token review, its signing).
                    let answer = {
                        let reset = std::future::poll_fn(|cx| respond.poll_reset(cx));
                        tokio::select! {
                            answer = answer => answer,
                            _ = reset => return,
                        }
                    };
                    let (head, body) = split(answer);
                    if let Some(pump) = Pump::start(respond, head, Out::Other(body), open) {
                        pump.await;
                    }
                });
            }
        }
    }
}

fn split(response: http::Response<Body>) -> (http::Response<()>, Body) {
    let (parts, body) = response.into_parts();
    (http::Response::from_parts(parts, ()), body)
}

/// The HTTP/2 settings of an xDS connection (as hyper's server had them: 16 KiB frames and
/// header lists, 400 KiB of send buffer per stream).
fn h2_builder(settings: &ConnSettings) -> h2::server::Builder {
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(settings.max_streams_per_connection)
        .initial_window_size(settings.receive_window)
        .initial_connection_window_size(settings.receive_window)
        .max_header_list_size(16 << 10)
        .max_send_buffer_size(400 << 10);
    builder
}

/// Pings the peer every `keepalive_interval`; resolves when one goes unanswered for
/// `keepalive_timeout` (or the connection cannot ping).
async fn keepalive(mut ping: h2::PingPong, settings: ConnSettings) -> Ended {
    loop {
        tokio::time::sleep(settings.keepalive_interval).await;
        if ping.send_ping(h2::Ping::opaque()).is_err() {
            return Ended::Unresponsive("the connection cannot ping");
        }
        let pong = std::future::poll_fn(|cx| ping.poll_pong(cx));
        match tokio::time::timeout(settings.keepalive_timeout, pong).await {
            Ok(Ok(_)) => {}
            Ok(Err(_)) => return Ended::Unresponsive("the connection failed"),
            Err(_) => return Ended::Unresponsive("a keepalive ping went unanswered"),
        }
    }
}

/// ±10 % of `age`.
fn jittered(age: Duration) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(age.as_nanos() as u64);
    let unit = (h.finish() % 10_000) as f64 / 10_000.0;
    age.mul_f64(0.9 + 0.2 * unit)
}

async fn connection<IO>(
    stream: IO,
    authn: Option<Authn>,
    ads: AdsService,
    settings: ConnSettings,
    drain: Drain,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let _live = drain.enter();
    let (away_tx, away) = watch::channel(false);
    let (open, open_rx) = watch::channel(0usize);
    let handle = ads.connection_handle();
    let close = handle.close.clone();
    let rebalance = Arc::new(Notify::new());
    let _aged = ads.enter_age(&handle, rebalance.clone(), open_rx.clone());
    let streams = ConnStreams {
        handle,
        ads,
        away,
        open: Arc::new(open),
        authn,
    };
    // What may end or close the connection besides its own end, polled only when one of its
    // own wakers fired (a FuturesUnordered): the connection's task is woken for every read
    // and write, and re-polling five timers and notifications each time cost ~3 % of a full
    // push's CPU.
    let outside = Control {
        settings: &settings,
        drain: &drain,
        close: &close,
        rebalance: &rebalance,
        open: open_rx,
    };
    let mut control = FuturesUnordered::new();
    // Boxed: the queue keeps a stub task the size of its future, besides the task itself.
    control.push(Box::pin(outside.wait()) as Pin<Box<dyn Future<Output = Ended> + Send + '_>>);
    // The client's preface and SETTINGS, unless the connection ends first (one that never
    // sends them is idle).
    let handshake = h2_builder(&settings).handshake::<_, Bytes>(stream);
    let mut conn = tokio::select! {
        conn = handshake => match conn {
            Ok(conn) => conn,
            Err(e) => {
                tracing::debug!(error = %e, "xDS connection ended before its HTTP/2 preface");
                return;
            }
        },
        Some(ended) = control.next() => {
            tracing::debug!("closing an xDS connection before its HTTP/2 preface: {}", ended.why());
            return;
        }
    };
    if let Some(ping) = conn.ping_pong() {
        control.push(Box::pin(keepalive(ping, settings)));
    }
    let mut pumps = Pumps::new();
    let grace = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(grace);
    let mut closing = false;
    loop {
        tokio::select! {
            biased;
            accepted = std::future::poll_fn(|cx| conn.poll_accept(cx)) => match accepted {
                Some(Ok((request, respond))) => streams.serve(request, respond, &mut pumps),
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "xDS connection ended");
                    return;
                }
                None => return,
            },
            Some(()) = pumps.next(), if !pumps.is_empty() => {}
            Some(ended) = control.next(), if !closing => match ended {
                Ended::Idle | Ended::Unresponsive(_) => {
                    // No stream to finish, or a peer that does not answer: closed at once.
                    tracing::debug!("closing an xDS connection: {}", ended.why());
                    return;
                }
                Ended::Close(why) => {
                    tracing::debug!("closing an xDS connection: {why}");
                    closing = true;
                    conn.graceful_shutdown();
                    let _ = away_tx.send(true);
                    grace
                        .as_mut()
                        .reset(tokio::time::Instant::now() + settings.close_grace);
                }
            },
            _ = &mut grace, if closing => {
                tracing::debug!("an xDS connection still open close_grace after GOAWAY; dropped");
                return;
            }
        }
    }
}

/// Why a connection's [`Control`] (or its keepalive) ended it.
enum Ended {
    /// No stream open for `idle_connection_timeout`: dropped at once.
    Idle,
    /// The peer left a keepalive ping unanswered: dropped at once.
    Unresponsive(&'static str),
    /// Closed gracefully (GOAWAY, then `close_grace`), for this reason.
    Close(&'static str),
}

impl Ended {
    fn why(&self) -> &'static str {
        match self {
            Ended::Idle => "no stream for idle_connection_timeout",
            Ended::Unresponsive(why) | Ended::Close(why) => why,
        }
    }
}

/// The conditions that end a connection from outside it.
struct Control<'a> {
    settings: &'a ConnSettings,
    drain: &'a Drain,
    close: &'a Notify,
    rebalance: &'a Notify,
    /// How many streams are open.
    open: watch::Receiver<usize>,
}

impl Control<'_> {
    async fn wait(mut self) -> Ended {
        let age = async {
            match self.settings.max_connection_age {
                Some(age) => tokio::time::sleep(jittered(age)).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(age);
        let turn = self.drain.my_turn();
        tokio::pin!(turn);
        // Runs while no stream is open (a connection that never opens one too).
        let idle = tokio::time::sleep(self.settings.idle_timeout);
        tokio::pin!(idle);
        let mut counting = true;
        loop {
            let streams = *self.open.borrow_and_update();
            tokio::select! {
                changed = self.open.changed(), if counting => {
                    counting = changed.is_ok();
                    if counting && *self.open.borrow() == 0 {
                        idle.as_mut().reset(tokio::time::Instant::now() + self.settings.idle_timeout);
                    }
                }
                _ = &mut idle, if streams == 0 => return Ended::Idle,
                _ = &mut age => return Ended::Close("max_connection_age"),
                _ = &mut turn => return Ended::Close("draining"),
                _ = self.close.notified() => {
                    return Ended::Close(
                        "it holds the most streams waiting for a first request, past max_pending_streams",
                    );
                }
                _ = self.rebalance.notified() => return Ended::Close("rebalancing across replicas"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_drain_spreads_the_open_connections_evenly() {
        let drain = Drain::default();
        let guards: Vec<_> = (0..4).map(|_| drain.enter()).collect();
        let start = tokio::time::Instant::now();
        let turns: Vec<_> = (0..4)
            .map(|_| {
                let drain = drain.clone();
                tokio::spawn(async move {
                    drain.my_turn().await;
                    start.elapsed()
                })
            })
            .collect();
        tokio::task::yield_now().await;
        drain.start(Duration::from_secs(4));
        let mut at = Vec::new();
        for t in turns {
            at.push(t.await.unwrap());
        }
        at.sort();
        assert_eq!(
            at,
            [0, 1, 2, 3].map(Duration::from_secs),
            "one every second over 4 s"
        );
        assert_eq!(drain.live(), 4);
        drop(guards);
        drain.drained().await;
        assert_eq!(drain.live(), 0);
    }

    #[test]
    fn connection_ages_are_jittered_within_ten_percent() {
        let age = Duration::from_secs(1800);
        let ages: std::collections::BTreeSet<_> = (0..50).map(|_| jittered(age)).collect();
        assert!(ages.len() > 40, "spread: {}", ages.len());
        assert!(
            ages.iter()
                .all(|a| *a >= age.mul_f64(0.9) && *a <= age.mul_f64(1.1))
        );
    }
}

/// The connection's HTTP/2 served on h2 by its one task: keepalive pings that a peer
/// answers keep it open, one left unanswered closes it.
#[cfg(test)]
mod keepalive_tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct NoStreams;

    impl super::super::StreamStarter for NoStreams {
        fn start(&self, _: super::super::AdsStream) {}
    }

    fn ads() -> AdsService {
        let limits = super::super::AdsLimits {
            max_streams: 10,
            queue_capacity: 4,
            max_requests_per_second: 100,
            max_stream_wait: Duration::from_secs(1),
            first_request_timeout: Duration::from_secs(10),
            message_timeout: Duration::from_secs(10),
            max_message_size: 1 << 20,
            max_request_buffer_bytes: 1 << 20,
            max_connection_request_buffer_bytes: 1 << 20,
            max_pending_request_buffer_bytes: 1 << 20,
            max_pending_streams: 10,
            pending_stream_grace: Duration::from_secs(1),
            max_connections: 10,
        };
        AdsService::new(Arc::new(NoStreams), limits, axon_metrics::Metrics::new())
    }

    fn settings() -> ConnSettings {
        ConnSettings {
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            max_connection_age: None,
            close_grace: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(24 * 3600),
            max_streams_per_connection: 10,
            receive_window: 1 << 20,
        }
    }

    /// Serves one connection over `io`, plaintext, with [`settings`].
    fn serve(io: tokio::io::DuplexStream) -> tokio::task::JoinHandle<()> {
        tokio::spawn(connection(io, None, ads(), settings(), Drain::default()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_that_answers_pings_stays_connected() {
        let (server, client) = tokio::io::duplex(1 << 20);
        let served = serve(server);
        let (_send, conn) = h2::client::handshake(client).await.expect("handshake");
        let client = tokio::spawn(conn);
        // Ten intervals, each ping answered by h2's client.
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert!(!served.is_finished(), "closed a connection that answers");
        client.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_ping_left_unanswered_closes_the_connection() {
        let (server, mut client) = tokio::io::duplex(1 << 20);
        let started = tokio::time::Instant::now();
        let served = serve(server);
        // The preface and an empty SETTINGS frame; then nothing is ever answered.
        client
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
            .await
            .unwrap();
        let reader = tokio::spawn(async move {
            let mut sink = [0u8; 4096];
            while client.read(&mut sink).await.is_ok_and(|n| n > 0) {}
        });
        tokio::time::timeout(Duration::from_secs(60), served)
            .await
            .expect("closed within the interval and the timeout")
            .unwrap();
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(40) && took < Duration::from_secs(41),
            "closed after {took:?}, not interval + timeout"
        );
        reader.abort();
    }
}
