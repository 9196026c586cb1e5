//! The process's file-descriptor limit: raised to its hard limit at start-up (as Go does
//! for istiod), and the `max_connections` it leaves room for.

/// Raises the soft `RLIMIT_NOFILE` to the hard one; returns the limit in force (`None`:
/// unlimited or unknown).
pub(super) fn raise() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(soft), hard) = (limit.current, limit.maximum) else {
        return None;
    };
    let Some(hard) = hard else {
        return Some(soft);
    };
    if soft < hard {
        let mut raised = limit;
        raised.current = Some(hard);
        if setrlimit(Resource::Nofile, raised).is_ok() {
            tracing::debug!(from = soft, to = hard, "raised the file-descriptor limit");
            return Some(hard);
        }
    }
    Some(soft)
}

/// `max_connections` as configured, or (0) what the descriptor limit leaves after a
/// reserve of a quarter of it, at most 1024.
pub(super) fn max_connections(configured: usize, fd_limit: Option<u64>) -> usize {
    if configured > 0 {
        return configured;
    }
    match fd_limit {
        Some(limit) => {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let reserve = (limit / 4).min(1024);
            (limit - reserve).max(1)
        }
        None => 1 << 20,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_a_quarter_of_the_limit_at_most_1024() {
        assert_eq!(max_connections(0, Some(160)), 120);
        assert_eq!(max_connections(0, Some(1024)), 768);
        assert_eq!(max_connections(0, Some(20_000)), 18_976);
        assert_eq!(max_connections(0, Some(1)), 1);
        assert_eq!(max_connections(50, Some(20_000)), 50);
        assert_eq!(max_connections(0, None), 1 << 20);
    }

    #[test]
    fn the_limit_is_raised_to_the_hard_one() {
        let after = raise();
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert_eq!(after, limit.current);
        if limit.maximum.is_some() {
            assert_eq!(limit.current, limit.maximum);
        }
    }
}
