//! [`Load`]: the simulated proxies of `axon-load run --reconnect`, and what its once-a-second
//! line says ([`LoadLine`]: reconnects, ACKs, and what the resumed streams cost).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::wait_until;

/// One `reconnects N acks M resume_bytes B resume_resources R resumed S full_resync_bytes F`
/// line of `axon-load run --reconnect`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadLine {
    pub reconnects: u64,
    pub acks: u64,
    /// Response bytes received on resumed streams.
    pub resume_bytes: u64,
    /// Resources in those responses.
    pub resume_resources: u64,
    /// Resumed streams the server accepted.
    pub resumed: u64,
    /// What full re-pushes to those streams would have cost (their proxies' first syncs).
    pub full_resync_bytes: u64,
}

impl LoadLine {
    /// Parses a `key value …` line starting with `reconnects`; unknown keys are skipped.
    pub fn parse(line: &str) -> Option<LoadLine> {
        let mut words = line.split_whitespace();
        let mut out = LoadLine::default();
        while let (Some(key), Some(value)) = (words.next(), words.next()) {
            let value: u64 = value.parse().ok()?;
            match key {
                "reconnects" => out.reconnects = value,
                "acks" => out.acks = value,
                "resume_bytes" => out.resume_bytes = value,
                "resume_resources" => out.resume_resources = value,
                "resumed" => out.resumed = value,
                "full_resync_bytes" => out.full_resync_bytes = value,
                _ => {} // a figure this harness does not read
            }
        }
        line.starts_with("reconnects ").then_some(out)
    }

    /// `self - before`, field by field.
    pub fn since(&self, before: &LoadLine) -> LoadLine {
        LoadLine {
            reconnects: self.reconnects - before.reconnects,
            acks: self.acks - before.acks,
            resume_bytes: self.resume_bytes - before.resume_bytes,
            resume_resources: self.resume_resources - before.resume_resources,
            resumed: self.resumed - before.resumed,
            full_resync_bytes: self.full_resync_bytes - before.full_resync_bytes,
        }
    }
}

#[derive(Default)]
struct Seen {
    /// The last `reconnects …` line and when it was read.
    last: Option<(Instant, LoadLine)>,
    /// Every line, for a failure message.
    lines: Vec<String>,
}

/// The `axon-load` that cargo built beside `axon` (crates/load; a workspace `cargo test`
/// builds it, for its own integration tests).
pub fn axon_load() -> std::path::PathBuf {
    let load = std::path::Path::new(env!("CARGO_BIN_EXE_axon")).with_file_name("axon-load");
    assert!(
        load.exists(),
        "{} is missing: run the tests from the workspace root (`cargo test`), or `cargo build -p axon-load` first",
        load.display()
    );
    load
}

/// `axon-load run --reconnect` against `xds`; killed on drop.
pub struct Load {
    child: Child,
    seen: Arc<Mutex<Seen>>,
}

impl Load {
    /// `n` proxies over `namespaces` namespaces, `extra` arguments (e.g. `--delta`).
    pub fn start(xds: SocketAddr, n: usize, namespaces: usize, extra: &[&str]) -> Load {
        let mut child = Command::new(axon_load())
            .args([
                "run",
                "--xds",
                &xds.to_string(),
                "--proxies",
                &n.to_string(),
            ])
            .args(["--namespaces", &namespaces.to_string()])
            .args(["--reconnect", "--client-threads", "1"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("axon-load");
        let stdout = child.stdout.take().unwrap();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let reader = seen.clone();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let mut seen = reader.lock().unwrap();
                if let Some(parsed) = LoadLine::parse(&line) {
                    seen.last = Some((Instant::now(), parsed));
                } else {
                    seen.lines.push(line);
                }
            }
        });
        Load { child, seen }
    }

    /// The first line read after `t` (the tool prints one a second).
    pub fn line_after(&self, t: Instant) -> LoadLine {
        let mut found = None;
        let ok = wait_until(Duration::from_secs(10), || {
            found = self.seen.lock().unwrap().last.filter(|(at, _)| *at > t);
            found.is_some()
        });
        assert!(
            ok,
            "axon-load printed no line after the instant: {:?}",
            self.seen.lock().unwrap().lines
        );
        found.unwrap().1
    }

    /// The first line read from now on.
    pub fn line(&self) -> LoadLine {
        self.line_after(Instant::now())
    }

    /// Waits until a line satisfies `f`; returns it.
    pub fn wait_line(&self, timeout: Duration, mut f: impl FnMut(&LoadLine) -> bool) -> LoadLine {
        let mut last = None;
        let ok = wait_until(timeout, || {
            last = self.seen.lock().unwrap().last.map(|(_, l)| l);
            last.as_ref().is_some_and(&mut f)
        });
        assert!(
            ok,
            "axon-load: no line as wanted; last {last:?}; output {:?}",
            self.seen.lock().unwrap().lines
        );
        last.unwrap()
    }

    /// Lines other than the `reconnects …` ones (the sync line, errors).
    pub fn other_lines(&self) -> Vec<String> {
        self.seen.lock().unwrap().lines.clone()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
