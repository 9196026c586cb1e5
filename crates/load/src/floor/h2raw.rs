//! The floor's HTTP/2, written on the socket: the leanest server a replay can be.
//!
//! Nothing here decodes more than an Envoy's server must: the frame headers, the client's
//! SETTINGS, PINGs and WINDOW_UPDATEs, and each request's node (once), type and nonce. The
//! request header blocks are skipped unread (no HPACK decoding); the response headers are
//! one constant block. Each captured response is framed once, at start, as the DATA frames
//! of stream 1 (the stream every simulated proxy opens), so a response that fits in the
//! client's windows is one `write` of bytes made before the run began; any other stream id,
//! frame size or a window too small for the whole message falls back to framing at the time
//! of writing, with the client's flow control obeyed.
//!
//! The server announces windows of 2³¹−1 (stream and connection), so it never sends a
//! WINDOW_UPDATE: the requests of a bench are a few MiB per connection at most.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{PushSpec, namespace_of};
use crate::wire::{self, Deframer};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const MAX_WINDOW: u32 = (1 << 31) - 1;
const DEFAULT_FRAME: usize = 16_384;
/// `:status: 200` (static index 8) and `content-type: application/grpc` (a literal without
/// indexing, name at static index 31).
const RESPONSE_HEADERS: &[u8] = b"\x88\x0f\x10\x10application/grpc";

/// One captured response: the gRPC message (5-byte prefix included) and the same already
/// framed as the DATA frames of stream 1 at the default frame size.
pub(crate) struct Frame {
    grpc: Bytes,
    stream1: Bytes,
}

impl Frame {
    pub(crate) fn new(grpc: Bytes) -> Frame {
        let mut out = BytesMut::with_capacity(grpc.len() + 9 * grpc.len().div_ceil(DEFAULT_FRAME));
        for chunk in grpc.chunks(DEFAULT_FRAME) {
            put_header(&mut out, chunk.len(), DATA, 0, 1);
            out.put_slice(chunk);
        }
        Frame {
            grpc,
            stream1: out.freeze(),
        }
    }
}

/// Per view (a namespace): the four responses (absent types are `None`).
pub(crate) type FramedViews = std::collections::HashMap<String, [Option<Frame>; 4]>;

fn put_header(out: &mut BytesMut, len: usize, ty: u8, flags: u8, stream: u32) {
    out.put_uint(len as u64, 3);
    out.put_u8(ty);
    out.put_u8(flags);
    out.put_u32(stream & 0x7fff_ffff);
}

/// One stream of a connection.
struct Stream {
    id: u32,
    /// The client's window for this stream.
    window: i64,
    deframer: Deframer,
    view: Option<String>,
    /// Messages (or their unsent tails) waiting for window.
    pending: VecDeque<Bytes>,
}

/// One connection's state: what the client allows and what waits to be written.
struct Conn {
    window: i64,
    initial_window: i64,
    max_frame: usize,
    streams: Vec<Stream>,
    /// Written first, in order: pre-framed responses and the bytes that were in `out` when
    /// each was queued (so that everything here precedes everything in `out`).
    ready: Vec<Bytes>,
    /// Written after `ready`: small frames (SETTINGS ACK, PING ACK, HEADERS) and data framed
    /// at the time of writing.
    out: BytesMut,
}

pub(crate) async fn connection(
    tcp: tokio::net::TcpStream,
    views: std::sync::Arc<FramedViews>,
    mut push_rx: tokio::sync::watch::Receiver<std::sync::Arc<PushSpec>>,
    delta: bool,
) -> anyhow::Result<()> {
    let (mut rd, mut wr) = tcp.into_split();
    let mut conn = Conn {
        window: 65_535,
        initial_window: 65_535,
        max_frame: DEFAULT_FRAME,
        streams: Vec::new(),
        out: BytesMut::with_capacity(256),
        ready: Vec::new(),
    };
    // Our SETTINGS (INITIAL_WINDOW_SIZE 2³¹−1) and the connection window to match.
    put_header(&mut conn.out, 6, SETTINGS, 0, 0);
    conn.out.put_u16(0x4);
    conn.out.put_u32(MAX_WINDOW);
    put_header(&mut conn.out, 4, WINDOW_UPDATE, 0, 0);
    conn.out.put_u32(MAX_WINDOW - 65_535);
    write_out(&mut wr, &mut conn).await?;
    let mut inbuf = BytesMut::with_capacity(4096);
    let mut preface = false;
    push_rx.borrow_and_update();
    loop {
        tokio::select! {
            n = rd.read_buf(&mut inbuf) => {
                if n? == 0 {
                    return Ok(());
                }
                if !preface {
                    if inbuf.len() < PREFACE.len() {
                        continue;
                    }
                    anyhow::ensure!(&inbuf[..PREFACE.len()] == PREFACE, "not an HTTP/2 preface");
                    let _ = inbuf.split_to(PREFACE.len());
                    preface = true;
                }
                while let Some(frame) = next_frame(&mut inbuf) {
                    if !conn.on_frame(frame, &views, delta)? {
                        return Ok(());
                    }
                }
                if inbuf.is_empty() && inbuf.capacity() > 65_536 {
                    inbuf = BytesMut::with_capacity(4096);
                }
            }
            changed = push_rx.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let spec = push_rx.borrow_and_update().clone();
                conn.push(&spec, &views);
            }
        }
        write_out(&mut wr, &mut conn).await?;
    }
}

async fn write_out(
    wr: &mut tokio::net::tcp::OwnedWriteHalf,
    conn: &mut Conn,
) -> std::io::Result<()> {
    // One `writev` for all of it, as long as the socket takes everything.
    let out = conn.out.split().freeze();
    let mut parts: Vec<Bytes> = conn.ready.drain(..).collect();
    if !out.is_empty() {
        parts.push(out);
    }
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<std::io::IoSlice<'_>> = parts[first..]
            .iter()
            .map(|b| std::io::IoSlice::new(b))
            .collect();
        let mut n = wr.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while first < parts.len() && n >= parts[first].len() {
            n -= parts[first].len();
            first += 1;
        }
        if n > 0 {
            let _ = parts[first].split_to(n);
        }
    }
    Ok(())
}

/// The next complete frame (type, flags, stream, payload) off the buffer.
fn next_frame(buf: &mut BytesMut) -> Option<(u8, u8, u32, Bytes)> {
    if buf.len() < 9 {
        return None;
    }
    let len = ((buf[0] as usize) << 16) | ((buf[1] as usize) << 8) | buf[2] as usize;
    if buf.len() < 9 + len {
        buf.reserve(9 + len - buf.len());
        return None;
    }
    let head = buf.split_to(9);
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Some((head[3], head[4], stream, buf.split_to(len).freeze()))
}

impl Conn {
    /// Handles one frame; `false` ends the connection.
    fn on_frame(
        &mut self,
        (ty, flags, id, payload): (u8, u8, u32, Bytes),
        views: &FramedViews,
        delta: bool,
    ) -> anyhow::Result<bool> {
        match ty {
            DATA => {
                let mut body = &payload[..];
                if flags & PADDED != 0 && !body.is_empty() {
                    let pad = body[0] as usize;
                    body = &body[1..body.len().saturating_sub(pad).max(1)];
                }
                let Some(i) = self.streams.iter().position(|s| s.id == id) else {
                    return Ok(true);
                };
                self.streams[i].deframer.push(body);
                while let Some(msg) = self.streams[i].deframer.next()? {
                    self.on_request(i, msg, views, delta)?;
                }
            }
            HEADERS => {
                // The header block is not read: every stream here is an ADS stream.
                anyhow::ensure!(flags & END_HEADERS != 0, "CONTINUATION is not supported");
                if !self.streams.iter().any(|s| s.id == id) {
                    self.streams.push(Stream {
                        id,
                        window: self.initial_window,
                        deframer: Deframer::default(),
                        view: None,
                        pending: VecDeque::new(),
                    });
                    put_header(
                        &mut self.out,
                        RESPONSE_HEADERS.len(),
                        HEADERS,
                        END_HEADERS,
                        id,
                    );
                    self.out.put_slice(RESPONSE_HEADERS);
                }
            }
            RST_STREAM => self.streams.retain(|s| s.id != id),
            SETTINGS if flags & ACK == 0 => {
                for setting in payload.chunks_exact(6) {
                    let value =
                        u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]);
                    match u16::from_be_bytes([setting[0], setting[1]]) {
                        0x4 => {
                            let change = value as i64 - self.initial_window;
                            self.initial_window = value as i64;
                            for s in &mut self.streams {
                                s.window += change;
                            }
                        }
                        0x5 => self.max_frame = value as usize,
                        _ => {}
                    }
                }
                put_header(&mut self.out, 0, SETTINGS, ACK, 0);
                self.flush();
            }
            PING if flags & ACK == 0 => {
                put_header(&mut self.out, 8, PING, ACK, 0);
                self.out.put_slice(&payload);
            }
            GOAWAY => return Ok(false),
            WINDOW_UPDATE if payload.len() == 4 => {
                let inc = (u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                    & 0x7fff_ffff) as i64;
                if id == 0 {
                    self.window += inc;
                } else if let Some(s) = self.streams.iter_mut().find(|s| s.id == id) {
                    s.window += inc;
                }
                self.flush();
            }
            _ => {}
        }
        Ok(true)
    }

    /// A request: the first of each type (empty nonce) is answered with its captured response.
    fn on_request(
        &mut self,
        i: usize,
        msg: Bytes,
        views: &FramedViews,
        delta: bool,
    ) -> anyhow::Result<()> {
        let (node, type_url, nonce) = if delta {
            let r = wire::DeltaRequestLite::decode(msg)?;
            (r.node, r.type_url, r.response_nonce)
        } else {
            let r = wire::SotwRequestLite::decode(msg)?;
            (r.node, r.type_url, r.response_nonce)
        };
        if self.streams[i].view.is_none() {
            let id = node.map(|n| n.id).unwrap_or_default();
            let namespace = namespace_of(&id).unwrap_or("").to_string();
            anyhow::ensure!(views.contains_key(&namespace), "no view for {id}");
            self.streams[i].view = Some(namespace);
        }
        let Some(ty) = wire::type_index(&type_url) else {
            return Ok(());
        };
        if nonce.is_empty() {
            self.send(i, views, ty);
        }
        Ok(())
    }

    /// A `push` line: the types of the spec to the streams of its namespaces.
    fn push(&mut self, spec: &PushSpec, views: &FramedViews) {
        for i in 0..self.streams.len() {
            if !self.streams[i]
                .view
                .as_deref()
                .is_some_and(|ns| spec.reaches(ns))
            {
                continue;
            }
            for ty in 0..4 {
                if spec.types & (1 << ty) != 0 {
                    self.send(i, views, ty);
                }
            }
        }
    }

    fn send(&mut self, i: usize, views: &FramedViews, ty: usize) {
        let stream = &mut self.streams[i];
        let Some(frame) = stream
            .view
            .as_ref()
            .and_then(|ns| views.get(ns))
            .and_then(|v| v[ty].as_ref())
        else {
            return;
        };
        let len = frame.grpc.len() as i64;
        if stream.pending.is_empty()
            && stream.id == 1
            && self.max_frame >= DEFAULT_FRAME
            && len <= stream.window
            && len <= self.window
        {
            // The common case: the bytes framed before the run, written as they are.
            stream.window -= len;
            self.window -= len;
            if !self.out.is_empty() {
                let small = self.out.split().freeze();
                self.ready.push(small);
            }
            self.ready.push(frame.stream1.clone());
            return;
        }
        stream.pending.push_back(frame.grpc.clone());
        self.flush();
    }

    /// Frames what waits, as far as the windows allow.
    fn flush(&mut self) {
        for stream in &mut self.streams {
            while let Some(head) = stream.pending.front_mut() {
                let n = head
                    .len()
                    .min(self.max_frame)
                    .min(stream.window.max(0) as usize)
                    .min(self.window.max(0) as usize);
                if n == 0 {
                    break;
                }
                let chunk = head.split_to(n);
                put_header(&mut self.out, n, DATA, 0, stream.id);
                self.out.put_slice(&chunk);
                stream.window -= n as i64;
                self.window -= n as i64;
                if head.is_empty() {
                    stream.pending.pop_front();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A real HTTP/2 client (the h2 crate, as the simulated proxies use) gets the captured
    /// response byte for byte, whether it fits the window (the pre-framed path) or must be
    /// framed as the window opens; a nonce'd request (an ACK) is not answered.
    async fn replay_to_a_client(window: u32) {
        let body: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let grpc = wire::grpc_frame(&body);
        let mut views = FramedViews::new();
        views.insert(
            "ns-0".into(),
            [Some(Frame::new(grpc.clone())), None, None, None],
        );
        let views = Arc::new(views);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (_push_tx, push_rx) = tokio::sync::watch::channel(Arc::new(PushSpec {
            types: 0,
            namespaces: None,
        }));
        tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            connection(tcp, views, push_rx, false).await.unwrap();
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::Builder::new()
            .initial_window_size(window)
            .initial_connection_window_size(window)
            .handshake::<_, Bytes>(tcp)
            .await
            .unwrap();
        tokio::spawn(conn);
        let mut client = client.ready().await.unwrap();
        let request = http::Request::post(format!("http://{addr}{}", wire::SOTW_PATH))
            .body(())
            .unwrap();
        let (response, mut tx) = client.send_request(request, false).unwrap();
        let node = {
            let mut b = BytesMut::new();
            prost::encoding::string::encode(
                1,
                &"sidecar~10.0.0.1~p.ns-0~ns-0.svc".to_string(),
                &mut b,
            );
            b
        };
        tx.send_data(
            wire::sotw_request(wire::CDS, "", "", &[], Some(&node)),
            false,
        )
        .unwrap();
        let mut body_rx = response.await.unwrap().into_body();
        let mut got = BytesMut::new();
        while got.len() < grpc.len() {
            let chunk = body_rx.data().await.unwrap().unwrap();
            let _ = body_rx.flow_control().release_capacity(chunk.len());
            got.extend_from_slice(&chunk);
        }
        assert_eq!(&got[..], &grpc[..]);
        // An ACK gets nothing; a new first request of the type would.
        tx.send_data(wire::sotw_request(wire::CDS, "v", "n", &[], None), false)
            .unwrap();
        let nothing =
            tokio::time::timeout(std::time::Duration::from_millis(100), body_rx.data()).await;
        assert!(nothing.is_err(), "an ACK is not answered");
    }

    #[tokio::test]
    async fn a_response_within_the_window_is_written_as_framed_before() {
        replay_to_a_client(1 << 20).await;
    }

    #[tokio::test]
    async fn a_response_larger_than_the_window_waits_for_window_updates() {
        replay_to_a_client(20_000).await;
    }
}
