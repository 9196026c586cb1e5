//! GRPCRoutes on Gateway `same-namespace`, with real gRPC clients and servers (grpcio, the
//! test venv's): `GRPCExactMethodMatching` (service and method to a backend; a method no
//! rule names is UNIMPLEMENTED) and `GRPCRouteHeaderMatching` (metadata matches). The
//! backends serve the suite's `GrpcEcho` (`Echo`, `EchoTwo`) and answer with their name.

use super::Conformance;
use crate::support::grpc_echo::{EchoServer, client_call};

const SERVICE: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

/// The three gRPC backends, each answering `NAME:`.
fn backends() -> Vec<(&'static str, EchoServer)> {
    [
        "grpc-infra-backend-v1",
        "grpc-infra-backend-v2",
        "grpc-infra-backend-v3",
    ]
    .into_iter()
    .map(|name| {
        (
            name,
            EchoServer::start_service(&format!("{name}:"), SERVICE),
        )
    })
    .collect()
}

/// Calls `method` of GrpcEcho through the gateway with `metadata`: the backend that
/// answered, or the call's failure (`code: UNIMPLEMENTED`).
fn call(world: &Conformance, method: &str, metadata: &[&str], wait: bool) -> String {
    let target = format!("127.0.0.1:{}", world.ports[&80]);
    let path = format!("/{SERVICE}/{method}");
    let mut extra = vec!["--method", &path, "--authority", "example.com"];
    if !wait {
        extra.push("--once");
    }
    for m in metadata {
        extra.extend(["--header", m]);
    }
    let (_, out) = client_call(&target, &extra);
    if let Some(reply) = out.lines().find_map(|l| l.strip_prefix("reply: ")) {
        return reply.split(':').next().unwrap_or_default().to_string();
    }
    out.lines()
        .find(|l| l.starts_with("code: "))
        .map_or_else(|| out.clone(), String::from)
}

fn start(case: &str) -> Option<(Conformance, Vec<(&'static str, EchoServer)>)> {
    let servers = backends();
    let upstreams: Vec<(&str, &str, u16)> = servers.iter().map(|(n, s)| (*n, "", s.port)).collect();
    let world = Conformance::start_full(case, "same-namespace", Vec::new(), &upstreams)?;
    Some((world, servers))
}

#[test]
fn grpcroute_exact_method_matching() {
    let Some((world, _servers)) = start("grpcroute-exact-method-matching.yaml") else {
        return;
    };
    // The first call waits (retrying UNAVAILABLE) until the route is there.
    assert_eq!(call(&world, "Echo", &[], true), "grpc-infra-backend-v1");
    assert_eq!(call(&world, "EchoTwo", &[], false), "grpc-infra-backend-v2");
    assert_eq!(call(&world, "EchoThree", &[], false), "code: UNIMPLEMENTED");
}

#[test]
fn grpcroute_header_matching() {
    let Some((world, _servers)) = start("grpcroute-header-matching.yaml") else {
        return;
    };
    assert_eq!(
        call(&world, "Echo", &["version=one"], true),
        "grpc-infra-backend-v1"
    );
    for (metadata, want) in [
        (&["version=two"][..], "grpc-infra-backend-v2"),
        (
            &["version=two", "color=orange"][..],
            "grpc-infra-backend-v1",
        ),
        (&["color=blue"][..], "grpc-infra-backend-v1"),
        (&["color=green"][..], "grpc-infra-backend-v1"),
        (&["color=red"][..], "grpc-infra-backend-v2"),
        (&["color=yellow"][..], "grpc-infra-backend-v2"),
        (&["color=purple"][..], "code: UNIMPLEMENTED"),
        (&[][..], "code: UNIMPLEMENTED"),
    ] {
        assert_eq!(call(&world, "Echo", metadata, false), want, "{metadata:?}");
    }
}

/// The replies of `1 + repeat` calls of `method` with `metadata` (waiting for the first).
fn replies(world: &Conformance, method: &str, metadata: &[&str], repeat: usize) -> Vec<String> {
    let target = format!("127.0.0.1:{}", world.ports[&80]);
    let path = format!("/{SERVICE}/{method}");
    let repeat = repeat.to_string();
    let mut extra = vec![
        "--method",
        &path,
        "--authority",
        "example.com",
        "--repeat",
        &repeat,
    ];
    for m in metadata {
        extra.extend(["--header", m]);
    }
    let (_, out) = client_call(&target, &extra);
    out.lines()
        .filter_map(|l| l.strip_prefix("reply: "))
        .map(String::from)
        .collect()
}

#[test]
fn grpcroute_request_header_modifier() {
    let Some((world, _servers)) = start("grpcroute-request-header-modifier.yaml") else {
        return;
    };
    // The backend's reply: `NAME:METHOD|k=v;k=v|message`.
    let echo = replies(&world, "Echo", &["x-header-set=old"], 0);
    let meta = echo.first().cloned().unwrap_or_default();
    assert!(
        meta.contains("x-header-set=set-overwrites-values"),
        "{echo:?}"
    );
    let two = replies(
        &world,
        "EchoTwo",
        &["x-header-remove-1=gone", "x-header-set-1=old"],
        0,
    );
    let meta = two.first().cloned().unwrap_or_default();
    assert!(meta.contains("x-header-set-1=header-set-1"), "{two:?}");
    assert!(meta.contains("x-header-add-1=header-add-1"), "{two:?}");
    assert!(!meta.contains("x-header-remove-1"), "{two:?}");
}

#[test]
fn grpcroute_weight() {
    let Some((world, _servers)) = start("grpcroute-weight.yaml") else {
        return;
    };
    let all = replies(&world, "Echo", &[], 99);
    let count = |name: &str| {
        all.iter()
            .filter(|r| r.starts_with(&format!("{name}:")))
            .count()
    };
    let (v1, v2, v3) = (
        count("grpc-infra-backend-v1"),
        count("grpc-infra-backend-v2"),
        count("grpc-infra-backend-v3"),
    );
    // 70/30 of 100: well within ±20 (over 4 sigma); v3 (weight 0) never.
    assert_eq!((v1 + v2, v3), (100, 0), "{all:?}");
    assert!((50..=90).contains(&v1), "v1 {v1}, v2 {v2}");
}
