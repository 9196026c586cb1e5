use crate::parse::{DocOutcome, parse_documents};

fn outcome(yaml: &str) -> DocOutcome {
    let mut docs = parse_documents(yaml, "default");
    assert_eq!(docs.len(), 1);
    docs.remove(0).outcome
}

fn errors(yaml: &str) -> String {
    match outcome(yaml) {
        DocOutcome::Invalid(e) => e.to_string(),
        other => panic!("accepted: {other:?}"),
    }
}

fn route(spec: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r}}\nspec: {spec}\n"
    )
}

#[test]
fn crd_defaults_are_applied() {
    let DocOutcome::Config(c) = outcome(&route(
        "{parentRefs: [{name: gw}], rules: [{matches: [{headers: [{name: a, value: b}]}], backendRefs: [{name: s, port: 80}], filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 80}, fraction: {numerator: 5}}}]}]}",
    )) else {
        panic!()
    };
    let crate::config::Spec::HttpRoute(r) = &c.spec else {
        panic!()
    };
    let p = &r.parent_refs[0];
    assert_eq!(
        (p.group.as_str(), p.kind.as_str()),
        ("gateway.networking.k8s.io", "Gateway")
    );
    let rule = &r.rules[0];
    assert_eq!(rule.matches[0].path.value, "/");
    assert_eq!(
        rule.matches[0].path.match_type,
        crate::gateway_api::PathMatchType::PathPrefix
    );
    assert_eq!(
        rule.matches[0].headers[0].match_type,
        crate::gateway_api::MatchType::Exact
    );
    let b = &rule.backend_refs[0];
    assert_eq!(
        (b.group.as_str(), b.kind.as_str(), b.weight),
        ("", "Service", 1)
    );
    let mirror = rule.filters[0].request_mirror.as_ref().unwrap();
    assert_eq!(mirror.fraction.unwrap().denominator, 100);

    // No rules at all: one rule matching every path.
    let DocOutcome::Config(c) = outcome(&route("{parentRefs: [{name: gw}]}")) else {
        panic!()
    };
    let crate::config::Spec::HttpRoute(r) = &c.spec else {
        panic!()
    };
    assert_eq!(r.rules.len(), 1);
    assert_eq!(r.rules[0].matches[0].path.value, "/");

    let gw = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: g}\nspec: {gatewayClassName: istio, listeners: [{name: https, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: c}]}}], addresses: [{value: 10.0.0.1}]}\n";
    let DocOutcome::Config(c) = outcome(gw) else {
        panic!()
    };
    let crate::config::Spec::KubernetesGateway(g) = &c.spec else {
        panic!()
    };
    let l = &g.listeners[0];
    assert_eq!(
        l.allowed_routes.namespaces.from,
        crate::gateway_api::FromNamespaces::Same
    );
    let tls = l.tls.as_ref().unwrap();
    assert_eq!(tls.mode, crate::gateway_api::TlsMode::Terminate);
    assert_eq!(tls.certificate_refs[0].kind, "Secret");
    assert_eq!(g.addresses[0].address_type, "IPAddress");
}

#[test]
fn unknown_fields_are_named_with_their_path() {
    let e = errors(&route("{rules: [{matches: [{pth: {value: /}}]}]}"));
    assert!(
        e.contains("spec.rules[0].matches[0].pth: unknown field `pth`"),
        "{e}"
    );
}

#[test]
fn versions_are_those_istiod_reads() {
    let e = errors(
        "apiVersion: gateway.networking.k8s.io/v1alpha3\nkind: BackendTLSPolicy\nmetadata: {name: p}\nspec: {}\n",
    );
    assert!(
        e.contains("apiVersion gateway.networking.k8s.io/v1alpha3 is not served"),
        "{e}"
    );
    let u = outcome(
        "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: UDPRoute\nmetadata: {name: u}\nspec: {}\n",
    );
    assert!(matches!(u, DocOutcome::Unsupported { .. }), "{u:?}");
}

#[test]
fn http_route_cel_rules() {
    let cases = [
        (
            "{rules: [{filters: [{type: RequestHeaderModifier}]}]}",
            "filter.requestHeaderModifier must be specified for RequestHeaderModifier filter.type",
        ),
        (
            "{rules: [{filters: [{type: URLRewrite, requestRedirect: {}}]}]}",
            "filter.requestRedirect must be nil if the filter.type is not RequestRedirect",
        ),
        (
            "{rules: [{filters: [{type: RequestRedirect, requestRedirect: {}}, {type: URLRewrite, urlRewrite: {}}]}]}",
            "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, but not both",
        ),
        (
            "{rules: [{backendRefs: [{name: s}]}]}",
            "Must have port for Service reference",
        ),
        (
            "{rules: [{matches: [{path: {type: PathPrefix, value: a}}]}]}",
            "value must be an absolute path and start with '/'",
        ),
        (
            "{rules: [{matches: [{path: {type: Exact, value: /a//b}}]}]}",
            "must not contain '//'",
        ),
        (
            "{rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 1}, percent: 5, fraction: {numerator: 1}}}]}]}",
            "Only one of percent or fraction may be specified",
        ),
        (
            "{rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 1}, fraction: {numerator: 5, denominator: 4}}}]}]}",
            "numerator must be less than or equal to denominator",
        ),
        (
            "{rules: [{matches: [{path: {type: Exact, value: /a}}], filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]}]}",
            "exactly one PathPrefix match must be specified",
        ),
        (
            "{rules: [{filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath}}}]}]}",
            "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
        ),
        (
            "{rules: [{timeouts: {request: 1s, backendRequest: 2s}}]}",
            "backendRequest timeout cannot be longer than request timeout",
        ),
        ("{rules: [{timeouts: {request: 1 s}}]}", "should match"),
        ("{hostnames: [Foo.com]}", "spec.hostnames[0]"),
        (
            "{rules: [{filters: [{type: RequestRedirect, requestRedirect: {statusCode: 304}}]}]}",
            "supported values: 301",
        ),
        (
            "{rules: [{filters: [{type: RequestRedirect, requestRedirect: {}}], backendRefs: [{name: s, port: 1}]}]}",
            "RequestRedirect filter must not be used together with backendRefs",
        ),
        (
            "{rules: [{filters: [{type: CORS, cors: {allowCredentials: true, allowOrigins: ['*']}}]}]}",
            "allowOrigins cannot contain '*' when allowCredentials is true",
        ),
    ];
    for (spec, want) in cases {
        let e = errors(&route(spec));
        assert!(e.contains(want), "{spec}: {e}");
    }
    // And what they allow.
    for spec in [
        "{rules: [{matches: [{path: {type: RegularExpression, value: 'a.*'}}]}]}",
        "{rules: [{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: m, port: 1}}}, {type: RequestMirror, requestMirror: {backendRef: {name: n, port: 1}}}]}]}",
        "{rules: [{timeouts: {request: 0s, backendRequest: 2s}}]}",
    ] {
        assert!(
            matches!(outcome(&route(spec)), DocOutcome::Config(_)),
            "{spec}"
        );
    }
}

#[test]
fn gateway_and_policy_cel_rules() {
    let gw = |spec: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: g}}\nspec: {spec}\n"
        )
    };
    let cases = [
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 80, protocol: HTTP}, {name: a, port: 81, protocol: HTTP}]}",
            "Listener name must be unique within the Gateway",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 80, protocol: HTTP}, {name: b, port: 80, protocol: HTTP}]}",
            "Combination of port, protocol and hostname must be unique",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 80, protocol: HTTP, tls: {mode: Passthrough}}]}",
            "tls must not be specified for protocols",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 443, protocol: HTTPS, tls: {mode: Passthrough}}]}",
            "tls mode must be Terminate for protocol HTTPS",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 443, protocol: TLS, tls: {}}]}",
            "certificateRefs or options must be specified when mode is Terminate",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 9, protocol: TCP, hostname: a.com}]}",
            "hostname must not be specified for protocols ['TCP', 'UDP']",
        ),
        (
            "{gatewayClassName: istio, listeners: []}",
            "should have at least 1 items",
        ),
        (
            "{gatewayClassName: istio, listeners: [{name: a, port: 0, protocol: HTTP}]}",
            "should be between 1 and 65535",
        ),
    ];
    for (spec, want) in cases {
        let e = errors(&gw(spec));
        assert!(e.contains(want), "{spec}: {e}");
    }
    let btls = |v: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: p}}\nspec: {{targetRefs: [{{group: '', kind: Service, name: s}}], validation: {v}}}\n"
        )
    };
    let e = errors(&btls("{hostname: a.com}"));
    assert!(
        e.contains("must specify either CACertificateRefs or WellKnownCACertificates"),
        "{e}"
    );
    let e = errors(&btls(
        "{hostname: a.com, wellKnownCACertificates: System, subjectAltNames: [{type: URI, hostname: a}]}",
    ));
    assert!(e.contains("must contain URI"), "{e}");
    assert!(matches!(
        outcome(&btls("{hostname: a.com, wellKnownCACertificates: System}")),
        DocOutcome::Config(_)
    ));
    let grpc = "apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: g}\nspec: {rules: [{matches: [{method: {}}], filters: [{type: URLRewrite, urlRewrite: {}}]}]}\n";
    let e = errors(grpc);
    assert!(
        e.contains("One or both of 'service' or 'method' must be specified"),
        "{e}"
    );
    assert!(e.contains("Unsupported value"), "{e}");
}

#[test]
fn a_gateway_class_is_of_no_namespace() {
    // Cluster-scoped: the directory's default namespace (or one written) is not its own.
    let DocOutcome::Config(c) = outcome(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: istio, namespace: shop}\nspec: {controllerName: istio.io/gateway-controller}\n",
    ) else {
        panic!()
    };
    assert_eq!(c.key.to_string(), "GatewayClass//istio");
}
