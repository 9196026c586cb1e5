//! The noisy-namespace scenario (issue 18's fair debounce): one namespace's VirtualService is
//! rewritten every 50 ms for `--noisy-seconds` (a controller in a loop), while every 3 s a
//! single VirtualService of another namespace is edited and timed from its write to the last
//! ACK of that namespace's proxies. Without fairness those edits wait for the noisy
//! namespace's `debounce_max`; with it, `debounce_after` plus the push.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::client::{self, Shared};
use axon_load::mesh::Mesh;

/// The edits' latencies, ms (from the write to the last ACK of the edited namespace's
/// proxies), and how many noisy writes were made.
pub(super) struct Noisy {
    pub(super) latencies: Vec<f64>,
    pub(super) noisy_writes: usize,
}

pub(super) fn run(
    shared: &Shared,
    mesh: &Mesh,
    config: &std::path::Path,
    proxies: usize,
    seconds: u64,
    timeout: Duration,
) -> anyhow::Result<Noisy> {
    anyhow::ensure!(
        mesh.namespaces >= 2 && mesh.virtual_services >= mesh.namespaces,
        "the noisy scenario needs two namespaces and a VirtualService in each"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let noisy = {
        let (stop, mesh, config) = (stop.clone(), mesh.clone(), config.to_path_buf());
        std::thread::spawn(move || -> anyhow::Result<usize> {
            let mut writes = 0;
            while !stop.load(Ordering::Relaxed) {
                // VirtualService 0 lives in ns-0.
                std::fs::write(
                    Mesh::vs_path(&config, 0),
                    mesh.virtual_service(0, 10 + writes % 80),
                )?;
                writes += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Ok(writes)
        })
    };
    let started = Instant::now();
    let mut latencies = Vec::new();
    let mut round = 0;
    // Let the noise run a while before the first timed edit.
    std::thread::sleep(Duration::from_secs(1));
    while started.elapsed() < Duration::from_secs(seconds) {
        // VirtualService k lives in ns-k.
        let k = 1 + round % (mesh.namespaces - 1);
        let members: Vec<usize> = (0..proxies).filter(|j| j % mesh.namespaces == k).collect();
        let written = Instant::now();
        std::fs::write(
            Mesh::vs_path(config, k),
            mesh.virtual_service(k, 20 + round % 60),
        )?;
        let since = shared.us(written);
        let deadline = written + timeout;
        let last = loop {
            let acks = client::acks_after(shared, since);
            let of_k: Vec<u64> = acks
                .iter()
                .filter(|(j, _, _)| j % mesh.namespaces == k)
                .map(|(_, last, _)| *last)
                .collect();
            if of_k.len() >= members.len() || Instant::now() >= deadline {
                break of_k.into_iter().max();
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        match last {
            Some(last) => latencies.push((last - since) as f64 / 1000.0),
            None => latencies.push(f64::INFINITY),
        }
        round += 1;
        std::thread::sleep(Duration::from_secs(3).saturating_sub(written.elapsed()));
    }
    stop.store(true, Ordering::Relaxed);
    let noisy_writes = noisy
        .join()
        .map_err(|_| anyhow::anyhow!("the noisy writer panicked"))??;
    latencies.sort_by(f64::total_cmp);
    Ok(Noisy {
        latencies,
        noisy_writes,
    })
}
