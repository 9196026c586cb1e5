//! The bench's targets (issues "Performance, second step" and "third step") and the limits file it gives axon
//! for fleets larger than axon's default admission burst.

use std::path::{Path, PathBuf};

use super::harness::ms;

/// axon's default `max_requests_per_second`, which is also its admission burst: a larger cold
/// storm would wait past `max_stream_wait` and be refused, which measures the admission
/// limit, not axon.
const DEFAULT_ADMISSION_BURST: usize = 1000;

/// For `n` proxies beyond the default admission burst, a limits file that admits them all at
/// once (`max_requests_per_second = n`, `max_streams = 2n`); `None` keeps axon's defaults.
pub(super) fn limits_for(n: usize, work: &Path) -> anyhow::Result<Option<PathBuf>> {
    if n <= DEFAULT_ADMISSION_BURST {
        return Ok(None);
    }
    let path = work.join("bench-limits.toml");
    let text = format!(
        "max_requests_per_second = {n}\nmax_streams = {}\nmax_pending_streams = {}\n",
        2 * n,
        (2 * n).max(16_384)
    );
    std::fs::write(&path, &text)?;
    println!(
        "limits for {n} proxies: {}",
        text.trim().replace('\n', ", ")
    );
    Ok(Some(path))
}

/// The RSS target for `n` proxies: its text and its bound in bytes.
pub(super) fn rss(n: usize) -> (&'static str, u64) {
    if n >= 10_000 {
        ("≤ 300 MiB", 300 << 20)
    } else if n >= 2000 {
        ("≤ 300 MB", 300_000_000)
    } else {
        ("", u64::MAX)
    }
}

/// An edit's p99 against `debounce_after` + 1.2 × the floor's p99 for the same bytes (the
/// replay server re-sending the changed type to the affected namespaces).
pub(super) fn edit(debounce_ms: f64, p99: f64, floor_p99: Option<f64>) -> (String, bool) {
    match floor_p99 {
        Some(f) => (
            format!(
                "p99 ≤ debounce_after + 1.2 × floor ({}) = {}",
                ms(f),
                ms(debounce_ms + 1.2 * f)
            ),
            p99 <= debounce_ms + 1.2 * f,
        ),
        None => ("(needs the floor)".to_string(), false),
    }
}

/// Bytes received between two snapshots, per type, as text.
pub(super) fn bytes_per_type(before: [u64; 4], after: [u64; 4]) -> String {
    let kib: Vec<String> = before
        .iter()
        .zip(after)
        .map(|(b, a)| format!("{:.0} KiB", (a - b) as f64 / 1024.0))
        .collect();
    kib.join(" / ")
}

/// The types with bytes between two snapshots, as the replay server's list (`rds`,
/// `cds,eds`, ...).
pub(super) fn types_sent(before: [u64; 4], after: [u64; 4]) -> String {
    let names = ["cds", "eds", "lds", "rds"];
    let sent: Vec<&str> = (0..4)
        .filter(|&t| after[t] > before[t])
        .map(|t| names[t])
        .collect();
    sent.join(",")
}
