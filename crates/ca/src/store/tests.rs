//! The directory: a self-signed root written once and kept across a restart, plug-in files
//! read again when they change.

use super::*;

#[test]
fn a_self_signed_root_is_written_once_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca");
    let first = CaStore::open(&ca, "cluster.local", CaTtls::default()).unwrap();
    let root = first.current().root_pem().to_string();
    for name in [CA_CERT_FILE, CA_KEY_FILE, ROOT_CERT_FILE] {
        assert!(ca.join(name).exists(), "{name}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(ca.join(CA_KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let again = CaStore::open(&ca, "cluster.local", CaTtls::default()).unwrap();
    assert_eq!(again.current().root_pem(), root);
}

#[test]
fn half_a_plug_in_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CA_CERT_FILE), "x").unwrap();
    let e = CaStore::open(dir.path(), "cluster.local", CaTtls::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("without the other"), "{e}");
}

#[test]
fn changed_files_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = CaStore::open(dir.path(), "cluster.local", CaTtls::default()).unwrap();
    let first = store.current();
    // Another root, written over the files (as a rotated plug-in).
    let (_, made) = Authority::self_signed(
        "cluster.local",
        Duration::from_secs(86400),
        SystemTime::now(),
    )
    .unwrap();
    std::fs::write(dir.path().join(CA_KEY_FILE), &made.key_pem).unwrap();
    std::fs::write(dir.path().join(CA_CERT_FILE), &made.cert_pem).unwrap();
    std::fs::write(dir.path().join(ROOT_CERT_FILE), &made.cert_pem).unwrap();
    store.state.lock().unwrap().checked = Instant::now() - Duration::from_secs(2);
    let second = store.current();
    assert!(!Arc::ptr_eq(&first, &second));
    assert_eq!(second.root_pem(), made.cert_pem);
    // Broken files keep the material in use.
    std::fs::write(dir.path().join(CA_CERT_FILE), "broken").unwrap();
    store.state.lock().unwrap().checked = Instant::now() - Duration::from_secs(2);
    assert!(Arc::ptr_eq(&second, &store.current()));
}
