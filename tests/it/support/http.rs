//! A raw, blocking HTTP/1.1 client ([`http_get`], [`http_request`]): one request per
//! connection (`Connection: close`), used for traffic through Envoy, Envoy's admin API and
//! axon's monitoring and debug addresses; [`http_request_on`] sends it on a connection the
//! caller made (a mesh pod's, `mesh/`). A connection-level failure is status 0.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A parsed HTTP response. `status` is 0 when the request failed at the
/// connection level (then `body` holds the error).
#[derive(Debug, Clone, Default)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    fn error(msg: String) -> Self {
        HttpResponse {
            status: 0,
            headers: Vec::new(),
            body: msg,
        }
    }
}

/// `GET path` with `Connection: close`; `Host` defaults to `example.com`
/// unless `headers` has one. Returns `(status, body)`, status 0 on failure.
pub fn http_get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let r = http_request(addr, "GET", path, headers, Duration::from_secs(5));
    (r.status, r.body)
}

/// Like [`http_get`] with a custom method and timeout, returning headers too.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> HttpResponse {
    match try_http_request(addr, method, path, headers, timeout) {
        Ok(r) => r,
        Err(e) => HttpResponse::error(format!("{method} http://{addr}{path}: {e}")),
    }
}

/// Like [`http_request`] on `stream`, a connection already made (to `what`, for messages).
pub fn http_request_on(
    stream: TcpStream,
    what: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> HttpResponse {
    match exchange(stream, method, path, headers, timeout) {
        Ok(r) => r,
        Err(e) => HttpResponse::error(format!("{method} http://{what}{path}: {e}")),
    }
}

fn try_http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<HttpResponse> {
    let stream = TcpStream::connect_timeout(&addr, timeout)?;
    exchange(stream, method, path, headers, timeout)
}

/// Sends the request on `stream` and reads the response.
fn exchange(
    mut stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<HttpResponse> {
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str("Host: example.com\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n");
    if method != "GET" && method != "HEAD" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;

    let mut raw = Vec::new();
    // Read to EOF (Connection: close), but stop early once a
    // Content-Length-delimited body is complete.
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if let Some(done) = response_complete(&raw)
                    && done
                {
                    break;
                }
            }
            Err(e) if raw.is_empty() => return Err(e),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionReset
                    || e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break;
            }
            Err(e) => return Err(e),
        }
    }
    parse_response(&raw)
}

/// `Some(true)` once the header block is in and a Content-Length body is
/// complete; `None`/`Some(false)` otherwise.
fn response_complete(raw: &[u8]) -> Option<bool> {
    let end = find_subslice(raw, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    for line in head.lines().skip(1) {
        if let Some((k, v)) = line.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            let len: usize = v.trim().parse().ok()?;
            return Some(raw.len() >= end + 4 + len);
        }
    }
    Some(false)
}

pub(crate) fn find_subslice(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let end = find_subslice(raw, b"\r\n\r\n").ok_or_else(|| {
        bad(&format!(
            "incomplete response ({} bytes): {:?}",
            raw.len(),
            String::from_utf8_lossy(raw)
        ))
    })?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = raw[end + 4..].to_vec();
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.truncate(len);
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        body = decode_chunked(&body);
    }
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn decode_chunked(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find_subslice(data, b"\r\n") {
        let size_str = String::from_utf8_lossy(&data[..eol]);
        let size_str = size_str.split(';').next().unwrap_or("").trim().to_string();
        let Ok(size) = usize::from_str_radix(&size_str, 16) else {
            break;
        };
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}
