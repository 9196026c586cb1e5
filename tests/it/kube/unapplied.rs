//! Istio and Gateway API objects in the cluster of kinds axon does not apply (here a
//! WasmPlugin, and a UDPRoute served at an older version than the group's preferred) are
//! warned of at start, as a file holding one is at load: what they say is not
//! enforced. A kind axon watches (a Telemetry, an HTTPRoute of the Gateway API) is not.

use std::time::Duration;

use crate::support::fake_kube::*;
use crate::support::*;

#[test]
fn objects_of_kinds_not_applied_are_warned_of() {
    let api = FakeKube::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.apply(namespace("shop", &[]));
    api.apply(istio(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: logs, namespace: shop}\nspec: {accessLogging: [{providers: [{name: envoy}]}]}\n",
    ));
    api.apply(istio(
        "apiVersion: extensions.istio.io/v1alpha1\nkind: WasmPlugin\nmetadata: {name: stats, namespace: shop}\nspec: {url: oci://example/stats:1}\n",
    ));
    api.apply(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]},
    }));
    api.apply(serde_json::json!({
        "apiVersion": "gateway.networking.k8s.io/v1alpha2", "kind": "UDPRoute",
        "metadata": {"name": "dns", "namespace": "shop"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "dns", "port": 53}]}]},
    }));
    let kubeconfig = kubeconfig.display().to_string();
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    let warned_of = |kind: &str, object: &str| {
        axon.logs().lines().any(|l| {
            l.contains("kind not applied by axon") && l.contains(kind) && l.contains(object)
        })
    };
    // A UDPRoute too: served at v1alpha2 only, beside the group's preferred v1.
    let warned = wait_until(Duration::from_secs(30), || {
        warned_of("WasmPlugin", "shop/stats") && warned_of("UDPRoute", "shop/dns")
    });
    assert!(warned, "no warning:\n{}", axon.logs());
    assert!(
        !axon
            .logs()
            .lines()
            .any(|l| l.contains("kind not applied by axon")
                && (l.contains("Telemetry") || l.contains("HTTPRoute"))),
        "{}",
        axon.logs()
    );
}
