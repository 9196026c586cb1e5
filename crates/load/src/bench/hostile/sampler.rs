//! Samples axon while the hostile connections are open, on a thread of its own: its RSS
//! (/proc, every 250 ms), `axon_request_buffer_bytes` (its `/metrics`, every 500 ms; whether
//! the page answered is kept too) and how many hostile connections and streams are held.
//! At most [`MAX_SAMPLES`] samples are kept.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::clients::Hostile;
use crate::bench::harness::{Metrics, http_get};
use crate::proc;

const MAX_SAMPLES: usize = 8192;
const EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, Copy)]
pub(super) struct Sample {
    /// Since the sampler started.
    pub at: Duration,
    pub rss_kib: u64,
    /// `None` when `/metrics` was not read at this sample; `Some(None)` when it did not answer.
    pub buffered: Option<Option<f64>>,
    pub held: i64,
    pub streams: i64,
}

pub(super) struct Sampler {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    pub(super) fn start(pid: u32, monitoring: SocketAddr, hostile: Arc<Hostile>) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut out = Vec::new();
            let mut tick = 0u64;
            while !stopped.load(Ordering::Relaxed) && out.len() < MAX_SAMPLES {
                let buffered = tick.is_multiple_of(2).then(|| {
                    http_get(monitoring, "/metrics")
                        .filter(|(status, _)| *status == 200)
                        .map(|(_, body)| Metrics(body).get("axon_request_buffer_bytes", ""))
                });
                out.push(Sample {
                    at: started.elapsed(),
                    rss_kib: proc::rss_kib(pid),
                    buffered,
                    held: hostile.held(),
                    streams: hostile.streams_held(),
                });
                tick += 1;
                let next = started + EVERY * tick as u32;
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            out
        });
        Sampler { stop, thread }
    }

    pub(super) fn stop(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// Peak and median of `v` (unsorted); `(0, 0)` if empty.
pub(super) fn peak_median<T: Copy + PartialOrd + Default>(mut v: Vec<T>) -> (T, T) {
    if v.is_empty() {
        return (T::default(), T::default());
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    (v[v.len() - 1], v[v.len() / 2])
}
