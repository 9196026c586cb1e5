//! The Fleet actor: this replica among its peers. It knows the peers' monitoring addresses
//! ([`SetPeers`], from `--peers` or the peer Service's EndpointSlices), asks each for its
//! stream count every `peer_poll_interval` (through a [`PeerClient`] the wiring supplies:
//! the HTTP client lives with the HTTP servers), and rebalances: a replica above its share
//! of the fleet's streams closes its oldest connections ([`Shedder`], the transport's
//! `close_oldest`: GOAWAY, as at `max_connection_age`).
//!
//! The decisions are plain state: the peers and their answers in [`peers::PeerTable`], the
//! balance in [`balance::Balancer`]; this shell does the polling and the closing only.
//! Receives [`SetPeers`], [`GetReplica`] (`/fleet/replica`), [`GetPeers`] (the fleet view)
//! and [`StopBalancing`] (SIGTERM); sends nothing to other actors. Nothing else depends on
//! the peers: one that does not answer is left out of the balance and named in the fleet
//! view, and a replica with no peer answering serves every stream it gets.
//!
//! Two replicas of one name would write one Lease holder and one name in the fleet view:
//! the younger of the two, on seeing the other, says so and sends the reason on its
//! `name_taken` channel (the wiring stops serving on it); the older warns once.

pub mod balance;
pub mod peers;

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use axon_metrics::Metrics;
use axon_transport::AdsService;
pub use peers::{Me, PeerView, ReplicaReport};

/// A peer's answer to a GET: its JSON body, or why there is none.
pub type PeerAnswer = Pin<Box<dyn Future<Output = Result<serde_json::Value, String>> + Send>>;

/// GETs a path of a peer's monitoring address (implemented over HTTP by the wiring).
pub trait PeerClient: Send + Sync + 'static {
    fn get(&self, addr: &str, path: &str) -> PeerAnswer;
}

/// What the balance reads and closes of this replica's connections.
pub trait Shedder: Send + Sync + 'static {
    /// ADS streams served now.
    fn streams(&self) -> usize;
    /// Tells the `n` oldest connections with a stream to close; returns how many were told.
    fn close_oldest(&self, n: usize) -> usize;
}

impl Shedder for AdsService {
    fn streams(&self) -> usize {
        AdsService::streams(self)
    }

    fn close_oldest(&self, n: usize) -> usize {
        AdsService::close_oldest(self, n)
    }
}

/// The peers' monitoring addresses are now these (`HOST:PORT`).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct SetPeers(pub Vec<String>);

/// What this replica says of itself (`/fleet/replica`).
#[derive(Message)]
#[rtype(result = "ReplicaReport")]
pub struct GetReplica;

/// The known peers and their last answers (the fleet view asks them).
#[derive(Message)]
#[rtype(result = "Vec<PeerView>")]
pub struct GetPeers;

/// SIGTERM: this replica is draining; it closes nothing more to rebalance and says so.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopBalancing;

/// The Fleet actor's settings (from the limits file and the flags).
#[derive(Debug, Clone)]
pub struct FleetSettings {
    pub replica: String,
    pub poll_interval: Duration,
    pub max_peers: usize,
    pub slack: f64,
    pub rate: u32,
    pub settle: Duration,
}

pub struct Fleet {
    me: Me,
    interval: Duration,
    table: peers::PeerTable,
    balancer: balance::Balancer,
    shedder: Arc<dyn Shedder>,
    client: Arc<dyn PeerClient>,
    /// Peers with a poll in flight (each at most one, so at most `max_peers` at once).
    polling: HashSet<String>,
    draining: bool,
    metrics: Metrics,
    /// Told once, when this replica is the younger of two of one name.
    name_taken: Option<tokio::sync::oneshot::Sender<String>>,
    warned_name: bool,
}

impl Fleet {
    pub fn new(
        settings: FleetSettings,
        shedder: Arc<dyn Shedder>,
        client: Arc<dyn PeerClient>,
        metrics: Metrics,
    ) -> Fleet {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Fleet {
            me: Me {
                name: settings.replica,
                instance: random_instance(),
                started_unix_ms,
            },
            interval: settings.poll_interval,
            table: peers::PeerTable::new(settings.max_peers),
            balancer: balance::Balancer::new(settings.slack, settings.rate, settings.settle),
            shedder,
            client,
            polling: HashSet::new(),
            draining: false,
            metrics,
            name_taken: None,
            warned_name: false,
        }
    }

    /// Where to say that another replica, older, has this replica's name.
    pub fn on_name_taken(mut self, tx: tokio::sync::oneshot::Sender<String>) -> Fleet {
        self.name_taken = Some(tx);
        self
    }

    /// After each answer: another replica with this one's name?
    fn check_name(&mut self) {
        let Some((addr, other)) = self.table.name_taken(&self.me) else {
            return;
        };
        if self.me.younger_than(other) {
            let Some(tx) = self.name_taken.take() else {
                return;
            };
            let reason = format!(
                "the replica at {addr} has this replica's name {:?} and started first: two \
                 replicas of one name count each other as themselves and would both hold \
                 the Gateway status Lease; give each its own --replica-name (or POD_NAME)",
                self.me.name
            );
            tracing::error!(peer = %addr, replica = %self.me.name, "{reason}");
            self.draining = true;
            let _ = tx.send(reason);
        } else if !self.warned_name {
            self.warned_name = true;
            tracing::warn!(
                peer = %addr,
                replica = %self.me.name,
                "another replica has this replica's name; it started later and stops serving"
            );
        }
    }

    fn tick(&mut self, ctx: &mut Context<Self>) {
        self.rebalance();
        for addr in self.table.addresses() {
            if !self.polling.insert(addr.clone()) {
                continue;
            }
            let answer = self.client.get(&addr, "/fleet/replica");
            let timeout = self.interval;
            let poll = async move {
                match tokio::time::timeout(timeout, answer).await {
                    Ok(answer) => answer,
                    Err(_) => Err(format!("no answer within peer_poll_interval ({timeout:?})")),
                }
            };
            ctx.spawn(poll.into_actor(self).map(move |answer, act, _| {
                act.polling.remove(&addr);
                act.table.answered(&addr, answer);
                act.check_name();
                act.metrics
                    .fleet_peers
                    .set(act.table.counts(&act.me).len() as i64);
            }));
        }
    }

    fn rebalance(&mut self) {
        if self.draining {
            return;
        }
        let own = self.shedder.streams();
        let peers = self.table.counts(&self.me);
        let close = self
            .balancer
            .decide(tokio::time::Instant::now(), own, &peers);
        if close == 0 {
            return;
        }
        let closed = self.shedder.close_oldest(close);
        self.metrics.rebalance_closed.inc_by(closed as u64);
        let total = own + peers.iter().sum::<usize>();
        tracing::info!(
            streams = own,
            share = balance::even_share(total, peers.len() + 1),
            replicas = peers.len() + 1,
            closed,
            "above the even share of the fleet's streams: closing the oldest connections"
        );
    }
}

impl Actor for Fleet {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.interval, |act, ctx| act.tick(ctx));
    }
}

impl Handler<SetPeers> for Fleet {
    type Result = ();

    fn handle(&mut self, msg: SetPeers, ctx: &mut Context<Self>) {
        if self.table.set(msg.0) {
            tracing::info!(peers = ?self.table.addresses(), "peer replicas");
            self.tick(ctx);
        }
    }
}

impl Handler<GetReplica> for Fleet {
    type Result = MessageResult<GetReplica>;

    fn handle(&mut self, _: GetReplica, _: &mut Context<Self>) -> Self::Result {
        MessageResult(ReplicaReport {
            replica: self.me.name.clone(),
            streams: self.shedder.streams(),
            draining: self.draining,
            instance: self.me.instance.clone(),
            started_unix_ms: self.me.started_unix_ms,
        })
    }
}

impl Handler<GetPeers> for Fleet {
    type Result = MessageResult<GetPeers>;

    fn handle(&mut self, _: GetPeers, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.table.view(&self.me))
    }
}

impl Handler<StopBalancing> for Fleet {
    type Result = ();

    fn handle(&mut self, _: StopBalancing, _: &mut Context<Self>) {
        self.draining = true;
    }
}

/// 64 random bits as hex: std's hasher keys are drawn from the OS at random per process.
fn random_instance() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id() as u64);
    format!("{:016x}", h.finish())
}

#[cfg(test)]
mod tests;
