//! [`Upstream`]: a tiny keep-alive HTTP/1.1 server on 127.0.0.1 that answers every request
//! with 200 and its own name, and counts the requests it served. Stopped on drop.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::http::find_subslice;

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers every request with
/// `200`, body = its name and header `x-upstream: NAME`. Keep-alive capable.
pub struct Upstream {
    name: String,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    hits: Arc<AtomicU64>,
    accept_thread: Option<JoinHandle<()>>,
}

impl Upstream {
    pub fn start(name: &str) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("upstream bind");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicU64::new(0));
        let accept_thread = {
            let stop = stop.clone();
            let hits = hits.clone();
            let name = name.to_string();
            thread::Builder::new()
                .name(format!("upstream-{name}"))
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(conn) = conn else { continue };
                        let (stop, hits, name) = (stop.clone(), hits.clone(), name.clone());
                        let _ = thread::Builder::new()
                            .name(format!("upstream-{name}-conn"))
                            .spawn(move || serve_upstream_conn(conn, &name, &stop, &hits));
                    }
                })
                .expect("spawn upstream thread")
        };
        Upstream {
            name: name.to_string(),
            addr,
            stop,
            hits,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests served so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Unblock accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_upstream_conn(mut conn: TcpStream, name: &str, stop: &AtomicBool, hits: &AtomicU64) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(250)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        // Serve every complete request in the buffer.
        while let Some(end) = find_subslice(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut content_length = 0usize;
            let mut close = false;
            let mut http10 = false;
            let mut lines = head.split("\r\n");
            if let Some(req_line) = lines.next() {
                http10 = req_line.ends_with("HTTP/1.0");
            }
            for line in lines {
                if let Some((k, v)) = line.split_once(':') {
                    let (k, v) = (k.trim(), v.trim());
                    if k.eq_ignore_ascii_case("content-length") {
                        content_length = v.parse().unwrap_or(0);
                    } else if k.eq_ignore_ascii_case("connection") {
                        close = v.eq_ignore_ascii_case("close");
                    }
                }
            }
            let total = end + 4 + content_length;
            if buf.len() < total {
                break; // body not complete yet
            }
            buf.drain(..total);
            hits.fetch_add(1, Ordering::SeqCst);
            let close = close || http10;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-upstream: {name}\r\n\
                 content-length: {}\r\n{}\r\n{name}",
                name.len(),
                if close { "connection: close\r\n" } else { "" }
            );
            if conn.write_all(resp.as_bytes()).is_err() || close {
                let _ = conn.shutdown(Shutdown::Both);
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}
