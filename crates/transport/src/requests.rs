//! A stream's requests, decoded from its HTTP/2 body as they arrive, within bounds: a request
//! of at most `max_message_size`, arriving whole within `message_timeout` of its first bytes,
//! and the bytes of partial requests held within the [`buffers`](super::buffers) budgets
//! (over every stream, over the connection's, and, until the stream's first request, over
//! the streams not yet admitted). Only what stays buffered counts: a frame that completes a
//! request needs no room. A stream whose partial request has no room waits for room without
//! reading further (its client is held back by HTTP/2 flow control; what HTTP/2 holds unread
//! is bounded by the connection's window, `http2_receive_window`), until `message_timeout`; it holds at most
//! the frame it read last (16 KiB, axon's HTTP/2 frame size) past the budgets meanwhile.
//!
//! A request out of bounds ends the stream with the [`CloseReason`] gRPC gives it
//! (INVALID_ARGUMENT for a malformed one, RESOURCE_EXHAUSTED for one over
//! `max_message_size`, DEADLINE_EXCEEDED for one not whole in time), counted in
//! `axon_request_errors{reason}`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;

use super::RequestStream;
use super::buffers::Shares;
use axon_xds::Request;
use axon_xds::decode::RequestReader;
use axon_xds::protocol::stream::CloseReason;
use axon_xds::wire::FrameError;

/// What bounds a stream's requests.
pub(crate) struct Bounds {
    pub delta: bool,
    pub max_message_size: usize,
    pub message_timeout: Duration,
    pub shares: Shares,
    /// `axon_request_errors{reason}`.
    pub errors: prometheus::IntCounterVec,
}

struct State<B> {
    body: B,
    reader: RequestReader,
    shares: Shares,
    /// When the partial request buffered began to arrive.
    partial_since: Option<tokio::time::Instant>,
    message_timeout: Duration,
    errors: prometheus::IntCounterVec,
    ended: bool,
}

/// The requests of a stream, decoded from its body as they arrive.
pub(crate) fn stream<B>(body: B, bounds: Bounds) -> RequestStream
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::fmt::Display,
{
    let state = State {
        body,
        reader: RequestReader::with_limit(bounds.delta, bounds.max_message_size),
        shares: bounds.shares,
        partial_since: None,
        message_timeout: bounds.message_timeout,
        errors: bounds.errors,
        ended: false,
    };
    Box::pin(futures::stream::unfold(state, |mut s| async move {
        if s.ended {
            return None;
        }
        match next(&mut s).await {
            Some(Ok(request)) => Some((Ok(request), s)),
            Some(Err((reason, close))) => {
                s.ended = true;
                s.errors.with_label_values(&[reason]).inc();
                Some((Err(close), s))
            }
            None => None,
        }
    }))
}

/// Why a stream's requests end: the `reason` label, and how the stream is closed.
type Failure = (&'static str, CloseReason);

async fn next<B>(s: &mut State<B>) -> Option<Result<Request, Failure>>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    loop {
        match s.reader.next_request() {
            Ok(Some(request)) => {
                // The first request admits the stream: its pending share is given back.
                s.shares.admitted();
                s.partial_since = None;
                return Some(Ok(request));
            }
            Err(e) => return Some(Err(frame_failure(e))),
            Ok(None) => {}
        }
        // What is buffered now is part of a request: it needs room in the budgets.
        if s.reader.buffered() == 0 {
            s.partial_since = None;
        } else if s.partial_since.is_none() {
            s.partial_since = Some(tokio::time::Instant::now());
        }
        if let Err(failure) = hold(s).await {
            return Some(Err(failure));
        }
        let frame = match s.partial_since {
            Some(since) => {
                match tokio::time::timeout_at(since + s.message_timeout, s.body.frame()).await {
                    Ok(frame) => frame,
                    Err(_) => return Some(Err(late(s, None))),
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
            Some(Err(e)) => {
                return Some(Err((
                    "transport",
                    CloseReason::InvalidArgument(format!("the request stream failed: {e}")),
                )));
            }
            None => return None,
        }
    }
}

/// Makes the stream's shares what it buffers; without room, waits for room (reading
/// nothing more) until the partial request's `message_timeout`.
async fn hold<B>(s: &mut State<B>) -> Result<(), Failure> {
    let want = s.reader.buffered();
    // The common case first, without the snapshot `room` takes (it clones every budget):
    // the resize that succeeds at once, above all the no-op of a stream that holds nothing.
    if s.shares.resize(want).is_ok() {
        return Ok(());
    }
    loop {
        // Snapshot, then retry: bytes given back before the snapshot are seen by the retry,
        // those given back after it wake `room`.
        let room = s.shares.room();
        let full = match s.shares.resize(want) {
            Ok(()) => return Ok(()),
            Err(full) => full,
        };
        let since = *s
            .partial_since
            .get_or_insert_with(tokio::time::Instant::now);
        let deadline = since + s.message_timeout;
        let in_time = tokio::time::Instant::now() < deadline
            && tokio::time::timeout_at(deadline, room).await.is_ok();
        if !in_time {
            return Err(late(s, Some((full.key(), full.max()))));
        }
    }
}

/// The partial request did not arrive whole in time (`full`: because it waited for room in
/// that budget).
fn late<B>(s: &State<B>, full: Option<(&'static str, usize)>) -> Failure {
    let came = s.reader.buffered();
    let why = match full {
        Some((key, max)) => {
            format!("; it waited for room among the partial requests buffered, {max} bytes ({key})")
        }
        None => String::new(),
    };
    (
        "message_timeout",
        CloseReason::DeadlineExceeded(format!(
            "a request of which {came} bytes came did not arrive whole within {:?} \
             (message_timeout){why}",
            s.message_timeout
        )),
    )
}

fn frame_failure(e: FrameError) -> Failure {
    match e {
        FrameError::TooLarge(..) => (
            "max_message_size",
            CloseReason::ResourceExhausted(e.to_string()),
        ),
        FrameError::Compressed | FrameError::Decode(_) => (
            "malformed",
            CloseReason::InvalidArgument(format!("bad request: {e}")),
        ),
    }
}
