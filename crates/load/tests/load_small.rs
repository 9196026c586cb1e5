//! The CI version of the mesh-1k benchmark: `axon-load bench` with 200 simulated proxies
//! against the built `axon` on a 100-service mesh. Checks that every proxy syncs (SotW and
//! Delta), that the edits converge and that the floor's replay server serves them too; no
//! timing is asserted (the figures are printed).

use std::path::PathBuf;
use std::process::Command;

/// The `axon` that cargo built beside `axon-load` (a workspace `cargo test` builds both).
fn axon() -> PathBuf {
    let axon = std::path::Path::new(env!("CARGO_BIN_EXE_axon-load")).with_file_name("axon");
    assert!(
        axon.exists(),
        "{} is missing: run the tests from the workspace root (`cargo test`), or `cargo build -p axon` first",
        axon.display()
    );
    axon
}

fn bench(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_axon-load"))
        .args([
            "bench",
            "--proxies",
            "200",
            "--mesh",
            "mesh-100",
            "--timeout",
            "60",
            "--axon",
        ])
        .arg(axon())
        .args(extra)
        .output()
        .expect("running axon-load");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}\n{stderr}");
    assert!(
        out.status.success(),
        "axon-load bench failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    stdout
}

#[test]
fn two_hundred_sotw_proxies_sync_and_follow_edits() {
    let out = bench(&["--scenarios", "storm,vs,eds,floor"]);
    assert!(out.contains("storm: 200/200 synced"), "{out}");
    assert!(out.contains("floor storm: 200/200 synced"), "{out}");
    assert!(
        out.contains("VS edit: affected proxies | 200 of 200"),
        "{out}"
    );
}

#[test]
fn two_hundred_delta_proxies_sync_with_sidecars() {
    let out = bench(&["--delta", "--sidecars", "--scenarios", "storm,floor"]);
    assert!(out.contains("storm: 200/200 synced"), "{out}");
    assert!(out.contains("floor storm: 200/200 synced"), "{out}");
}
