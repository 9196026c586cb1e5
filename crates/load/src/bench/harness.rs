//! What the benchmark scenarios run on: the `axon` process and its metrics, the simulated
//! fleet, config edits, the replay server (the floor), and the report.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::client::{self, ClientConfig, Shared};

/// One row of the result table.
pub(super) struct Row {
    pub(super) figure: String,
    pub(super) value: String,
    pub(super) target: String,
    pub(super) met: Option<bool>,
}

pub(super) struct Report {
    pub(super) rows: Vec<Row>,
}

impl Report {
    pub(super) fn add(&mut self, figure: impl Into<String>, value: impl Into<String>) {
        self.rows.push(Row {
            figure: figure.into(),
            value: value.into(),
            target: String::new(),
            met: None,
        });
    }

    pub(super) fn check(
        &mut self,
        figure: impl Into<String>,
        value: impl Into<String>,
        target: impl Into<String>,
        met: bool,
    ) {
        self.rows.push(Row {
            figure: figure.into(),
            value: value.into(),
            target: target.into(),
            met: Some(met),
        });
    }

    pub(super) fn print(&self) {
        println!("| figure | value | target | met |");
        println!("|---|---|---|---|");
        for r in &self.rows {
            let met = match r.met {
                Some(true) => "met",
                Some(false) => "NOT MET",
                None => "",
            };
            println!("| {} | {} | {} | {} |", r.figure, r.value, r.target, met);
        }
    }
}

/// A running `axon serve`.
pub(super) struct Axon {
    pub(super) child: Child,
    pub(super) xds: SocketAddr,
    pub(super) monitoring: SocketAddr,
    pub(super) log: PathBuf,
}

impl Axon {
    /// Starts `bin` (by default the `axon` beside this binary, wherever the bench is run
    /// from).
    pub(super) fn start(
        bin: Option<&Path>,
        config: &Path,
        limits: Option<&Path>,
        log: &Path,
    ) -> anyhow::Result<Axon> {
        let bin = match bin {
            Some(bin) => bin.to_path_buf(),
            None => std::env::current_exe()?.with_file_name("axon"),
        };
        anyhow::ensure!(
            bin.is_file(),
            "no axon binary at {} (build it with `cargo build --release`, or give --axon)",
            bin.display()
        );
        let mut cmd = Command::new(&bin);
        cmd.args(["serve", "--config-dir"]).arg(config).args([
            "--xds-addr",
            "127.0.0.1:0",
            "--monitoring-addr",
            "127.0.0.1:0",
            "--debug-addr",
            "127.0.0.1:0",
            "--log-format",
            "text",
        ]);
        if let Some(l) = limits {
            cmd.arg("--limits").arg(l);
        }
        let child = cmd
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", bin.display()))?;
        let mut axon = Axon {
            child,
            xds: "0.0.0.0:0".parse()?,
            monitoring: "0.0.0.0:0".parse()?,
            log: log.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&axon.log).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.contains("axon listening")) {
                let field = |name: &str| -> anyhow::Result<SocketAddr> {
                    let v = line
                        .split(&format!("{name}="))
                        .nth(1)
                        .and_then(|r| r.split_whitespace().next())
                        .ok_or_else(|| anyhow::anyhow!("no {name} in {line}"))?;
                    Ok(v.trim_matches('"').parse()?)
                };
                axon.xds = field("xds_addr")?;
                axon.monitoring = field("monitoring_addr")?;
                break;
            }
            if let Some(status) = axon.child.try_wait()? {
                anyhow::bail!("axon exited ({status}):\n{text}");
            }
            anyhow::ensure!(Instant::now() < deadline, "axon never logged its addresses");
            std::thread::sleep(Duration::from_millis(20));
        }
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_get(axon.monitoring, "/ready").map(|(s, _)| s) != Some(200) {
            anyhow::ensure!(Instant::now() < deadline, "axon never became ready");
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(axon)
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn metrics(&self) -> Metrics {
        Metrics(
            http_get(self.monitoring, "/metrics")
                .map(|(_, b)| b)
                .unwrap_or_default(),
        )
    }
}

impl Drop for Axon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Prometheus text page.
pub(super) struct Metrics(pub(super) String);

impl Metrics {
    /// `name{labels} value` (labels exactly as written, or none).
    pub(super) fn get(&self, name: &str, labels: &str) -> f64 {
        let prefix = if labels.is_empty() {
            format!("{name} ")
        } else {
            format!("{name}{{{labels}}} ")
        };
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Every `name{labels} value` of a family: the labels (as written) and the value.
    pub(super) fn labels(&self, name: &str) -> Vec<(String, f64)> {
        let prefix = format!("{name}{{");
        self.0
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter_map(|rest| {
                let (labels, value) = rest.split_once("} ")?;
                Some((labels.to_string(), value.trim().parse().ok()?))
            })
            .collect()
    }

    pub(super) fn pushes(&self) -> [f64; 4] {
        ["cds", "eds", "lds", "rds"].map(|t| self.get("pilot_xds_pushes", &format!("type=\"{t}\"")))
    }

    pub(super) fn rebuilds(&self) -> f64 {
        self.get("pilot_pushcontext_init_seconds_count", "")
    }
}

pub(super) fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// The simulated proxies of one run, on their own runtime.
pub(super) struct Fleet {
    pub(super) shared: Arc<Shared>,
    pub(super) tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    pub(super) fn start(
        rt: &tokio::runtime::Runtime,
        n: usize,
        cfg: &ClientConfig,
        capture: impl Fn(usize) -> bool,
    ) -> Fleet {
        let shared = Shared::new(n, capture);
        let tasks = (0..n)
            .map(|j| rt.spawn(client::run(j, cfg.clone(), shared.clone())))
            .collect();
        Fleet { shared, tasks }
    }

    pub(super) fn stop(self) {
        for t in &self.tasks {
            t.abort();
        }
    }

    /// Waits until every proxy synced or failed; returns whether all synced.
    pub(super) fn wait_synced(&self, timeout: Duration) -> bool {
        let n = self.shared.proxies.len() as u64;
        let deadline = Instant::now() + timeout;
        loop {
            let synced = self.shared.synced.load(Ordering::Relaxed);
            let errors = self.shared.errors.load(Ordering::Relaxed);
            if synced == n {
                return true;
            }
            if synced + errors >= n || Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits at least `min`, then until no ACK arrived for `quiet` (bounded by `timeout`).
    pub(super) fn wait_quiet(&self, min: Duration, quiet: Duration, timeout: Duration) {
        self.wait_quiet_with(min, quiet, timeout, || 0.0)
    }

    /// Like `wait_quiet`, and `server()` (a server-side counter) stable as long.
    pub(super) fn wait_quiet_with(
        &self,
        min: Duration,
        quiet: Duration,
        timeout: Duration,
        server: impl Fn() -> f64,
    ) {
        let start = Instant::now();
        let count = || (self.shared.total_acks.load(Ordering::Relaxed), server());
        let mut last = count();
        let mut last_change = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = count();
            if now != last {
                last = now;
                last_change = Instant::now();
            }
            if start.elapsed() >= min && last_change.elapsed() >= quiet {
                return;
            }
            if start.elapsed() > timeout {
                return;
            }
        }
    }
}

pub(super) fn ms(d: f64) -> String {
    format!("{d:.0} ms")
}

pub(super) fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// The latencies (ms from `since`) of the proxies that ACKed anything after it.
pub(super) struct Edit {
    pub(super) affected: usize,
    /// The affected proxies' indexes.
    pub(super) proxies: Vec<usize>,
    pub(super) lat: Vec<f64>,
    pub(super) per_type: Vec<[u32; 4]>,
}

impl Edit {
    pub(super) fn measure(shared: &Shared, since: Instant) -> Edit {
        let since_us = shared.us(since);
        let acks = client::acks_after(shared, since_us);
        let mut lat: Vec<f64> = acks
            .iter()
            .map(|(_, last, _)| (last - since_us) as f64 / 1000.0)
            .collect();
        lat.sort_by(f64::total_cmp);
        Edit {
            affected: acks.len(),
            proxies: acks.iter().map(|(j, ..)| *j).collect(),
            lat,
            per_type: acks.iter().map(|(_, _, p)| *p).collect(),
        }
    }

    pub(super) fn p(&self, q: f64) -> f64 {
        client::quantile(&self.lat, q)
    }

    pub(super) fn last(&self) -> f64 {
        self.lat.last().copied().unwrap_or(f64::NAN)
    }

    /// The namespaces of the affected proxies (proxy `j` is in `ns-{j % namespaces}`).
    pub(super) fn namespaces(&self, namespaces: usize) -> Vec<String> {
        let set: std::collections::BTreeSet<usize> =
            self.proxies.iter().map(|j| j % namespaces).collect();
        set.into_iter().map(|i| format!("ns-{i}")).collect()
    }
}

pub(super) fn debounce_after(limits: Option<&Path>) -> Duration {
    let default = Duration::from_millis(100);
    let Some(text) = limits.and_then(|p| std::fs::read_to_string(p).ok()) else {
        return default;
    };
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == "debounce_after")
        .and_then(|(_, v)| humantime::parse_duration(v.trim().trim_matches('"')).ok())
        .unwrap_or(default)
}

/// The replay server process.
pub(super) struct Replay {
    pub(super) child: Child,
    pub(super) addr: SocketAddr,
}

impl Replay {
    pub(super) fn start(views: &Path, delta: bool) -> anyhow::Result<Replay> {
        let mut cmd = Command::new(std::env::current_exe()?);
        cmd.args(["replay", "--addr", "127.0.0.1:0", "--views"])
            .arg(views);
        if delta {
            cmd.arg("--delta");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("replay listening ")
            .ok_or_else(|| anyhow::anyhow!("replay said {line:?}"))?
            .parse()?;
        Ok(Replay { child, addr })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Re-sends every type to every stream, or only `types` (e.g. `rds`) to the streams of
    /// `namespaces` (`*`: all), and measures it: the ACKs after it, and the replay's CPU.
    pub(super) fn measure_push(
        &mut self,
        fleet: &Fleet,
        only: Option<(&str, &[String])>,
        timeout: Duration,
    ) -> anyhow::Result<(Edit, f64)> {
        let cpu0 = crate::proc::cpu_seconds(self.pid());
        let pushed = Instant::now();
        match only {
            None => self.command("push\n")?,
            Some((types, namespaces)) => {
                self.command(&format!("push {types} {}\n", namespaces.join(",")))?
            }
        }
        fleet.wait_quiet(
            Duration::from_millis(300),
            Duration::from_millis(500),
            timeout,
        );
        let cpu = crate::proc::cpu_seconds(self.pid()) - cpu0;
        Ok((Edit::measure(&fleet.shared, pushed), cpu))
    }

    fn command(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.child.stdin.as_mut().expect("piped");
        stdin.write_all(line.as_bytes())?;
        stdin.flush()?;
        Ok(())
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
