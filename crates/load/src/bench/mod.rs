//! The benchmark scenarios, run in sequence against an `axon serve` this tool starts on free
//! ports with a generated mesh, then against the replay server (the floor); prints a table.
//!
//! Every wait is bounded. Times are from this process's clock: a file write, then the
//! simulated proxies' ACKs.

use std::path::PathBuf;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Args;

use crate::client::{self, ClientConfig, Shared};
use crate::floor;
use crate::proc;
use axon_load::mesh::{Mesh, MeshArgs};

pub(crate) mod files;
mod harness;
pub(crate) mod hostile;
mod noisy;
mod replay_run;
mod summary;
mod targets;
use harness::*;

#[derive(Args, Debug, Clone)]
pub(crate) struct BenchArgs {
    /// Simulated proxies; a list (`2000,10000`) runs the bench once per size, one after the
    /// other, and prints one table with a column for each.
    #[arg(long, value_delimiter = ',', default_value = "2000")]
    pub proxies: Vec<usize>,
    #[command(flatten)]
    pub mesh: MeshArgs,
    /// Use Delta ADS instead of state of the world.
    #[arg(long)]
    pub delta: bool,
    /// A Sidecar `./*` in every namespace (sidecar share 1).
    #[arg(long)]
    pub sidecars: bool,
    /// The axon binary [default: the `axon` beside this `axon-load`, as cargo builds them]
    #[arg(long)]
    pub axon: Option<PathBuf>,
    /// An actor-limits file for axon (its defaults without it).
    #[arg(long)]
    pub limits: Option<PathBuf>,
    /// Worker threads of the simulated proxies' runtime.
    #[arg(long, default_value_t = 1)]
    pub client_threads: usize,
    /// HTTP/2 receive window of each simulated proxy (stream and connection), bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub window: u32,
    /// Scenarios to run, in this order: storm, vs, eds, burst, noisy, push, floor (`noisy`,
    /// a namespace rewritten every 50 ms beside timed single edits elsewhere, is not in the
    /// default list: it takes `--noisy-seconds`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "storm,vs,eds,burst,push,floor"
    )]
    pub scenarios: Vec<String>,
    /// How long the noisy namespace keeps changing, seconds.
    #[arg(long, default_value_t = 30)]
    pub noisy_seconds: u64,
    /// Bound on each scenario's wait, seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

/// Runs the benchmark at each fleet size; returns whether every proxy synced in every run
/// (the CI check). Ends with the table of all sizes ([`summary`]).
pub(crate) fn run(args: BenchArgs) -> anyhow::Result<bool> {
    let mut all_ok = true;
    let mut runs = Vec::new();
    for &n in &args.proxies {
        let mut summary = summary::Summary {
            proxies: n,
            sidecars: args.sidecars || args.mesh.sidecar_share.is_some_and(|s| s >= 1.0),
            delta: args.delta,
            client_threads: args.client_threads,
            ..Default::default()
        };
        all_ok &= run_one(&args, n, &mut summary)?;
        runs.push(summary);
    }
    summary::print(&runs);
    Ok(all_ok)
}

/// One run at `n` proxies: axon, then its floor; prints its detailed figures and fills `sum`.
fn run_one(args: &BenchArgs, n: usize, sum: &mut summary::Summary) -> anyhow::Result<bool> {
    let mut mesh = Mesh::from_args(&args.mesh)?;
    if args.sidecars {
        mesh.sidecar_share = 1.0;
    }
    let want = |s: &str| args.scenarios.iter().any(|x| x == s);
    let timeout = Duration::from_secs(args.timeout);
    let debounce = debounce_after(args.limits.as_deref());
    sum.debounce_ms = debounce.as_secs_f64() * 1000.0;
    let work = std::env::temp_dir().join(format!("axon-load-{}", std::process::id()));
    let config = work.join("mesh");
    std::fs::create_dir_all(&config)?;
    let files = mesh.write(&config)?;
    println!("machine: {}", proc::machine());
    println!(
        "mesh: {} services in {} namespaces, {} endpoints each, {} VirtualServices, {} \
         DestinationRules, Sidecars in {} namespaces ({files} files in {})",
        mesh.services,
        mesh.namespaces,
        mesh.endpoints,
        mesh.virtual_services,
        mesh.destination_rules,
        mesh.sidecar_namespaces(),
        config.display()
    );
    println!(
        "proxies: {n} ({}), one TCP connection and one stream each; client threads {}; debounce_after {debounce:?}",
        if args.delta { "Delta" } else { "SotW" },
        args.client_threads
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.client_threads.max(1))
        .enable_all()
        .build()?;
    let mut report = Report { rows: Vec::new() };
    let mut all_ok = true;

    let limits = match &args.limits {
        Some(path) => Some(path.clone()),
        None => targets::limits_for(n, &work)?,
    };
    let axon = Axon::start(
        args.axon.as_deref(),
        &config,
        limits.as_deref(),
        &work.join("axon.log"),
    )?;
    let cfg = ClientConfig {
        addr: axon.xds,
        delta: args.delta,
        namespaces: mesh.namespaces,
        window: args.window,
    };
    let rss_idle = proc::rss_kib(axon.pid());
    let tool_rss_idle = proc::self_rss_kib();
    report.add("axon RSS, no proxy", mib(rss_idle));

    // Cold storm: all at once; the first proxy of each namespace keeps what it gets.
    let cpu0 = proc::cpu_seconds(axon.pid());
    let tool_cpu0 = proc::cpu_seconds(std::process::id());
    let started = Instant::now();
    let fleet = Fleet::start(&rt, n, &cfg, |j| j < mesh.namespaces);
    let all = fleet.wait_synced(timeout);
    let storm_ms = started.elapsed().as_secs_f64() * 1000.0;
    let storm_cpu = proc::cpu_seconds(axon.pid()) - cpu0;
    let tool_cpu = proc::cpu_seconds(std::process::id()) - tool_cpu0;
    let times = client::sync_times_ms(&fleet.shared, fleet.shared.us(started));
    let errors = fleet.shared.errors.load(Ordering::Relaxed);
    let retries = fleet.shared.retries.load(Ordering::Relaxed);
    let synced = times.len();
    all_ok &= all && errors == 0;
    let storm_bytes: u64 = fleet
        .shared
        .proxies
        .iter()
        .map(|p| p.bytes.load(Ordering::Relaxed))
        .sum();
    sum.storm_ms = storm_ms;
    sum.storm_axon_cpu = storm_cpu;
    sum.storm_tool_cpu = tool_cpu;
    sum.storm_mib = client::bytes_by_type(&fleet.shared).map(|b| b as f64 / 1048576.0);
    println!(
        "storm: {synced}/{n} synced in {storm_ms:.0} ms, {errors} errors, {retries} reconnects, {:.1} MiB of responses, axon CPU {storm_cpu:.2} s",
        storm_bytes as f64 / 1048576.0
    );
    for e in fleet.shared.first_errors(5) {
        println!("  error: {e}");
    }
    let (p50, p99, max) = (
        client::quantile(&times, 0.5),
        client::quantile(&times, 0.99),
        client::quantile(&times, 1.0),
    );
    let metrics = axon.metrics();
    println!(
        "  axon: pilot_xds {} pushes {:?} rebuilds {}",
        metrics.get("pilot_xds", ""),
        metrics.pushes(),
        metrics.rebuilds()
    );
    fleet.wait_quiet(
        Duration::from_millis(500),
        Duration::from_millis(500),
        timeout,
    );
    let rss_n = proc::rss_kib(axon.pid());
    sum.rss_mib = rss_n as f64 / 1024.0;
    let tool_rss_n = proc::self_rss_kib();
    report.add(
        "proxies synced / errors / reconnects",
        format!("{synced}/{n}, {errors} errors, {retries} reconnects"),
    );
    report.add(
        "cold storm: bytes of responses",
        format!("{:.1} MiB", storm_bytes as f64 / 1048576.0),
    );
    report.add("cold storm: axon CPU", format!("{storm_cpu:.2} s"));
    report.add("cold storm: load tool CPU", format!("{tool_cpu:.2} s"));
    report.add(
        "cold storm: p50 / p99 / max sync",
        format!("{} / {} / {}", ms(p50), ms(p99), ms(max)),
    );
    report.check(
        "cold storm: p99 / p50",
        format!("{:.2}", p99 / p50),
        "≤ 3",
        p99 / p50 <= 3.0,
    );
    let (rss_target, rss_bound) = targets::rss(n);
    report.check(
        format!("axon RSS with {n} proxies"),
        mib(rss_n),
        rss_target,
        rss_n * 1024 <= rss_bound,
    );
    report.add(
        "axon peak RSS (VmHWM) during the storm",
        mib(proc::hwm_kib(axon.pid())),
    );
    report.add(
        "axon RSS per proxy",
        format!(
            "{:.1} KiB",
            rss_n.saturating_sub(rss_idle) as f64 / n as f64
        ),
    );
    report.add(
        "load tool RSS per stream",
        format!(
            "{:.1} KiB ({} → {})",
            tool_rss_n.saturating_sub(tool_rss_idle) as f64 / n as f64,
            mib(tool_rss_idle),
            mib(tool_rss_n)
        ),
    );

    // Edits. Each writes files, waits for quiet, and measures from the write.
    // An edit is done when neither the proxies' ACKs nor axon's pilot_xds_pushes moved for
    // 2 s (a slow axon pauses between pushes).
    let min_wait = debounce + Duration::from_millis(1000);
    let quiet = Duration::from_millis(2000);
    let server_pushes = || axon.metrics().pushes().iter().sum::<f64>();
    let mut vs_edit = None;
    let mut eds_edit = None;
    if want("vs") {
        let m0 = axon.metrics();
        let bytes0 = client::bytes_by_type(&fleet.shared);
        let written = Instant::now();
        std::fs::write(Mesh::vs_path(&config, 0), mesh.virtual_service(0, 80))?;
        fleet.wait_quiet_with(min_wait, quiet, timeout, server_pushes);
        let e = Edit::measure(&fleet.shared, written);
        let m1 = axon.metrics();
        report.add(
            "VS edit: bytes sent per type (CDS / EDS / LDS / RDS)",
            targets::bytes_per_type(bytes0, client::bytes_by_type(&fleet.shared)),
        );
        println!(
            "vs edit: {} affected, last ACK {}, rebuilds {}, pushes {:?}",
            e.affected,
            ms(e.last()),
            m1.rebuilds() - m0.rebuilds(),
            diff(m1.pushes(), m0.pushes())
        );
        report.add(
            "VS edit: affected proxies",
            format!("{} of {n}", e.affected),
        );
        report.add(
            "VS edit: p50 / p99 / last affected ACK",
            format!("{} / {} / {}", ms(e.p(0.5)), ms(e.p(0.99)), ms(e.last())),
        );
        sum.vs = Some((e.p(0.5), e.p(0.99)));
        vs_edit = Some(e);
    }
    if want("eds") {
        let m0 = axon.metrics();
        let bytes0 = client::bytes_by_type(&fleet.shared);
        let written = Instant::now();
        std::fs::write(Mesh::se_path(&config, 1), mesh.service_entry(1, 1))?;
        fleet.wait_quiet_with(min_wait, quiet, timeout, server_pushes);
        let e = Edit::measure(&fleet.shared, written);
        let m1 = axon.metrics();
        report.add(
            "endpoint edit: bytes sent per type (CDS / EDS / LDS / RDS)",
            targets::bytes_per_type(bytes0, client::bytes_by_type(&fleet.shared)),
        );
        let rebuilds = m1.rebuilds() - m0.rebuilds();
        let pushes = diff(m1.pushes(), m0.pushes());
        println!(
            "endpoint edit: {} affected, last ACK {}, rebuilds {rebuilds}, pushes {pushes:?}",
            e.affected,
            ms(e.last())
        );
        report.add(
            "endpoint edit: affected proxies",
            format!("{} of {n}", e.affected),
        );
        report.add(
            "endpoint edit: p50 / p99 last affected ACK",
            format!("{} / {}", ms(e.p(0.5)), ms(e.p(0.99))),
        );
        report.check(
            "endpoint edit: snapshot rebuilds / pushes cds,eds,lds,rds",
            format!("{rebuilds} / {pushes:?}"),
            "0 rebuilds",
            rebuilds == 0.0,
        );
        sum.eds = Some((e.p(0.5), e.p(0.99)));
        eds_edit = Some(e);
    }
    if want("burst") {
        let written = Instant::now();
        for k in 0..50 {
            // One write per millisecond: 50 edits within 50 ms.
            let at = written + Duration::from_millis(k as u64);
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            std::fs::write(Mesh::vs_path(&config, 0), mesh.virtual_service(0, 10 + k))?;
        }
        let burst_ms = written.elapsed().as_secs_f64() * 1000.0;
        fleet.wait_quiet_with(min_wait, quiet, timeout, server_pushes);
        let e = Edit::measure(&fleet.shared, written);
        // Pushes to a proxy: responses of its most-pushed type (a SotW push sends all four
        // types once; a Delta one only the changed type, RDS here).
        let pushes = |p: &[u32; 4]| p.iter().copied().max().unwrap_or(0);
        let max_pushes = e.per_type.iter().map(pushes).max().unwrap_or(0);
        let mean =
            e.per_type.iter().map(|p| pushes(p) as f64).sum::<f64>() / e.affected.max(1) as f64;
        println!(
            "burst: 50 edits in {burst_ms:.0} ms; {} affected, pushes per proxy max {max_pushes} mean {mean:.2}",
            e.affected
        );
        report.check(
            format!("burst (50 edits in {burst_ms:.0} ms): pushes per affected proxy, max / mean"),
            format!("{max_pushes} / {mean:.2} ({} proxies)", e.affected),
            "1",
            max_pushes == 1,
        );
    }
    if want("noisy") {
        let noisy = noisy::run(
            &fleet.shared,
            &mesh,
            &config,
            n,
            args.noisy_seconds,
            timeout,
        )?;
        fleet.wait_quiet_with(min_wait, quiet, timeout, server_pushes);
        let lat = &noisy.latencies;
        let (p50, max) = (client::quantile(lat, 0.5), client::quantile(lat, 1.0));
        let target = debounce.as_secs_f64() * 1000.0 + 200.0;
        println!(
            "noisy namespace: {} writes in ns-0; {} timed edits elsewhere, p50 {} max {}",
            noisy.noisy_writes,
            lat.len(),
            ms(p50),
            ms(max)
        );
        report.check(
            format!(
                "noisy ns-0 (a write every 50 ms, {} s): single edits elsewhere, p50 / max last ACK",
                args.noisy_seconds
            ),
            format!("{} / {} ({} edits)", ms(p50), ms(max), lat.len()),
            format!("max ≤ debounce + 200 ms = {}", ms(target)),
            max <= target,
        );
    }
    let mut push = None;
    let mut push_types = String::new();
    if want("push") {
        let cpu0 = proc::cpu_seconds(axon.pid());
        let bytes0 = client::bytes_by_type(&fleet.shared);
        let written = Instant::now();
        for i in 0..mesh.namespaces.min(mesh.virtual_services) {
            std::fs::write(Mesh::vs_path(&config, i), mesh.virtual_service(i, 70))?;
        }
        fleet.wait_quiet_with(min_wait, quiet, timeout, server_pushes);
        let cpu = proc::cpu_seconds(axon.pid()) - cpu0;
        let e = Edit::measure(&fleet.shared, written);
        let bytes1 = client::bytes_by_type(&fleet.shared);
        push_types = targets::types_sent(bytes0, bytes1);
        report.add(
            "full push: bytes sent per type (CDS / EDS / LDS / RDS)",
            targets::bytes_per_type(bytes0, bytes1),
        );
        println!(
            "full push: {} affected, last ACK {}, axon CPU {cpu:.2} s",
            e.affected,
            ms(e.last())
        );
        sum.push = Some((e.last() - sum.debounce_ms, cpu, push_types.clone()));
        push = Some((e, cpu));
    }
    let views: floor::Views = (0..mesh.namespaces.min(n))
        .filter_map(|j| {
            let cap = fleet_capture(&fleet.shared, j)?;
            Some((format!("ns-{}", j % mesh.namespaces), cap))
        })
        .collect();
    let late_errors = fleet.shared.errors.load(Ordering::Relaxed) - errors;
    report.add(
        "proxies disconnected during the edits",
        late_errors.to_string(),
    );
    for e in fleet.shared.first_errors(5) {
        println!("  error: {e}");
    }
    fleet.stop();
    std::thread::sleep(Duration::from_millis(300));
    report.add(
        "axon RSS after the proxies left",
        mib(proc::rss_kib(axon.pid())),
    );
    drop(axon);

    // The floor: the same bytes, pre-encoded, to the same N clients.
    let floor = if want("floor") {
        let f = replay_run::run(replay_run::FloorRun {
            views: &views,
            work: &work,
            delta: args.delta,
            cfg: &cfg,
            rt: &rt,
            n,
            timeout,
            push_types: &push_types,
            edits: [
                vs_edit.as_ref().map(|e| e.namespaces(mesh.namespaces)),
                eds_edit.as_ref().map(|e| e.namespaces(mesh.namespaces)),
            ],
            report: &mut report,
        })?;
        all_ok &= f.ok;
        sum.floor_storm_ms = Some(f.storm_ms);
        sum.floor_storm_replay_cpu = f.storm_replay_cpu;
        sum.floor_storm_tool_cpu = f.storm_tool_cpu;
        sum.floor_push = f.push;
        sum.floor_vs_p99 = f.edits[0];
        sum.floor_eds_p99 = f.edits[1];
        Some(f)
    } else {
        None
    };
    let floor_storm = floor.as_ref().map(|f| f.storm_ms);
    let floor_push = floor.as_ref().and_then(|f| f.push);
    let (floor_vs, floor_eds) = floor
        .as_ref()
        .map_or((None, None), |f| (f.edits[0], f.edits[1]));

    // Figures against the floor.
    let d = debounce.as_secs_f64() * 1000.0;
    match floor_storm {
        Some(f) => report.check(
            "cold storm: all synced",
            format!("{} (efficiency {:.2})", ms(storm_ms), f / storm_ms),
            format!("≤ 1.1 × floor = {}, 0 errors", ms(1.1 * f)),
            storm_ms <= 1.1 * f && errors == 0,
        ),
        None => report.add("cold storm: all synced", ms(storm_ms)),
    }
    if let Some((e, cpu)) = &push {
        let wall = e.last() - d;
        match floor_push {
            Some((fw, fc)) => {
                report.check(
                    "full push to all: last ACK − debounce_after",
                    format!(
                        "{} (efficiency {:.2}; {} proxies)",
                        ms(wall),
                        fw / wall,
                        e.affected
                    ),
                    format!("≤ 2 × floor = {}", ms(2.0 * fw)),
                    wall <= 2.0 * fw,
                );
                report.check(
                    "full push to all: CPU seconds",
                    format!("{cpu:.2} s (efficiency {:.2})", fc / cpu),
                    format!("≤ 1.5 × floor = {:.2} s", 1.5 * fc),
                    *cpu <= 1.5 * fc,
                );
            }
            None => report.add(
                "full push to all: last ACK / CPU",
                format!("{} / {cpu:.2} s", ms(e.last())),
            ),
        }
    }
    for (name, edit, floor) in [
        ("VS edit", &vs_edit, floor_vs),
        ("endpoint edit", &eds_edit, floor_eds),
    ] {
        if let Some(e) = edit {
            let (target, met) = targets::edit(d, e.p(0.99), floor);
            report.check(
                format!("{name}: p99 last affected ACK"),
                ms(e.p(0.99)),
                target,
                met,
            );
        }
    }
    println!();
    report.print();
    drop(rt);
    // axon's log outlives the run, for a look at what it did.
    let kept = std::env::temp_dir().join("axon-load-last-axon.log");
    if std::fs::copy(work.join("axon.log"), &kept).is_ok() {
        println!("axon's log: {}", kept.display());
    }
    let _ = std::fs::remove_dir_all(&work);
    Ok(all_ok)
}

fn diff(a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2], a[3] - b[3]]
}

fn fleet_capture(shared: &Shared, j: usize) -> Option<[Option<bytes::Bytes>; 4]> {
    let cap = shared.proxies.get(j)?.captured.as_ref()?;
    Some(cap.lock().unwrap_or_else(PoisonError::into_inner).clone())
}
