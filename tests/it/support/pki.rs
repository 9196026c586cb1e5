//! Test certificates: [`Pki`], a CA made with openssl in its own directory, and the
//! certificates it issues. Include with `#[path = "support/pki.rs"]`, beside `support`.

#![allow(dead_code)] // each test file uses some of it

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::ConfigDir;

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl must be installed to make the test certificates");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`ca.crt`, `ca.key`) in its own directory, and the certificates it issues.
pub struct Pki {
    dir: ConfigDir,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = ConfigDir::new();
        openssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "2",
                "-subj",
                "/CN=axon test CA",
            ],
            dir.path(),
        );
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.file(name)
    }

    /// The path of `name`, as a string for YAML.
    pub fn file(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// Issues `name.crt`/`name.key` with `san` (e.g. `DNS:a.example.com`, or
    /// `URI:spiffe://…`).
    pub fn issue(&self, name: &str, san: &str) {
        self.sign(name, san, &["-CAcreateserial"]);
    }

    /// Issues `name.crt`/`name.key` as [`Pki::issue`], with serial `serial` (to tell a
    /// rotated certificate from the one before).
    pub fn issue_with_serial(&self, name: &str, san: &str, serial: u32) {
        self.sign(name, san, &["-set_serial", &serial.to_string()]);
    }

    /// The certificate is swapped in whole (written beside, then renamed), as a Secret
    /// volume update would.
    fn sign(&self, name: &str, san: &str, serial: &[&str]) {
        let dir = self.dir.path();
        openssl(
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                &format!("/CN={name}"),
            ],
            dir,
        );
        std::fs::write(
            dir.join(format!("{name}.ext")),
            format!("subjectAltName={san}\nextendedKeyUsage=serverAuth,clientAuth\n"),
        )
        .unwrap();
        let (csr, ext, out) = (
            format!("{name}.csr"),
            format!("{name}.ext"),
            format!("{name}.crt.new"),
        );
        let mut args = vec![
            "x509", "-req", "-in", &csr, "-CA", "ca.crt", "-CAkey", "ca.key",
        ];
        args.extend_from_slice(serial);
        args.extend_from_slice(&["-days", "2", "-extfile", &ext, "-out", &out]);
        openssl(&args, dir);
        std::fs::rename(dir.join(&out), dir.join(format!("{name}.crt"))).unwrap();
    }
}

/// istiod's plug-in CA files (`ca-cert.pem` an intermediate, `ca-key.pem` its PKCS#8 key,
/// `root-cert.pem`, `cert-chain.pem` the intermediate then the root), made with openssl (a
/// new root named `name` and an intermediate it signs) and written into `into`, each file
/// swapped in whole. Returns the root, PEM.
pub fn plug_in_ca(into: &Path, name: &str) -> String {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    plug_in_ca_with(into, name, &ec)
}

/// [`plug_in_ca`] with RSA 2048 keys (istiod's default), PKCS#8 as openssl 3 writes them.
pub fn plug_in_ca_rsa(into: &Path, name: &str) -> String {
    plug_in_ca_with(into, name, &["-newkey", "rsa:2048", "-nodes"])
}

/// [`plug_in_ca`] with the key arguments `keys` of `openssl req`.
fn plug_in_ca_with(into: &Path, name: &str, keys: &[&str]) -> String {
    let work = ConfigDir::new();
    let dir = work.path();
    let mut root = vec!["req", "-x509"];
    root.extend_from_slice(keys);
    let subj = format!("/O=cluster.local/CN={name} root");
    root.extend_from_slice(&[
        "-keyout", "root.key", "-out", "root.crt", "-days", "3650", "-subj", &subj,
    ]);
    openssl(&root, dir);
    let mut req = vec!["req", "-new"];
    req.extend_from_slice(keys);
    let subj = format!("/O=cluster.local/CN={name} intermediate");
    req.extend_from_slice(&["-keyout", "ca.key", "-out", "ca.csr", "-subj", &subj]);
    openssl(&req, dir);
    std::fs::write(
        dir.join("ca.ext"),
        "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n",
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            "ca.csr",
            "-CA",
            "root.crt",
            "-CAkey",
            "root.key",
            "-CAcreateserial",
            "-days",
            "730",
            "-extfile",
            "ca.ext",
            "-out",
            "ca.crt",
        ],
        dir,
    );
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
    let (ca, key, root) = (read("ca.crt"), read("ca.key"), read("root.crt"));
    std::fs::create_dir_all(into).unwrap();
    for (file, text) in [
        ("ca-key.pem", key),
        ("root-cert.pem", root.clone()),
        ("cert-chain.pem", format!("{ca}{root}")),
        ("ca-cert.pem", ca),
    ] {
        let tmp = into.join(format!("{file}.new"));
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, into.join(file)).unwrap();
    }
    root
}

/// Every certificate of the PEM file `pem`, as trusted roots.
pub fn roots(pem: &Path) -> rustls::RootCertStore {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(pem).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}

/// A TLS client (ring) that trusts the roots of `root_pem`, shows no certificate of its own
/// and offers the ALPN protocol `alpn`.
pub fn client_config(root_pem: &Path, alpn: &[u8]) -> rustls::ClientConfig {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(root_pem))
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    config
}
