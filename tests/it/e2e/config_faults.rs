//! End-to-end: file-system faults and editor save patterns never make axon serve a state the
//! user did not save. A real gateway Envoy must keep routing by the last good config through
//! each fault, with every request answered, while the periodic rescan is off (`1h`), so that
//! only the watch, the settle rule and the directory re-check can explain what is seen.

use crate::support;
use crate::support::scenario;

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
/// The limits of these tests: no periodic rescan, the default settle window.
const LIMITS: &str = "file_rescan_interval = \"1h\"\nfile_settle = \"1s\"\n";
const SETTLE: Duration = Duration::from_secs(1);

/// How the config directory is laid out.
#[derive(Clone, Copy, PartialEq)]
enum Layout {
    /// Plain files in `conf/`.
    Plain,
    /// As a Kubernetes ConfigMap volume: `conf/..<stamp>/` holds the files, `conf/..data`
    /// links to it, and each `conf/<name>` links to `..data/<name>`.
    ConfigMap,
}

/// Field order = drop order: Envoy dies before axon.
struct Mesh {
    envoy: Envoy,
    axon: Axon,
    root: ConfigDir,
    conf: PathBuf,
    gw_port: u16,
    v1: Upstream,
    v2: Upstream,
}

const FILES: [&str; 3] = ["gateway.yaml", "backend.yaml", "routes.yaml"];

fn routes_yaml(subset: &str) -> String {
    backend_routes_yaml("v1", false, false, &[(subset, 100)])
}

impl Mesh {
    fn start(layout: Layout) -> Mesh {
        let v1 = Upstream::start("backend-v1");
        let v2 = Upstream::start("backend-v2");
        let root = ConfigDir::new();
        let conf = root.path().join("conf");
        let gw_port = free_port();
        let files = files(gw_port, v1.port(), v2.port(), "v1");
        match layout {
            Layout::Plain => write_plain(&conf, &files),
            Layout::ConfigMap => write_configmap(&conf, "..2026_12_01_a", &files),
        }
        root.write("limits.toml", LIMITS);
        let limits = root.file("limits.toml");
        // Subject to file permissions even as root, for the chmod faults.
        let axon = Axon::start_unprivileged(&conf, &["--limits", limits.to_str().unwrap()]);
        let (envoy, gw_port) = start_envoy_listening(
            &axon,
            gw_port,
            |port| format!("0.0.0.0_{port}"),
            |port| fs::write(conf.join("gateway.yaml"), gateway_yaml(port)).unwrap(),
            || Envoy::start(axon.xds_addr(), gateway_options()),
            CONVERGE,
        );
        let m = Mesh {
            envoy,
            axon,
            root,
            conf,
            gw_port,
            v1,
            v2,
        };
        wait_gateway_route(
            &m.envoy,
            m.gw_port,
            "*",
            &[&format!("outbound|80|v1|{BACKEND}")],
            CONVERGE,
        );
        m.wait_body("initial route", "backend-v1");
        m
    }

    fn files(&self, subset: &str) -> Vec<(&'static str, String)> {
        files(self.gw_port, self.v1.port(), self.v2.port(), subset)
    }

    fn get(&self) -> (u16, String) {
        http_get(Envoy::local(self.gw_port), "/", &[])
    }

    fn wait_body(&self, what: &str, want: &str) {
        wait_for_answer(what, CONVERGE, want, &self.envoy, || self.get());
    }

    /// Sends requests for `long`: every one must be answered by `want`.
    fn served_throughout(&self, what: &str, long: Duration, want: &str) {
        let end = Instant::now() + long;
        let mut n = 0;
        while Instant::now() < end {
            let got = self.get();
            assert_eq!(
                got,
                (200, want.to_string()),
                "{what}: request {n} not served by the last good config\n{}\naxon log:\n{}",
                describe_envoy(&self.envoy),
                self.axon.logs()
            );
            n += 1;
        }
        assert!(n > 10, "{what}: only {n} requests sent");
    }

    /// Waits for `want` while every answer is a 200 from one of the backends.
    fn switch_to(&self, what: &str, want: &str) {
        let mut last = (0, String::new());
        let ok = wait_until(CONVERGE, || {
            last = self.get();
            assert!(
                last.0 == 200 && last.1.starts_with("backend-"),
                "{what}: a request failed while switching: {last:?}\n{}",
                describe_envoy(&self.envoy)
            );
            last.1 == want
        });
        assert!(
            ok,
            "{what}: never served by {want}; last {last:?}\n{}",
            self.axon.logs()
        );
    }

    fn config_updates(&self) -> f64 {
        self.axon
            .metric("pilot_inbound_updates{type=\"config\"}")
            .unwrap_or(0.0)
    }

    fn dir_problem(&self) -> Option<String> {
        self.axon.debug_json("/debug/configz")["sources"]
            .as_array()
            .into_iter()
            .flatten()
            .chain(std::iter::once(&self.axon.debug_json("/debug/configz")))
            .find_map(|s| s["dir_problem"].as_str().map(str::to_string))
    }
}

fn files(gw_port: u16, v1: u16, v2: u16, subset: &str) -> Vec<(&'static str, String)> {
    vec![
        (FILES[0], gateway_yaml(gw_port)),
        (FILES[1], backend_yaml(v1, v2)),
        (FILES[2], routes_yaml(subset)),
    ]
}

/// Writes each file atomically (a dot-named temp file, then a rename), creating `dir`.
fn write_plain(dir: &Path, files: &[(&str, String)]) {
    fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        let tmp = dir.join(format!(".{name}.tmp"));
        fs::write(&tmp, text).unwrap();
        fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

/// Writes `files` into `conf/<data>/` and points `conf/..data` at it, as the kubelet does
/// (a new directory, a `..data_tmp` link renamed over `..data`, the old directory removed);
/// creates the per-file links on first use.
fn write_configmap(conf: &Path, data: &str, files: &[(&str, String)]) {
    fs::create_dir_all(conf.join(data)).unwrap();
    for (name, text) in files {
        fs::write(conf.join(data).join(name), text).unwrap();
    }
    let old = fs::read_link(conf.join("..data")).ok();
    std::os::unix::fs::symlink(data, conf.join("..data_tmp")).unwrap();
    fs::rename(conf.join("..data_tmp"), conf.join("..data")).unwrap();
    for (name, _) in files {
        let link = conf.join(name);
        if fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(name), &link).unwrap();
        }
    }
    if let Some(old) = old {
        fs::remove_dir_all(conf.join(old)).unwrap();
    }
}

#[test]
fn a_removed_directory_keeps_its_configs_and_is_watched_again_when_back() {
    let m = Mesh::start(Layout::Plain);
    let updates = m.config_updates();

    fs::remove_dir_all(&m.conf).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || m.dir_problem().is_some()),
        "/debug/configz never reported the directory missing: {}",
        m.axon.debug_json("/debug/configz")
    );
    assert!(
        m.axon
            .wait_for_log("config directory unreadable", Duration::from_secs(5)),
        "no warning for the missing directory"
    );
    m.served_throughout("directory removed", 3 * SETTLE, "backend-v1");
    assert_eq!(m.config_updates(), updates, "nothing was pushed");

    // Back with another route: read without a rescan (the directory is looked for every
    // file_settle while it is missing), and only the new route is pushed.
    write_plain(&m.conf, &m.files("v2"));
    m.switch_to("directory back", "backend-v2");
    assert!(
        wait_until(Duration::from_secs(10), || m.dir_problem().is_none()),
        "the directory problem is still reported"
    );
    // The watch is set up again: a later edit is seen at once, with the rescan off.
    let edited = Instant::now();
    write_plain(&m.conf, &m.files("v1")[2..]);
    m.switch_to("edit after the directory came back", "backend-v1");
    eprintln!(
        "[faults] an edit after the directory came back was served in {:?}",
        edited.elapsed()
    );
    assert!(
        edited.elapsed() < Duration::from_secs(20),
        "the edit took {:?}: the watch was not set up again",
        edited.elapsed()
    );
}

#[test]
fn a_configmap_data_swap_is_followed_without_a_gap() {
    let m = Mesh::start(Layout::ConfigMap);
    let updates = m.config_updates();
    write_configmap(&m.conf, "..2026_12_01_b", &m.files("v2"));
    m.switch_to("..data swapped", "backend-v2");
    m.served_throughout("after the swap", 2 * SETTLE, "backend-v2");
    assert_eq!(
        m.config_updates(),
        updates + 1.0,
        "one update for the one swap, nothing in between"
    );
    // A second swap, back.
    write_configmap(&m.conf, "..2026_12_01_c", &m.files("v1"));
    m.switch_to("..data swapped back", "backend-v1");
}

#[test]
fn editor_save_patterns_never_push_an_unsaved_state() {
    let m = Mesh::start(Layout::Plain);
    let routes = m.conf.join("routes.yaml");
    let v1 = routes_yaml("v1");
    let v2 = routes_yaml("v2");
    let settled = |what: &str, want: &str| m.served_throughout(what, 2 * SETTLE, want);

    // Truncate, then write the same text 0.3 s later: nothing to push.
    let updates = m.config_updates();
    fs::File::create(&routes).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    fs::write(&routes, &v1).unwrap();
    settled("truncate then write", "backend-v1");
    assert_eq!(
        m.config_updates(),
        updates,
        "truncate + write pushed something"
    );

    // A partial write, 0.3 s of nothing, the rest, then close: only the whole is pushed.
    let updates = m.config_updates();
    let mut f = fs::File::create(&routes).unwrap();
    let (head, tail) = v2.split_at(v2.len() / 2);
    f.write_all(head.as_bytes()).unwrap();
    f.flush().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    f.write_all(tail.as_bytes()).unwrap();
    drop(f);
    m.switch_to("partial writes", "backend-v2");
    settled("after the partial writes", "backend-v2");
    assert_eq!(
        m.config_updates(),
        updates + 1.0,
        "one push, of the whole file"
    );

    // Removed and created again (some editors save so), within the settle: nothing.
    let updates = m.config_updates();
    fs::remove_file(&routes).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    fs::write(&routes, &v2).unwrap();
    settled("remove then create", "backend-v2");
    assert_eq!(
        m.config_updates(),
        updates,
        "remove + create pushed something"
    );

    // A temp file renamed over it.
    let tmp = m.conf.join("routes.yaml.swp");
    fs::write(&tmp, &v1).unwrap();
    fs::rename(&tmp, &routes).unwrap();
    m.switch_to("temp file renamed over", "backend-v1");

    // An atomic symlink swap, to a file outside the directory.
    let target = m.root.path().join("routes-v2.yaml");
    fs::write(&target, &v2).unwrap();
    let link = m.conf.join(".routes.link");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    fs::rename(&link, &routes).unwrap();
    m.switch_to("symlink swapped in", "backend-v2");

    // Emptied for good: dropped once it stays empty for the settle, not before.
    let updates = m.config_updates();
    fs::write(&routes, "").unwrap();
    let emptied = Instant::now();
    assert!(
        wait_until(CONVERGE, || m.get().0 == 404),
        "the route of an emptied file was never dropped"
    );
    assert!(
        emptied.elapsed() >= SETTLE,
        "dropped after {:?}, before file_settle",
        emptied.elapsed()
    );
    assert_eq!(m.config_updates(), updates + 1.0);
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn permission_faults_keep_the_last_good_configs() {
    let m = Mesh::start(Layout::Plain);
    let updates = m.config_updates();
    let routes = m.conf.join("routes.yaml");

    // The routes file unreadable, then changed while unreadable: still served as it was.
    chmod(&routes, 0o000);
    assert!(
        m.axon
            .wait_config_error("Permission denied", Duration::from_secs(10)),
        "no error in /debug/configz: {:?}",
        m.axon.config_errors()
    );
    m.served_throughout("routes.yaml unreadable", 2 * SETTLE, "backend-v1");
    assert_eq!(m.config_updates(), updates, "nothing was pushed");
    chmod(&routes, 0o644);
    fs::write(&routes, routes_yaml("v2")).unwrap();
    m.switch_to("readable again, and edited", "backend-v2");

    // The whole directory unlistable: nothing dropped; edits are seen again once it is back.
    let updates = m.config_updates();
    chmod(&m.conf, 0o000);
    assert!(
        wait_until(Duration::from_secs(10), || m.dir_problem().is_some()),
        "the unlistable directory is not reported: {}",
        m.axon.debug_json("/debug/configz")
    );
    m.served_throughout("directory unlistable", 2 * SETTLE, "backend-v2");
    assert_eq!(m.config_updates(), updates, "nothing was pushed");
    chmod(&m.conf, 0o755);
    assert!(
        wait_until(Duration::from_secs(10), || m.dir_problem().is_none()),
        "the directory problem is still reported"
    );
    fs::write(&routes, routes_yaml("v1")).unwrap();
    m.switch_to("directory listable again, and edited", "backend-v1");
}
