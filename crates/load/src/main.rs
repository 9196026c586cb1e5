//! `axon-load`: the load tool, mesh generator and benchmarks for axon.
//!
//! - `gen-mesh`: writes a synthetic mesh's config directory ([`mesh`]).
//! - `run`: opens N ADS streams to a running axon, as Envoys do, and reports their sync.
//! - `bench`: starts axon on a generated mesh, runs every scenario and the floor, prints
//!   the figures ([`mod@bench`]).
//! - `files`: a large config directory: load time, peak RSS, `debounce_max` under a burst of
//!   file events ([`bench::files`]).
//! - `hostile`: healthy proxies beside 1,000 hostile connections: sync, push convergence,
//!   axon's RSS and buffered bytes ([`bench::hostile`]).
//! - `replay`: the floor's replay server ([`floor`]), started by `bench`.

mod bench;
mod client;
mod floor;
use axon_load::mesh;
mod proc;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "axon-load",
    about = "Load tool, mesh generator and benchmarks for axon"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write a synthetic mesh's config directory.
    GenMesh {
        #[command(flatten)]
        mesh: mesh::MeshArgs,
        /// Output directory (created).
        #[arg(long)]
        out: PathBuf,
    },
    /// Connect N simulated proxies to a running axon and report their sync.
    Run {
        /// axon's ADS address.
        #[arg(long)]
        xds: SocketAddr,
        #[arg(long, default_value_t = 100)]
        proxies: usize,
        /// Namespaces the proxies spread over (ns-0 … ns-(K-1)).
        #[arg(long, default_value_t = 10)]
        namespaces: usize,
        #[arg(long)]
        delta: bool,
        /// Keep the streams open this many seconds after the sync, printing ACK counts.
        #[arg(long, default_value_t = 0)]
        hold: u64,
        #[arg(long, default_value_t = 1)]
        client_threads: usize,
        #[arg(long, default_value_t = 120)]
        timeout: u64,
        /// Reconnect every proxy whose stream ends, for ever (as Envoy does), resuming with
        /// what it has, and keep running until killed, printing once a second `reconnects N
        /// acks M resume_bytes B resume_resources R resumed S full_resync_bytes F`: the bytes
        /// and resources received on resumed streams, their count, and what full re-pushes
        /// to them would have cost (each proxy's first-sync bytes, per resumed stream).
        #[arg(long)]
        reconnect: bool,
    },
    /// Start axon on a generated mesh, run the scenarios and the floor, print the figures.
    Bench(bench::BenchArgs),
    /// Start axon on a directory of N files, time the load and a burst of file events.
    Files(bench::files::FilesArgs),
    /// Start axon, sync healthy proxies, then open hostile connections beside them and compare.
    Hostile(bench::hostile::HostileArgs),
    /// The floor's replay server (started by `bench`).
    Replay {
        #[arg(long)]
        views: PathBuf,
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
        #[arg(long)]
        delta: bool,
    },
}

fn main() -> anyhow::Result<ExitCode> {
    match Cli::parse().command {
        Cmd::GenMesh { mesh, out } => {
            let m = mesh::Mesh::from_args(&mesh)?;
            let files = m.write(&out)?;
            println!("{files} files in {} ({m:?})", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Run {
            xds,
            proxies,
            namespaces,
            delta,
            hold,
            client_threads,
            timeout,
            reconnect,
        } => run(
            xds,
            proxies,
            namespaces,
            delta,
            hold,
            client_threads,
            timeout,
            reconnect,
        ),
        Cmd::Bench(args) => Ok(if bench::run(args)? {
            ExitCode::SUCCESS
        } else {
            println!("not every proxy synced");
            ExitCode::from(1)
        }),
        Cmd::Files(args) => Ok(if bench::files::run(args)? {
            ExitCode::SUCCESS
        } else {
            println!("a target was not met");
            ExitCode::from(1)
        }),
        Cmd::Hostile(args) => Ok(if bench::hostile::run(args)? {
            ExitCode::SUCCESS
        } else {
            println!("a target was not met");
            ExitCode::from(1)
        }),
        Cmd::Replay { views, addr, delta } => {
            floor::serve(&views, addr, delta)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    xds: SocketAddr,
    n: usize,
    namespaces: usize,
    delta: bool,
    hold: u64,
    threads: usize,
    timeout: u64,
    reconnect: bool,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()?;
    let cfg = client::ClientConfig {
        addr: xds,
        delta,
        namespaces,
        window: 1 << 20,
    };
    let rss0 = proc::self_rss_kib();
    let shared = client::Shared::new(n, |_| false);
    let started = Instant::now();
    for j in 0..n {
        if reconnect {
            rt.spawn(client::run_forever(j, cfg.clone(), shared.clone()));
        } else {
            rt.spawn(client::run(j, cfg.clone(), shared.clone()));
        }
    }
    let deadline = started + Duration::from_secs(timeout);
    while shared.synced.load(Ordering::Relaxed) + shared.errors.load(Ordering::Relaxed) < n as u64
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let times = client::sync_times_ms(&shared, shared.us(started));
    let errors = shared.errors.load(Ordering::Relaxed);
    println!(
        "{}/{n} synced in {:.0} ms (p50 {:.0} ms, p99 {:.0} ms), {errors} errors; tool RSS {:.1} KiB per stream",
        times.len(),
        client::quantile(&times, 1.0),
        client::quantile(&times, 0.5),
        client::quantile(&times, 0.99),
        proc::self_rss_kib().saturating_sub(rss0) as f64 / n.max(1) as f64
    );
    for e in shared.first_errors(5) {
        println!("  error: {e}");
    }
    for _ in 0..hold {
        std::thread::sleep(Duration::from_secs(1));
        println!(
            "acks {} errors {}",
            shared.total_acks.load(Ordering::Relaxed),
            shared.errors.load(Ordering::Relaxed)
        );
    }
    if reconnect {
        loop {
            std::thread::sleep(Duration::from_secs(1));
            let (bytes, resources, full, resumed) = client::resume_totals(&shared);
            println!(
                "reconnects {} acks {} resume_bytes {bytes} resume_resources {resources} \
                 resumed {resumed} full_resync_bytes {full}",
                shared.retries.load(Ordering::Relaxed),
                shared.total_acks.load(Ordering::Relaxed)
            );
        }
    }
    Ok(if times.len() == n {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
