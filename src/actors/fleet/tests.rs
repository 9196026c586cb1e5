//! The Fleet actor with a scripted peer client and a counting shedder, in paused time: it
//! polls its peers, leaves out the one that does not answer, and sheds at the rate.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use super::*;

/// Answers `/fleet/replica` for the peers it knows; the others are refused.
#[derive(Default)]
struct Scripted(Mutex<HashMap<String, serde_json::Value>>);

impl PeerClient for Scripted {
    fn get(&self, addr: &str, path: &str) -> PeerAnswer {
        assert_eq!(path, "/fleet/replica");
        let answer = self
            .0
            .lock()
            .unwrap()
            .get(addr)
            .cloned()
            .ok_or_else(|| "connection refused".to_string());
        Box::pin(async move { answer })
    }
}

/// Holds `streams`; each close takes one away, as a proxy that leaves.
#[derive(Default)]
struct Counting {
    streams: AtomicUsize,
    closed: AtomicUsize,
}

impl Shedder for Counting {
    fn streams(&self) -> usize {
        self.streams.load(Ordering::SeqCst)
    }

    fn close_oldest(&self, n: usize) -> usize {
        self.streams.fetch_sub(n, Ordering::SeqCst);
        self.closed.fetch_add(n, Ordering::SeqCst);
        n
    }
}

#[actix_rt::test]
async fn the_actor_polls_leaves_out_the_silent_and_sheds_at_the_rate() {
    tokio::time::pause();
    let client = Arc::new(Scripted::default());
    client.0.lock().unwrap().insert(
        "b:1".into(),
        json!({"replica": "b", "streams": 0, "draining": false}),
    );
    let shedder = Arc::new(Counting::default());
    shedder.streams.store(200, Ordering::SeqCst);
    let fleet = Fleet::new(
        FleetSettings {
            replica: "a".into(),
            poll_interval: Duration::from_secs(1),
            max_peers: 8,
            slack: 0.1,
            rate: 10,
            settle: Duration::ZERO,
        },
        shedder.clone(),
        client.clone(),
        Metrics::new(),
    )
    .start();
    fleet.do_send(SetPeers(vec!["b:1".into(), "c:1".into()]));
    // Let the first polls answer.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    let peers = fleet.send(GetPeers).await.unwrap();
    assert_eq!(peers.len(), 2);
    assert_eq!(peers[0].report.as_ref().map(|r| r.streams), Some(0));
    assert_eq!(peers[1].error.as_deref(), Some("connection refused"));
    // Two replicas count (c is left out): 200 of 200 held, share 100; 10 a second.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        shedder.closed.load(Ordering::SeqCst),
        10,
        "one tick: the rate"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(shedder.closed.load(Ordering::SeqCst), 40, "four ticks");
    let me = fleet.send(GetReplica).await.unwrap();
    assert_eq!(
        (me.replica.as_str(), me.streams, me.draining),
        ("a", 160, false)
    );
    // Draining: nothing more is closed, and it says so.
    fleet.send(StopBalancing).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(shedder.closed.load(Ordering::SeqCst), 40);
    assert!(fleet.send(GetReplica).await.unwrap().draining);
}
