//! Fuzz target `kube`: Kubernetes watch events (Services, EndpointSlices, Pods, Namespaces,
//! Istio objects as JSON) into the registries' pure indexes (`axon_fuzz::kube_script`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(script) = std::str::from_utf8(data) {
        axon_fuzz::kube_script::run(script);
    }
});
