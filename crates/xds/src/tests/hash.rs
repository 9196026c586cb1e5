//! Route hash policies from the DestinationRule each proxy uses.

use super::*;

/// A route's consistent hash comes from the DestinationRule the proxy uses: a
/// `workloadSelector` rule reaches the routes of the proxies it selects, and only theirs.
#[test]
fn a_selector_rules_hash_reaches_the_routes_of_the_proxies_it_selects() {
    const HASHED: &str = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: hashed, namespace: web}
spec:
  host: reviews.shop.svc.cluster.local
  workloadSelector: {matchLabels: {app: web}}
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user}}}
"#;
    let ctx = context(&format!("{MESH}---{HASHED}"));
    let hashes = |labels: &[(&str, &str)]| -> usize {
        let proxy = axon_model::fixtures::proxy("sidecar", "10.9.0.1", "web", labels);
        let routes = generate_for(ResourceType::Route, &ctx, &proxy, &names(&["9080"]));
        decode::<RouteConfiguration>(&routes)
            .iter()
            .flat_map(|rc| &rc.virtual_hosts)
            .filter(|vh| vh.name.starts_with("reviews."))
            .flat_map(|vh| &vh.routes)
            .filter_map(|r| match &r.action {
                Some(Action::Route(a)) => Some(a.hash_policy.len()),
                _ => None,
            })
            .sum()
    };
    assert_eq!(hashes(&[("app", "web")]), 1, "the selected proxy hashes");
    assert_eq!(hashes(&[("app", "other")]), 0, "another proxy does not");
}
