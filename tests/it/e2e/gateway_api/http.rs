//! The suite's core HTTPRoute cases on Gateway `same-namespace` (HTTP, routes from its own
//! namespace): for each, the requests of its Go file, some the route must catch (answered
//! by the backend it names, with what the filters did) and some it must not (another
//! backend, or 404).

use super::{Conformance, answered_by, received};

const GW: &str = "same-namespace";

/// A request `(method, path, headers)` and the backend that must answer it (`None`: 404).
type Case<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], Option<&'a str>);

/// Asserts that each `(method, path, headers) → backend` is answered by that backend
/// (`None`: 404, no route).
fn expect(world: &Conformance, host: &str, cases: &[Case]) {
    let mut wrong = Vec::new();
    for (method, path, headers, want) in cases {
        let r = world.request(80, method, host, path, headers);
        let got = match want {
            Some(_) if r.status == 200 => answered_by(&r),
            _ => None,
        };
        let ok = match want {
            Some(b) => got.as_deref() == Some(*b),
            None => r.status == 404,
        };
        if !ok {
            wrong.push(format!(
                "{method} {path} {headers:?}: want {want:?}, got {} {}",
                r.status, r.body
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

const V1: Option<&str> = Some("infra-backend-v1");
const V2: Option<&str> = Some("infra-backend-v2");
const V3: Option<&str> = Some("infra-backend-v3");

#[test]
fn httproute_matching() {
    let Some(world) = Conformance::start("httproute-matching.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/", "infra-backend-v1");
    expect(
        &world,
        "example.com",
        &[
            ("GET", "/", &[], V1),
            ("GET", "/example", &[], V1),
            ("GET", "/", &[("version", "one")], V1),
            ("GET", "/v2", &[], V2),
            ("GET", "/v2/example", &[], V2),
            ("GET", "/", &[("version", "two")], V2),
            // Path-separated prefixes: /v2 does not take /v2example.
            ("GET", "/v2example", &[], V1),
            ("GET", "/foo/v2/example", &[], V1),
        ],
    );
}

#[test]
fn httproute_header_matching() {
    let Some(world) = Conformance::start("httproute-header-matching.yaml", GW) else {
        return;
    };
    world.wait_for_with(80, "/", &[("version", "one")], "infra-backend-v1");
    expect(
        &world,
        "example.com",
        &[
            ("GET", "/", &[("version", "one")], V1),
            ("GET", "/", &[("version", "two")], V2),
            ("GET", "/", &[("version", "two"), ("color", "orange")], V1),
            ("GET", "/", &[("version", "two"), ("color", "blue")], V2),
            ("GET", "/", &[("color", "blue")], V1),
            ("GET", "/", &[("color", "green")], V1),
            ("GET", "/", &[("color", "red")], V2),
            ("GET", "/", &[("color", "yellow")], V2),
            ("GET", "/", &[("color", "orange")], None),
            ("GET", "/", &[("color", "purple")], None),
            ("GET", "/", &[("some-other-header", "one")], None),
            ("GET", "/", &[], None),
        ],
    );
}

#[test]
fn httproute_method_matching() {
    let Some(world) = Conformance::start("httproute-method-matching.yaml", GW) else {
        return;
    };
    world.wait_for_method("POST", "/", "infra-backend-v1");
    expect(
        &world,
        "example.com",
        &[
            ("POST", "/", &[], V1),
            ("GET", "/", &[], V2),
            ("HEAD", "/", &[], None),
            ("GET", "/path1", &[], V1),
            ("PUT", "/", &[("version", "one")], V2),
            ("POST", "/path2", &[("version", "two")], V3),
            ("PATCH", "/path3", &[], V1),
            ("DELETE", "/path4", &[("version", "three")], V1),
            ("PATCH", "/path5", &[], V1),
            ("PATCH", "/", &[("version", "four")], V2),
            ("PUT", "/", &[], None),
            ("DELETE", "/path4", &[], None),
        ],
    );
}

#[test]
fn httproute_path_match_order() {
    let Some(world) = Conformance::start("httproute-path-match-order.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/match", "infra-backend-v1");
    expect(
        &world,
        "example.com",
        &[
            ("GET", "/match/exact/one", &[], V3),
            ("GET", "/match/exact", &[], V2),
            ("GET", "/match", &[], V1),
            ("GET", "/match/prefix/one/any", &[], V2),
            ("GET", "/match/prefix/any", &[], V1),
            ("GET", "/match/any", &[], V3),
            ("GET", "/nomatch", &[], None),
        ],
    );
}

#[test]
fn httproute_query_param_matching() {
    let Some(world) = Conformance::start("httproute-query-param-matching.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/?animal=whale", "infra-backend-v1");
    expect(
        &world,
        "example.com",
        &[
            ("GET", "/?animal=whale", &[], V1),
            ("GET", "/?animal=dolphin", &[], V2),
            ("GET", "/?animal=dolphin&color=blue", &[], V3),
            ("GET", "/?ANIMAL=Whale", &[], V3),
            ("GET", "/?animal=whale&otherparam=irrelevant", &[], V1),
            ("GET", "/?color=blue", &[], None),
            ("GET", "/?animal=dog", &[], None),
            ("GET", "/?animal=whaledolphin", &[], None),
            ("GET", "/", &[], None),
        ],
    );
}

#[test]
fn httproute_weight() {
    let Some(world) = Conformance::start("httproute-weight.yaml", GW) else {
        return;
    };
    world.wait_for_any(80, "/");
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let r = world.request(80, "GET", "example.com", "/", &[]);
        *counts
            .entry(answered_by(&r).unwrap_or_else(|| format!("{} {}", r.status, r.body)))
            .or_insert(0) += 1;
    }
    let v1 = counts.get("infra-backend-v1").copied().unwrap_or(0);
    let v2 = counts.get("infra-backend-v2").copied().unwrap_or(0);
    // 70/30 of 200: well within ±30 (over 4 sigma); v3 (weight 0) never.
    assert!(v1 + v2 == 200 && (110..=170).contains(&v1), "{counts:?}");
}

#[test]
fn httproute_redirects() {
    for case in [
        "httproute-redirect-host-and-status.yaml",
        "httproute-redirect-path.yaml",
        "httproute-redirect-scheme.yaml",
    ] {
        let Some(world) = Conformance::start(case, GW) else {
            return;
        };
        let port = world.ports[&80];
        let cases: &[(&str, u16, &str)] = match case {
            "httproute-redirect-host-and-status.yaml" => &[
                (
                    "/hostname-redirect",
                    302,
                    "http://example.org:PORT/hostname-redirect",
                ),
                (
                    "/host-and-status",
                    301,
                    "http://example.org:PORT/host-and-status",
                ),
            ],
            "httproute-redirect-path.yaml" => &[
                (
                    "/original-prefix/lemon",
                    302,
                    "http://example.com:PORT/replacement-prefix/lemon",
                ),
                (
                    "/full/path/original",
                    302,
                    "http://example.com:PORT/full-path-replacement",
                ),
                (
                    "/path-and-host",
                    302,
                    "http://example.org:PORT/replacement-prefix",
                ),
                (
                    "/path-and-status",
                    301,
                    "http://example.com:PORT/replacement-prefix",
                ),
                (
                    "/full-path-and-host",
                    302,
                    "http://example.org:PORT/replacement-full",
                ),
                (
                    "/full-path-and-status",
                    301,
                    "http://example.com:PORT/replacement-full",
                ),
            ],
            _ => &[
                // A scheme without a port: the scheme's default port.
                ("/scheme", 302, "https://example.com/scheme"),
                (
                    "/scheme-and-host",
                    302,
                    "https://example.org/scheme-and-host",
                ),
                (
                    "/scheme-and-status",
                    301,
                    "https://example.com/scheme-and-status",
                ),
                (
                    "/scheme-and-host-and-status",
                    302,
                    "https://example.org/scheme-and-host-and-status",
                ),
            ],
        };
        // As the suite sends it: the host without a port. A redirect that keeps the
        // request's port names the listener's (istiod routes per listener port; the suite's
        // is 80, which Envoy leaves out); one that changes the scheme leaves it out.
        let host = "example.com";
        let first = cases[0].0;
        let mut last = Default::default();
        assert!(
            crate::support::wait_until(super::CONVERGE, || {
                last = world.request(80, "GET", host, first, &[]);
                last.status == cases[0].1
            }),
            "{case}: {first} never redirected: {last:?}"
        );
        for (path, status, location) in cases {
            let r = world.request(80, "GET", host, path, &[]);
            let want = location.replace("PORT", &port.to_string());
            assert_eq!(
                (r.status, r.header("location")),
                (*status, Some(want.as_str())),
                "{case}: {path}: {r:?}"
            );
        }
        // Not redirected: a path no rule matches.
        assert_eq!(
            world.request(80, "GET", host, "/other", &[]).status,
            404,
            "{case}"
        );
    }
}

#[test]
fn httproute_rewrite_path_and_host() {
    let Some(world) = Conformance::start("httproute-rewrite-path.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/prefix/one/two", "infra-backend-v1");
    for (path, want) in [
        ("/prefix/one/two", "/one/two"),
        ("/strip-prefix/three", "/three"),
        ("/strip-prefix", "/"),
        ("/full/one/two", "/one"),
        ("/full/rewrite-path-and-modify-headers/test", "/test"),
    ] {
        let r = world.request(80, "GET", "example.com", path, &[("x-header-remove", "r")]);
        assert_eq!(r.status, 200, "{path}: {r:?}");
        assert_eq!(received(&r)["path"], want, "{path}: {}", r.body);
    }
    let r = world.request(
        80,
        "GET",
        "example.com",
        "/full/rewrite-path-and-modify-headers/test",
        &[("x-header-remove", "r"), ("x-header-set", "old")],
    );
    let headers = &received(&r)["headers"];
    assert_eq!(
        headers["x-header-set"], "set-overwrites-values",
        "{}",
        r.body
    );
    assert_eq!(headers["x-header-add"], "header-val-1", "{}", r.body);
    assert!(headers.get("x-header-remove").is_none(), "{}", r.body);
    // Not rewritten: a path of no rewrite rule is not routed at all.
    assert_eq!(
        world
            .request(80, "GET", "example.com", "/other", &[])
            .status,
        404
    );

    let Some(world) = Conformance::start("httproute-rewrite-host.yaml", GW) else {
        return;
    };
    world.wait_for(80, "rewrite.example", "/one", "infra-backend-v1");
    let r = world.request(80, "GET", "rewrite.example", "/one", &[]);
    assert_eq!(
        received(&r)["headers"]["host"],
        "one.example.org",
        "{}",
        r.body
    );
    let r = world.request(80, "GET", "rewrite.example", "/two", &[]);
    assert_eq!(
        (
            answered_by(&r).as_deref(),
            received(&r)["headers"]["host"].as_str()
        ),
        (V2, Some("example.org")),
        "{}",
        r.body
    );
    // Another host is not the route's.
    assert_eq!(
        world
            .request(80, "GET", "other.example", "/one", &[])
            .status,
        404
    );
}

#[test]
fn httproute_reference_grant_lets_a_backend_of_another_namespace_in() {
    let Some(world) = Conformance::start("httproute-reference-grant.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/", "web-backend");
    // Without the grant the backend is not permitted: its share answers 500.
    let text = std::fs::read_to_string(world.config.file("manifests.yaml")).unwrap();
    let without: Vec<&str> = text
        .split("---\n")
        .filter(|d| !(d.contains("kind: ReferenceGrant") && d.contains("name: reference-grant")))
        .collect();
    world.config.write("manifests.yaml", &without.join("---\n"));
    let mut last = Default::default();
    assert!(
        crate::support::wait_until(super::CONVERGE, || {
            last = world.request(80, "GET", "example.com", "/", &[]);
            last.status == 500
        }),
        "the route still reaches web-backend without its ReferenceGrant: {last:?}"
    );
}
