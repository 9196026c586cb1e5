//! In Kubernetes, the CA's root in every namespace axon reads: the ConfigMap
//! `istio-ca-root-cert` (data `root-cert.pem`), as istiod's namespace controller writes it,
//! in the fake API server: created in each selected namespace (none in a namespace the
//! selector leaves out), in a namespace made later, and replaced when the plug-in root is
//! rotated.

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

    // A rotated plug-in root replaces every copy; nothing is written when nothing changed.
    let writes = api.writes(CONFIG_MAPS);
    assert_eq!(writes, 3, "one write per selected namespace");
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
