//! Test material for this crate's tests and its dependents' (the `fixtures` feature): TLS
//! certificates made by openssl.

use std::process::Command;

/// A self-signed P-256 certificate and its key, made by openssl (`days` may be negative:
/// an expired certificate).
pub fn self_signed(cn: &str, days: i32) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temporary directory for openssl");
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .expect("openssl must be installed to make the test certificates");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        "k.pem",
        "-out",
        "r.csr",
        "-subj",
        &format!("/CN={cn}"),
    ]);
    run(&[
        "x509",
        "-req",
        "-in",
        "r.csr",
        "-signkey",
        "k.pem",
        "-days",
        &days.to_string(),
        "-out",
        "c.pem",
    ]);
    let read =
        |f: &str| std::fs::read_to_string(dir.path().join(f)).expect("openssl wrote the file");
    (read("c.pem"), read("k.pem"))
}
