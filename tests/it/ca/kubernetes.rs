//! In Kubernetes, against the fake API server: the CA's root in every namespace axon reads,
//! the ConfigMap `istio-ca-root-cert` (data `root-cert.pem`) as istiod's namespace controller
//! writes it: created in each selected namespace (none in a namespace the selector leaves
//! out), in a namespace made later, put back when deleted or edited, and replaced when the
//! plug-in root is rotated. And the signing material kept as istiod keeps it: a self-signed
//! root in the Secret `istio-ca-secret`, shared by the next replica; the plug-in Secret
//! `cacerts` read first.

use std::time::Duration;

use crate::support::fake_kube::{self, CONFIG_MAPS, FakeKube};
use crate::support::pki::plug_in_ca;
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(20);

fn root_cert_of(api: &FakeKube, namespace: &str) -> Option<String> {
    let config_map = api.get(CONFIG_MAPS, namespace, "istio-ca-root-cert")?;
    assert_eq!(config_map["metadata"]["labels"]["istio.io/config"], "true");
    config_map["data"]["root-cert.pem"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn the_root_certificate_config_map_is_kept_in_every_selected_namespace() {
    let api = FakeKube::start();
    for (ns, labels) in [
        ("default", &[("team", "mesh")][..]),
        ("web", &[("team", "mesh")][..]),
        ("outside", &[][..]),
    ] {
        api.apply(fake_kube::namespace(ns, labels));
    }
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(work.path());
    let ca_dir = work.path().join("ca");
    let first = plug_in_ca(&ca_dir, "first");
    let _axon = Axon::start_with_env(
        None,
        &[
            "--kubernetes",
            "--namespace-selector",
            "team=mesh",
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let everywhere = |pem: &str, namespaces: &[&str]| {
        namespaces
            .iter()
            .all(|ns| root_cert_of(&api, ns).as_deref() == Some(pem))
    };
    assert!(
        wait_until(CONVERGE, || everywhere(&first, &["default", "web"])),
        "istio-ca-root-cert is not in every selected namespace: {:?}",
        root_cert_of(&api, "web")
    );
    assert_eq!(
        root_cert_of(&api, "outside"),
        None,
        "written outside the selector"
    );

    // A namespace made later gets it.
    api.apply(fake_kube::namespace("late", &[("team", "mesh")]));
    assert!(
        wait_until(CONVERGE, || everywhere(&first, &["late"])),
        "the new namespace has no istio-ca-root-cert"
    );

    assert_eq!(
        api.writes(CONFIG_MAPS),
        3,
        "one write per selected namespace"
    );

    // Deleted or edited by someone else: put back.
    api.delete("v1", "ConfigMap", "web", "istio-ca-root-cert");
    let mut edited = api
        .get(CONFIG_MAPS, "default", "istio-ca-root-cert")
        .unwrap();
    edited["data"]["root-cert.pem"] = "edited".into();
    api.apply(edited);
    assert!(
        wait_until(CONVERGE, || everywhere(&first, &["default", "web"])),
        "a deleted or edited istio-ca-root-cert was not put back"
    );

    // A rotated plug-in root replaces every copy; nothing is written when nothing changed.
    let writes = api.writes(CONFIG_MAPS);
    assert_eq!(writes, 5);
    let second = plug_in_ca(&ca_dir, "second");
    assert!(
        wait_until(CONVERGE, || everywhere(
            &second,
            &["default", "web", "late"]
        )),
        "the rotated root was not published"
    );
    assert_eq!(api.writes(CONFIG_MAPS), writes + 3);
    assert_eq!(root_cert_of(&api, "outside"), None);
}

fn start_in_kubernetes(api: &FakeKube, work: &std::path::Path, ca_dir: &std::path::Path) -> Axon {
    let kubeconfig = api.write_kubeconfig(work);
    Axon::start_with_env(
        None,
        &[
            "--kubernetes",
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    )
}

#[test]
fn the_self_signed_root_is_kept_in_istio_ca_secret_and_shared() {
    use base64::Engine as _;
    let api = FakeKube::start();
    api.apply(fake_kube::namespace("default", &[]));
    let work = tempfile::tempdir().unwrap();
    let first_dir = work.path().join("first");
    let first = start_in_kubernetes(&api, work.path(), &first_dir);
    let root = std::fs::read_to_string(first_dir.join("root-cert.pem")).unwrap();
    let secret = api
        .get(fake_kube::SECRETS, "default", "istio-ca-secret")
        .expect("istio-ca-secret was not created");
    assert_eq!(secret["type"], "istio.io/ca-root");
    let decoded = |key: &str| {
        let text = secret["data"][key].as_str().unwrap_or_default();
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap(),
        )
        .unwrap()
    };
    assert_eq!(decoded("root-cert.pem"), root);
    assert_eq!(decoded("ca-cert.pem"), root);
    assert!(decoded("ca-key.pem").contains("PRIVATE KEY"));
    drop(first);

    // Another replica (or a restart on a fresh volume) signs with the same root.
    let second_dir = work.path().join("second");
    let _second = start_in_kubernetes(&api, work.path(), &second_dir);
    assert_eq!(
        std::fs::read_to_string(second_dir.join("root-cert.pem")).unwrap(),
        root
    );
    assert!(
        wait_until(CONVERGE, || root_cert_of(&api, "default").as_deref()
            == Some(&root)),
        "istio-ca-root-cert does not hold the kept root"
    );
}

#[test]
fn the_plug_in_secret_cacerts_is_read_first() {
    use base64::Engine as _;
    let api = FakeKube::start();
    api.apply(fake_kube::namespace("default", &[]));
    let work = tempfile::tempdir().unwrap();
    let plug_in = work.path().join("plug-in");
    let root = plug_in_ca(&plug_in, "cacerts");
    let mut data = serde_json::Map::new();
    for file in [
        "ca-cert.pem",
        "ca-key.pem",
        "cert-chain.pem",
        "root-cert.pem",
    ] {
        let bytes = std::fs::read(plug_in.join(file)).unwrap();
        data.insert(
            file.to_string(),
            base64::engine::general_purpose::STANDARD
                .encode(bytes)
                .into(),
        );
    }
    api.apply(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "cacerts", "namespace": "default"},
        "data": data,
    }));
    let ca_dir = work.path().join("ca");
    let _axon = start_in_kubernetes(&api, work.path(), &ca_dir);
    assert_eq!(
        std::fs::read_to_string(ca_dir.join("root-cert.pem")).unwrap(),
        root
    );
    assert!(
        api.get(fake_kube::SECRETS, "default", "istio-ca-secret")
            .is_none(),
        "a self-signed root was kept beside the plug-in"
    );
    assert!(
        wait_until(CONVERGE, || root_cert_of(&api, "default").as_deref()
            == Some(&root)),
        "istio-ca-root-cert does not hold the plug-in root"
    );
}
