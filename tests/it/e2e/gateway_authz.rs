//! End-to-end: an AuthorizationPolicy at a gateway on `remoteIpBlocks`, the client's address
//! read from `X-Forwarded-For` behind the `numTrustedProxies` the gateway's pod declares
//! (`proxy.istio.io/config` `gatewayTopology`, sent by pilot-agent as `PROXY_CONFIG`): a
//! request forwarded for the denied address is refused with 403, one for another passes.

use std::time::Duration;

use crate::support::scenario::*;
use crate::support::*;

const CONVERGE: Duration = Duration::from_secs(30);

#[test]
fn remote_ip_blocks_behind_trusted_proxies() {
    let upstream = Upstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(upstream.port(), v2.port()));
    config.write(
        "routes.yaml",
        &backend_routes_yaml("v1", false, false, &[("v1", 100)]),
    );
    config.write(
        "authz.yaml",
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: block, namespace: istio-system}\nspec:\n  selector: {matchLabels: {istio: ingressgateway}}\n  action: DENY\n  rules: [{from: [{source: {remoteIpBlocks: [203.0.113.7/32]}}]}]\n",
    );
    let axon = Axon::start(config.path());
    let mut options = gateway_options();
    options.extra_metadata.push((
        "PROXY_CONFIG".into(),
        serde_json::json!({"gatewayTopology": {"numTrustedProxies": 1}}),
    ));
    let (envoy, port) =
        start_gateway_listening_with(&axon, &config, gw_port, axon.xds_addr(), &options, CONVERGE);
    let get = |xff: &str| http_get(Envoy::local(port), "/", &[("x-forwarded-for", xff)]);
    let mut last = (0, String::new());
    let ok = wait_until(CONVERGE, || {
        last = get("198.51.100.1");
        last.0 == 200
    });
    assert!(
        ok,
        "the allowed client never passed: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    assert_eq!(get("203.0.113.7"), (403, "RBAC: access denied".to_string()));
    assert_eq!(get("198.51.100.2").0, 200);
    assert_no_rejected_updates(&envoy);
}
