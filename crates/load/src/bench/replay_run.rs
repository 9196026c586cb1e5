//! The floor's run: the responses axon sent, captured per view, replayed by `axon-load
//! replay` (its own process, [`crate::floor`]) to a fresh fleet of the same size: the cold
//! storm, a push of all four types, a push of the types axon's full push sent, and the edits'
//! types to their namespaces. The replay server's CPU and the load tool's own are measured
//! beside each, so a reader can tell when the tool, not the server, set the pace.
//!
//! The storm is played [`STORMS`] times, each with a fresh fleet, and the fastest is the
//! floor: a floor is the best the bytes can do, and one run on a shared two-core machine
//! varies by ±20% (a single run was once slower than axon's own storm).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::client::{self, ClientConfig};
use crate::floor;
use crate::proc;

use super::harness::{Fleet, Replay, Report, mib, ms};

pub(super) struct FloorRun<'a> {
    pub views: &'a floor::Views,
    pub work: &'a Path,
    pub delta: bool,
    pub cfg: &'a ClientConfig,
    pub rt: &'a tokio::runtime::Runtime,
    pub n: usize,
    pub timeout: Duration,
    /// The types axon's full push sent (`rds`), empty when it did not run.
    pub push_types: &'a str,
    /// The namespaces of the VS edit's and the endpoint edit's affected proxies.
    pub edits: [Option<Vec<String>>; 2],
    pub report: &'a mut Report,
}

pub(super) struct FloorFigures {
    pub ok: bool,
    pub storm_ms: f64,
    pub storm_replay_cpu: f64,
    pub storm_tool_cpu: f64,
    /// The push matching axon's full push (or of all four types): last ACK, replay CPU.
    pub push: Option<(f64, f64)>,
    /// The p99 of the VS edit's (RDS) and the endpoint edit's (EDS) floors.
    pub edits: [Option<f64>; 2],
}

/// Storms the floor plays; the fastest counts.
const STORMS: usize = 3;

/// What one floor storm measured.
struct StormFigures {
    t: f64,
    replay_cpu: f64,
    tool_cpu: f64,
    bytes: u64,
    times: Vec<f64>,
}

/// One storm against the replay server: the fleet, whether all synced, and its figures.
fn storm(f: &FloorRun<'_>, replay: &Replay, cfg: &ClientConfig) -> (Fleet, bool, StormFigures) {
    let cpu0 = proc::cpu_seconds(replay.pid());
    let tool_cpu0 = proc::cpu_seconds(std::process::id());
    let started = Instant::now();
    let fleet = Fleet::start(f.rt, f.n, cfg, |_| false);
    let ok = fleet.wait_synced(f.timeout);
    let figures = StormFigures {
        t: started.elapsed().as_secs_f64() * 1000.0,
        replay_cpu: proc::cpu_seconds(replay.pid()) - cpu0,
        tool_cpu: proc::cpu_seconds(std::process::id()) - tool_cpu0,
        bytes: fleet
            .shared
            .proxies
            .iter()
            .map(|p| p.bytes.load(Ordering::Relaxed))
            .sum(),
        times: client::sync_times_ms(&fleet.shared, fleet.shared.us(started)),
    };
    (fleet, ok, figures)
}

pub(super) fn run(f: FloorRun<'_>) -> anyhow::Result<FloorFigures> {
    let n = f.n;
    let views_path = f.work.join("views.bin");
    floor::write_views(&views_path, f.views)?;
    let mut replay = Replay::start(&views_path, f.delta)?;
    let cfg = ClientConfig {
        addr: replay.addr,
        ..f.cfg.clone()
    };
    // The fastest of `STORMS` storms, each with a fresh fleet; the last fleet serves the
    // pushes below.
    let mut best: Option<StormFigures> = None;
    let mut walls = Vec::new();
    let mut errors = 0;
    let mut ok = true;
    let mut last = None;
    for i in 0..STORMS {
        let (fleet, synced, figures) = storm(&f, &replay, &cfg);
        ok &= synced;
        errors += fleet.shared.errors.load(Ordering::Relaxed);
        walls.push(figures.t);
        for e in fleet.shared.first_errors(5) {
            println!("  error: {e}");
        }
        if best.as_ref().is_none_or(|b| figures.t < b.t) {
            best = Some(figures);
        }
        if i + 1 < STORMS {
            // The replay server drops a connection when its client leaves.
            fleet.stop();
        } else {
            last = Some(fleet);
        }
    }
    let (Some(best), Some(fleet)) = (best, last) else {
        anyhow::bail!("no floor storm ran");
    };
    let StormFigures {
        t,
        replay_cpu: storm_replay_cpu,
        tool_cpu: storm_tool_cpu,
        bytes,
        times,
    } = best;
    println!(
        "floor storm: {}/{n} synced in {t:.0} ms (the fastest of {} ms), {errors} errors, {:.1} MiB, replay CPU {storm_replay_cpu:.2} s, load tool CPU {storm_tool_cpu:.2} s",
        times.len(),
        walls
            .iter()
            .map(|w| format!("{w:.0}"))
            .collect::<Vec<_>>()
            .join(", "),
        bytes as f64 / 1048576.0
    );
    f.report.add(
        "floor: cold storm, all synced (p50 / p99)",
        format!(
            "{} ({} / {}), {:.1} MiB",
            ms(t),
            ms(client::quantile(&times, 0.5)),
            ms(client::quantile(&times, 0.99)),
            bytes as f64 / 1048576.0
        ),
    );
    f.report.add(
        "floor: cold storm, replay server CPU / load tool CPU",
        format!("{storm_replay_cpu:.2} s / {storm_tool_cpu:.2} s"),
    );
    fleet.wait_quiet(
        Duration::from_millis(300),
        Duration::from_millis(300),
        f.timeout,
    );
    f.report.add(
        format!("replay server RSS with {n} proxies (peak)"),
        format!(
            "{} ({})",
            mib(proc::rss_kib(replay.pid())),
            mib(proc::hwm_kib(replay.pid()))
        ),
    );
    let (e, cpu) = replay.measure_push(&fleet, None, f.timeout)?;
    println!(
        "floor push: {} proxies, last ACK {}, replay CPU {cpu:.2} s",
        e.affected,
        ms(e.last())
    );
    f.report.add(
        "floor: a push of all four types, last ACK / CPU",
        format!("{} / {cpu:.2} s ({} proxies)", ms(e.last()), e.affected),
    );
    let mut push = Some((e.last(), cpu));
    if !f.push_types.is_empty() {
        // The floor for axon's full push: the types it sent, to every proxy.
        let all = ["*".to_string()];
        let (e, cpu) = replay.measure_push(&fleet, Some((f.push_types, &all)), f.timeout)?;
        f.report.add(
            format!("floor: a push of {}, last ACK / CPU", f.push_types),
            format!("{} / {cpu:.2} s ({} proxies)", ms(e.last()), e.affected),
        );
        push = Some((e.last(), cpu));
    }
    let mut edits = [None, None];
    for ((namespaces, types), out) in f.edits.iter().zip(["rds", "eds"]).zip(&mut edits) {
        let Some(namespaces) = namespaces else {
            continue;
        };
        let (e, _) = replay.measure_push(&fleet, Some((types, namespaces)), f.timeout)?;
        println!(
            "floor {types} to {} namespaces: {} proxies, p99 {}",
            namespaces.len(),
            e.affected,
            ms(e.p(0.99))
        );
        *out = Some(e.p(0.99));
    }
    fleet.stop();
    drop(replay);
    Ok(FloorFigures {
        ok: ok && errors == 0,
        storm_ms: t,
        storm_replay_cpu,
        storm_tool_cpu,
        push,
        edits,
    })
}
