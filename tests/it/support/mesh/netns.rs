//! Named network namespaces (`ip netns`, so `/var/run/netns/NAME`), the one thing of the mesh
//! that touches the machine: [`Netns`] adds one, runs code inside it ([`Netns::run`]: sockets
//! made there stay there and work from any thread afterwards) and deletes it with whatever
//! still runs in it ([`delete`]). The names of one test process start with [`prefix`]
//! (`axm-PID-`, the pid in base 36); [`sweep_stale`] deletes those of processes that are gone
//! (a crashed or killed test run). Also the `ip` and `iptables-restore` commands, and the
//! preflight check ([`preflight`]) that fails loudly when the machine cannot run the mesh.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;

use crate::support::running_as_root;

/// What every mesh namespace's name starts with (then the pid, in base 36).
const NAME_PREFIX: &str = "axm-";

/// A network namespace this process added, open (so code can enter it even after its name is
/// deleted). Deleting it is [`delete`]'s, by name.
#[derive(Debug)]
pub struct Netns {
    name: String,
    file: File,
}

impl Netns {
    /// `ip netns add NAME` (its loopback still down).
    pub fn add(name: &str) -> Netns {
        assert!(name.len() <= 15, "netns name {name:?} is longer than 15");
        ip(&["netns", "add", name]);
        let path = netns_path(name);
        let file = File::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        Netns {
            name: name.to_string(),
            file,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `f` on a thread of its own that has entered this namespace, and returns what it
    /// returns. A socket `f` makes belongs to this namespace for good; a process it spawns
    /// starts in it.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        thread::scope(|s| {
            thread::Builder::new()
                .name(format!("netns-{}", self.name))
                .spawn_scoped(s, || {
                    rustix::thread::move_into_link_name_space(
                        self.file.as_fd(),
                        Some(rustix::thread::LinkNameSpaceType::Network),
                    )
                    .unwrap_or_else(|e| panic!("setns into {}: {e}", self.name));
                    f()
                })
                .expect("spawn a netns thread")
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// `ip -n NAME ARGS...`
    pub fn ip(&self, args: &[&str]) {
        let mut all = vec!["-n", &self.name];
        all.extend_from_slice(args);
        ip(&all);
    }

    /// `ip netns exec NAME iptables-restore` fed `rules`.
    pub fn iptables_restore(&self, rules: &str) {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.name, "iptables-restore"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn iptables-restore in {}: {e}", self.name));
        child
            .stdin
            .take()
            .expect("its stdin")
            .write_all(rules.as_bytes())
            .expect("write the rules to iptables-restore");
        let out = child.wait_with_output().expect("wait for iptables-restore");
        assert!(
            out.status.success(),
            "iptables-restore in {} failed ({}): {}\nrules:\n{rules}",
            self.name,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The command prefix that runs a program in this namespace (`ip netns exec NAME`).
    pub fn exec_prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }
}

/// `/var/run/netns/NAME`.
fn netns_path(name: &str) -> PathBuf {
    Path::new("/var/run/netns").join(name)
}

/// `/etc/netns/NAME`, whose files `ip netns exec` mounts over `/etc`'s (`hosts`).
pub fn etc_dir(name: &str) -> PathBuf {
    Path::new("/etc/netns").join(name)
}

/// Runs `ip ARGS...`, panicking with its stderr on failure.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("run ip {}: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "ip {} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deletes namespace `name`: kills what still runs in it (`ip netns pids`: only processes
/// this harness started there), `ip netns del`, and removes `/etc/netns/NAME`. Never panics
/// (it runs in `Drop`); says on stderr what it could not do.
pub fn delete(name: &str) {
    if let Ok(out) = Command::new("ip").args(["netns", "pids", name]).output() {
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
    }
    let deleted = Command::new("ip")
        .args(["netns", "del", name])
        .stderr(Stdio::null())
        .status();
    if netns_path(name).exists() {
        eprintln!("[mesh] could not delete netns {name} ({deleted:?})");
    }
    let _ = fs::remove_dir_all(etc_dir(name));
}

/// The start of every namespace name this process makes: `axm-PID-` (pid in base 36).
pub fn prefix() -> String {
    format!("{NAME_PREFIX}{}-", base36(std::process::id()))
}

pub fn base36(mut n: u32) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ASCII digits")
}

/// Deletes the mesh namespaces (and `/etc/netns` directories) of test processes that are
/// gone (the pid in the name no longer runs). Once per process.
pub fn sweep_stale() {
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| {
        let mut names: Vec<String> = Command::new("ip")
            .args(["netns", "list"])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if let Ok(dir) = fs::read_dir("/etc/netns") {
            names.extend(
                dir.flatten()
                    .filter_map(|e| e.file_name().into_string().ok()),
            );
        }
        names.sort();
        names.dedup();
        for name in names.iter().filter(|n| is_stale(n)) {
            eprintln!("[mesh] deleting netns {name}, left by a test process that is gone");
            delete(name);
        }
    });
}

/// Whether `name` is a mesh namespace of a process that no longer runs.
fn is_stale(name: &str) -> bool {
    let Some(pid) = name
        .strip_prefix(NAME_PREFIX)
        .and_then(|rest| rest.split('-').next())
        .and_then(|pid| u32::from_str_radix(pid, 36).ok())
    else {
        return false;
    };
    pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists()
}

/// Panics, saying what is missing, unless this process can build a mesh: root (network
/// namespaces, iptables), `ip` (iproute2) and `iptables-restore`. The mesh tests never skip.
pub fn preflight() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let mut missing = Vec::new();
        if !running_as_root() {
            missing.push(
                "root (they add network namespaces and iptables rules: run the tests as root)"
                    .to_string(),
            );
        }
        for (tool, package) in [("ip", "iproute2"), ("iptables-restore", "iptables")] {
            let found = Command::new(tool)
                .arg("-V")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok();
            if !found {
                missing.push(format!(
                    "`{tool}` on the PATH (on Debian/Ubuntu: apt-get install -y {package})"
                ));
            }
        }
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the mesh tests (tests/it/mesh) run sidecar Envoys in pods made of network \
                 namespaces, and they need {}",
                missing.join("; and ")
            ))
        }
    });
    if let Err(e) = checked {
        panic!("{e}");
    }
}
