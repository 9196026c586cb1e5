//! `axon-load hostile`: healthy proxies beside hostile connections. Starts axon on a
//! generated mesh, syncs a baseline of N healthy proxies and times a push to them; then opens
//! the hostile connections ([`clients`]: TCP without the HTTP/2 preface, HTTP/2 streams that
//! never send a request, streams stalled inside a partial gRPC message) and keeps them open
//! by reopening whatever axon closes, with axon's own limits (its defaults unless `--limits`);
//! while they are open, N new healthy proxies (fresh node ids) sync and a second push goes to
//! all 2N. Samples axon's RSS and `axon_request_buffer_bytes` meanwhile ([`sampler`]); then
//! closes the hostile connections and pushes to the same 2N again (the control: as many
//! proxies, no hostile ones). Prints the comparison ([`report`]); the targets: every healthy proxy synced and ACKed each push, and
//! convergence with the hostile ones ≤ 2 × baseline + 100 ms.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;

use super::harness::{Axon, Fleet, Report, debounce_after, mib, ms};
use crate::client::{self, ClientConfig, Shared};
use crate::proc;
use axon_load::mesh::{Mesh, MeshArgs};

mod clients;
mod report;
mod sampler;

use clients::{Hostile, Plan};
use sampler::Sampler;

#[derive(Args, Debug, Clone)]
pub(crate) struct HostileArgs {
    /// Healthy proxies in the baseline; as many new ones connect while the hostile ones are open.
    #[arg(long, default_value_t = 200)]
    pub proxies: usize,
    #[command(flatten)]
    pub mesh: MeshArgs,
    /// TCP connections that never send the HTTP/2 preface.
    #[arg(long, default_value_t = 400)]
    pub no_preface: usize,
    /// HTTP/2 connections whose streams never send a request.
    #[arg(long, default_value_t = 300)]
    pub silent: usize,
    /// Streams on each silent connection (at most 1,000; axon's HTTP/2 server lets 200 be open
    /// at once on a connection, the others wait for one of them to end).
    #[arg(long, default_value_t = 4)]
    pub silent_streams: usize,
    /// HTTP/2 connections with one stream stalled inside a partial gRPC message.
    #[arg(long, default_value_t = 300)]
    pub stalled: usize,
    /// The size the stalled message's gRPC header announces, bytes (axon's default
    /// max_message_size, 4 MiB, is the largest it accepts).
    #[arg(long, default_value_t = 4 << 20)]
    pub announce: u32,
    /// The part of the stalled message's body sent, KiB (at most 16 MiB, and always less than
    /// announced).
    #[arg(long, default_value_t = 16)]
    pub stall_kib: usize,
    /// The hostile connections are opened evenly over this many seconds.
    #[arg(long, default_value_t = 10)]
    pub ramp: u64,
    /// How long the hostile connections are kept open from the first, seconds (past axon's
    /// idle_connection_timeout, so that every kind is closed and reopened at least once).
    #[arg(long, default_value_t = 75)]
    pub hold: u64,
    /// The axon binary [default: the `axon` beside this `axon-load`, as cargo builds them]
    #[arg(long)]
    pub axon: Option<PathBuf>,
    /// An actor-limits file for axon (its defaults without it).
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// Worker threads of the healthy proxies' runtime (the hostile ones have one of their own).
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// Bound on each wait, seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

/// The push to every healthy proxy: the latency of each one's last ACK after the write.
struct Push {
    /// Every proxy that ACKed, sorted, ms.
    all: Vec<f64>,
    /// The baseline proxies (index < N) alone.
    first: Vec<f64>,
    /// axon's CPU seconds from the write until the push was done (2 s of quiet included).
    cpu: f64,
}

/// After the ramp, how long the hostile connections stand alone before the new proxies come
/// (axon's RSS with them alone is the median over this time).
const SETTLE: Duration = Duration::from_secs(5);

/// What the run measured, for the report.
struct Figures {
    n: usize,
    base_sync: Vec<f64>,
    base_push: Push,
    base_rss: u64,
    idle_rss: u64,
    base_buffered: f64,
    new_sync: Vec<f64>,
    hostile_push: Push,
    errors: u64,
    retries: u64,
    samples: Vec<sampler::Sample>,
    /// When the new proxies were started, since the sampler started.
    new_at: Duration,
    ramp: Duration,
    window: Duration,
    cpu: f64,
    hwm: u64,
    log: report::LogTail,
    refused_metric: f64,
    /// `axon_rejected_streams` by reason, at the end.
    rejected_metric: String,
    /// `axon_request_errors` by reason, at the end.
    request_errors_metric: String,
    /// After the hostile connections closed: axon's RSS, and a push to the same 2N proxies.
    after_rss: u64,
    control_push: Push,
}

/// A work directory removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs it; returns whether every target was met.
pub(crate) fn run(args: HostileArgs) -> anyhow::Result<bool> {
    let mesh = Mesh::from_args(&args.mesh)?;
    anyhow::ensure!(
        mesh.virtual_services > 0,
        "the pushes edit VirtualServices: none in this mesh"
    );
    let n = args.proxies;
    anyhow::ensure!(n > 0, "--proxies must be at least 1");
    let timeout = Duration::from_secs(args.timeout);
    let ramp = Duration::from_secs(args.ramp);
    let hold = Duration::from_secs(args.hold.clamp(args.ramp + SETTLE.as_secs(), 600));
    let work =
        WorkDir(std::env::temp_dir().join(format!("axon-load-hostile-{}", std::process::id())));
    let config = work.0.join("mesh");
    std::fs::create_dir_all(&config)?;
    let files = mesh.write(&config)?;
    let limits = args.limits.as_deref();
    let debounce = debounce_after(limits);
    let buffer_bound = limit(limits, "max_request_buffer_bytes")
        .and_then(|v| v.parse().ok())
        .unwrap_or(64u64 << 20);
    println!("machine: {}", proc::machine());
    let load_start = load_average();
    println!(
        "mesh: {} services in {} namespaces, {} endpoints each, {} VirtualServices, {} \
         DestinationRules, Sidecars in {} namespaces ({files} files)",
        mesh.services,
        mesh.namespaces,
        mesh.endpoints,
        mesh.virtual_services,
        mesh.destination_rules,
        mesh.sidecar_namespaces(),
    );
    println!(
        "healthy: {n} SotW proxies, then {n} more with the hostile connections open; client threads {}",
        args.client_threads
    );
    let timeouts = [
        "first_request_timeout",
        "message_timeout",
        "idle_connection_timeout",
    ]
    .map(|k| {
        format!(
            "{k} {}",
            limit(limits, k).unwrap_or_else(|| default_limit(k).into())
        )
    });
    println!(
        "hostile: {} without the HTTP/2 preface, {} × {} silent streams, {} stalled at {} KiB of \
         an announced {} bytes; opened over {} s, held {} s; axon's limits {} ({}): what axon \
         closes is reopened at once, and counted",
        args.no_preface,
        args.silent,
        args.silent_streams,
        args.stalled,
        args.stall_kib,
        args.announce,
        ramp.as_secs(),
        hold.as_secs(),
        match limits {
            Some(p) => format!("from {}", p.display()),
            None => "(defaults)".to_string(),
        },
        timeouts.join(", "),
    );

    let healthy_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()?;
    let hostile_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let log_path = work.0.join("axon.log");
    let axon = Axon::start(args.axon.as_deref(), &config, limits, &log_path)?;
    let cfg = ClientConfig {
        addr: axon.xds,
        delta: false,
        namespaces: mesh.namespaces,
        window: 1 << 20,
    };
    let idle_rss = proc::rss_kib(axon.pid());
    // One fleet of 2N: the baseline are 0..N, the new ones N..2N (their own node ids).
    let mut fleet = Fleet {
        shared: Shared::new(2 * n, |_| false),
        tasks: Vec::new(),
    };

    // Baseline.
    let started = Instant::now();
    spawn(&healthy_rt, &mut fleet, &cfg, 0..n);
    wait_synced(&fleet.shared, n, timeout);
    let base_sync = sync_times(&fleet.shared, 0..n, started);
    fleet.wait_quiet(
        Duration::from_millis(500),
        Duration::from_millis(500),
        timeout,
    );
    let base_push = push(&axon, &mesh, &config, &fleet, n, 70, debounce, timeout)?;
    let base_rss = proc::rss_kib(axon.pid());
    let base_buffered = axon.metrics().get("axon_request_buffer_bytes", "");
    println!(
        "baseline: {}/{n} synced (max {}), push ACKed by {} (last {}), axon RSS {}",
        base_sync.len(),
        ms(client::quantile(&base_sync, 1.0)),
        base_push.all.len(),
        ms(client::quantile(&base_push.all, 1.0)),
        mib(base_rss)
    );

    // The hostile connections.
    let log_mark = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let plan = Plan {
        addr: axon.xds,
        no_preface: args.no_preface,
        silent: args.silent,
        silent_streams: args.silent_streams.clamp(1, 1000),
        stalled: args.stalled,
        stall: clients::stalled_message(args.announce, args.stall_kib.clamp(1, 16 << 10) << 10),
        ramp,
    };
    let hostile = Arc::new(Hostile::default());
    let cpu0 = proc::cpu_seconds(axon.pid());
    let sampler = Sampler::start(axon.pid(), axon.monitoring, hostile.clone());
    let opened = Instant::now();
    let tasks = clients::start(&hostile_rt, &plan, hostile.clone());
    // Once every hostile connection is open and the first reopenings are under way.
    std::thread::sleep((opened + ramp + SETTLE).saturating_duration_since(Instant::now()));
    println!(
        "hostile: {} connections and {} streams held {:.0} s after the first",
        hostile.held(),
        hostile.streams_held(),
        opened.elapsed().as_secs_f64()
    );
    let new_started = Instant::now();
    let new_at = new_started - opened;
    spawn(&healthy_rt, &mut fleet, &cfg, n..2 * n);
    wait_synced(&fleet.shared, 2 * n, timeout);
    let new_sync = sync_times(&fleet.shared, n..2 * n, new_started);
    fleet.wait_quiet(
        Duration::from_millis(500),
        Duration::from_millis(500),
        timeout,
    );
    let hostile_push = push(&axon, &mesh, &config, &fleet, n, 60, debounce, timeout)?;
    println!(
        "with hostile: {}/{n} new synced (max {}), push ACKed by {} (last {}); holding to {} s",
        new_sync.len(),
        ms(client::quantile(&new_sync, 1.0)),
        hostile_push.all.len(),
        ms(client::quantile(&hostile_push.all, 1.0)),
        hold.as_secs()
    );
    std::thread::sleep((opened + hold).saturating_duration_since(Instant::now()));
    let window = opened.elapsed();
    let samples = sampler.stop();
    let cpu = proc::cpu_seconds(axon.pid()) - cpu0;
    let metrics = axon.metrics();
    let mut figures = Figures {
        n,
        base_sync,
        base_push,
        base_rss,
        idle_rss,
        base_buffered,
        new_sync,
        hostile_push,
        errors: fleet.shared.errors.load(Ordering::Relaxed),
        retries: fleet.shared.retries.load(Ordering::Relaxed),
        samples,
        new_at,
        ramp,
        window,
        cpu,
        hwm: proc::hwm_kib(axon.pid()),
        log: report::LogTail::read(&log_path, log_mark),
        refused_metric: metrics.get("axon_xds_refused_connections", ""),
        rejected_metric: by_reason(&metrics, "axon_rejected_streams"),
        request_errors_metric: by_reason(&metrics, "axon_request_errors"),
        after_rss: 0,
        control_push: Push {
            all: Vec::new(),
            first: Vec::new(),
            cpu: 0.0,
        },
    };
    // The control: the hostile connections closed, the same 2N proxies pushed to again.
    for t in &tasks {
        t.abort();
    }
    drop(hostile_rt);
    std::thread::sleep(Duration::from_secs(2));
    figures.after_rss = proc::rss_kib(axon.pid());
    figures.control_push = push(&axon, &mesh, &config, &fleet, n, 50, debounce, timeout)?;
    println!(
        "hostile closed: axon RSS {}; push ACKed by {} (last {})",
        mib(figures.after_rss),
        figures.control_push.all.len(),
        ms(client::quantile(&figures.control_push.all, 1.0)),
    );
    for e in fleet.shared.first_errors(5) {
        println!("  healthy proxy error: {e}");
    }
    fleet.stop();
    drop(healthy_rt);
    drop(axon);
    let kept = std::env::temp_dir().join("axon-load-last-hostile-axon.log");
    if std::fs::copy(&log_path, &kept).is_ok() {
        println!("axon's log: {}", kept.display());
    }
    let mut report = Report { rows: Vec::new() };
    report::fill(&mut report, &figures, &plan, &hostile, buffer_bound);
    // Other work on the machine shows in the timings: say how busy it was.
    report.add(
        "machine load average (1 min) at the start / end",
        format!("{load_start} / {}", load_average()),
    );
    for line in &figures.log.distinct {
        println!("  axon warned during the hostile window: {line}");
    }
    println!();
    report.print();
    Ok(report.rows.iter().all(|r| r.met != Some(false)))
}

fn spawn(
    rt: &tokio::runtime::Runtime,
    fleet: &mut Fleet,
    cfg: &ClientConfig,
    range: std::ops::Range<usize>,
) {
    for j in range {
        let task = rt.spawn(client::run(j, cfg.clone(), fleet.shared.clone()));
        fleet.tasks.push(task);
    }
}

/// Waits until `n` proxies synced, or every started one synced or failed, within `timeout`.
fn wait_synced(shared: &Shared, n: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let synced = shared.synced.load(Ordering::Relaxed) as usize;
        if synced >= n || synced + shared.errors.load(Ordering::Relaxed) as usize >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Sync times of proxies `range`, sorted, ms from `since`.
fn sync_times(shared: &Shared, range: std::ops::Range<usize>, since: Instant) -> Vec<f64> {
    let since = shared.us(since);
    let mut v: Vec<f64> = shared.proxies[range]
        .iter()
        .map(|p| p.synced_us.load(Ordering::Relaxed))
        .filter(|&t| t > 0)
        .map(|t| t.saturating_sub(since) as f64 / 1000.0)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// A push to every proxy: one VirtualService per namespace rewritten with `weight`; done when
/// neither the ACKs nor axon's pushes moved for 2 s.
#[allow(clippy::too_many_arguments)]
fn push(
    axon: &Axon,
    mesh: &Mesh,
    config: &Path,
    fleet: &Fleet,
    n: usize,
    weight: usize,
    debounce: Duration,
    timeout: Duration,
) -> anyhow::Result<Push> {
    let cpu0 = proc::cpu_seconds(axon.pid());
    let written = Instant::now();
    for i in 0..mesh.namespaces.min(mesh.virtual_services) {
        std::fs::write(Mesh::vs_path(config, i), mesh.virtual_service(i, weight))?;
    }
    let pushes = || axon.metrics().pushes().iter().sum::<f64>();
    fleet.wait_quiet_with(
        debounce + Duration::from_secs(1),
        Duration::from_secs(2),
        timeout,
        pushes,
    );
    let cpu = proc::cpu_seconds(axon.pid()) - cpu0;
    let since = fleet.shared.us(written);
    let acks = client::acks_after(&fleet.shared, since);
    let lat = |(_, last, _): &(usize, u64, [u32; 4])| (last - since) as f64 / 1000.0;
    let mut all: Vec<f64> = acks.iter().map(lat).collect();
    let mut first: Vec<f64> = acks.iter().filter(|a| a.0 < n).map(lat).collect();
    all.sort_by(f64::total_cmp);
    first.sort_by(f64::total_cmp);
    Ok(Push { all, first, cpu })
}

/// The 1-minute load average (/proc/loadavg), or "?".
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// A key's raw value in the limits file, if it sets it.
fn limit(limits: Option<&Path>, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(limits?).ok()?;
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
}

fn default_limit(key: &str) -> &'static str {
    match key {
        "first_request_timeout" | "message_timeout" => "10s",
        "idle_connection_timeout" => "60s",
        _ => "?",
    }
}

/// A `{reason}` family's non-zero counts, `reason N, ...`.
fn by_reason(metrics: &super::harness::Metrics, family: &str) -> String {
    let counts: Vec<String> = metrics
        .labels(family)
        .into_iter()
        .filter(|(_, n)| *n > 0.0)
        .map(|(labels, n)| format!("{labels} {n:.0}"))
        .collect();
    if counts.is_empty() {
        "0".to_string()
    } else {
        counts.join(", ")
    }
}
