//! The JWT filter against istiod's (`policy_applier_test.go`'s `TestJwtFilter` expectations):
//! providers and their fields, the requirement for one and for several providers, the keys
//! inline (fetched, or failing closed), and where the filter sits in the chains.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::http::jwt_authn::v3::{
    JwtAuthentication, JwtProvider, JwtRequirement, jwt_provider::JwksSourceSpecifier,
    jwt_requirement::RequiresType, requirement_rule::RequirementType,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_filter,
};
use prost::Message;

use super::*;
use crate::generate::lds;
use axon_config::config::{Config, ConfigKey, ConfigKind, Spec};
use axon_config::istio::{FetchedJwks, JwksSource};
use axon_model::fixtures::{configs, proxy};
use axon_model::push_request::{PushRequest, TriggerReason};
use axon_model::sidecar_scope::SidecarScope;

const JWKS: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"abc"}]}"#;
const FETCHED: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"x","y":"y"}]}"#;

fn ra(namespace: &str, name: &str, spec: &str) -> String {
    format!(
        "---\napiVersion: security.istio.io/v1\nkind: RequestAuthentication\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {spec}\n"
    )
}

/// A context of `yaml`, with `fetched` as the resolver's answers (`None`: a failed fetch).
fn context(yaml: &str, fetched: &[(&str, Option<&str>)]) -> PushContext {
    let mut set = configs(yaml);
    for (uri, keys) in fetched {
        let source = JwksSource::Uri(uri.to_string());
        let key = ConfigKey::new(ConfigKind::Jwks, "", source.url());
        set.insert(
            key.clone(),
            Arc::new(Config {
                key,
                labels: Default::default(),
                created: None,
                spec: Spec::Jwks(FetchedJwks {
                    source,
                    keys: keys.map(String::from),
                }),
                not_applied: Vec::new(),
            }),
        );
    }
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    PushContext::build(None, &set, &req, &Arc::default())
}

fn sidecar() -> Proxy {
    proxy("sidecar", "10.0.0.5", "foo", &[("app", "a")])
}

fn config_of(filter: &HttpFilter) -> JwtAuthentication {
    assert_eq!(filter.name, "envoy.filters.http.jwt_authn");
    match &filter.config_type {
        Some(http_filter::ConfigType::TypedConfig(any)) => {
            assert_eq!(
                any.type_url,
                "type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication"
            );
            JwtAuthentication::decode(any.value.as_ref()).expect("JwtAuthentication")
        }
        other => panic!("typed config expected, got {other:?}"),
    }
}

fn inline(p: &JwtProvider) -> &str {
    match &p.jwks_source_specifier {
        Some(JwksSourceSpecifier::LocalJwks(ds)) => match &ds.specifier {
            Some(Specifier::InlineString(s)) => s,
            other => panic!("inline string expected: {other:?}"),
        },
        other => panic!("local jwks expected: {other:?}"),
    }
}

fn name(r: &JwtRequirement) -> String {
    match &r.requires_type {
        Some(RequiresType::ProviderName(n)) => n.clone(),
        Some(RequiresType::AllowMissing(_)) => "allow_missing".to_string(),
        Some(RequiresType::RequiresAny(or)) => {
            format!(
                "OR({})",
                or.requirements
                    .iter()
                    .map(name)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }
        Some(RequiresType::RequiresAll(and)) => format!(
            "AND({})",
            and.requirements
                .iter()
                .map(name)
                .collect::<Vec<_>>()
                .join(",")
        ),
        other => format!("{other:?}"),
    }
}

fn requirement_of(auth: &JwtAuthentication) -> String {
    assert_eq!(auth.rules.len(), 1);
    let rule = &auth.rules[0];
    assert_eq!(
        rule.r#match.as_ref().and_then(|m| m.path_specifier.clone()),
        Some(PathSpecifier::Prefix("/".to_string()))
    );
    match &rule.requirement_type {
        Some(RequirementType::Requires(r)) => name(r),
        other => panic!("requires expected: {other:?}"),
    }
}

#[test]
fn no_policy_no_filter() {
    let ctx = context(&ra("bar", "other", "{jwtRules: [{issuer: x}]}"), &[]);
    assert!(jwt_filter(&ctx, &sidecar()).is_none());
    let ctx = context(&ra("foo", "empty", "{}"), &[]);
    assert!(jwt_filter(&ctx, &sidecar()).is_none());
}

#[test]
fn one_rule_as_istiod() {
    let spec = format!(
        "{{jwtRules: [{{issuer: 'https://secret.foo.com', audiences: [a, b], jwks: '{JWKS}', fromHeaders: [{{name: x-jwt, prefix: 'Bearer '}}], fromParams: [token], fromCookies: [c], outputPayloadToHeader: x-payload, forwardOriginalToken: true, outputClaimToHeaders: [{{header: x-group, claim: group}}]}}]}}"
    );
    let ctx = context(&ra("foo", "r", &spec), &[]);
    let auth = config_of(&jwt_filter(&ctx, &sidecar()).expect("filter"));
    assert_eq!(requirement_of(&auth), "OR(origins-0,allow_missing)");
    assert!(auth.bypass_cors_preflight);
    let p = &auth.providers["origins-0"];
    assert_eq!(p.issuer, "https://secret.foo.com");
    assert_eq!(p.audiences, ["a", "b"]);
    assert!(p.forward);
    assert_eq!(p.forward_payload_header, "x-payload");
    assert_eq!(p.payload_in_metadata, "payload");
    assert_eq!(
        p.normalize_payload_in_metadata
            .as_ref()
            .map(|n| n.space_delimited_claims.clone()),
        Some(vec!["permission".to_string(), "scope".to_string()])
    );
    assert!(!p.clear_route_cache, "sidecars keep the route cache");
    assert_eq!(
        p.from_headers
            .iter()
            .map(|h| (h.name.as_str(), h.value_prefix.as_str()))
            .collect::<Vec<_>>(),
        [("x-jwt", "Bearer ")]
    );
    assert_eq!(p.from_params, ["token"]);
    assert_eq!(p.from_cookies, ["c"]);
    assert_eq!(
        p.claim_to_headers
            .iter()
            .map(|c| (c.header_name.as_str(), c.claim_name.as_str()))
            .collect::<Vec<_>>(),
        [("x-group", "group")]
    );
    assert_eq!(inline(p), JWKS);
}

#[test]
fn fetched_keys_inline_and_a_failed_fetch_fails_closed() {
    let spec = "{jwtRules: [{issuer: b, jwksUri: 'https://b/keys'}, {issuer: a, jwksUri: 'https://a/keys', spaceDelimitedClaims: [roles, scope]}, {issuer: c, jwksUri: 'https://c/keys'}]}";
    let ctx = context(
        &ra("foo", "r", spec),
        &[("https://a/keys", Some(FETCHED)), ("https://b/keys", None)],
    );
    let auth = config_of(&jwt_filter(&ctx, &sidecar()).expect("filter"));
    // Ordered by issuer, and istiod's outer OR with the inner AND.
    assert_eq!(
        requirement_of(&auth),
        "OR(origins-0,origins-1,origins-2,AND(OR(origins-0,allow_missing),OR(origins-1,allow_missing),OR(origins-2,allow_missing)))"
    );
    let issuers: Vec<&str> = ["origins-0", "origins-1", "origins-2"]
        .iter()
        .map(|n| auth.providers[*n].issuer.as_str())
        .collect();
    assert_eq!(issuers, ["a", "b", "c"]);
    assert_eq!(inline(&auth.providers["origins-0"]), FETCHED);
    // Failed, or not fetched yet: no token verifies.
    assert_eq!(inline(&auth.providers["origins-1"]), FAIL_CLOSED_JWKS);
    assert_eq!(inline(&auth.providers["origins-2"]), FAIL_CLOSED_JWKS);
    assert_eq!(
        auth.providers["origins-0"]
            .normalize_payload_in_metadata
            .as_ref()
            .map(|n| n.space_delimited_claims.clone()),
        Some(vec![
            "permission".to_string(),
            "roles".to_string(),
            "scope".to_string()
        ])
    );
}

#[test]
fn providers_encode_in_name_order_every_time() {
    let rules: String = (0..8)
        .map(|i| format!("{{issuer: i{i}, jwks: '{JWKS}'}}"))
        .collect::<Vec<_>>()
        .join(",");
    let ctx = context(&ra("foo", "r", &format!("{{jwtRules: [{rules}]}}")), &[]);
    let first = jwt_filter(&ctx, &sidecar()).expect("filter");
    for _ in 0..20 {
        assert_eq!(jwt_filter(&ctx, &sidecar()), Some(first.clone()));
    }
    assert_eq!(config_of(&first).providers.len(), 8);
}

const WORKLOAD: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: a, namespace: foo}
spec:
  hosts: [a.foo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 8080, name: http, protocol: HTTP}
  - {number: 9000, name: tcp, protocol: TCP}
  endpoints: [{address: 10.0.0.5, labels: {app: a}}]
"#;

const GATEWAY: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: foo}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ['*']
"#;

/// The first HTTP filter of every HTTP connection manager of `listener`.
fn first_http_filters(listener: &Listener) -> Vec<String> {
    listener
        .filter_chains
        .iter()
        .flat_map(|c| &c.filters)
        .filter_map(|f| match &f.config_type {
            Some(filter::ConfigType::TypedConfig(any))
                if f.name == "envoy.filters.network.http_connection_manager" =>
            {
                let hcm = HttpConnectionManager::decode(any.value.as_ref()).expect("hcm");
                Some(hcm.http_filters[0].name.clone())
            }
            _ => None,
        })
        .collect()
}

fn listeners(ctx: &PushContext, proxy: &Proxy) -> Vec<Listener> {
    let scope = SidecarScope::compute(ctx, proxy);
    lds::generate(ctx, proxy, &scope)
        .into_iter()
        .map(|r| Listener::decode(r.value.as_ref()).expect("listener"))
        .collect()
}

#[test]
fn first_on_sidecar_inbound_http_chains_only() {
    let ctx = context(
        &format!(
            "{WORKLOAD}{}",
            ra(
                "foo",
                "r",
                &format!("{{jwtRules: [{{issuer: i, jwks: '{JWKS}'}}]}}")
            )
        ),
        &[],
    );
    let all = listeners(&ctx, &sidecar());
    let inbound = all
        .iter()
        .find(|l| l.name == "virtualInbound")
        .expect("virtualInbound");
    let firsts = first_http_filters(inbound);
    assert!(!firsts.is_empty());
    assert!(firsts.iter().all(|f| f == JWT_FILTER), "{firsts:?}");
    // Not on the sidecar's outbound listeners (istiod puts none there).
    for l in all.iter().filter(|l| l.name != "virtualInbound") {
        assert!(
            first_http_filters(l).iter().all(|f| f != JWT_FILTER),
            "{}",
            l.name
        );
    }
}

#[test]
fn first_on_gateways_with_the_route_cache_cleared() {
    let gw_labels = [
        ("istio", "ingressgateway"),
        ("gateway.networking.k8s.io/gateway-name", "kgw"),
    ];
    let gw = proxy("router", "10.1.0.1", "foo", &gw_labels);
    let target = "{targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: kgw}, jwtRules: [{issuer: i, jwksUri: 'https://i/keys'}]}";
    let ctx = context(
        &format!("{GATEWAY}{}", ra("foo", "r", target)),
        &[("https://i/keys", Some(FETCHED))],
    );
    let all = listeners(&ctx, &gw);
    assert_eq!(all.len(), 1);
    assert_eq!(first_http_filters(&all[0]), [JWT_FILTER]);
    let auth = config_of(&jwt_filter(&ctx, &gw).expect("filter"));
    assert!(auth.providers["origins-0"].clear_route_cache);
    // The scope depends on the policy and its fetched keys, and its key names the policy.
    let scope = SidecarScope::compute(&ctx, &gw);
    assert!(scope.deps.contains(&ConfigKey::new(
        ConfigKind::RequestAuthentication,
        "foo",
        "r"
    )));
    assert!(
        scope
            .deps
            .contains(&ConfigKey::new(ConfigKind::Jwks, "", "https://i/keys"))
    );
    assert!(
        scope.key.contains("|RequestAuthentication/foo/r|"),
        "{}",
        scope.key
    );
    // Another Gateway's proxy does not take it.
    let other = proxy(
        "router",
        "10.1.0.2",
        "foo",
        &[
            ("istio", "ingressgateway"),
            ("gateway.networking.k8s.io/gateway-name", "x"),
        ],
    );
    assert!(jwt_filter(&ctx, &other).is_none());
}
