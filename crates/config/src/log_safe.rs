//! What a client sends, made safe to log: [`Escaped`] shows a string with its control
//! characters escaped (a node id with a newline cannot forge a log line) and cut at
//! [`MAX_LOGGED`] characters; [`LogLimit`] lets one line through per window and counts the
//! rest (a proxy that NACKs every push logs once a minute, not once per NACK).

use std::fmt;
use std::time::{Duration, Instant};

/// The most characters of a client string a log line shows.
pub const MAX_LOGGED: usize = 256;

/// A client string as a log line may show it.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shown, c) in self.0.chars().enumerate() {
            if shown == MAX_LOGGED {
                let rest = self.0.chars().count() - shown;
                return write!(f, "…(+{rest} chars)");
            }
            if c.is_control() {
                write!(f, "{}", c.escape_default())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// One line per `every`, with the count of the ones held back.
#[derive(Debug, Clone)]
pub struct LogLimit {
    every: Duration,
    last: Option<Instant>,
    held_back: u64,
}

impl LogLimit {
    pub fn new(every: Duration) -> LogLimit {
        LogLimit {
            every,
            last: None,
            held_back: 0,
        }
    }

    /// Whether to log now; `Some(n)`: yes, and `n` lines were held back since the last one.
    pub fn allow(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.duration_since(last) < self.every => {
                self.held_back += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.held_back))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_strings_cut() {
        let forged = "sidecar~1.2.3.4~a.ns~ns.svc.cluster.local\n2026-12-01T00:00:00Z  INFO forged";
        let shown = Escaped(forged).to_string();
        assert!(
            !shown.contains('\n') && shown.contains("\\n2026"),
            "{shown}"
        );
        let long = "x".repeat(1000);
        let shown = Escaped(&long).to_string();
        assert!(shown.starts_with(&"x".repeat(MAX_LOGGED)));
        assert!(shown.ends_with("…(+744 chars)"), "{shown}");
        assert_eq!(Escaped("plain").to_string(), "plain");
    }

    #[test]
    fn one_line_per_window_with_the_count_held_back() {
        let t0 = Instant::now();
        let mut limit = LogLimit::new(Duration::from_secs(60));
        assert_eq!(limit.allow(t0), Some(0));
        for s in 1..=9 {
            assert_eq!(limit.allow(t0 + Duration::from_secs(s)), None);
        }
        assert_eq!(limit.allow(t0 + Duration::from_secs(60)), Some(9));
        assert_eq!(limit.allow(t0 + Duration::from_secs(61)), None);
    }
}
