//! A raw TCP echo for the L4 tests: a server on 127.0.0.1 that answers each connection with
//! `NAME:` and what it read, then closes; and a client call. Include with
//! `#[path = "support/tcp_echo.rs"] mod tcp_echo;`. The accept thread lives as long as the
//! test process (a blocked `accept` cannot be interrupted portably), holding no child process.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// Starts an echo named `name`; its port.
pub fn tcp_echo(name: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a TCP echo");
    let port = listener.local_addr().expect("its address").port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
                let mut buf = [0u8; 64];
                let n = conn.read(&mut buf).unwrap_or(0);
                let _ = conn.write_all(format!("{name}:").as_bytes());
                let _ = conn.write_all(&buf[..n]);
            });
        }
    });
    port
}

/// Sends `hi` to 127.0.0.1:`port` and reads the answer to its end (empty on any failure).
pub fn tcp_call(port: u16) -> String {
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = conn.write_all(b"hi");
    let mut out = String::new();
    let _ = conn.read_to_string(&mut out);
    out
}
