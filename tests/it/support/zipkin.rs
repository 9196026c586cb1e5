//! [`Zipkin`]: a Zipkin-compatible span collector on 127.0.0.1 (a port of its own) for the
//! tracing tests. It takes what Envoy's zipkin tracer sends with `HTTP_JSON`: `POST
//! /api/v2/spans`, a JSON array of v2 spans (`traceId`, `id`, `kind`, `name`,
//! `localEndpoint.serviceName`, `tags`, ...), its body sized by `content-length` or chunked;
//! stores the spans and answers 202 on a keep-alive HTTP/1.1 connection. Anything else (another
//! path, a body that is not a JSON array, e.g. `application/x-protobuf`) is answered 400 or 404
//! and recorded apart, so that a test can say why no span arrived. Stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use super::accept::{Acceptor, poke_at};
use super::wait::wait_until;

/// What the collector received.
#[derive(Debug, Default)]
struct Received {
    /// Every span of every accepted post, in arrival order.
    spans: Vec<Value>,
    /// Requests it could not take: `METHOD PATH content-type: reason`.
    rejected: Vec<String>,
    /// Accepted posts.
    posts: usize,
}

pub struct Zipkin {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    _acceptor: Acceptor,
}

impl Zipkin {
    pub fn start() -> Zipkin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("zipkin bind");
        let addr = listener.local_addr().unwrap();
        let received: Arc<Mutex<Received>> = Arc::default();
        let r2 = received.clone();
        let acceptor = Acceptor::spawn("zipkin", listener, poke_at(addr), move |conn| {
            serve(conn, &r2)
        });
        Zipkin {
            addr,
            received,
            _acceptor: acceptor,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Value> {
        self.received.lock().unwrap().spans.clone()
    }

    /// How many posts were accepted.
    pub fn posts(&self) -> usize {
        self.received.lock().unwrap().posts
    }

    /// The requests it could not take.
    pub fn rejected(&self) -> Vec<String> {
        self.received.lock().unwrap().rejected.clone()
    }

    /// The spans received so far that satisfy `pred`.
    pub fn spans_where(&self, pred: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.received
            .lock()
            .unwrap()
            .spans
            .iter()
            .filter(|s| pred(s))
            .cloned()
            .collect()
    }

    /// Waits (up to `timeout`) for a span that satisfies `pred`, and returns it.
    pub fn wait_for_span(&self, timeout: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let mut found = None;
        wait_until(timeout, || {
            found = self.spans_where(&pred).into_iter().next();
            found.is_some()
        });
        found
    }

    /// A summary for failure messages: posts, spans (name, kind, service, url) and rejections.
    pub fn describe(&self) -> String {
        let r = self.received.lock().unwrap();
        let spans: Vec<String> = r
            .spans
            .iter()
            .map(|s| {
                format!(
                    "  {} {} service={} url={} traceId={}",
                    s["kind"],
                    s["name"],
                    s["localEndpoint"]["serviceName"],
                    s["tags"]["http.url"],
                    s["traceId"]
                )
            })
            .collect();
        format!(
            "zipkin collector on {}: {} posts accepted, {} spans:\n{}\nrejected: {:?}",
            self.addr,
            r.posts,
            r.spans.len(),
            spans.join("\n"),
            r.rejected
        )
    }
}

/// A span's tag `name` ("" when it has none).
pub fn span_tag(span: &Value, name: &str) -> String {
    span["tags"][name].as_str().unwrap_or_default().to_string()
}

/// Serves keep-alive requests on one connection until it closes.
fn serve(conn: TcpStream, received: &Mutex<Received>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    loop {
        let Some((method, path, headers)) = read_head(&mut reader) else {
            return;
        };
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        let body = if header("transfer-encoding").eq_ignore_ascii_case("chunked") {
            read_chunked(&mut reader)
        } else {
            let length: usize = header("content-length").parse().unwrap_or(0);
            let mut body = vec![0u8; length];
            reader.read_exact(&mut body).ok().map(|_| body)
        };
        let Some(body) = body else { return };
        let content_type = header("content-type");
        let status = if method != "POST" || path.split('?').next() != Some("/api/v2/spans") {
            received
                .lock()
                .unwrap()
                .rejected
                .push(format!("{method} {path} {content_type}: not a span post"));
            "404 Not Found"
        } else {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Array(spans)) => {
                    let mut r = received.lock().unwrap();
                    r.posts += 1;
                    r.spans.extend(spans);
                    "202 Accepted"
                }
                other => {
                    let reason = match other {
                        Ok(v) => format!("JSON but not an array: {v}"),
                        Err(e) => format!("not JSON ({e}), {} bytes", body.len()),
                    };
                    received
                        .lock()
                        .unwrap()
                        .rejected
                        .push(format!("{method} {path} {content_type}: {reason}"));
                    "400 Bad Request"
                }
            }
        };
        let answer = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A request's method, path and headers (names lower-cased).
type Head = (String, String, Vec<(String, String)>);

/// The request line and headers, `None` once the connection closes.
fn read_head(reader: &mut impl BufRead) -> Option<Head> {
    let mut line = String::new();
    // Skip blank lines between requests.
    while line.trim().is_empty() {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
    }
    let mut first = line.split_whitespace();
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Some((method, path, headers))
}

/// A chunked body, `None` if the connection ends inside it.
fn read_chunked(reader: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        if reader.read_line(&mut size_line).ok()? == 0 {
            return None;
        }
        let size = usize::from_str_radix(size_line.trim().split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut t = String::new();
                if reader.read_line(&mut t).ok()? == 0 || t.trim().is_empty() {
                    return Some(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..]).ok()?;
        let mut crlf = String::new();
        reader.read_line(&mut crlf).ok()?;
    }
}
