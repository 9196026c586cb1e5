use serde_json::json;

use super::*;
use axon_config::fixtures::self_signed;

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

#[test]
fn names_resolve_as_istiod_parses_them() {
    assert_eq!(resource_name("cert"), "kubernetes://cert");
    assert_eq!(resource_name("kubernetes://cert"), "kubernetes://cert");
    assert_eq!(ca_resource_name("cert"), "kubernetes://cert-cacert");
    let r = SecretRef::parse("kubernetes://cert-cacert", "shop").unwrap();
    assert_eq!(
        (r.namespace.as_str(), r.name.as_str(), r.ca_only),
        ("shop", "cert-cacert", true)
    );
    let r = SecretRef::parse("kubernetes://other/cert", "shop").unwrap();
    assert_eq!((r.namespace.as_str(), r.name.as_str()), ("other", "cert"));
    assert_eq!(
        r.related(),
        [
            config_key("other", "cert"),
            config_key("other", "cert-cacert")
        ]
    );
    assert_eq!(SecretRef::parse("file-root:/ca.pem", "shop"), None);
    assert_eq!(SecretRef::parse("kubernetes://", "shop"), None);
    // A Gateway API listener's: always NAMESPACE/NAME, kept as is, possibly of another
    // namespace than the proxy's.
    assert_eq!(
        resource_name("kubernetes-gateway://infra/cert"),
        "kubernetes-gateway://infra/cert"
    );
    let r = SecretRef::parse("kubernetes-gateway://infra/cert", "shop").unwrap();
    assert_eq!(
        (r.namespace.as_str(), r.name.as_str(), r.gateway),
        ("infra", "cert", true)
    );
    assert_eq!(SecretRef::parse("kubernetes-gateway://cert", "shop"), None);
    assert!(
        !SecretRef::parse("kubernetes://infra/cert", "shop")
            .unwrap()
            .gateway
    );
}

fn index(secrets: &[(&str, &str, serde_json::Value)]) -> SecretIndex {
    let configs: ConfigSet = secrets
        .iter()
        .map(|(ns, name, object)| {
            let config = Config {
                key: config_key(ns, name),
                labels: Default::default(),
                created: None,
                spec: Spec::Secret(decode_secret(object, now()).unwrap().unwrap()),
                not_applied: Vec::new(),
            };
            (config.key.clone(), Arc::new(config))
        })
        .collect();
    SecretIndex::build(&configs)
}

#[test]
fn the_index_answers_for_certificates_roots_and_credentials() {
    let (cert, key) = self_signed("both", 2);
    let idx = index(&[
        (
            "shop",
            "both",
            json!({"stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": cert}}),
        ),
        (
            "shop",
            "split",
            json!({"stringData": {"tls.crt": cert, "tls.key": key}}),
        ),
        (
            "shop",
            "split-cacert",
            json!({"stringData": {"cacert": cert}}),
        ),
        (
            "shop",
            "only-cert",
            json!({"stringData": {"cert": cert, "key": key}}),
        ),
    ]);
    assert!(idx.certificate("shop", "both").is_ok());
    assert!(
        idx.roots("shop", "both-cacert").is_ok(),
        "the CA of a compound Secret"
    );
    assert!(idx.roots("shop", "split-cacert").is_ok());
    assert_eq!(
        idx.roots("shop", "only-cert-cacert").unwrap_err(),
        SecretProblem::NoRoots {
            namespace: "shop".into(),
            name: "only-cert".into()
        }
    );
    assert!(matches!(
        idx.certificate("other", "both"),
        Err(SecretProblem::NotFound { .. })
    ));
    assert!(matches!(
        idx.certificate("shop", "split-cacert"),
        Err(SecretProblem::NoCertificate { .. })
    ));
    assert_eq!(idx.credential("shop", "both", true), Ok(()));
    assert_eq!(idx.credential("shop", "split", true), Ok(()));
    assert!(idx.credential("shop", "only-cert", false).is_ok());
    assert!(idx.credential("shop", "only-cert", true).is_err());
    assert!(idx.credential("shop", "missing", false).is_err());
    assert_eq!(
        idx.credential("shop", "kubernetes://shop/both", true),
        Ok(())
    );
    assert!(matches!(
        idx.credential("other", "kubernetes://shop/both", false),
        Err(SecretProblem::OtherNamespace { .. })
    ));
}
