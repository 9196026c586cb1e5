//! The table of `axon-load hostile`: baseline against with-hostile, the hostile connections'
//! fate (held, closed by axon and reopened, refused, by reason), and what axon's log said
//! during the hostile window ([`LogTail`]).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::Ordering;

use super::clients::{Hostile, Kind, Plan};
use super::sampler::peak_median;
use super::{Figures, Push};
use crate::bench::harness::{Report, mib, ms};
use crate::client::quantile;

/// Most of axon's log read back.
const MAX_LOG_BYTES: u64 = 64 << 20;

/// What axon logged after a point: line counts, and the first few distinct warnings.
#[derive(Default)]
pub(super) struct LogTail {
    pub lines: usize,
    pub warn: usize,
    pub error: usize,
    pub bytes: u64,
    /// Up to five distinct WARN/ERROR messages (timestamps cut, at most 200 characters).
    pub distinct: Vec<String>,
}

impl LogTail {
    pub(super) fn read(path: &Path, from: u64) -> LogTail {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(path)
            && f.seek(SeekFrom::Start(from)).is_ok()
        {
            let _ = f.take(MAX_LOG_BYTES).read_to_string(&mut text);
        }
        let mut tail = LogTail {
            bytes: text.len() as u64,
            ..Default::default()
        };
        for line in text.lines() {
            tail.lines += 1;
            let warn = line.contains(" WARN ");
            let error = line.contains(" ERROR ");
            tail.warn += usize::from(warn);
            tail.error += usize::from(error);
            if (warn || error) && tail.distinct.len() < 5 {
                let message: String = line
                    .split_once(' ')
                    .map_or(line, |(_, rest)| rest)
                    .trim()
                    .chars()
                    .take(200)
                    .collect();
                if !tail.distinct.contains(&message) {
                    tail.distinct.push(message);
                }
            }
        }
        tail
    }
}

fn spread(v: &[f64]) -> String {
    format!(
        "{} / {} / {}",
        ms(quantile(v, 0.5)),
        ms(quantile(v, 0.99)),
        ms(quantile(v, 1.0))
    )
}

/// p50 / p99 / max of a push, and axon's CPU during it.
fn push(p: &Push) -> String {
    format!("{}; axon CPU {:.2} s", spread(&p.all), p.cpu)
}

fn lives(h: &Hostile, k: Kind) -> String {
    match h.kind(k).lives() {
        Some((a, b)) => format!(" after {a:.1}–{b:.1} s"),
        None => String::new(),
    }
}

fn count(k: Kind, plan: &Plan) -> String {
    match k {
        Kind::NoPreface => plan.no_preface.to_string(),
        Kind::Silent => format!("{} × {} streams", plan.silent, plan.silent_streams),
        Kind::Stalled => format!(
            "{} × 1 stream, {} bytes sent",
            plan.stalled,
            plan.stall.len()
        ),
    }
}

pub(super) fn fill(r: &mut Report, f: &Figures, plan: &Plan, h: &Hostile, buffer_bound: u64) {
    let n = f.n;
    let all_synced = f.base_sync.len() == n && f.new_sync.len() == n && f.errors == 0;
    r.check(
        "healthy proxies synced",
        format!(
            "baseline {}/{n}; new, hostile open {}/{n}; {} errors, {} reconnects",
            f.base_sync.len(),
            f.new_sync.len(),
            f.errors,
            f.retries
        ),
        "all, 0 errors",
        all_synced,
    );
    r.add(
        format!("time to sync p50 / p99 / max: baseline ({n} at once, cold)"),
        spread(&f.base_sync),
    );
    r.add(
        format!("time to sync p50 / p99 / max: {n} new, hostile open"),
        spread(&f.new_sync),
    );
    let acked = |p: &Push, want: usize| p.all.len() == want;
    r.check(
        "push ACKed by every healthy proxy",
        format!(
            "baseline {}/{n}; with hostile {}/{}",
            f.base_push.all.len(),
            f.hostile_push.all.len(),
            2 * n
        ),
        "all",
        acked(&f.base_push, n) && acked(&f.hostile_push, 2 * n),
    );
    r.add(
        format!("push convergence p50 / p99 / max: baseline ({n} proxies)"),
        push(&f.base_push),
    );
    let base_max = quantile(&f.base_push.all, 1.0);
    let hostile_max = quantile(&f.hostile_push.all, 1.0);
    let bound = 2.0 * base_max + 100.0;
    r.check(
        format!(
            "push convergence p50 / p99 / max: hostile open ({} proxies)",
            2 * n
        ),
        push(&f.hostile_push),
        format!("max ≤ 2 × baseline + 100 ms = {}", ms(bound)),
        hostile_max <= bound,
    );
    r.add(
        format!("  of which the {n} baseline proxies"),
        spread(&f.hostile_push.first),
    );
    r.add(
        format!(
            "push convergence p50 / p99 / max: the same {}, hostile closed (control)",
            2 * n
        ),
        format!(
            "{} (max with hostile / control: {:.2})",
            push(&f.control_push),
            hostile_max / quantile(&f.control_push.all, 1.0)
        ),
    );

    // Memory: the samples before the new proxies came (hostile only) and after.
    let after_ramp =
        |s: &&super::sampler::Sample| s.at >= f.ramp + std::time::Duration::from_secs(1);
    let before: Vec<u64> = f
        .samples
        .iter()
        .filter(after_ramp)
        .filter(|s| s.at < f.new_at)
        .map(|s| s.rss_kib)
        .collect();
    let with_all: Vec<u64> = f
        .samples
        .iter()
        .filter(|s| s.at >= f.new_at)
        .map(|s| s.rss_kib)
        .collect();
    let (peak_all, _) = peak_median(f.samples.iter().map(|s| s.rss_kib).collect());
    let (_, before_median) = peak_median(before);
    let (_, with_median) = peak_median(with_all);
    let held: Vec<i64> = f
        .samples
        .iter()
        .filter(after_ramp)
        .map(|s| s.held)
        .collect();
    let (_, held_median) = peak_median(held.clone());
    let held_min = held.iter().copied().min().unwrap_or(0);
    let streams: Vec<i64> = f
        .samples
        .iter()
        .filter(after_ramp)
        .map(|s| s.streams)
        .collect();
    let (_, streams_median) = peak_median(streams);
    r.add(
        format!("axon RSS: idle / {n} proxies (baseline)"),
        format!("{} / {}", mib(f.idle_rss), mib(f.base_rss)),
    );
    let per_conn = before_median.saturating_sub(f.base_rss) as f64 / held_median.max(1) as f64;
    r.add(
        "axon RSS, hostile open, before the new proxies (median)",
        format!(
            "{} (+{} over the baseline, {per_conn:.1} KiB per hostile connection held)",
            mib(before_median),
            mib(before_median.saturating_sub(f.base_rss))
        ),
    );
    r.add(
        format!(
            "axon RSS, hostile open, {} healthy: median / peak of the window",
            2 * n
        ),
        format!("{} / {}", mib(with_median), mib(peak_all)),
    );
    r.add("axon peak RSS (VmHWM) over the run", mib(f.hwm));
    r.add(
        "axon RSS 2 s after the hostile connections closed",
        mib(f.after_rss),
    );
    let buffered: Vec<f64> = f
        .samples
        .iter()
        .filter(after_ramp)
        .filter_map(|s| s.buffered.flatten())
        .collect();
    let (buf_peak, buf_median) = peak_median(buffered);
    let kib = |b: f64| format!("{:.0} KiB", b / 1024.0);
    r.check(
        "axon_request_buffer_bytes: baseline / hostile median / peak",
        format!(
            "{} / {} / {} ({} stalled × {} bytes sent = {})",
            kib(f.base_buffered),
            kib(buf_median),
            kib(buf_peak),
            plan.stalled,
            plan.stall.len(),
            kib((plan.stalled * plan.stall.len()) as f64)
        ),
        format!("≤ max_request_buffer_bytes = {}", kib(buffer_bound as f64)),
        buf_peak <= buffer_bound as f64,
    );
    r.add(
        "hostile connections / streams held after the ramp: median (min)",
        format!(
            "{held_median} ({held_min}) of {} / {streams_median} streams",
            plan.total()
        ),
    );
    for k in Kind::ALL {
        let s = h.kind(k);
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let mut value = format!(
            "{} held at the end; {} closed by axon and reopened{}; {} refused, {} failed connects",
            s.open.load(Ordering::Relaxed),
            load(&s.closed),
            if k == Kind::NoPreface {
                lives(h, k)
            } else {
                String::new()
            },
            load(&s.refused),
            load(&s.failed)
        );
        if k != Kind::NoPreface {
            value.push_str(&format!(
                "; streams {} held, {} ended by axon and reopened{}",
                s.streams_open.load(Ordering::Relaxed),
                load(&s.streams_ended),
                lives(h, k)
            ));
        }
        r.add(
            format!("hostile: {} ({})", k.label(), count(k, plan)),
            value,
        );
    }
    let reasons: Vec<String> = h
        .reasons()
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    r.add("closings by axon, by reason", reasons.join("; "));
    r.add(
        "axon_xds_refused_connections (end)",
        format!("{}", f.refused_metric),
    );
    r.add("axon_rejected_streams (end)", f.rejected_metric.clone());
    r.add("axon_request_errors (end)", f.request_errors_metric.clone());
    r.add(
        format!(
            "axon CPU over the hostile window ({:.0} s)",
            f.window.as_secs_f64()
        ),
        format!("{:.2} s", f.cpu),
    );
    let asked = f.samples.iter().filter(|s| s.buffered.is_some()).count();
    let answered = f
        .samples
        .iter()
        .filter(|s| matches!(s.buffered, Some(Some(_))))
        .count();
    r.add(
        "/metrics answered during the hostile window",
        format!("{answered}/{asked}"),
    );
    r.add(
        "axon log during the hostile window",
        format!(
            "{} lines, {} WARN, {} ERROR ({:.1} KiB)",
            f.log.lines,
            f.log.warn,
            f.log.error,
            f.log.bytes as f64 / 1024.0
        ),
    );
}
