//! `tls.credentialName`: the SDS names istiod gives a cluster, and its sidecar rule.

use super::*;

/// The clusters of `proxy` for `SERVICES` and a DestinationRule (`rule` is its spec's lines).
fn clusters_of(proxy: &Proxy, rule: &str) -> std::collections::BTreeMap<String, Cluster> {
    let yaml = format!(
        "{SERVICES}---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr, namespace: shop}}\nspec:\n{rule}"
    );
    let ctx = context(&yaml);
    let scope = SidecarScope::compute(&ctx, proxy);
    generate(&ctx, proxy, &scope)
        .iter()
        .map(|r| Cluster::decode(r.value.as_ref()).unwrap())
        .map(|c| (c.name.clone(), c))
        .collect()
}

#[test]
fn credential_name_over_sds_and_istiods_sidecar_rule() {
    let rule = "  host: shop.example.com\n  trafficPolicy: {tls: {mode: MUTUAL, credentialName: client, subjectAltNames: [shop.example.com]}}\n";
    let gw = proxy("router", "10.1.0.1", "shop", &[("istio", "egressgateway")]);
    let cs = clusters_of(&gw, rule);
    let common = tls_context(&cs[PLAIN]).common_tls_context.unwrap();
    let certs: Vec<&str> = common
        .tls_certificate_sds_secret_configs
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(certs, ["kubernetes://client"]);
    let Some(ValidationContextType::CombinedValidationContext(v)) = common.validation_context_type
    else {
        panic!()
    };
    let root = v.validation_context_sds_secret_config.unwrap();
    assert_eq!(
        (root.name.as_str(), root.sds_config),
        ("kubernetes://client-cacert", Some(ads_config_source()))
    );
    #[allow(deprecated)]
    let sans = v
        .default_validation_context
        .unwrap()
        .match_subject_alt_names;
    assert_eq!(sans.len(), 1);

    // A sidecar uses a credential only from a rule that selects it (istiod's
    // `buildUpstreamClusterTLSContext`): else no TLS at all.
    let app = proxy("sidecar", "10.1.0.2", "shop", &[("app", "client")]);
    assert!(clusters_of(&app, rule)[PLAIN].transport_socket.is_none());
    let selecting = format!("  workloadSelector: {{matchLabels: {{app: client}}}}\n{rule}");
    let cs = clusters_of(&app, &selecting);
    assert!(cs[PLAIN].transport_socket.is_some());

    // insecureSkipVerify: no roots asked for.
    let skip = "  host: shop.example.com\n  trafficPolicy: {tls: {mode: MUTUAL, credentialName: client, insecureSkipVerify: true}}\n";
    let common = tls_context(&clusters_of(&gw, skip)[PLAIN])
        .common_tls_context
        .unwrap();
    assert!(common.validation_context_type.is_none());
}
