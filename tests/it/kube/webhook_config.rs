//! The validating webhook's configuration in Kubernetes, against the fake API server: the
//! shipped ValidatingWebhookConfiguration (`config/kubernetes/70-validatingwebhook.yaml`)
//! gets axon's CA root as its webhooks' caBundle, as istiod's webhook controller writes it;
//! an edit that drops it is undone; a rotated root replaces it. Its failurePolicy stays
//! `Ignore` while the API server is not seen to call the webhook (the fake calls none: the
//! dry-run Gateway is not denied, and not stored).

use std::time::Duration;

use base64::Engine as _;

use crate::support::fake_kube::{self, FakeKube, VALIDATING_WEBHOOK_CONFIGURATIONS};
use crate::support::pki::plug_in_ca;
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(20);
const NAME: &str = "istio-validator-axon-system";

/// The shipped configuration, as `kubectl apply` would create it.
fn shipped() -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("config/kubernetes/70-validatingwebhook.yaml");
    let text = std::fs::read_to_string(path).expect("the manifest");
    serde_norway::from_str(&text).expect("YAML")
}

fn bundles(api: &FakeKube) -> Vec<Option<String>> {
    let Some(config) = api.get(VALIDATING_WEBHOOK_CONFIGURATIONS, "", NAME) else {
        return Vec::new();
    };
    config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| {
            let b64 = w["clientConfig"]["caBundle"].as_str()?;
            let pem = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
            String::from_utf8(pem).ok()
        })
        .collect()
}

fn policies(api: &FakeKube) -> Vec<String> {
    let config = api
        .get(VALIDATING_WEBHOOK_CONFIGURATIONS, "", NAME)
        .expect("the configuration");
    config["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| w["failurePolicy"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_webhooks_ca_bundle_is_the_cas_root_and_kept_current() {
    let api = FakeKube::start();
    api.apply(fake_kube::namespace("default", &[]));
    api.apply(shipped());
    let work = tempfile::tempdir().unwrap();
    let kubeconfig = api.write_kubeconfig(work.path());
    let ca_dir = work.path().join("ca");
    let first = plug_in_ca(&ca_dir, "first");
    let axon = Axon::start_with_env(
        None,
        &[
            "--kubernetes",
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca_dir.to_str().unwrap(),
            "--webhook-addr",
            "127.0.0.1:0",
            "--webhook-config-name",
            NAME,
        ],
        &[("KUBECONFIG", kubeconfig.to_str().unwrap())],
    );
    let root = |pem: &str| bundles(&api) == vec![Some(pem.to_string())];
    assert!(
        wait_until(CONVERGE, || root(&first)),
        "the caBundle is not the CA's root: {:?}\n{}",
        bundles(&api),
        axon.logs()
    );
    assert_eq!(
        policies(&api),
        ["Ignore"],
        "not seen to be called: fail open"
    );
    assert!(
        api.get(
            "/apis/networking.istio.io/v1/gateways",
            "default",
            "axon-invalid-gateway-dry-run"
        )
        .is_none(),
        "the readiness probe is a dry run"
    );

    // Someone drops the caBundle: axon puts it back.
    let mut edited = api
        .get(VALIDATING_WEBHOOK_CONFIGURATIONS, "", NAME)
        .unwrap();
    edited["webhooks"][0]["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    api.apply(edited);
    assert!(
        wait_until(CONVERGE, || root(&first)),
        "a dropped caBundle was not put back"
    );

    // A rotated root replaces it, and nothing is written when nothing changed.
    let writes = api.writes(VALIDATING_WEBHOOK_CONFIGURATIONS);
    let second = plug_in_ca(&ca_dir, "second");
    assert!(
        wait_until(CONVERGE, || root(&second)),
        "the rotated root is not the caBundle: {:?}",
        bundles(&api)
    );
    assert_eq!(api.writes(VALIDATING_WEBHOOK_CONFIGURATIONS), writes + 1);
}
