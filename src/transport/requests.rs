//! A stream's requests, decoded from its HTTP/2 body as they arrive, within bounds: a request
//! of at most `max_message_size`, arriving whole within `message_timeout` of its first bytes,
//! and the bytes of partial requests buffered over all streams at most
//! `max_request_buffer_bytes` (the [`Budget`], shown in `axon_request_buffer_bytes`). A
//! request out of bounds ends the stream with an error.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use tonic::body::Body;

use super::RequestStream;
use crate::xds::decode::RequestReader;

/// The bytes of partial requests buffered over every stream, and their bound.
#[derive(Clone)]
pub struct Budget {
    used: Arc<AtomicUsize>,
    max: usize,
    gauge: prometheus::IntGauge,
}

impl Budget {
    pub fn new(max: usize, gauge: prometheus::IntGauge) -> Budget {
        Budget {
            used: Arc::default(),
            max,
            gauge,
        }
    }

    /// Moves a stream's share from `from` to `to` bytes; `false` if that goes over the bound
    /// (the share is then given back whole).
    fn resize(&self, from: usize, to: usize) -> bool {
        let used = if to >= from {
            self.used.fetch_add(to - from, Ordering::SeqCst) + (to - from)
        } else {
            self.used.fetch_sub(from - to, Ordering::SeqCst) - (from - to)
        };
        self.gauge.set(used as i64);
        if used > self.max && to > from {
            self.used.fetch_sub(to, Ordering::SeqCst);
            self.gauge.set(self.used.load(Ordering::SeqCst) as i64);
            return false;
        }
        true
    }
}

/// A stream's share of the [`Budget`], given back when the stream ends.
struct Share {
    budget: Budget,
    held: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.resize(self.held, 0);
    }
}

/// What bounds a stream's requests.
pub struct Bounds {
    pub delta: bool,
    pub max_message_size: usize,
    pub message_timeout: Duration,
    pub budget: Budget,
}

struct State {
    body: Body,
    reader: RequestReader,
    share: Share,
    /// When the partial request buffered began to arrive.
    partial_since: Option<tokio::time::Instant>,
    message_timeout: Duration,
    ended: bool,
}

/// The requests of a stream, decoded from its body as they arrive.
pub fn stream(body: Body, bounds: Bounds) -> RequestStream {
    let state = State {
        body,
        reader: RequestReader::with_limit(bounds.delta, bounds.max_message_size),
        share: Share {
            budget: bounds.budget,
            held: 0,
        },
        partial_since: None,
        message_timeout: bounds.message_timeout,
        ended: false,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        if s.ended {
            return None;
        }
        match next(&mut s).await {
            Some(Ok(request)) => Some((Ok(request), s)),
            Some(Err(e)) => {
                s.ended = true;
                Some((Err(e), s))
            }
            None => None,
        }
    }))
}

async fn next(s: &mut State) -> Option<Result<crate::xds::Request, String>> {
    loop {
        match s.reader.next_request() {
            Ok(Some(request)) => {
                account(s);
                return Some(Ok(request));
            }
            Err(e) => return Some(Err(e.to_string())),
            Ok(None) => {}
        }
        if !account(s) {
            return Some(Err(format!(
                "the buffered parts of requests over every stream passed {} bytes \
                 (max_request_buffer_bytes)",
                s.share.budget.max
            )));
        }
        let frame = match s.partial_since {
            Some(since) => {
                let deadline = since + s.message_timeout;
                match tokio::time::timeout_at(deadline, s.body.frame()).await {
                    Ok(frame) => frame,
                    Err(_) => {
                        return Some(Err(format!(
                            "a request of which {} bytes came did not arrive whole within {:?} \
                             (message_timeout)",
                            s.reader.buffered(),
                            s.message_timeout
                        )));
                    }
                }
            }
            None => s.body.frame().await,
        };
        match frame {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    s.reader.push(data);
                }
            }
            Some(Err(e)) => return Some(Err(e.to_string())),
            None => return None,
        }
    }
}

/// Brings the stream's share of the budget and its partial-request clock up to date; `false`
/// when the budget is exhausted.
fn account(s: &mut State) -> bool {
    let now = s.reader.buffered();
    if now == 0 {
        s.partial_since = None;
    } else if s.partial_since.is_none() {
        s.partial_since = Some(tokio::time::Instant::now());
    }
    let ok = s.share.budget.resize(s.share.held, now);
    s.share.held = if ok { now } else { 0 };
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_bound_and_gives_shares_back() {
        let gauge = prometheus::IntGauge::new("g", "g").unwrap();
        let budget = Budget::new(100, gauge.clone());
        assert!(budget.resize(0, 60));
        assert!(!budget.resize(0, 50), "60 + 50 > 100");
        assert_eq!(gauge.get(), 60);
        assert!(budget.resize(60, 10));
        assert!(budget.resize(0, 90));
        assert_eq!(gauge.get(), 100);
        {
            let _share = Share {
                budget: budget.clone(),
                held: 90,
            };
        }
        assert_eq!(gauge.get(), 10, "a dropped share is given back");
    }
}
