//! The config directory at start-up and against hostile files, through the real file system:
//! `/ready` waits for a clean first read and says why; an empty directory is served only
//! once it stays empty for `file_settle`; a file over `max_file_bytes`, past `max_files`,
//! nested past `max_yaml_depth` or whose aliases expand past the bound is rejected by name,
//! quickly and in bounded memory, while the rest is served.

use crate::support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use support::*;

const VS: &str = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: NAME, namespace: demo}\nspec:\n  hosts: [NAME.demo.svc.cluster.local]\n  http: [{route: [{destination: {host: NAME.demo.svc.cluster.local}}]}]\n";

fn vs(name: &str) -> String {
    VS.replace("NAME", name)
}

fn ready(axon: &Axon) -> (u16, String) {
    let r = axon.monitoring_get("/ready");
    (r.status, r.body)
}

fn wait_ready(axon: &Axon) {
    assert!(
        wait_until(Duration::from_secs(30), || ready(axon).0 == 200),
        "never ready: {:?}\n{}",
        ready(axon),
        axon.logs()
    );
}

fn chmod(path: &std::path::Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

fn limits(dir: &ConfigDir, text: &str) -> String {
    dir.write("limits.toml", text);
    dir.file("limits.toml").display().to_string()
}

#[test]
fn an_unreadable_subdirectory_at_start_up_holds_ready_and_says_why() {
    let root = ConfigDir::new();
    let conf = root.path().join("conf");
    fs::create_dir_all(conf.join("sub")).unwrap();
    fs::write(conf.join("a.yaml"), vs("a")).unwrap();
    fs::write(conf.join("sub/b.yaml"), vs("b")).unwrap();
    chmod(&conf.join("sub"), 0o000);
    let limits = limits(&root, "file_rescan_interval = \"1h\"\n");
    let axon = Axon::start_unprivileged(&conf, &["--limits", &limits]);
    assert!(
        wait_until(Duration::from_secs(10), || ready(&axon)
            .1
            .contains("Permission denied")),
        "/ready does not say why: {:?}",
        ready(&axon)
    );
    let (status, body) = ready(&axon);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("sub: cannot list"), "{body}");
    assert!(
        axon.wait_for_log("cannot list a config subdirectory", Duration::from_secs(5)),
        "not logged"
    );
    // Readable again: seen by the watch (the rescan is off), and served whole.
    chmod(&conf.join("sub"), 0o755);
    wait_ready(&axon);
    let configs = axon.debug_json("/debug/configz")["configs"].clone();
    assert_eq!(configs.as_array().map(Vec::len), Some(2), "{configs}");
}

#[test]
fn an_unreadable_file_at_start_up_holds_ready_and_says_why() {
    let root = ConfigDir::new();
    let conf = root.path().join("conf");
    fs::create_dir_all(&conf).unwrap();
    fs::write(conf.join("a.yaml"), vs("a")).unwrap();
    fs::write(conf.join("b.yaml"), vs("b")).unwrap();
    chmod(&conf.join("b.yaml"), 0o000);
    let limits = limits(&root, "file_rescan_interval = \"1h\"\n");
    let axon = Axon::start_unprivileged(&conf, &["--limits", &limits]);
    assert!(
        wait_until(Duration::from_secs(10), || ready(&axon)
            .1
            .contains("b.yaml: cannot read")),
        "/ready does not name the file: {:?}",
        ready(&axon)
    );
    assert_eq!(ready(&axon).0, 503);
    assert_eq!(axon.metric("axon_config_read_errors "), Some(1.0));
    chmod(&conf.join("b.yaml"), 0o644);
    wait_ready(&axon);
}

#[test]
fn an_empty_directory_is_served_once_it_stays_empty_for_the_settle() {
    let root = ConfigDir::new();
    let conf = root.path().join("conf");
    fs::create_dir_all(&conf).unwrap();
    let limits = limits(&root, "file_settle = \"2s\"\n");
    let started = Instant::now();
    let axon = Axon::start_with_args(&conf, &["--limits", &limits]);
    let (status, body) = ready(&axon);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("no config file yet"), "{body}");
    wait_ready(&axon);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "ready after {:?}, before file_settle",
        started.elapsed()
    );
}

#[test]
fn hostile_files_are_rejected_by_name_quickly_and_in_bounded_memory() {
    let root = ConfigDir::new();
    let conf = root.path().join("conf");
    fs::create_dir_all(&conf).unwrap();
    for name in ["a", "b", "c"] {
        fs::write(conf.join(format!("{name}.yaml")), vs(name)).unwrap();
    }
    // 1,000 aliases of a 1 MiB string: 1 GiB once expanded, from a 1 MiB file.
    let mut aliases = format!("{}\nbig: &big {}\nmany: [", vs("d"), "x".repeat(1 << 20));
    aliases.push_str(&"*big, ".repeat(1000));
    aliases.push_str("]\n");
    fs::write(conf.join("d-aliases.yaml"), aliases).unwrap();
    // 100,000 nested flow brackets in 200 KB.
    let deep = format!(
        "{}\nx: {}{}\n",
        vs("e"),
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    fs::write(conf.join("e-deep.yaml"), deep).unwrap();
    // Over max_file_bytes (1 MiB here).
    let padding = format!("# {}\n", "p".repeat(100));
    fs::write(
        conf.join("f-big.yaml"),
        format!("{}{}", vs("f"), padding.repeat(11_000)),
    )
    .unwrap();
    // Past max_files (6 here): a..f are the first six in path order.
    fs::write(conf.join("g.yaml"), vs("g")).unwrap();
    let limits = limits(&root, "max_file_bytes = 1100000\nmax_files = 6\n");
    let started = Instant::now();
    let axon = Axon::start_with_args(&conf, &["--limits", &limits]);
    wait_ready(&axon);
    let took = started.elapsed();
    let configz = axon.debug_json("/debug/configz");
    let names: Vec<String> = configz["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["key"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["a", "b", "c"], "only the good files: {configz}");
    let errors = axon.config_errors();
    let error_for = |file: &str| {
        errors
            .iter()
            .find(|e| e.contains(file))
            .cloned()
            .unwrap_or_else(|| panic!("no error names {file}: {errors:?}"))
    };
    assert!(error_for("d-aliases.yaml").contains("aliases expand past 1100000 bytes"));
    let deep = error_for("e-deep.yaml");
    assert!(
        deep.contains("nested deeper than 64 levels at line 8"),
        "{deep}"
    );
    assert!(error_for("f-big.yaml").contains("more than max_file_bytes (1100000)"));
    assert!(error_for("/g.yaml").contains("more than max_files (6)"));
    let rss_mib = axon.rss_kib() / 1024;
    eprintln!("[bounds] ready in {took:?}, RSS {rss_mib} MiB");
    assert!(rss_mib < 300, "RSS {rss_mib} MiB after the hostile files");
    assert!(took < Duration::from_secs(20), "ready after {took:?}");
}
