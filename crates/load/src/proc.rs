//! RSS and CPU time of a process, from /proc.

/// Resident set size in KiB (`VmRSS` of /proc/PID/status); 0 if unreadable.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "VmRSS:")
}

/// Peak resident set size in KiB (`VmHWM`).
pub(crate) fn hwm_kib(pid: u32) -> u64 {
    status_field(&format!("/proc/{pid}/status"), "VmHWM:")
}

pub(crate) fn self_rss_kib() -> u64 {
    status_field("/proc/self/status", "VmRSS:")
}

fn status_field(path: &str, key: &str) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// User + system CPU seconds of a process (fields 14 and 15 of /proc/PID/stat).
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name (field 2) may contain spaces; fields after its ')' are fixed.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state): utime is field 14 → index 11, stime 15 → index 12.
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    ticks / clock_ticks()
}

/// USER_HZ: 100 on Linux for every architecture this runs on.
fn clock_ticks() -> f64 {
    100.0
}

/// The machine, for BENCHMARKS.md: cores, CPU model, memory.
pub(crate) fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let mem = status_field("/proc/meminfo", "MemTotal:");
    format!(
        "{cpus} cores, {model}, {:.1} GiB RAM",
        mem as f64 / 1024.0 / 1024.0
    )
}
