//! One HTTP/2 connection's streams, served on the h2 crate directly: a request's body
//! ([`RecvBody`], read with no body layer between h2 and the request decoder) and a
//! response's body written to its h2 stream ([`Pump`]).
//!
//! An ADS stream's responses are pumped by the connection's own task (`server.rs` polls
//! its pumps beside the connection): no task per stream, no body layers between the
//! stream's bounded queue ([`ResponseBody`]) and h2. As hyper 1.12's pipe does, a pump holds
//! the chunk it polled until the stream has send capacity and only then polls its body
//! again, so what h2 buffers stays within a message; it claims capacity only with a chunk in
//! hand (a claim held by an idle stream pins the connection's window against the others,
//! hyperium/hyper#4003). A stream the peer resets ends its pump, which drops the body, so
//! that the stream's owner sees it closed.
//!
//! A request body that the peer resets with NO_ERROR ends cleanly, as hyper's did: Envoy
//! resets its own streams with NO_ERROR when it closes them.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame};
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
                Some(Err(e)) if e.reason() == Some(h2::Reason::NO_ERROR) => {
                    return Poll::Ready(None);
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => self.data_done = true,
            }
        }
        match ready!(self.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) if e.reason() == Some(h2::Reason::NO_ERROR) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
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
    /// A chunk polled from the body, waiting for send capacity, and whether it ends the body.
    held: Option<(Bytes, bool)>,
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
            held: None,
            _guard: guard,
        })
    }
}

impl<G: Unpin> Future for Pump<G> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        loop {
            // Registered while the pump waits for its body or for capacity.
            if this.send.poll_reset(cx).is_ready() {
                return Poll::Ready(());
            }
            if let Some((data, end)) = this.held.take() {
                while this.send.capacity() == 0 {
                    match this.send.poll_capacity(cx) {
                        Poll::Pending => {
                            this.held = Some((data, end));
                            return Poll::Pending;
                        }
                        Poll::Ready(Some(Ok(0))) => {}
                        Poll::Ready(Some(Ok(_))) => break,
                        Poll::Ready(Some(Err(_)) | None) => return Poll::Ready(()),
                    }
                }
                if this.send.send_data(data, end).is_err() || end {
                    return Poll::Ready(());
                }
                continue;
            }
            match ready!(this.body.poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let end = this.body.is_end_stream();
                        if data.is_empty() {
                            // Needs no capacity.
                            if this.send.send_data(data, end).is_err() || end {
                                return Poll::Ready(());
                            }
                            continue;
                        }
                        // One byte claimed, with the chunk in hand: h2 raises the claim to
                        // what is buffered as it sends.
                        this.send.reserve_capacity(1);
                        this.held = Some((data, end));
                    }
                    Err(frame) => {
                        this.send.reserve_capacity(0);
                        if let Ok(trailers) = frame.into_trailers() {
                            let _ = this.send.send_trailers(trailers);
                        }
                        return Poll::Ready(());
                    }
                },
                Some(Err(status)) => {
                    this.send.reserve_capacity(0);
                    let mut trailers = http::HeaderMap::new();
                    // A status always renders into headers; an unrenderable message, its code.
                    let _ = status.add_header(&mut trailers);
                    let _ = this.send.send_trailers(trailers);
                    return Poll::Ready(());
                }
                None => {
                    this.send.reserve_capacity(0);
                    let _ = this.send.send_data(Bytes::new(), true);
                    return Poll::Ready(());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// A request a client resets with NO_ERROR (as Envoy resets the streams it closes) ends
    /// its body cleanly; one reset with CANCEL is an error.
    #[tokio::test]
    async fn a_reset_with_no_error_ends_the_request_body_cleanly() {
        for (reason, clean) in [(h2::Reason::NO_ERROR, true), (h2::Reason::CANCEL, false)] {
            let (server, client) = tokio::io::duplex(1 << 16);
            let served = tokio::spawn(async move {
                let mut conn = h2::server::handshake(server).await.expect("handshake");
                let (request, _respond) = conn.accept().await.expect("a stream").expect("ok");
                let driving = tokio::spawn(async move { while conn.accept().await.is_some() {} });
                let mut body = RecvBody::new(request.into_body());
                let first = body.frame().await.expect("a frame").expect("data");
                assert_eq!(first.into_data().unwrap(), Bytes::from_static(b"hello"));
                let rest = body.frame().await;
                driving.abort();
                rest.map(|r| r.map(|_| ()))
            });
            let (mut send, conn) = h2::client::handshake(client).await.expect("handshake");
            let client_conn = tokio::spawn(conn);
            let request = http::Request::post("http://axon/x").body(()).unwrap();
            let (_response, mut stream) = send.send_request(request, false).expect("stream");
            stream
                .send_data(Bytes::from_static(b"hello"), false)
                .unwrap();
            // The reset follows the data on the wire; h2 hands over the data first.
            stream.send_reset(reason);
            let rest = served.await.unwrap();
            match (clean, rest) {
                (true, None) => {}
                (false, Some(Err(_))) => {}
                (_, other) => panic!("{reason:?}: {other:?}"),
            }
            client_conn.abort();
        }
    }
}
