//! [`Axon`]: a running `axon serve` process on ephemeral ports, its captured log, and
//! clients of its monitoring address (`/metrics`, `/ready`) and debug address
//! (`/debug/syncz`, `/debug/connections`, `/debug/push_status`, ...). Killed on drop; its
//! log is printed if the test panics.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::http::{HttpResponse, http_request};
use super::process::{
    LOG_TAIL_LINES, keep_dir_on_panic, kill_child, new_temp_dir, spawn_log_reader, tail_lines,
};
use super::wait::wait_until;

/// A running `axon serve` process.
pub struct Axon {
    child: Child,
    xds_addr: SocketAddr,
    xds_tls_addr: Option<SocketAddr>,
    webhook_addr: Option<SocketAddr>,
    monitoring_addr: SocketAddr,
    debug_addr: SocketAddr,
    log: Arc<Mutex<String>>,
    log_path: PathBuf,
    dir: Option<tempfile::TempDir>,
    readers: Vec<JoinHandle<()>>,
    /// The `--mesh-config` file [`Axon::start_with_mesh_config`] wrote, kept while axon runs.
    mesh_config: Option<tempfile::NamedTempFile>,
}

impl Axon {
    /// Starts `axon serve` on ephemeral ports watching `config_dir`, and waits
    /// (up to 30 s) for its `--listening-file` (the bound addresses).
    pub fn start(config_dir: &Path) -> Axon {
        Self::start_with_args(config_dir, &[])
    }

    /// Like [`Axon::start`] with extra command-line arguments.
    pub fn start_with_args(config_dir: &Path, extra_args: &[&str]) -> Axon {
        match Self::try_start(Some(config_dir), "127.0.0.1:0", extra_args, &[], &[]) {
            Ok(axon) => axon,
            Err(failure) => failure.panic(),
        }
    }

    /// Like [`Axon::start`], with `mesh_yaml` as its `--mesh-config` (a file kept while axon
    /// runs).
    pub fn start_with_mesh_config(config_dir: &Path, mesh_yaml: &str) -> Axon {
        let file = tempfile::NamedTempFile::new().expect("a mesh config file");
        std::fs::write(file.path(), mesh_yaml).expect("write the mesh config");
        let path = file.path().to_string_lossy().into_owned();
        let mut axon = Self::start_with_args(config_dir, &["--mesh-config", &path]);
        axon.mesh_config = Some(file);
        axon
    }

    /// Starts `axon serve` with `--config-dir` only when `config_dir` is given, extra
    /// arguments (e.g. `--kubernetes`) and extra environment variables (e.g. `KUBECONFIG`).
    pub fn start_with_env(
        config_dir: Option<&Path>,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Axon {
        match Self::try_start(config_dir, "127.0.0.1:0", extra_args, env, &[]) {
            Ok(axon) => axon,
            Err(failure) => failure.panic(),
        }
    }

    /// Like [`Axon::start_with_args`], but subject to file permissions even when the tests
    /// run as root: then axon runs under `setpriv` with every capability dropped (so that
    /// `chmod 000` denies it, as it would deny any other user).
    pub fn start_unprivileged(config_dir: &Path, extra_args: &[&str]) -> Axon {
        let wrapper: &[&str] = if running_as_root() {
            &["setpriv", "--inh-caps=-all", "--bounding-set=-all", "--"]
        } else {
            &[]
        };
        match Self::try_start(Some(config_dir), "127.0.0.1:0", extra_args, &[], wrapper) {
            Ok(axon) => axon,
            Err(failure) => failure.panic(),
        }
    }

    /// Like [`Axon::start_with_args`], run under `wrapper` (a command and its arguments
    /// that execs the rest, e.g. `prlimit --nofile=256:256 --`).
    pub fn start_wrapped(config_dir: &Path, extra_args: &[&str], wrapper: &[&str]) -> Axon {
        match Self::try_start(Some(config_dir), "127.0.0.1:0", extra_args, &[], wrapper) {
            Ok(axon) => axon,
            Err(failure) => failure.panic(),
        }
    }

    /// Starts `axon serve` with its xDS server on `127.0.0.1:xds_port` (the
    /// monitoring server on an ephemeral port), e.g. to restart axon where
    /// an Envoy already points. If the port is still held (the previous
    /// process's socket lingering), retries for up to 10 s.
    pub fn start_on(config_dir: &Path, xds_port: u16, extra_args: &[&str]) -> Axon {
        let xds_addr = format!("127.0.0.1:{xds_port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Self::try_start(Some(config_dir), &xds_addr, extra_args, &[], &[]) {
                Ok(axon) => return axon,
                Err(failure) if failure.bind_failed && Instant::now() < deadline => {
                    eprintln!("[harness] axon could not bind {xds_addr} yet; retrying");
                    thread::sleep(Duration::from_millis(100));
                }
                Err(failure) => failure.panic(),
            }
        }
    }

    fn try_start(
        config_dir: Option<&Path>,
        xds_addr_arg: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
        wrapper: &[&str],
    ) -> Result<Axon, StartFailure> {
        Self::try_start_at(
            config_dir,
            xds_addr_arg,
            "127.0.0.1:0",
            extra_args,
            env,
            wrapper,
        )
    }

    /// Starts `axon serve` with its xDS server on `127.0.0.1:xds_port` and its monitoring
    /// server on `127.0.0.1:monitoring_port` (a replica its peers know by that address, and
    /// restart in place); retries for up to 10 s while a port is still held.
    pub fn start_at(
        config_dir: &Path,
        xds_port: u16,
        monitoring_port: u16,
        extra_args: &[&str],
    ) -> Axon {
        let xds_addr = format!("127.0.0.1:{xds_port}");
        let monitoring_addr = format!("127.0.0.1:{monitoring_port}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Self::try_start_at(
                Some(config_dir),
                &xds_addr,
                &monitoring_addr,
                extra_args,
                &[],
                &[],
            ) {
                Ok(axon) => return axon,
                Err(failure) if failure.in_use && Instant::now() < deadline => {
                    eprintln!("[harness] axon could not bind its ports yet; retrying");
                    thread::sleep(Duration::from_millis(100));
                }
                Err(failure) => failure.panic(),
            }
        }
    }

    fn try_start_at(
        config_dir: Option<&Path>,
        xds_addr_arg: &str,
        monitoring_addr_arg: &str,
        extra_args: &[&str],
        env: &[(&str, &str)],
        wrapper: &[&str],
    ) -> Result<Axon, StartFailure> {
        let dir = new_temp_dir("axon-e2e-axon-");
        let log_path = dir.path().join("axon.log");
        let listening_path = dir.path().join("listening.json");
        let file = Arc::new(Mutex::new(
            fs::File::create(&log_path).expect("create axon log file"),
        ));
        let bin = env!("CARGO_BIN_EXE_axon");
        let mut cmd = match wrapper.split_first() {
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg(bin);
                cmd
            }
            None => Command::new(bin),
        };
        cmd.arg("serve");
        if let Some(dir) = config_dir {
            cmd.arg("--config-dir").arg(dir);
        }
        cmd.args([
            "--xds-addr",
            xds_addr_arg,
            "--monitoring-addr",
            monitoring_addr_arg,
            "--debug-addr",
            "127.0.0.1:0",
        ])
        .arg("--listening-file")
        .arg(&listening_path)
        .args(extra_args)
        .envs(env.iter().copied())
        .env("RUST_LOG", "info,axon=debug")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {bin}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        let readers = vec![
            spawn_log_reader(
                child.stderr.take().unwrap(),
                log.clone(),
                file.clone(),
                "stderr",
            ),
            spawn_log_reader(child.stdout.take().unwrap(), log.clone(), file, "stdout"),
        ];

        let deadline = Instant::now() + Duration::from_secs(30);
        let mut exited = false;
        let addrs = loop {
            if let Some(listening) = Listening::read(&listening_path) {
                break Ok(listening);
            }
            if let Ok(Some(status)) = child.try_wait() {
                // Give the readers a moment to drain the pipes.
                for r in readers {
                    let _ = r.join();
                }
                exited = true;
                break Err(format!("axon exited early with {status}"));
            }
            if Instant::now() >= deadline {
                kill_child(&mut child);
                break Err("axon did not write its --listening-file within 30 s".to_string());
            }
            thread::sleep(Duration::from_millis(50));
        };
        match addrs {
            Ok(listening) => Ok(Axon {
                mesh_config: None,
                child,
                xds_addr: listening
                    .xds_addr
                    .expect("the harness serves plaintext xDS"),
                xds_tls_addr: listening.xds_tls_addr,
                webhook_addr: listening.webhook_addr,
                monitoring_addr: listening.monitoring_addr,
                debug_addr: listening.debug_addr,
                log,
                log_path,
                dir: Some(dir),
                readers: Vec::new(),
            }),
            Err(msg) => {
                let logs = log.lock().unwrap().clone();
                let bind_failed = exited
                    && logs.contains("binding the xDS address")
                    && logs.to_ascii_lowercase().contains("in use");
                let in_use = exited && logs.to_ascii_lowercase().contains("in use");
                Err(StartFailure {
                    msg,
                    command: format!(
                        "{bin} serve --config-dir {} --xds-addr {xds_addr_arg} \
                         --monitoring-addr 127.0.0.1:0 {}",
                        config_dir.map_or("(none)".into(), |d| d.display().to_string()),
                        extra_args.join(" ")
                    ),
                    logs,
                    dir,
                    bind_failed,
                    in_use,
                })
            }
        }
    }

    /// The process id of the running axon (e.g. for [`rss_kib`]).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// axon's resident set size in KiB (`VmRSS`), 0 if unknown.
    pub fn rss_kib(&self) -> u64 {
        rss_kib(self.pid())
    }

    /// Sends axon SIGTERM; returns its exit status once it exits, within `timeout` (else
    /// kills it and panics).
    pub fn terminate(&mut self, timeout: Duration) -> std::process::ExitStatus {
        self.signal_term();
        self.wait_exit(timeout)
    }

    /// Sends axon SIGTERM.
    pub fn signal_term(&self) {
        let pid = self.pid().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(sent.is_ok_and(|s| s.success()), "kill -TERM {pid} failed");
    }

    /// Axon's exit status once it exits, within `timeout` (else kills it and panics).
    pub fn wait_exit(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if Instant::now() >= deadline {
                kill_child(&mut self.child);
                panic!(
                    "axon did not exit within {timeout:?} of SIGTERM\n{}",
                    self.logs()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills axon (SIGKILL) and waits for it to exit. The log stays
    /// readable; dropping the `Axon` afterwards is harmless.
    pub fn stop(&mut self) {
        kill_child(&mut self.child);
    }

    /// The TLS xDS address (`--xds-tls-addr`), from the `--listening-file`.
    pub fn xds_tls_addr(&self) -> Option<SocketAddr> {
        self.xds_tls_addr
    }

    /// The validating webhook's address (`--webhook-addr`), from the `--listening-file`.
    pub fn webhook_addr(&self) -> Option<SocketAddr> {
        self.webhook_addr
    }

    pub fn xds_addr(&self) -> SocketAddr {
        self.xds_addr
    }

    pub fn monitoring_addr(&self) -> SocketAddr {
        self.monitoring_addr
    }

    /// The debug address (`/debug/...`, see `axon_debug.rs`).
    pub fn debug_addr(&self) -> SocketAddr {
        self.debug_addr
    }

    /// Everything axon wrote so far (stderr, plus stdout lines prefixed with
    /// `[stdout] `), ANSI codes stripped.
    pub fn logs(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Waits until the log contains `substring`.
    pub fn wait_for_log(&self, substring: &str, timeout: Duration) -> bool {
        wait_until(timeout, || self.log.lock().unwrap().contains(substring))
    }

    /// Current length of the captured log (an offset for
    /// [`Axon::wait_for_log_line_after`]).
    pub fn log_len(&self) -> usize {
        self.log.lock().unwrap().len()
    }

    /// Waits for a log line written after byte `offset` that satisfies
    /// `pred`, returning it.
    pub fn wait_for_log_line_after(
        &self,
        offset: usize,
        timeout: Duration,
        mut pred: impl FnMut(&str) -> bool,
    ) -> Option<String> {
        let mut found = None;
        wait_until(timeout, || {
            let log = self.log.lock().unwrap();
            let tail = log.get(offset..).unwrap_or("");
            found = tail.lines().find(|l| pred(l)).map(str::to_string);
            found.is_some()
        });
        found
    }

    /// Number of log lines containing `substring`.
    pub fn count_log(&self, substring: &str) -> usize {
        self.log
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(substring))
            .count()
    }

    /// `GET /metrics` on the monitoring address (body; empty string and a
    /// message on stderr on failure).
    pub fn metrics(&self) -> String {
        let r = http_request(
            self.monitoring_addr,
            "GET",
            "/metrics",
            &[("Host", "localhost")],
            Duration::from_secs(5),
        );
        if r.status != 200 {
            eprintln!(
                "[harness] GET /metrics on {} -> {}: {}",
                self.monitoring_addr, r.status, r.body
            );
        }
        r.body
    }

    /// `GET path` on the monitoring address.
    pub fn monitoring_get(&self, path: &str) -> HttpResponse {
        http_request(
            self.monitoring_addr,
            "GET",
            path,
            &[("Host", "localhost")],
            Duration::from_secs(5),
        )
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// Why [`Axon::try_start`] failed.
struct StartFailure {
    msg: String,
    command: String,
    logs: String,
    dir: tempfile::TempDir,
    /// axon exited because the xDS address was in use.
    bind_failed: bool,
    /// axon exited because one of its addresses was in use.
    in_use: bool,
}

impl StartFailure {
    fn panic(self) -> ! {
        let kept = self.dir.keep();
        panic!(
            "{}\ncommand: {}\nlog file: {}\n----- axon log -----\n{}",
            self.msg,
            self.command,
            kept.join("axon.log").display(),
            tail_lines(&self.logs, LOG_TAIL_LINES)
        );
    }
}

/// The resident set size (`VmRSS` in `/proc/PID/status`) of process `pid`,
/// in KiB; 0 if it cannot be read (no such process, not Linux).
pub fn rss_kib(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Parses `xds_addr=` and `monitoring_addr=` from the `axon listening` line.
pub fn parse_listening(log: &str) -> Option<(SocketAddr, SocketAddr)> {
    static XDS: OnceLock<regex::Regex> = OnceLock::new();
    static MON: OnceLock<regex::Regex> = OnceLock::new();
    let xds =
        XDS.get_or_init(|| regex::Regex::new(r#"xds_addr="?([0-9a-fA-F.:\[\]]+:\d+)"#).unwrap());
    let mon = MON.get_or_init(|| {
        regex::Regex::new(r#"monitoring_addr="?([0-9a-fA-F.:\[\]]+:\d+)"#).unwrap()
    });
    let line = log.lines().find(|l| l.contains("axon listening"))?;
    let x = xds.captures(line)?.get(1)?.as_str().parse().ok()?;
    let m = mon.captures(line)?.get(1)?.as_str().parse().ok()?;
    Some((x, m))
}

/// What axon's `--listening-file` says: the addresses it bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Listening {
    pub xds_addr: Option<SocketAddr>,
    pub xds_tls_addr: Option<SocketAddr>,
    pub webhook_addr: Option<SocketAddr>,
    pub monitoring_addr: SocketAddr,
    pub debug_addr: SocketAddr,
    pub replica: String,
}

impl Listening {
    /// The file's addresses, once axon has written it (`None` before: axon writes it whole,
    /// by a rename).
    pub fn read(path: &Path) -> Option<Listening> {
        let text = fs::read_to_string(path).ok()?;
        Listening::parse(&text)
    }

    pub fn parse(text: &str) -> Option<Listening> {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let addr = |key: &str| v.get(key)?.as_str()?.parse::<SocketAddr>().ok();
        Some(Listening {
            xds_addr: addr("xds_addr"),
            xds_tls_addr: addr("xds_tls_addr"),
            webhook_addr: addr("webhook_addr"),
            monitoring_addr: addr("monitoring_addr")?,
            debug_addr: addr("debug_addr")?,
            replica: v.get("replica")?.as_str()?.to_string(),
        })
    }
}

/// Parses `debug_addr=` from the `axon listening` line.
pub fn parse_debug_addr(log: &str) -> Option<SocketAddr> {
    static DEBUG: OnceLock<regex::Regex> = OnceLock::new();
    let re = DEBUG
        .get_or_init(|| regex::Regex::new(r#"debug_addr="?([0-9a-fA-F.:\[\]]+:\d+)"#).unwrap());
    let line = log.lines().find(|l| l.contains("axon listening"))?;
    re.captures(line)?.get(1)?.as_str().parse().ok()
}

impl Drop for Axon {
    fn drop(&mut self) {
        kill_child(&mut self.child);
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        if thread::panicking() {
            eprintln!(
                "\n===== axon log (xds {}, monitoring {}, file {}) =====\n{}===== end axon log =====",
                self.xds_addr,
                self.monitoring_addr,
                self.log_path.display(),
                tail_lines(&self.logs(), LOG_TAIL_LINES)
            );
        }
        keep_dir_on_panic(&mut self.dir, "axon");
    }
}

/// Whether this process runs with uid 0 (file permissions do not apply to it).
pub fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}
