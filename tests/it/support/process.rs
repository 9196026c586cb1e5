//! Child processes of the harness (axon, Envoy): capturing their output into a log buffer
//! and file, killing them, the temp directories they run in (kept, with their path printed,
//! when a test panics) and the log tail printed on failure.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Child;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, JoinHandle};

/// How many log lines are printed when a test panics.
pub(crate) const LOG_TAIL_LINES: usize = 300;

/// The last `n` lines of `text`, saying how many were left out.
pub(crate) fn tail_lines(text: &str, n: usize) -> String {
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

/// A fresh temp directory named `PREFIX…` (removed on drop unless kept).
pub(crate) fn new_temp_dir(prefix: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .expect("create temp dir")
}

/// Copies `src` line by line (ANSI codes stripped; stdout lines prefixed `[stdout] `) into
/// `buf` and `file`, on its own thread.
pub(crate) fn spawn_log_reader(
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

/// When the thread is panicking, keeps `dir` on disk and prints where it is.
pub(crate) fn keep_dir_on_panic(dir: &mut Option<tempfile::TempDir>, what: &str) {
    if thread::panicking()
        && let Some(d) = dir.take()
    {
        let p = d.keep();
        eprintln!("[harness] kept {what} temp dir: {}", p.display());
    }
}

/// Kills `child` (SIGKILL) and reaps it.
pub(crate) fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}
