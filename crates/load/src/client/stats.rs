//! Figures from the fleet's shared state: sync times, ACKs after an instant, quantiles, bytes
//! received, what resumed streams cost.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use super::Shared;

/// Proxies whose sync time is known, sorted, in ms from `since_us`.
pub(crate) fn sync_times_ms(shared: &Shared, since_us: u64) -> Vec<f64> {
    let mut v: Vec<f64> = shared
        .proxies
        .iter()
        .map(|p| p.synced_us.load(Ordering::Relaxed))
        .filter(|&t| t > 0)
        .map(|t| t.saturating_sub(since_us) as f64 / 1000.0)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Per proxy with an ACK after `since_us`: (index, last ACK after it, ACKs per type after it).
pub(crate) fn acks_after(shared: &Shared, since_us: u64) -> Vec<(usize, u64, [u32; 4])> {
    shared
        .proxies
        .iter()
        .enumerate()
        .filter_map(|(j, p)| {
            let acks = p.acks.lock().unwrap_or_else(PoisonError::into_inner);
            let mut last = 0;
            let mut per = [0u32; 4];
            for a in acks.iter().filter(|a| a.at_us > since_us) {
                last = last.max(a.at_us);
                per[a.ty as usize] += 1;
            }
            (last > 0).then_some((j, last, per))
        })
        .collect()
}

/// The value at quantile `q` of sorted `v`.
pub(crate) fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let i = ((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// Response bytes received so far by every proxy, per type (CDS, EDS, LDS, RDS).
pub(crate) fn bytes_by_type(shared: &Shared) -> [u64; 4] {
    let mut total = [0u64; 4];
    for p in &shared.proxies {
        for (t, b) in total.iter_mut().zip(&p.bytes_by_type) {
            *t += b.load(Ordering::Relaxed);
        }
    }
    total
}

/// What the resumed streams cost: (response bytes, resources in them, full re-push bytes
/// they would have cost, resumed streams), summed over the proxies.
pub(crate) fn resume_totals(shared: &Shared) -> (u64, u64, u64, u64) {
    let (mut bytes, mut resources) = (0, 0);
    for p in &shared.proxies {
        bytes += p.resume_bytes.load(Ordering::Relaxed);
        resources += p.resume_resources.load(Ordering::Relaxed);
    }
    (
        bytes,
        resources,
        shared.full_resync_bytes.load(Ordering::Relaxed),
        shared.resumed.load(Ordering::Relaxed),
    )
}
