//! The published table: one column per fleet size (`--proxies 2000,10000`), axon's figure
//! beside its floor's for the storm, the edits and the full push, with RSS, CPU (axon's, the
//! replay server's and the load tool's own) and the bytes of each type, against the targets
//! of issue "Performance, third step".

use super::harness::ms;

/// The figures of one run (one fleet size); `None` where a scenario did not run.
#[derive(Debug, Default, Clone)]
pub(super) struct Summary {
    pub proxies: usize,
    /// Every namespace under a Sidecar `./*` (the RSS target is for that mesh).
    pub sidecars: bool,
    pub delta: bool,
    pub client_threads: usize,
    pub debounce_ms: f64,
    pub storm_ms: f64,
    pub storm_axon_cpu: f64,
    pub storm_tool_cpu: f64,
    /// MiB of each type (CDS, EDS, LDS, RDS) in the storm.
    pub storm_mib: [f64; 4],
    pub floor_storm_ms: Option<f64>,
    pub floor_storm_replay_cpu: f64,
    pub floor_storm_tool_cpu: f64,
    pub rss_mib: f64,
    pub vs: Option<(f64, f64)>,
    pub floor_vs_p99: Option<f64>,
    pub eds: Option<(f64, f64)>,
    pub floor_eds_p99: Option<f64>,
    /// Last ACK − debounce, axon's CPU, and the types sent (`rds`).
    pub push: Option<(f64, f64, String)>,
    pub floor_push: Option<(f64, f64)>,
}

impl Summary {
    /// The share of its threads the load tool kept busy: near 1, the tool set the pace.
    fn busy(&self, cpu: f64, wall_ms: f64) -> f64 {
        cpu / (wall_ms / 1000.0 * self.client_threads.max(1) as f64)
    }
}

fn ratio(value: f64, floor: Option<f64>) -> String {
    match floor {
        Some(f) if f > 0.0 => format!("{:.2} ×", value / f),
        _ => "–".into(),
    }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "**NOT MET**" }
}

/// The table, as markdown: rows of figures, a column per run, and the target.
pub(super) fn print(runs: &[Summary]) {
    if runs.is_empty() {
        return;
    }
    let mut head = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for r in runs {
        head.push_str(&format!(" {} proxies |", r.proxies));
        rule.push_str("---|");
    }
    println!("\n## Convergence, axon beside its floor\n");
    println!("{head} target |\n{rule}---|");
    let row = |name: &str, cells: Vec<String>, target: &str| {
        println!("| {name} | {} | {target} |", cells.join(" | "));
    };
    let each = |f: &dyn Fn(&Summary) -> String| runs.iter().map(f).collect::<Vec<_>>();
    row(
        "cold storm: all synced (floor; ratio)",
        each(&|r| match r.floor_storm_ms {
            Some(f) => format!(
                "{} (floor {}; {}) {}",
                ms(r.storm_ms),
                ms(f),
                ratio(r.storm_ms, Some(f)),
                met(r.storm_ms <= 1.1 * f)
            ),
            None => ms(r.storm_ms),
        }),
        "≤ 1.1 × floor",
    );
    row(
        "cold storm: CPU s, axon / replay server",
        each(&|r| match r.floor_storm_ms {
            Some(_) => format!("{:.2} / {:.2}", r.storm_axon_cpu, r.floor_storm_replay_cpu),
            None => format!("{:.2} / –", r.storm_axon_cpu),
        }),
        "",
    );
    row(
        "cold storm: load tool CPU s and busy share, against axon / the floor",
        each(&|r| {
            let axon = format!(
                "{:.2} ({:.0}%)",
                r.storm_tool_cpu,
                100.0 * r.busy(r.storm_tool_cpu, r.storm_ms)
            );
            match r.floor_storm_ms {
                Some(f) => format!(
                    "{axon} / {:.2} ({:.0}%)",
                    r.floor_storm_tool_cpu,
                    100.0 * r.busy(r.floor_storm_tool_cpu, f)
                ),
                None => format!("{axon} / –"),
            }
        }),
        "",
    );
    row(
        "cold storm: MiB per type, CDS / EDS / LDS / RDS",
        each(&|r| {
            let m = r.storm_mib;
            format!("{:.1} / {:.1} / {:.1} / {:.1}", m[0], m[1], m[2], m[3])
        }),
        "",
    );
    row(
        "axon RSS with the proxies connected",
        each(&|r| {
            if r.proxies >= 10_000 && r.sidecars && !r.delta {
                format!("{:.1} MiB {}", r.rss_mib, met(r.rss_mib <= 300.0))
            } else {
                format!("{:.1} MiB", r.rss_mib)
            }
        }),
        "≤ 300 MiB at 10,000 with Sidecars (SotW); without, ≤ 1.5 × that; Delta within 10% of SotW",
    );
    for (name, pick) in [
        (
            "VS edit (RDS): p50 / p99 (floor p99)",
            &(|r: &Summary| r.vs.zip(r.floor_vs_p99.or(Some(f64::NAN))))
                as &dyn Fn(&Summary) -> Option<((f64, f64), f64)>,
        ),
        (
            "endpoint edit (EDS): p50 / p99 (floor p99)",
            &|r: &Summary| r.eds.zip(r.floor_eds_p99.or(Some(f64::NAN))),
        ),
    ] {
        row(
            name,
            each(&|r| match pick(r) {
                Some(((p50, p99), f)) if f.is_finite() => format!(
                    "{} / {} ({}) {}",
                    ms(p50),
                    ms(p99),
                    ms(f),
                    met(p99 <= r.debounce_ms + 1.2 * f)
                ),
                Some(((p50, p99), _)) => format!("{} / {}", ms(p50), ms(p99)),
                None => "–".into(),
            }),
            "p99 ≤ debounce_after + 1.2 × floor p99",
        );
    }
    row(
        "full push: last ACK − debounce (floor)",
        each(&|r| match (&r.push, r.floor_push) {
            (Some((wall, _, types)), Some((fw, _))) => {
                format!("{} ({}; {types})", ms(*wall), ms(fw))
            }
            (Some((wall, _, types)), None) => format!("{} ({types})", ms(*wall)),
            _ => "–".into(),
        }),
        "",
    );
    row(
        "full push: CPU s, axon (floor; ratio)",
        each(&|r| match (&r.push, r.floor_push) {
            (Some((_, cpu, _)), Some((_, fc))) => format!(
                "{cpu:.2} ({fc:.2}; {}) {}",
                ratio(*cpu, Some(fc)),
                met(*cpu <= 1.5 * fc)
            ),
            (Some((_, cpu, _)), None) => format!("{cpu:.2}"),
            _ => "–".into(),
        }),
        "≤ 1.5 × floor",
    );
    println!(
        "\n{}, {}; debounce_after {} ms; client threads {}; a floor is the same response \
         bytes, framed before the run, written by `axon-load replay` to the same clients.",
        if runs[0].sidecars {
            "a Sidecar `./*` in every namespace"
        } else {
            "no Sidecar (every proxy gets every service)"
        },
        if runs[0].delta {
            "Delta ADS"
        } else {
            "SotW ADS"
        },
        runs[0].debounce_ms,
        runs[0].client_threads
    );
}
