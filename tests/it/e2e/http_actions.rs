//! End-to-end: HTTP route actions as istiod translates them, through a real gateway Envoy to
//! an upstream that records what it received ([`EchoUpstream`]). Each rule is checked with a
//! request it must catch and one it must not: `timeout` (504 within it; a quick answer
//! passes), `retries` (two 503s then a 200: three attempts; `attempts: 0`: one), `redirect`
//! (302 with its Location), `directResponse` (Envoy's own answer), `rewrite` (the path and
//! the authority the upstream sees), and `headers` (set, add and remove, on the request and
//! the response, at the route and at the destination), `fault` (an abort, a delay),
//! `mirror` (a copy reaches the shadow upstream) and `corsPolicy` (a preflight from an allowed
//! origin is answered with the CORS headers, one from another origin is not). The default
//! retry policy is in Envoy's config when a route sets none.

use crate::support;
use crate::support::scenario;

use std::time::{Duration, Instant};

use scenario::*;
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const ECHO: &str = "echo.demo.svc.cluster.local";

fn echo_yaml(port: u16, shadow_port: u16) -> String {
    documents(&[
        service_entry_yaml("echo", "demo", ECHO, http_port(80), &[(port, None)]),
        service_entry_yaml(
            "shadow",
            "demo",
            "shadow.demo.svc.cluster.local",
            http_port(80),
            &[(shadow_port, None)],
        ),
    ])
}

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: actions, namespace: demo}
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - name: timeout
    match: [{uri: {prefix: /timeout}}]
    timeout: 1s
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: retry
    match: [{uri: {prefix: /retry}}]
    retries: {attempts: 3, retryOn: 5xx}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: no-retry
    match: [{uri: {prefix: /no-retry}}]
    retries: {attempts: 0}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: redirect
    match: [{uri: {prefix: /old}}]
    redirect: {uri: /new, authority: new.example.com, redirectCode: 302}
  - name: direct
    match: [{uri: {exact: /teapot}}]
    directResponse: {status: 418, body: {string: "short and stout"}}
  - name: rewrite
    match: [{uri: {prefix: /v1/}}]
    rewrite: {uri: /api/, authority: internal.example.com}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: headers
    match: [{uri: {prefix: /headers}}]
    headers:
      request:
        set: {x-set: "1"}
        add: {x-added: "yes"}
        remove: [x-drop]
      response:
        set: {x-from-route: "route"}
        remove: [x-upstream]
    route:
    - destination: {host: echo, port: {number: 80}}
      headers:
        request: {set: {x-destination: echo}}
  - name: abort
    match: [{uri: {prefix: /fault/abort}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 100}}}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: delay
    match: [{uri: {prefix: /fault/delay}}]
    fault: {delay: {fixedDelay: 1s, percentage: {value: 100}}}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: mirror
    match: [{uri: {prefix: /mirror}}]
    mirror: {host: shadow, port: {number: 80}}
    mirrorPercentage: {value: 100}
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: cors
    match: [{uri: {prefix: /cors}}]
    corsPolicy:
      allowOrigins: [{exact: "https://a.example"}]
      allowMethods: [GET, POST]
      allowHeaders: [x-custom]
      maxAge: 24h
    route: [{destination: {host: echo, port: {number: 80}}}]
  - name: default
    route: [{destination: {host: echo, port: {number: 80}}}]
"#;

fn get_with(
    gw: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> HttpResponse {
    http_request(gw, method, path, headers, Duration::from_secs(10))
}

#[test]
fn route_actions_do_in_envoy_what_istiod_makes_them_do() {
    let echo = EchoUpstream::start("echo");
    let shadow = EchoUpstream::start("shadow");
    let config = ConfigDir::new();
    let gw_port = free_port();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("echo.yaml", &echo_yaml(echo.port(), shadow.port()));
    config.write("routes.yaml", ROUTES);
    let axon = Axon::start(config.path());
    let (envoy, gw_port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let gw = Envoy::local(gw_port);
    let get = |path: &str, headers: &[(&str, &str)]| {
        http_request(gw, "GET", path, headers, Duration::from_secs(10))
    };
    wait_for_answer("the default route", CONVERGE, "echo", &envoy, || {
        let r = get("/plain", &[]);
        (
            r.status,
            r.header("x-upstream").unwrap_or_default().to_string(),
        )
    });
    assert_no_rejected_updates(&envoy);

    // timeout: 1s. A 3 s answer is cut with 504 well before it; a quick one passes.
    let started = Instant::now();
    let slow = get("/timeout", &[("x-delay-ms", "3000")]);
    let took = started.elapsed();
    // 504 is Envoy's own answer at the timeout (the upstream would have answered 200).
    assert_eq!(slow.status, 504, "{slow:?}");
    eprintln!("[e2e] the 3 s request was cut after {took:?}");
    assert_eq!(get("/timeout", &[("x-delay-ms", "100")]).status, 200);
    // No timeout elsewhere: a 3 s answer on the default route passes (istiod's 0).
    assert_eq!(get("/plain", &[("x-delay-ms", "3000")]).status, 200);

    // retries: attempts 3 on 5xx. Two 503s, then 200: the upstream saw three attempts.
    let r = get("/retry", &[("x-fail-first", "2"), ("x-request-key", "r1")]);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(echo.requests_with_key("r1").len(), 3);
    // attempts: 0 disables retries: one 503, one attempt.
    let r = get(
        "/no-retry",
        &[("x-fail-first", "1"), ("x-request-key", "r2")],
    );
    assert_eq!(r.status, 503, "{r:?}");
    assert_eq!(echo.requests_with_key("r2").len(), 1);
    // The default policy (no retries set) retries connect failures and resets, not a 503.
    let r = get("/plain", &[("x-fail-first", "1"), ("x-request-key", "r3")]);
    assert_eq!((r.status, echo.requests_with_key("r3").len()), (503, 1));

    // redirect: 302 to http://new.example.com/new; nothing reaches the upstream.
    let before = echo.requests().len();
    let r = get("/old/page", &[]);
    assert_eq!(r.status, 302, "{r:?}");
    assert_eq!(r.header("location"), Some("http://new.example.com/new"));
    assert_eq!(echo.requests().len(), before);

    // directResponse: Envoy answers itself; /teapot/x is not caught by the exact match.
    let r = get("/teapot", &[]);
    assert_eq!((r.status, r.body.as_str()), (418, "short and stout"));
    assert_eq!(get("/teapot/x", &[]).status, 200);

    // rewrite: the upstream sees /api/users and the new authority; /v2/ is left alone.
    let r = get("/v1/users", &[]);
    let seen: serde_json::Value = serde_json::from_str(&r.body).expect("echo JSON");
    assert_eq!(seen["path"], "/api/users", "{seen}");
    assert_eq!(seen["headers"]["host"], "internal.example.com", "{seen}");
    let seen: serde_json::Value =
        serde_json::from_str(&get("/v2/users", &[]).body).expect("echo JSON");
    assert_eq!(seen["path"], "/v2/users");
    assert_eq!(seen["headers"]["host"], "example.com");

    // headers: set, add and remove on the request (route and destination), set and remove
    // on the response; another route's requests keep theirs.
    let r = get("/headers", &[("x-drop", "1"), ("x-set", "0")]);
    let seen: serde_json::Value = serde_json::from_str(&r.body).expect("echo JSON");
    let h = &seen["headers"];
    assert_eq!(
        (&h["x-set"], &h["x-added"]),
        (&"1".into(), &"yes".into()),
        "{seen}"
    );
    assert_eq!(h["x-destination"], "echo", "{seen}");
    assert!(
        h.get("x-drop").is_none(),
        "x-drop reached the upstream: {seen}"
    );
    assert_eq!(r.header("x-from-route"), Some("route"));
    assert_eq!(
        r.header("x-upstream"),
        None,
        "the response header was not removed"
    );
    let r = get("/plain", &[("x-drop", "1")]);
    let seen: serde_json::Value = serde_json::from_str(&r.body).expect("echo JSON");
    assert_eq!(seen["headers"]["x-drop"], "1");
    assert_eq!(r.header("x-upstream"), Some("echo"));
    assert_eq!(r.header("x-from-route"), None);

    // fault: an abort answered by Envoy (418), nothing upstream; a delay of 1 s.
    let before = echo.requests().len();
    let r = get("/fault/abort", &[]);
    assert_eq!(r.status, 418, "{r:?}");
    assert_eq!(
        echo.requests().len(),
        before,
        "an aborted request reached the upstream"
    );
    let started = Instant::now();
    assert_eq!(get("/fault/delay", &[]).status, 200);
    let delayed = started.elapsed();
    assert!(
        delayed >= Duration::from_millis(950),
        "not delayed: {delayed:?}"
    );

    // mirror: the shadow upstream gets a copy (Host with Envoy's `-shadow` suffix); the
    // answer is the primary's. Other routes are not mirrored.
    let r = get("/mirror/x", &[("x-request-key", "m1")]);
    assert_eq!(r.header("x-upstream"), Some("echo"));
    assert!(
        wait_until(Duration::from_secs(10), || !shadow
            .requests_with_key("m1")
            .is_empty()),
        "the shadow upstream saw no copy"
    );
    let copy = &shadow.requests_with_key("m1")[0];
    assert_eq!(copy.path, "/mirror/x");
    assert!(copy.headers["host"].ends_with("-shadow"), "{copy:?}");
    get("/plain", &[("x-request-key", "m2")]);
    assert!(
        shadow.requests_with_key("m2").is_empty(),
        "an unmirrored route was mirrored"
    );

    // corsPolicy: a preflight from the allowed origin gets the CORS headers; another
    // origin's does not.
    let preflight = |origin: &str| {
        get_with(
            gw,
            "OPTIONS",
            "/cors",
            &[
                ("Origin", origin),
                ("Access-Control-Request-Method", "POST"),
            ],
        )
    };
    let ok = preflight("https://a.example");
    assert_eq!(
        ok.header("access-control-allow-origin"),
        Some("https://a.example"),
        "{ok:?}"
    );
    assert_eq!(ok.header("access-control-allow-methods"), Some("GET,POST"));
    assert_eq!(ok.header("access-control-max-age"), Some("86400"));
    let other = preflight("https://b.example");
    assert_eq!(
        other.header("access-control-allow-origin"),
        None,
        "{other:?}"
    );

    // Envoy's config: istiod's default retry policy where no retries are set.
    let dump = envoy.config_dump();
    let routes = dynamic_route_configs(&dump);
    let all: Vec<&serde_json::Value> = routes
        .iter()
        .flat_map(|rc| rc["virtual_hosts"].as_array().into_iter().flatten())
        .flat_map(|vh| vh["routes"].as_array().into_iter().flatten())
        .collect();
    let by_name = |name: &str| {
        all.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no route {name} in {routes:?}"))
    };
    let default = &by_name("default")["route"]["retry_policy"];
    assert_eq!(default["num_retries"], 2, "{default}");
    assert_eq!(
        default["retry_on"],
        "connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes"
    );
    assert_eq!(
        default["retry_host_predicate"][0]["name"],
        "envoy.retry_host_predicates.previous_hosts"
    );
    assert!(by_name("no-retry")["route"].get("retry_policy").is_none());
}
