//! `axon-load files`: a large config directory. Starts axon on a generated mesh of N files
//! (half ServiceEntries, half VirtualServices), measures how long until `/ready` and axon's
//! peak RSS, then rewrites VirtualService files without pause for a while (a burst of file
//! events that never leaves the debounce a quiet window) and measures the longest time
//! between two snapshot builds: `debounce_max` must hold.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;

use super::harness::{Axon, Report, http_get, mib};
use crate::proc;
use axon_load::mesh::Mesh;

#[derive(Args, Debug, Clone)]
pub(crate) struct FilesArgs {
    /// Config files in the directory.
    #[arg(long, default_value_t = 5000)]
    pub files: usize,
    /// The axon binary [default: the `axon` beside this `axon-load`, as cargo builds them]
    #[arg(long)]
    pub axon: Option<PathBuf>,
    /// How long the burst of file writes lasts, seconds.
    #[arg(long, default_value_t = 15)]
    pub burst: u64,
    /// One file written every this many milliseconds during the burst.
    #[arg(long, default_value_t = 20)]
    pub every_ms: u64,
    /// Inline endpoints per ServiceEntry.
    #[arg(long, default_value_t = 10)]
    pub endpoints: usize,
    /// `debounce_max` for axon (a limits file is written with it).
    #[arg(long, default_value = "3s")]
    pub debounce_max: String,
}

/// Runs it; returns whether every target was met.
pub(crate) fn run(args: FilesArgs) -> anyhow::Result<bool> {
    let half = args.files / 2;
    let mesh = Mesh {
        services: args.files - half,
        namespaces: 10,
        endpoints: args.endpoints.clamp(1, 250),
        virtual_services: half,
        destination_rules: 0,
        sidecar_share: 0.0,
    };
    let debounce_max = humantime::parse_duration(&args.debounce_max)?;
    let work = std::env::temp_dir().join(format!("axon-load-files-{}", std::process::id()));
    let config = work.join("mesh");
    std::fs::create_dir_all(&config)?;
    let files = mesh.write(&config)?;
    let bytes: u64 = walk_bytes(&config);
    let limits = work.join("limits.toml");
    std::fs::write(
        &limits,
        format!("debounce_max = \"{}\"\n", args.debounce_max),
    )?;
    println!("machine: {}", proc::machine());
    println!(
        "{files} files ({} MiB) in {}: {} ServiceEntries, {} VirtualServices; debounce_max {debounce_max:?}",
        bytes / (1 << 20),
        config.display(),
        mesh.services,
        mesh.virtual_services
    );
    let mut report = Report { rows: Vec::new() };
    let started = Instant::now();
    let axon = Axon::start(
        args.axon.as_deref(),
        &config,
        Some(&limits),
        &work.join("axon.log"),
    )?;
    let deadline = started + Duration::from_secs(120);
    while http_get(axon.monitoring, "/ready").is_none_or(|(status, _)| status != 200) {
        anyhow::ensure!(Instant::now() < deadline, "axon not ready within 120 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let load = started.elapsed();
    let peak = proc::hwm_kib(axon.pid());
    report.check(
        format!("{files} files: start to /ready"),
        format!("{:.2} s", load.as_secs_f64()),
        "≤ 5 s",
        load <= Duration::from_secs(5),
    );
    report.check(
        "axon peak RSS (VmHWM) after the load",
        mib(peak),
        "≤ 300 MB",
        peak * 1024 <= 300_000_000,
    );

    // The burst: a VirtualService written every `every_ms`, for `burst` seconds.
    let rebuilds = || axon.metrics().rebuilds();
    let before = rebuilds();
    let burst_start = Instant::now();
    let burst_end = burst_start + Duration::from_secs(args.burst);
    let mut builds = vec![burst_start];
    let mut last = before;
    let mut k = 0usize;
    let mut next_write = burst_start;
    let mut next_sample = burst_start;
    while Instant::now() < burst_end {
        let now = Instant::now();
        if now >= next_write {
            let i = k % mesh.virtual_services.max(1);
            std::fs::write(
                Mesh::vs_path(&config, i),
                mesh.virtual_service(i, 10 + k % 80),
            )?;
            k += 1;
            next_write += Duration::from_millis(args.every_ms);
        }
        if now >= next_sample {
            let n = rebuilds();
            if n > last {
                builds.push(Instant::now());
                last = n;
            }
            next_sample += Duration::from_millis(25);
        }
        std::thread::sleep(
            next_write
                .min(next_sample)
                .saturating_duration_since(Instant::now()),
        );
    }
    builds.push(burst_end);
    let gaps: Vec<Duration> = builds.windows(2).map(|w| w[1] - w[0]).collect();
    let longest = gaps.iter().copied().max().unwrap_or_default();
    let built = (last - before) as usize;
    println!(
        "burst: {k} writes in {:?}, {built} snapshot builds, longest gap {longest:?}",
        burst_end - burst_start
    );
    // Each build may take its own time: allow one second beyond debounce_max.
    let bound = debounce_max + Duration::from_secs(1);
    report.check(
        format!(
            "burst of {k} writes over {} s: longest time without a snapshot build",
            args.burst
        ),
        format!("{:.2} s ({built} builds)", longest.as_secs_f64()),
        format!("≤ debounce_max + 1 s ({:.1} s)", bound.as_secs_f64()),
        longest <= bound && built > 0,
    );
    let rss_after = proc::hwm_kib(axon.pid());
    report.add("axon peak RSS (VmHWM) after the burst", mib(rss_after));
    report.print();
    drop(axon);
    let _ = std::fs::remove_dir_all(&work);
    Ok(report.rows.iter().all(|r| r.met != Some(false)))
}

fn walk_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => walk_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
