//! [`TcpApp`]: a pod's TCP application: on each connection it first writes a banner line,
//! `NAME PEER` (its name and the address the connection came from), then echoes what it
//! reads. A pod's HTTP application is the harness's [`EchoUpstream`](crate::support::EchoUpstream)
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

/// Reads the banner line of a [`TcpApp`] from `conn` (without its newline; empty on any
/// failure).
pub fn read_banner(conn: TcpStream) -> String {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    let _ = BufReader::new(conn).read_line(&mut line);
    line.trim_end().to_string()
}
