//! [`StatusUpstream`]: an HTTP/1.1 server on 127.0.0.1 that answers every request (keep-alive)
//! with the status it is set to and `x-upstream: NAME`, and counts them: an endpoint that can
//! be made to fail while Envoy keeps its connections.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::thread;

pub struct StatusUpstream {
    port: u16,
    status: Arc<AtomicU16>,
    hits: Arc<AtomicU64>,
}

impl StatusUpstream {
    /// Starts answering `status` as `name`.
    pub fn start(name: &str, status: u16) -> StatusUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("status upstream bind");
        let port = listener.local_addr().unwrap().port();
        let status = Arc::new(AtomicU16::new(status));
        let hits = Arc::new(AtomicU64::new(0));
        let (status2, hits2, name) = (status.clone(), hits.clone(), name.to_string());
        thread::Builder::new()
            .name(format!("status-{name}"))
            .spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let (status, hits, name) = (status2.clone(), hits2.clone(), name.clone());
                    thread::spawn(move || serve(conn, &name, &status, &hits));
                }
            })
            .expect("spawn status upstream");
        StatusUpstream { port, status, hits }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// What it answers from now on.
    pub fn set_status(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    /// Requests answered so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

fn serve(mut conn: std::net::TcpStream, name: &str, status: &AtomicU16, hits: &AtomicU64) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while let Ok(n @ 1..) = conn.read(&mut chunk) {
        buf.extend_from_slice(&chunk[..n]);
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            hits.fetch_add(1, Ordering::SeqCst);
            let code = status.load(Ordering::SeqCst);
            let answer = format!(
                "HTTP/1.1 {code} X\r\nx-upstream: {name}\r\ncontent-length: {}\r\n\r\n{name}",
                name.len()
            );
            if conn.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    }
}
