//! One HTTP/2 connection's streams, served on the h2 crate directly: a request's body
//! ([`RecvBody`], read with no body layer between h2 and the request decoder) and a
//! response's body written to its h2 stream ([`Pump`]).
//!
//! An ADS stream's responses are pumped by the connection's own task (`server.rs` polls
//! its pumps beside the connection): no task per stream, no body layers between the
//! stream's bounded queue ([`ResponseBody`]) and h2. A pump polls its body only while the
//! peer's window has room, as hyper's did, so what h2 buffers stays within a message; a
//! stream the peer resets ends its pump, which drops the body, so that the stream's owner
//! sees it closed.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tonic::Status;
use tonic::body::Body;

use super::sink::ResponseBody;

/// A request's body: the DATA frames of its h2 stream as they arrive (their bytes given back
/// to the peer's window as they are read), then its trailers.
pub(crate) struct RecvBody {
    recv: h2::RecvStream,
    data_done: bool,
}

impl RecvBody {
    pub(crate) fn new(recv: h2::RecvStream) -> RecvBody {
        RecvBody {
            recv,
            data_done: false,
        }
    }
}

impl HttpBody for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        if !self.data_done {
            match ready!(self.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Read, so the peer may send as much again (what is held past this is
                    // bounded by the request buffers, `requests.rs`).
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        match ready!(self.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// What a response's body is: an ADS stream's queue, or any other (unary) answer.
pub(crate) enum Out {
    Ads(ResponseBody),
    Other(Body),
}

impl Out {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        match self {
            Out::Ads(body) => Pin::new(body).poll_frame(cx),
            Out::Other(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Out::Ads(body) => body.is_end_stream(),
            Out::Other(body) => body.is_end_stream(),
        }
    }
}

/// Writes a response's body to its h2 stream: DATA frames, then the trailers (an error the
/// body ends with becomes its gRPC status, as tonic's). Resolves when the stream is done,
/// or reset by the peer. `G` is held for as long as it runs (the connection's count of open
/// streams).
pub(crate) struct Pump<G> {
    body: Out,
    send: h2::SendStream<Bytes>,
    _guard: G,
}

impl<G> Pump<G> {
    /// Sends the response's headers (with END_STREAM when the body is empty, as a gRPC
    /// trailers-only answer is); `None` when the stream is gone already.
    pub(crate) fn start(
        mut respond: h2::server::SendResponse<Bytes>,
        head: http::Response<()>,
        body: Out,
        guard: G,
    ) -> Option<Pump<G>> {
        let end = body.is_end_stream();
        let send = respond.send_response(head, end).ok()?;
        (!end).then_some(Pump {
            body,
            send,
            _guard: guard,
        })
    }
}

impl<G: Unpin> Future for Pump<G> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            // The body is polled only while the peer's window has room (one byte asked):
            // a message is then handed to h2 whole, and nothing piles up behind a full window.
            this.send.reserve_capacity(1);
            if this.send.capacity() == 0 {
                loop {
                    match ready!(this.send.poll_capacity(cx)) {
                        Some(Ok(0)) => {}
                        Some(Ok(_)) => break,
                        Some(Err(_)) | None => return Poll::Ready(()),
                    }
                }
            } else if this.send.poll_reset(cx).is_ready() {
                return Poll::Ready(());
            }
            match ready!(this.body.poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let end = this.body.is_end_stream();
                        if this.send.send_data(data, end).is_err() || end {
                            return Poll::Ready(());
                        }
                    }
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            let _ = this.send.send_trailers(trailers);
                        }
                        return Poll::Ready(());
                    }
                },
                Some(Err(status)) => {
                    let mut trailers = http::HeaderMap::new();
                    // A status always renders into headers; an unrenderable message, its code.
                    let _ = status.add_header(&mut trailers);
                    let _ = this.send.send_trailers(trailers);
                    return Poll::Ready(());
                }
                None => {
                    let _ = this.send.send_data(Bytes::new(), true);
                    return Poll::Ready(());
                }
            }
        }
    }
}
