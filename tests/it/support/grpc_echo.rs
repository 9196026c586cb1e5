//! A Python gRPC echo server (`tests/grpc/echo.py server`) for the gRPC tests, on the test
//! venv's pinned `grpcio`: started on a free port of the test's loopback, or in a mesh pod
//! ([`EchoServer::start_in`]), killed on drop, its output printed when a test panics; and
//! the script's client, run on the host ([`client_call`]) or as a pod's application
//! ([`client_call_in`]).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::support::mesh::Pod;
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
    run_client(Command::new(grpc_python()), target, extra)
}

/// [`client_call`] as `pod`'s application (`ip netns exec`, as root: captured by a sidecar),
/// resolving names through the pod's `/etc/hosts` (grpc's native resolver).
pub fn client_call_in(pod: &Pod, target: &str, extra: &[&str]) -> (bool, String) {
    let mut python = pod.command(&grpc_python().to_string_lossy());
    python.env("GRPC_DNS_RESOLVER", "native");
    run_client(python, target, extra)
}

/// `echo.py client TARGET hello --deadline 20 EXTRA...` run by `python`.
fn run_client(mut python: Command, target: &str, extra: &[&str]) -> (bool, String) {
    let out = python
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
    /// Starts `echo.py server PORT PREFIX` on a free port of 127.0.0.1 and waits until it
    /// listens.
    pub fn start(prefix: &str) -> EchoServer {
        let python = grpc_python();
        // A port could be taken between free_port() and the bind: try a few.
        let mut last_failure = String::new();
        for _ in 0..3 {
            match Self::spawn(Command::new(&python), free_port(), prefix, &[]) {
                Ok(server) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("{last_failure}");
    }

    /// [`EchoServer::start`] serving also `service`'s `Echo` and `EchoTwo` (the Gateway API
    /// conformance suite's GrpcEcho).
    pub fn start_service(prefix: &str, service: &str) -> EchoServer {
        let python = grpc_python();
        let mut last_failure = String::new();
        for _ in 0..3 {
            match Self::spawn(
                Command::new(&python),
                free_port(),
                prefix,
                &["--service", service],
            ) {
                Ok(server) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!("{last_failure}");
    }

    /// Starts `echo.py server PORT PREFIX` on 0.0.0.0:`port` in `pod` (its application,
    /// reached at the pod's IP) and waits until it listens.
    pub fn start_in(pod: &Pod, port: u16, prefix: &str) -> EchoServer {
        let python = pod.command(&grpc_python().to_string_lossy());
        Self::spawn(python, port, prefix, &["--bind", "0.0.0.0"])
            .unwrap_or_else(|failure| panic!("pod {}: {failure}", pod.name()))
    }

    /// Runs `echo.py server PORT PREFIX EXTRA...` with `python`; the server once it listens,
    /// else what it printed (it is killed).
    fn spawn(
        mut python: Command,
        port: u16,
        prefix: &str,
        extra: &[&str],
    ) -> Result<EchoServer, String> {
        let mut child = python
            .arg("-u")
            .arg(echo_script())
            .args(["server", &port.to_string(), prefix])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {python:?}: {e}"));
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
            return Ok(server);
        }
        // Dropping `server` kills it.
        let failure = format!(
            "echo server {prefix:?} on port {port} not ready (ready={ready}):\n{}",
            server.output.lock().unwrap()
        );
        Err(failure)
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
