use base64::Engine as _;
use serde_json::json;

use super::*;
use crate::fixtures::self_signed;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn a_tls_secret_is_read_from_data_or_string_data() {
    let (cert, key) = self_signed("shop", 2);
    let object =
        json!({"type": "kubernetes.io/tls", "data": {"tls.crt": b64(&cert), "tls.key": b64(&key)}});
    let secret = decode_secret(&object, now()).unwrap().unwrap();
    let pair = secret.certificate.as_ref().unwrap();
    assert_eq!(pair.chain.as_ref(), cert.as_bytes());
    assert_eq!(pair.info.subject, "CN=shop");
    assert!(secret.ca.is_none());
    let object = json!({"stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": cert}});
    let secret = decode_secret(&object, now()).unwrap().unwrap();
    assert_eq!(secret.secret_type, "Opaque");
    assert_eq!(secret.ca.unwrap().certificates.as_ref(), cert.as_bytes());
}

#[test]
fn the_generic_keys_come_first_as_in_istiod() {
    let (a, ka) = self_signed("generic", 2);
    let (b, kb) = self_signed("tls", 2);
    let object = json!({"stringData": {"cert": a, "key": ka, "tls.crt": b, "tls.key": kb, "cacert": a, "ca.crt": b}});
    let secret = decode_secret(&object, now()).unwrap().unwrap();
    assert_eq!(secret.certificate.unwrap().info.subject, "CN=generic");
    assert_eq!(secret.ca.unwrap().info.subject, "CN=generic");
}

#[test]
fn a_key_of_another_certificate_is_refused() {
    let (cert, _) = self_signed("a", 2);
    let (_, other) = self_signed("b", 2);
    let object = json!({"stringData": {"tls.crt": cert, "tls.key": other}});
    assert_eq!(
        decode_secret(&object, now()).unwrap_err(),
        SecretError::KeyMismatch {
            key: "tls.key",
            cert: "tls.crt"
        }
    );
}

#[test]
fn expired_unparsable_and_empty_certificates_are_refused() {
    let (cert, key) = self_signed("old", -1);
    let object = json!({"stringData": {"tls.crt": cert, "tls.key": key}});
    let err = decode_secret(&object, now()).unwrap_err().to_string();
    assert!(
        err.starts_with("tls.crt: certificate \"CN=old\" is expired"),
        "{err}"
    );
    // Valid now, not in ten days.
    let (cert, key) = self_signed("soon", 2);
    let object = json!({"stringData": {"tls.crt": cert, "tls.key": key}});
    assert!(decode_secret(&object, now()).is_ok());
    assert!(matches!(
        decode_secret(&object, now() + 10 * 86_400),
        Err(SecretError::NotValidNow { .. })
    ));
    let object = json!({"stringData": {"ca.crt": "not a certificate"}});
    assert_eq!(
        decode_secret(&object, now()).unwrap_err(),
        SecretError::NoCertificate { key: "ca.crt" }
    );
    let object = json!({"stringData": {"tls.crt": "", "tls.key": ""}});
    assert_eq!(
        decode_secret(&object, now()).unwrap_err(),
        SecretError::EmptyPair("tls.crt", "tls.key")
    );
    let object = json!({"data": {"tls.crt": "%%%"}});
    assert_eq!(
        decode_secret(&object, now()).unwrap_err(),
        SecretError::Base64("tls.crt".into())
    );
}

#[test]
fn a_secret_without_tls_keys_is_no_tls_secret() {
    let object = json!({"type": "Opaque", "stringData": {"password": "x"}});
    assert_eq!(decode_secret(&object, now()), Ok(None));
    // A certificate without its key is half a pair: an error.
    let (cert, _) = self_signed("a", 2);
    let object = json!({"stringData": {"tls.crt": cert}});
    assert!(matches!(
        decode_secret(&object, now()),
        Err(SecretError::NoKeys(_))
    ));
}

#[test]
fn nothing_of_the_content_is_shown() {
    let (cert, key) = self_signed("shown", 2);
    let object = json!({"stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": cert}});
    let secret = decode_secret(&object, now()).unwrap().unwrap();
    let debug = format!("{secret:?}");
    let json = serde_json::to_string(&secret).unwrap();
    for shown in [debug, json] {
        assert!(shown.contains("CN=shown"), "{shown}");
        assert!(!shown.contains("BEGIN"), "{shown}");
        let key_body = key.lines().nth(1).unwrap();
        assert!(!shown.contains(key_body), "{shown}");
    }
}
