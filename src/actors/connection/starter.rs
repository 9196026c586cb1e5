//! Starts a ConnectionActor for each stream the transport admits ([`StreamStarter`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use actix::prelude::*;

use super::{ConnectionActor, Peers};
use axon_transport::{AdsStream, StreamStarter};
use axon_xds::protocol::names::NameSets;
use axon_xds::protocol::stream::{Protocol, StreamState};

/// What every ConnectionActor is started with.
pub struct ConnectionStarter {
    peers: Peers,
    write_timeout: Duration,
    names: Arc<NameSets>,
    arbiters: Vec<ArbiterHandle>,
    next_arbiter: AtomicUsize,
}

impl ConnectionStarter {
    pub fn new(peers: Peers, write_timeout: Duration, arbiters: Vec<ArbiterHandle>) -> Self {
        assert!(!arbiters.is_empty(), "at least one connection arbiter");
        ConnectionStarter {
            peers,
            write_timeout,
            names: Arc::default(),
            arbiters,
            next_arbiter: AtomicUsize::new(0),
        }
    }
}

impl StreamStarter for ConnectionStarter {
    fn start(&self, stream: AdsStream) {
        // On the arbiter that serves this stream's HTTP/2 connection (the server runs on the
        // connection arbiters): the stream's reads, writes and actor then share a thread.
        // Served from elsewhere (a plain tokio runtime), on the next connection arbiter.
        let arbiter = actix_rt::Arbiter::try_current().unwrap_or_else(|| {
            let i = self.next_arbiter.fetch_add(1, Ordering::Relaxed) % self.arbiters.len();
            self.arbiters[i].clone()
        });
        let peers = self.peers.clone();
        let (write_timeout, names) = (self.write_timeout, self.names.clone());
        ConnectionActor::start_in_arbiter(&arbiter, move |ctx| {
            let AdsStream {
                id,
                delta,
                requests,
                responses,
                slot,
                verified,
            } = stream;
            ctx.add_stream(requests);
            let protocol = Protocol::from_delta(delta);
            let stream = StreamState::new(protocol, names)
                .verified(verified)
                .clock(std::time::Instant::now);
            ConnectionActor::new(id, stream, responses, slot, peers, write_timeout)
        });
    }
}
