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
