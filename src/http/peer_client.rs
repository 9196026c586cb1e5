//! The client the Fleet actor and the fleet view ask peer replicas with: a GET of a path on
//! a peer's monitoring address, over HTTP/1.1 (`Connection: close`), its body read as JSON.
//!
//! Bounded: the answer is read up to `max_peer_answer_bytes` (a larger one is an error, and
//! the peer is left out of that answer) and within the caller's timeout. With
//! `--debug-token-file`, the token goes along (the peers' per-proxy answers need it).

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::actors::fleet::{PeerAnswer, PeerClient};

#[derive(Clone)]
pub struct HttpPeers {
    pub token: Option<Arc<str>>,
    pub max_bytes: usize,
}

impl PeerClient for HttpPeers {
    fn get(&self, addr: &str, path: &str) -> PeerAnswer {
        let (addr, path, peers) = (addr.to_string(), path.to_string(), self.clone());
        Box::pin(async move { peers.fetch(&addr, &path).await })
    }
}

impl HttpPeers {
    async fn fetch(&self, addr: &str, path: &str) -> Result<serde_json::Value, String> {
        let mut tcp = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connecting: {e}"))?;
        let auth = match &self.token {
            Some(token) => format!("Authorization: Bearer {token}\r\n"),
            None => String::new(),
        };
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n{auth}Connection: close\r\n\r\n"
        );
        tcp.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("sending: {e}"))?;
        // The head, at most 16 KiB, is beside the body's bound.
        let cap = self.max_bytes.saturating_add(16 << 10);
        let mut raw = Vec::new();
        (&mut tcp)
            .take(cap as u64 + 1)
            .read_to_end(&mut raw)
            .await
            .map_err(|e| format!("reading: {e}"))?;
        if raw.len() > cap {
            return Err(format!(
                "answer larger than max_peer_answer_bytes ({})",
                self.max_bytes
            ));
        }
        parse_response(&raw)
    }
}

/// A whole HTTP/1.1 response (read to the connection's end): its JSON body if 200.
fn parse_response(raw: &[u8]) -> Result<serde_json::Value, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no complete HTTP head")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|_| "HTTP head not UTF-8")?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .ok_or("no HTTP status line")?;
    let chunked = lines.any(|l| {
        l.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("transfer-encoding")
                && value.trim().eq_ignore_ascii_case("chunked")
        })
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    if status != "200" {
        let text = String::from_utf8_lossy(&body);
        return Err(format!("HTTP {status}: {}", text.trim()));
    }
    serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk")?;
        let size = std::str::from_utf8(&body[..end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .ok_or("bad chunk size")?;
        body = &body[end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size + 2 {
            return Err("truncated chunk".to_string());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_plain_or_chunked_and_errors_say_why() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\n{\"streams\":3}";
        assert_eq!(parse_response(plain).unwrap()["streams"], 3);
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap()["a"], 1);
        let refused = b"HTTP/1.1 401 Unauthorized\r\n\r\nneeds a token\n";
        assert_eq!(
            parse_response(refused).unwrap_err(),
            "HTTP 401: needs a token"
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n\r\nnot json").is_err());
    }

    #[tokio::test]
    async fn an_answer_over_the_bound_is_refused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf).await;
            let body = format!("[{}0]", "0,".repeat(50_000));
            let _ = s
                .write_all(format!("HTTP/1.1 200 OK\r\n\r\n{body}").as_bytes())
                .await;
        });
        let peers = HttpPeers {
            token: None,
            max_bytes: 1000,
        };
        let e = peers.get(&addr, "/fleet/replica").await.unwrap_err();
        assert!(e.contains("max_peer_answer_bytes"), "{e}");
    }
}
