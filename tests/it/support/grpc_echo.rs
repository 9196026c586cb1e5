//! A Python gRPC echo server (`tests/grpc/echo.py server`) for the gRPC tests, on the test
//! venv's pinned `grpcio`: started on a free port, killed on drop, its output printed when a
//! test panics. Include with `#[path = "support/grpc_echo.rs"] mod grpc_echo;`.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::support::{free_port, grpc_python, wait_until};

// ---------------------------------------------------------------------------
// Echo script
// ---------------------------------------------------------------------------

/// `tests/grpc/echo.py`.
pub fn echo_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/echo.py")
}

/// `echo.py client TARGET hello --deadline 20 EXTRA...`: whether the call succeeded, and
/// what the client printed.
pub fn client_call(target: &str, extra: &[&str]) -> (bool, String) {
    let out = Command::new(grpc_python())
        .arg("-u")
        .arg(echo_script())
        .args(["client", target, "hello", "--deadline", "20"])
        .args(extra)
        .output()
        .expect("run echo.py client");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

// ---------------------------------------------------------------------------
// Echo servers
// ---------------------------------------------------------------------------

/// A running `echo.py server`; killed on drop.
pub struct EchoServer {
    child: Child,
    pub port: u16,
    prefix: String,
    output: Arc<Mutex<String>>,
}

impl EchoServer {
    /// Starts `echo.py server PORT PREFIX` on a free port and waits until it listens.
    pub fn start(prefix: &str) -> EchoServer {
        let python = grpc_python();
        // A port could be taken between free_port() and the bind: try a few.
        let mut last_failure = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut child = Command::new(&python)
                .arg("-u")
                .arg(echo_script())
                .args(["server", &port.to_string(), prefix])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {} echo.py server: {e}", python.display()));
            let output = Arc::new(Mutex::new(String::new()));
            for src in [
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                Box::new(child.stderr.take().unwrap()),
            ] {
                let output = output.clone();
                thread::spawn(move || {
                    for line in BufReader::new(src).lines() {
                        let Ok(line) = line else { break };
                        let mut o = output.lock().unwrap();
                        o.push_str(&line);
                        o.push('\n');
                    }
                });
            }
            let mut server = EchoServer {
                child,
                port,
                prefix: prefix.to_string(),
                output,
            };
            let ready = wait_until(Duration::from_secs(20), || {
                server.output.lock().unwrap().contains("listening")
                    || !matches!(server.child.try_wait(), Ok(None))
            });
            if ready && server.output.lock().unwrap().contains("listening") {
                return server;
            }
            last_failure = format!(
                "echo server {prefix:?} on port {port} not ready (ready={ready}):\n{}",
                server.output.lock().unwrap()
            );
            // Dropping `server` kills it.
        }
        panic!("{last_failure}");
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if thread::panicking() {
            eprintln!(
                "===== echo server {:?} (port {}) output =====\n{}",
                self.prefix,
                self.port,
                tail(&self.output.lock().unwrap(), 50)
            );
        }
    }
}
