//! The suite's filter, timeout and retry cases on Gateway `same-namespace`: request and
//! response header modifiers (on the rule and on a backendRef), mirrors, request and
//! backend-request timeouts, and retries. The echo backends take their cue from headers
//! (`x-delay-ms`, `x-fail-first` with `x-request-key`) where the suite's echo takes a query.

use super::{Conformance, answered_by, received};
use crate::support::wait_until;

const GW: &str = "same-namespace";

fn header(r: &crate::support::HttpResponse, name: &str) -> Option<String> {
    received(r)["headers"][name].as_str().map(String::from)
}

#[test]
fn httproute_request_header_modifier_on_the_rule_and_on_a_backend() {
    for case in [
        "httproute-request-header-modifier.yaml",
        "httproute-request-header-modifier-backend.yaml",
    ] {
        let Some(world) = Conformance::start(case, GW) else {
            return;
        };
        world.wait_for(80, "example.com", "/set", "infra-backend-v1");
        let r = world.request(80, "GET", "example.com", "/set", &[("x-header-set", "old")]);
        assert_eq!(
            header(&r, "x-header-set").as_deref(),
            Some("set-overwrites-values"),
            "{case}: {}",
            r.body
        );
        let r = world.request(80, "GET", "example.com", "/add", &[]);
        assert_eq!(
            header(&r, "x-header-add").as_deref(),
            Some("add-appends-values"),
            "{case}: {}",
            r.body
        );
        let r = world.request(
            80,
            "GET",
            "example.com",
            "/remove",
            &[("x-header-remove", "gone")],
        );
        assert_eq!(header(&r, "x-header-remove"), None, "{case}: {}", r.body);
        let r = world.request(
            80,
            "GET",
            "example.com",
            "/multiple",
            &[("x-header-remove-1", "a"), ("x-header-set-1", "old")],
        );
        assert_eq!(
            header(&r, "x-header-set-1").as_deref(),
            Some("header-set-1"),
            "{case}: {}",
            r.body
        );
        assert_eq!(
            header(&r, "x-header-add-3").as_deref(),
            Some("header-add-3"),
            "{case}: {}",
            r.body
        );
        assert_eq!(header(&r, "x-header-remove-1"), None, "{case}: {}", r.body);
        // Not modified: a header of another rule's filter stays as sent.
        let r = world.request(
            80,
            "GET",
            "example.com",
            "/set",
            &[("x-header-remove", "kept")],
        );
        assert_eq!(
            header(&r, "x-header-remove").as_deref(),
            Some("kept"),
            "{case}: {}",
            r.body
        );
    }
}

#[test]
fn httproute_response_header_modifier() {
    let Some(world) = Conformance::start("httproute-response-header-modifier.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/set", "infra-backend-v1");
    let r = world.request(80, "GET", "example.com", "/set", &[]);
    assert_eq!(
        r.header("x-header-set"),
        Some("set-overwrites-values"),
        "{r:?}"
    );
    let r = world.request(80, "GET", "example.com", "/add", &[]);
    assert_eq!(
        r.header("x-header-add"),
        Some("add-appends-values"),
        "{r:?}"
    );
    let r = world.request(80, "GET", "example.com", "/case-insensitivity", &[]);
    assert_eq!(r.header("x-uppercase-add"), Some("uppercase-add"), "{r:?}");
    // Not modified: another rule's response.
    let r = world.request(80, "GET", "example.com", "/remove", &[]);
    assert_eq!(r.header("x-header-set"), None, "{r:?}");
}

#[test]
fn httproute_request_multiple_mirrors() {
    let Some(world) = Conformance::start("httproute-request-multiple-mirrors.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/multi-mirror", "infra-backend-v1");
    let (v2, v3) = (
        &world.backends["infra-backend-v2"],
        &world.backends["infra-backend-v3"],
    );
    // One request, told apart by its key from the mirrors of the requests before it.
    let key = [("x-request-key", "mirrored"), ("x-header-remove", "r")];
    let r = world.request(
        80,
        "GET",
        "example.com",
        "/multi-mirror-and-modify-request-headers",
        &key,
    );
    assert_eq!(
        answered_by(&r).as_deref(),
        Some("infra-backend-v1"),
        "{}",
        r.body
    );
    assert!(
        wait_until(super::CONVERGE, || !v2
            .requests_with_key("mirrored")
            .is_empty()
            && !v3.requests_with_key("mirrored").is_empty()),
        "the request was not mirrored to v2 and v3"
    );
    let mirrored = v2.requests_with_key("mirrored").remove(0);
    assert_eq!(
        mirrored.headers.get("x-header-set").map(String::as_str),
        Some("set-overwrites-values")
    );
    assert!(!mirrored.headers.contains_key("x-header-remove"));
    // Not mirrored: a request no mirroring rule matches is not routed at all.
    assert_eq!(
        world
            .request(80, "GET", "example.com", "/other", &[])
            .status,
        404
    );
}

#[test]
fn httproute_timeouts() {
    for (case, timed, open) in [
        (
            "httproute-timeout-request.yaml",
            "/request-timeout",
            "/disable-request-timeout",
        ),
        (
            "httproute-timeout-backend-request.yaml",
            "/backend-timeout",
            "/disable-backend-timeout",
        ),
    ] {
        let Some(world) = Conformance::start(case, GW) else {
            return;
        };
        world.wait_for(80, "example.com", timed, "infra-backend-v1");
        let slow = [("x-delay-ms", "1500")];
        let r = world.request(80, "GET", "example.com", timed, &slow);
        assert_eq!(r.status, 504, "{case}: {timed} slow: {r:?}");
        let r = world.request(80, "GET", "example.com", open, &slow);
        assert_eq!(r.status, 200, "{case}: {open} slow: {r:?}");
    }
}

#[test]
fn httproute_retry() {
    let Some(world) = Conformance::start("httproute-retry.yaml", GW) else {
        return;
    };
    world.wait_for(
        80,
        "example.com",
        "/retry/code-all-attempts-2",
        "infra-backend-v3",
    );
    let send = |path: &str, key: &str, fails: &str| {
        world
            .request(
                80,
                "GET",
                "example.com",
                path,
                &[("x-request-key", key), ("x-fail-first", fails)],
            )
            .status
    };
    // 503 is retried here (two retries): one failure is hidden, three are not.
    assert_eq!(send("/retry/code-all-attempts-2", "a", "1"), 200);
    assert_eq!(send("/retry/code-all-attempts-2", "b", "3"), 503);
    // Here only 500 (and connection failures) are: a 503 is answered as is.
    assert_eq!(send("/retry/code-500-attempts-3", "c", "1"), 503);
    assert_eq!(
        world.backends["infra-backend-v3"]
            .requests_with_key("c")
            .len(),
        1
    );
}

#[test]
fn httproute_request_percentage_mirror() {
    let Some(world) = Conformance::start("httproute-request-percentage-mirror.yaml", GW) else {
        return;
    };
    world.wait_for(80, "example.com", "/percent-mirror", "infra-backend-v1");
    let v2 = &world.backends["infra-backend-v2"];
    // 200 requests each, told apart by key: 20 % of them mirrored (40 ± 17 at 3 sigma), and
    // 25/50 (100 ± 21). Mirrors arrive after their answers: wait for the low bound, then the
    // count can only be under the truth, so the high bound is checked as is.
    for (path, prefix, low, high) in [
        ("/percent-mirror", "p", 22, 60),
        ("/percent-mirror-fraction", "f", 75, 125),
    ] {
        for i in 0..200 {
            let key = format!("{prefix}-{i}");
            let r = world.request(80, "GET", "example.com", path, &[("x-request-key", &key)]);
            assert_eq!(r.status, 200, "{path}: {r:?}");
        }
        let mirrored = || {
            v2.requests()
                .iter()
                .filter(|r| {
                    r.headers
                        .get("x-request-key")
                        .is_some_and(|k| k.starts_with(&format!("{prefix}-")))
                })
                .count()
        };
        assert!(
            wait_until(super::CONVERGE, || mirrored() >= low),
            "{path}: only {} of 200 mirrored",
            mirrored()
        );
        assert!(mirrored() <= high, "{path}: {} of 200 mirrored", mirrored());
    }
}
