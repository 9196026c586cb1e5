//! [`TcpApp`]: a pod's TCP application: on each connection it reads the client's first line,
//! answers with a banner line, `NAME PEER` (its name and the address the connection came
//! from), then echoes what it reads. It is client-first, as Istio's application
//! requirements ask: a server-first protocol does not pass a PERMISSIVE sidecar (the TLS
//! inspector waits for the client's first bytes, under istiod as under axon). A pod's HTTP application is the harness's [`EchoUpstream`](crate::support::EchoUpstream)
//! on a listener made in the pod. Both stop on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::support::accept::Acceptor;

/// A running banner-then-echo TCP application.
pub struct TcpApp {
    _acceptor: Acceptor,
}

impl TcpApp {
    /// Serves on `listener`; `poke` connects to it to end the accept loop on drop.
    pub fn serve(
        listener: TcpListener,
        name: &str,
        poke: impl Fn() + Send + Sync + 'static,
    ) -> TcpApp {
        let name2 = name.to_string();
        TcpApp {
            _acceptor: Acceptor::spawn(&format!("tcp-app-{name}"), listener, poke, move |conn| {
                banner_then_echo(conn, &name2)
            }),
        }
    }
}

fn banner_then_echo(mut conn: TcpStream, name: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let peer = conn
        .peer_addr()
        .map_or_else(|_| "?".to_string(), |p| p.to_string());
    // The client's first line, byte by byte (nothing past it is consumed).
    let mut byte = [0u8; 1];
    loop {
        match conn.read(&mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => {}
            _ => return,
        }
    }
    if conn
        .write_all(format!("{name} {peer}\n").as_bytes())
        .is_err()
    {
        return;
    }
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = conn.read(&mut buf) {
        if conn.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// The client's first line to a [`TcpApp`].
pub const HELLO: &[u8] = b"hello\n";

/// Says [`HELLO`] and reads the banner line of a [`TcpApp`] from `conn` (without its
/// newline; empty on any failure).
pub fn read_banner(mut conn: TcpStream) -> String {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    if conn.write_all(HELLO).is_err() {
        return String::new();
    }
    let mut line = String::new();
    let _ = BufReader::new(conn).read_line(&mut line);
    line.trim_end().to_string()
}
