//! Istio and Gateway API objects in the cluster of kinds axon does not apply (here a
//! WasmPlugin) are warned of at start, as a file holding one is at load: what they say is not
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
    let kubeconfig = kubeconfig.display().to_string();
    let axon = Axon::start_with_env(
        None,
        &["--kubernetes"],
        &[("KUBECONFIG", kubeconfig.as_str())],
    );
    let warned = wait_until(Duration::from_secs(30), || {
        axon.logs().lines().any(|l| {
            l.contains("kind not applied by axon")
                && l.contains("WasmPlugin")
                && l.contains("shop/stats")
        })
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
