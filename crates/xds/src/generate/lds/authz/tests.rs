//! The RBAC filters as istiod's builder makes them (`builder_test.go`'s testdata): names,
//! order, actions, shadow rules, the TCP handling of HTTP-only keys, and the matchers.

use prost::Message;

use super::wire::{HttpRbac, NetworkRbac};
use super::*;
use axon_model::fixtures::{context, proxy};

fn ap(name: &str, ns: &str, spec: &str, dry_run: bool) -> String {
    let annotations = if dry_run {
        ", annotations: {istio.io/dry-run: \"true\"}"
    } else {
        ""
    };
    format!(
        "---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: {name}, namespace: {ns}{annotations}}}\nspec: {spec}\n"
    )
}

fn http(docs: &str) -> (Vec<HttpRbac>, Vec<HttpRbac>) {
    let ctx = context(docs);
    let p = proxy("sidecar", "10.0.0.1", "foo", &[("app", "a")]);
    let (custom, local) = http_filters(&ctx, &p);
    let decode = |f: &HttpFilter| match &f.config_type {
        Some(http_filter::ConfigType::TypedConfig(any)) => {
            assert_eq!(
                any.type_url,
                "type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC"
            );
            HttpRbac::decode(any.value.as_ref()).unwrap()
        }
        other => panic!("{other:?}"),
    };
    (
        custom.iter().map(decode).collect(),
        local.iter().map(decode).collect(),
    )
}

fn tcp(docs: &str) -> Vec<NetworkRbac> {
    let ctx = context(docs);
    let p = proxy("sidecar", "10.0.0.1", "foo", &[("app", "a")]);
    network_filters(&ctx, &p)
        .iter()
        .map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(any)) => {
                NetworkRbac::decode(any.value.as_ref()).unwrap()
            }
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn audit_deny_allow_in_order_with_istiods_names() {
    let docs = [
        ap("allow", "foo", "{rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/b]}}]}, {to: [{operation: {methods: [GET]}}]}]}", false),
        ap("deny", "istio-system", "{action: DENY, rules: [{from: [{source: {namespaces: [bad]}}]}]}", false),
        ap("audit", "foo", "{action: AUDIT, rules: [{}]}", false),
        ap("other", "foo", "{selector: {matchLabels: {app: z}}, rules: [{}]}", false),
    ]
    .concat();
    let (custom, local) = http(&docs);
    assert!(custom.is_empty());
    let actions: Vec<i32> = local
        .iter()
        .map(|f| f.rules.as_ref().unwrap().action)
        .collect();
    assert_eq!(actions, [LOG, DENY, ALLOW]);
    assert_eq!(
        local[2].rules.as_ref().unwrap().names(),
        [
            "ns[foo]-policy[allow]-rule[0]",
            "ns[foo]-policy[allow]-rule[1]"
        ]
    );
    assert_eq!(
        local[1].rules.as_ref().unwrap().names(),
        ["ns[istio-system]-policy[deny]-rule[0]"]
    );
    let allow = format!("{:?}", local[2]);
    assert!(
        allow.contains("Exact(\"spiffe://cluster.local/ns/a/sa/b\")"),
        "{allow}"
    );
    assert!(
        allow.contains(":method") && allow.contains("Exact(\"GET\")"),
        "{allow}"
    );
    let deny = format!("{:?}", local[1]);
    assert!(deny.contains(".*/ns/bad/.*"), "{deny}");
}

#[test]
fn an_allow_without_rules_matches_nothing_and_dry_run_is_shadow() {
    let (_, local) = http(&ap("nothing", "foo", "{}", false));
    let rules = local[0].rules.as_ref().unwrap();
    assert_eq!(rules.action, ALLOW);
    assert_eq!(rules.names(), ["ns[foo]-policy[nothing]-rule[0]"]);
    assert!(format!("{rules:?}").contains("NotRule"));

    let (_, local) = http(&ap("try", "foo", "{action: DENY, rules: [{}]}", true));
    assert!(local[0].rules.is_none());
    assert_eq!(local[0].shadow_rules.as_ref().unwrap().action, DENY);
    assert_eq!(local[0].shadow_rules_stat_prefix, "istio_dry_run_deny_");
}

#[test]
fn on_tcp_http_only_keys_drop_an_allow_rule_and_widen_a_deny_rule() {
    let docs = [
        ap(
            "allow",
            "foo",
            "{rules: [{to: [{operation: {paths: [/a]}}]}, {to: [{operation: {ports: ['80']}}]}]}",
            false,
        ),
        ap(
            "deny",
            "foo",
            "{action: DENY, rules: [{to: [{operation: {methods: [POST], ports: ['81']}}]}]}",
            false,
        ),
    ]
    .concat();
    let filters = tcp(&docs);
    assert_eq!(filters.len(), 2);
    assert_eq!(filters[0].stat_prefix, "tcp.");
    let deny = filters[0].rules.as_ref().unwrap();
    assert_eq!(deny.action, DENY);
    let text = format!("{deny:?}");
    assert!(
        text.contains("DestinationPort(81)") && !text.contains("POST"),
        "{text}"
    );
    // The path rule cannot be checked on TCP: only the port rule allows.
    let allow = filters[1].rules.as_ref().unwrap();
    assert_eq!(allow.names(), ["ns[foo]-policy[allow]-rule[1]"]);
}

#[test]
fn wildcards_ips_headers_and_jwt_keys() {
    let docs = ap(
        "p",
        "foo",
        "{rules: [{from: [{source: {requestPrincipals: [https://issuer/*], ipBlocks: [10.1.0.0/16], notNamespaces: [x]}}], to: [{operation: {paths: [/api/*, '*.js'], hosts: ['*.example.com']}}], when: [{key: 'request.headers[x-a]', values: [b*]}, {key: 'request.auth.claims[groups]', values: [admin]}]}]}",
        false,
    );
    let (_, local) = http(&docs);
    let text = format!("{:?}", local[0]);
    for want in [
        "Prefix(\"/api/\")",
        "Suffix(\".js\")",
        "Suffix(\".example.com\")",
        "ignore_case: true",
        "DirectRemoteIp(CidrRange { address_prefix: \"10.1.0.0\"",
        "NotId",
        "\"x-a\"",
        "Prefix(\"b\")",
        "envoy.filters.http.jwt_authn",
        "\"groups\"",
        "Exact(\"https://issuer\")",
    ] {
        assert!(text.contains(want), "{want} not in {text}");
    }
}

#[test]
fn custom_without_a_provider_denies_what_its_rules_select() {
    let (custom, local) = http(&ap(
        "ext",
        "foo",
        "{action: CUSTOM, provider: {name: my-ext}, rules: [{to: [{operation: {paths: [/admin]}}]}]}",
        false,
    ));
    assert!(local.is_empty());
    let rules = custom[0].rules.as_ref().unwrap();
    assert_eq!(rules.action, DENY);
    assert!(format!("{rules:?}").contains("/admin"));
}

#[test]
fn custom_with_a_provider_marks_its_requests_for_ext_authz() {
    use axon_config::mesh::{ExtAuthzKind, ExtAuthzProvider, MeshConfig};
    use axon_model::push_request::{PushRequest, TriggerReason};
    let docs = format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: ext, namespace: ext}}\nspec: {{hosts: [ext.ext.svc.cluster.local], location: MESH_INTERNAL, resolution: STATIC, ports: [{{number: 8000, name: http, protocol: HTTP}}], endpoints: [{{address: 10.0.0.9}}]}}\n{}",
        ap(
            "ext",
            "foo",
            "{action: CUSTOM, provider: {name: my-ext}, rules: [{to: [{operation: {paths: [/admin]}}]}]}",
            false
        )
    );
    let mesh = MeshConfig {
        ext_authz: vec![ExtAuthzProvider {
            name: "my-ext".into(),
            service: "ext.ext.svc.cluster.local".into(),
            port: 8000,
            timeout_nanos: 600_000_000_000,
            fail_open: false,
            status_on_error: None,
            body: None,
            kind: ExtAuthzKind::Grpc,
        }],
        ..MeshConfig::default()
    };
    let req = PushRequest::full_push(TriggerReason::Config, std::time::Instant::now());
    let ctx = PushContext::build(
        None,
        &axon_model::fixtures::configs(&docs),
        &req,
        &std::sync::Arc::new(mesh),
    );
    let p = proxy("sidecar", "10.0.0.1", "foo", &[("app", "a")]);
    let (custom, _) = http_filters(&ctx, &p);
    let names: Vec<&str> = custom.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["envoy.filters.http.rbac", "envoy.filters.http.ext_authz"]
    );
    let Some(http_filter::ConfigType::TypedConfig(any)) = &custom[0].config_type else {
        panic!()
    };
    let rbac = HttpRbac::decode(any.value.as_ref()).unwrap();
    assert!(rbac.rules.is_none());
    assert_eq!(rbac.shadow_rules_stat_prefix, "istio_ext_authz_");
    assert_eq!(
        rbac.shadow_rules.unwrap().names(),
        ["istio-ext-authz-my-ext-ns[foo]-policy[ext]-rule[0]"]
    );
    let ext = format!("{:?}", custom[1]);
    assert!(
        ext.contains("envoy.extensions.filters.http.ext_authz.v3.ExtAuthz"),
        "{ext}"
    );
    // gRPC providers check TCP too.
    let names: Vec<String> = network_filters(&ctx, &p)
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(
        names,
        [
            "envoy.filters.network.rbac",
            "envoy.filters.network.ext_authz"
        ]
    );
}
