//! [`EchoUpstream`]: an HTTP/1.1 server on 127.0.0.1 that answers with what it received
//! (method, path, headers, as JSON) and records every request, so that a test sees what
//! Envoy sent upstream: rewritten paths and authorities, added and removed headers, retried
//! attempts. Requests steer it by header: `x-delay-ms: N` answers after N ms; `x-fail-first:
//! K` with `x-request-key: KEY` answers 503 to the first K requests of KEY. A WebSocket
//! upgrade (`upgrade: websocket`) is answered 101 and the connection then echoes its bytes.
//! Each request is recorded with the peer address it came from (a mesh pod's app, see
//! `mesh/`, serves on a listener made in its network namespace: [`EchoUpstream::serve`]).
//! Stopped on drop.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use super::accept::{Acceptor, poke_at};
use super::http::find_subslice;

/// One request as the upstream received it (header names lower-cased).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    /// The address the connection came from.
    pub peer: Option<SocketAddr>,
}

pub struct EchoUpstream {
    name: String,
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Recorded>>>,
    _acceptor: Acceptor,
}

impl EchoUpstream {
    /// An echo on 127.0.0.1, on a port of its own.
    pub fn start(name: &str) -> EchoUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("echo bind");
        let addr = listener.local_addr().unwrap();
        Self::serve(listener, name, poke_at(addr))
    }

    /// An echo on `listener`; `poke` connects to it (from wherever that listener is
    /// reachable) when the echo is dropped, to end its accept loop.
    pub fn serve(
        listener: TcpListener,
        name: &str,
        poke: impl Fn() + Send + Sync + 'static,
    ) -> EchoUpstream {
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let (seen2, name2) = (seen.clone(), name.to_string());
        let acceptor = Acceptor::spawn(&format!("echo-{name}"), listener, poke, move |conn| {
            serve(conn, &name2, &seen2)
        });
        EchoUpstream {
            name: name.to_string(),
            addr,
            seen,
            _acceptor: acceptor,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many requests it has received.
    pub fn hits(&self) -> u64 {
        self.seen.lock().unwrap().len() as u64
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }

    /// The requests received with `x-request-key: key`.
    pub fn requests_with_key(&self, key: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.headers.get("x-request-key").map(String::as_str) == Some(key))
            .collect()
    }
}

/// Serves keep-alive requests on one connection until it closes.
fn serve(mut conn: TcpStream, name: &str, seen: &Mutex<Vec<Recorded>>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let peer = conn.peer_addr().ok();
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let head_end = loop {
            if let Some(i) = find_subslice(&buf, b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        buf.drain(..head_end + 4);
        let mut lines = head.split("\r\n");
        let mut first = lines.next().unwrap_or_default().split(' ');
        let (method, path) = (
            first.next().unwrap_or_default().to_string(),
            first.next().unwrap_or_default().to_string(),
        );
        let headers: BTreeMap<String, String> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        // Bodies are not expected (GET, and Envoy's mirrors of them); skip a declared one.
        let length: usize = headers
            .get("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < length {
            let mut chunk = [0u8; 4096];
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..length);
        let recorded = Recorded {
            method,
            path,
            headers,
            peer,
        };
        let key = recorded.headers.get("x-request-key").cloned();
        let fail_first: usize = recorded
            .headers
            .get("x-fail-first")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let delay: u64 = recorded
            .headers
            .get("x-delay-ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let attempt = {
            let mut seen = seen.lock().unwrap();
            seen.push(recorded.clone());
            key.map_or(1, |k| {
                seen.iter()
                    .filter(|r| r.headers.get("x-request-key") == Some(&k))
                    .count()
            })
        };
        if delay > 0 {
            thread::sleep(Duration::from_millis(delay));
        }
        if recorded
            .headers
            .get("upgrade")
            .is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
        {
            let _ = conn.write_all(
                b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n",
            );
            let _ = conn.write_all(&buf);
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = conn.read(&mut chunk) {
                if conn.write_all(&chunk[..n]).is_err() {
                    return;
                }
            }
            return;
        }
        let status = if attempt <= fail_first {
            "503 Service Unavailable"
        } else {
            "200 OK"
        };
        let body = serde_json::json!({
            "upstream": name,
            "method": recorded.method,
            "path": recorded.path,
            "headers": recorded.headers,
            "peer": peer.map(|p| p.to_string()),
        })
        .to_string();
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nx-upstream: {name}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if conn.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A slow request (3 s) held until `echo` has it, then three more (0.5 s) at once: their
/// statuses, the slow one's last. How a test fills a connection pool of one and overflows
/// its pending queue; `send` sends one request with the given headers and returns its
/// status, `tag` makes the request keys unique.
pub fn pool_burst(
    echo: &EchoUpstream,
    tag: &str,
    send: impl Fn(&[(&str, &str)]) -> u16 + Sync,
) -> Vec<u16> {
    let key = format!("slow-{tag}");
    std::thread::scope(|scope| {
        let slow = scope.spawn(|| send(&[("x-delay-ms", "3000"), ("x-request-key", &key)]));
        assert!(crate::support::wait_until(
            std::time::Duration::from_secs(30),
            || !echo.requests_with_key(&key).is_empty()
        ));
        let others: Vec<_> = (0..3)
            .map(|i| {
                let key = format!("q{i}-{tag}");
                let send = &send;
                scope.spawn(move || send(&[("x-delay-ms", "500"), ("x-request-key", &key)]))
            })
            .collect();
        let mut statuses: Vec<u16> = others.into_iter().map(|t| t.join().unwrap()).collect();
        statuses.push(slow.join().unwrap());
        statuses
    })
}
