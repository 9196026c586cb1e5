//! TPROXY capture (`INTERCEPTION_MODE: TPROXY`), set up as istio-iptables and pilot-agent
//! set it up (the mangle table's `TPROXY` to 15006, mark 1337 routed to `lo` by table 133,
//! Envoy as uid 0, gid 1337 with `CAP_NET_ADMIN` only, as istio's injector runs it), through
//! real sidecars fed by axon:
//!
//! - A server pod under TPROXY, named by a ServiceEntry and its WorkloadEntry, is reached by
//!   host from a REDIRECT client and from a TPROXY client; its app sees the client pod's
//!   address as the peer (Envoy's `original_src`), not 127.0.0.6.
//! - A port no service names reaches the app through `virtualInbound`'s passthrough chain.
//! - The TPROXY sidecar's `virtualInbound` and `virtualOutbound` are `transparent` and the
//!   former has `original_src` (mark 1337); a REDIRECT sidecar's are not and has not.
//! - Under REGISTRY_ONLY a TPROXY client still reaches the service but not a pod IP no
//!   service names.
//! - (Ignored: axon's bug) a REDIRECT and a TPROXY sidecar of one namespace get listeners
//!   of their own mode.

use std::net::{Ipv4Addr, SocketAddr};

use super::{APP_PORT, service_yaml, stat, wait_answer};
use crate::support::mesh::{
    INBOUND_CAPTURED, InterceptionMode, Mesh, OUTBOUND_CAPTURED, Pod, PodSpec, TPROXY_CAPTURED,
    TPROXY_MARKED_RETURN, TPROXY_ROUTES, istio_iptables_rules, istio_iptables_rules_for,
};
use crate::support::{Axon, ConfigDir, dynamic_listener};

const VIP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 30);
/// A port of the server's app that no service names.
const UNNAMED_PORT: u16 = 8081;

/// The nat rules that send the proxy's own connections over `lo` back to 15006.
const PROXY_TO_SELF: [&str; 2] = [
    "--uid-owner 1337 -j ISTIO_IN_REDIRECT",
    "--gid-owner 1337 -j ISTIO_IN_REDIRECT",
];

/// `virtualInbound`/`virtualOutbound` of `pod`'s sidecar, as its config_dump shows it.
fn listener(pod: &Pod, name: &str) -> serde_json::Value {
    pod.wait_listener(name);
    dynamic_listener(&pod.envoy().config_dump(), name)
        .and_then(|l| l.pointer("/active_state/listener").cloned())
        .unwrap_or_else(|| panic!("pod {}: no {name}\n{}", pod.name(), pod.describe()))
}

/// Whether a listener is `transparent: true`.
fn transparent(listener: &serde_json::Value) -> bool {
    listener["transparent"].as_bool() == Some(true)
}

/// The `original_src` listener filter's mark, if the listener has the filter.
fn original_src_mark(listener: &serde_json::Value) -> Option<u64> {
    listener["listener_filters"]
        .as_array()?
        .iter()
        .find(|f| f["name"] == "envoy.filters.listener.original_src")
        .map(|f| f["typed_config"]["mark"].as_u64().unwrap_or(0))
}

/// The IP of a `peer` an echo app reported (`IP:PORT`).
fn peer_ip(peer: &str) -> String {
    peer.parse::<SocketAddr>()
        .map(|p| p.ip().to_string())
        .unwrap_or_else(|_| peer.to_string())
}

#[test]
fn a_tproxy_server_sees_its_clients_addresses() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let host = mesh.service("echo", "b", VIP);
    // REDIRECT and TPROXY sidecars in namespaces of their own (one namespace: the last test).
    let redirect_client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]));
    let tproxy_client = mesh.pod(PodSpec::sidecar("tclient", "c", &[("app", "tclient")]).tproxy());
    let server = mesh.pod(PodSpec::sidecar("echo", "b", &[("app", "echo")]).tproxy());
    assert_eq!(server.interception(), InterceptionMode::Tproxy);
    let app = server.serve_http(APP_PORT, "echo");
    let _unnamed = server.serve_http(UNNAMED_PORT, "echo-unnamed");
    config.write(
        "echo.yaml",
        &service_yaml("echo", "b", VIP, &[(server.ip(), "v1")]),
    );
    redirect_client.wait_listener("0.0.0.0_80");
    tproxy_client.wait_listener("0.0.0.0_80");

    // (a) The service's port, by host: the app sees each client pod's own address.
    for client in [&redirect_client, &tproxy_client] {
        let peer = wait_answer(client, &host, 80, &[], "echo", &server);
        assert_eq!(
            peer_ip(&peer),
            client.ip().to_string(),
            "from {} the app saw {peer}\n{}",
            client.name(),
            server.describe()
        );
        assert!(client.nat_packets(OUTBOUND_CAPTURED) >= 1);
    }
    assert!(!app.requests().is_empty());
    assert!(
        server.mangle_packets(TPROXY_CAPTURED) >= 2
            && server.mangle_packets(TPROXY_MARKED_RETURN) >= 1
            && stat(&server, "listener.0.0.0.0_15006.downstream_cx_total") >= 2,
        "{}",
        server.describe()
    );

    // (b) A port no service names, by the pod's IP: virtualInbound's passthrough chain.
    for client in [&redirect_client, &tproxy_client] {
        let peer = wait_answer(
            client,
            &server.ip().to_string(),
            UNNAMED_PORT,
            &[],
            "echo-unnamed",
            &server,
        );
        // istiod's InboundPassthroughCluster binds 127.0.0.6 (`upstream_bind_config`), as
        // axon's does, and under REDIRECT the app sees that (`capture.rs`). Under TPROXY
        // istiod also puts `original_src` on virtualInbound, and Envoy applies its socket
        // option (the downstream's IP, port 0, IP_TRANSPARENT, mark 1337) before binding,
        // in place of the cluster's bind address: the app sees the client here too, which
        // is what istio documents for TPROXY ("preserves both the source and destination
        // IP addresses and ports"), for every inbound chain alike.
        assert_eq!(
            peer_ip(&peer),
            client.ip().to_string(),
            "through the passthrough from {} the app saw {peer}\n{}",
            client.name(),
            server.describe()
        );
    }
    assert!(
        stat(
            &server,
            "cluster.InboundPassthroughCluster.upstream_cx_total"
        ) >= 2
    );
    // Envoy's connections to the app were let through by their mark, never taken back to
    // 15006 by the nat table (a loop).
    for rule in PROXY_TO_SELF {
        assert_eq!(server.nat_packets(rule), 0, "{}", server.describe());
    }

    // (c) The config that does it.
    let inbound = listener(&server, "virtualInbound");
    assert!(transparent(&inbound), "{inbound:#}");
    assert_eq!(original_src_mark(&inbound), Some(1337), "{inbound:#}");
    assert!(transparent(&listener(&server, "virtualOutbound")));
    let inbound = listener(&redirect_client, "virtualInbound");
    assert!(!transparent(&inbound), "{inbound:#}");
    assert_eq!(original_src_mark(&inbound), None, "{inbound:#}");
    assert!(!transparent(&listener(&redirect_client, "virtualOutbound")));
}

#[test]
fn registry_only_refuses_an_unknown_ip_from_a_tproxy_client() {
    let config = ConfigDir::new();
    let axon = Axon::start_with_mesh_config(
        config.path(),
        "outboundTrafficPolicy: {mode: REGISTRY_ONLY}\n",
    );
    let mesh = Mesh::new(axon.xds_addr());
    let host = mesh.service("known", "b", VIP);
    let client = mesh.pod(PodSpec::sidecar("client", "a", &[("app", "client")]).tproxy());
    let known = mesh.pod(PodSpec::sidecar("known", "b", &[("app", "known")]).tproxy());
    let outside = mesh.pod(PodSpec::plain("outside", "c", &[("app", "outside")]));
    let plain = mesh.pod(PodSpec::plain("plain", "c", &[("app", "plain")]));
    let _known_app = known.serve_http(APP_PORT, "known");
    let outside_app = outside.serve_http(APP_PORT, "outside");
    config.write(
        "known.yaml",
        &service_yaml("known", "b", VIP, &[(known.ip(), "v1")]),
    );
    client.wait_listener("0.0.0.0_80");
    // TPROXY client to TPROXY server: the server's app sees the client.
    let peer = wait_answer(&client, &host, 80, &[], "known", &known);
    assert_eq!(peer_ip(&peer), client.ip().to_string());

    // A pod IP no service names: captured (nat, as under REDIRECT) and refused by
    // virtualOutbound's BlackHoleCluster; it never reaches the pod.
    let captured = client.nat_packets(OUTBOUND_CAPTURED);
    let (status, body) = client.http_get(&outside.ip().to_string(), APP_PORT, "/", &[]);
    assert_eq!(status, 0, "{body}\n{}", client.describe());
    assert!(client.nat_packets(OUTBOUND_CAPTURED) > captured);
    assert!(stat(&client, "listener.0.0.0.0_15001.downstream_cx_total") >= 1);
    assert!(outside_app.requests().is_empty());
    // Not captured, from a plain pod, the same IP answers.
    assert_eq!(
        plain
            .http_get(&outside.ip().to_string(), APP_PORT, "/", &[])
            .0,
        200
    );
}

/// axon memoizes generated listeners per scope key (`SidecarScope::key`), which says
/// `INTERCEPTION_MODE: NONE` but not `TPROXY`: a TPROXY sidecar of a namespace whose
/// REDIRECT sidecar was served first gets that one's listeners (not transparent, no
/// original_src; TPROXY-captured connections are then refused), and the other way round a
/// REDIRECT sidecar gets transparent listeners, which Envoy without `CAP_NET_ADMIN` rejects
/// (NACK: "Setting IPPROTO_IP/IP_TRANSPARENT option on socket failed"). The other tests here
/// keep TPROXY and REDIRECT sidecars in different namespaces.
#[test]
fn redirect_and_tproxy_sidecars_of_one_namespace_get_their_own_listeners() {
    let config = ConfigDir::new();
    let axon = Axon::start(config.path());
    let mesh = Mesh::new(axon.xds_addr());
    let redirect = mesh.pod(PodSpec::sidecar("redirect", "a", &[("app", "same")]));
    redirect.wait_listener("virtualInbound");
    let tproxy = mesh.pod(PodSpec::sidecar("tproxy", "a", &[("app", "same")]).tproxy());
    let inbound = listener(&tproxy, "virtualInbound");
    assert!(
        transparent(&inbound),
        "the TPROXY sidecar got the listeners of its namespace's REDIRECT sidecar:\n{inbound:#}"
    );
    assert_eq!(original_src_mark(&inbound), Some(1337), "{inbound:#}");
    assert!(!transparent(&listener(&redirect, "virtualInbound")));
}

#[test]
fn the_tproxy_rules_are_istio_iptables_tproxy_mode() {
    let rules = istio_iptables_rules_for(InterceptionMode::Tproxy);
    // The mangle table of istio's `inbound-ports-wildcard-tproxy.golden`, in its order, with
    // the injector's excluded inbound ports.
    let mangle: Vec<&str> = rules.lines().take_while(|l| *l != "COMMIT").collect();
    let expected = vec![
        "*mangle",
        "-N ISTIO_DIVERT",
        "-N ISTIO_TPROXY",
        "-N ISTIO_INBOUND",
        "-A ISTIO_DIVERT -j MARK --set-mark 1337",
        "-A ISTIO_DIVERT -j ACCEPT",
        "-A ISTIO_TPROXY ! -d 127.0.0.1/32 -p tcp -j TPROXY --tproxy-mark 1337/0xffffffff --on-port 15006",
        "-A PREROUTING -p tcp -j ISTIO_INBOUND",
        "-A ISTIO_INBOUND -p tcp --dport 22 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN",
        "-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN",
        "-A ISTIO_INBOUND -p tcp -m conntrack --ctstate RELATED,ESTABLISHED -j ISTIO_DIVERT",
        "-A ISTIO_INBOUND -p tcp -j ISTIO_TPROXY",
        "-A PREROUTING -p tcp -m mark --mark 1337 -j CONNMARK --save-mark",
        "-A OUTPUT -p tcp -o lo -m mark --mark 1337 -j RETURN",
        "-A OUTPUT ! -d 127.0.0.1/32 -p tcp -o lo -m owner --uid-owner 1337 -j MARK --set-mark 1338",
        "-A OUTPUT ! -d 127.0.0.1/32 -p tcp -o lo -m owner --gid-owner 1337 -j MARK --set-mark 1338",
        "-A OUTPUT -p tcp -m connmark --mark 1337 -j CONNMARK --restore-mark",
        "-I ISTIO_INBOUND 1 -p tcp -m mark --mark 1337 -j RETURN",
        "-I ISTIO_INBOUND 2 -p tcp -s 127.0.0.6/32 -i lo -j RETURN",
        "-I ISTIO_INBOUND 3 -p tcp -i lo -m mark ! --mark 1338 -j RETURN",
    ];
    assert_eq!(mangle, expected, "{rules}");
    // The nat table: outbound as under REDIRECT; inbound is not the nat table's.
    let nat: Vec<&str> = rules.lines().skip_while(|l| *l != "*nat").collect();
    let redirect = istio_iptables_rules();
    for rule in redirect
        .lines()
        .filter(|l| l.contains("ISTIO_OUTPUT") || l.contains("ISTIO_REDIRECT"))
    {
        assert!(nat.contains(&rule), "{rule} missing:\n{rules}");
    }
    assert!(nat.contains(&"-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN"));
    for absent in ["-A PREROUTING", INBOUND_CAPTURED, "--dport 15090"] {
        assert!(
            !nat.iter().any(|l| l.contains(absent)),
            "{absent} in nat:\n{rules}"
        );
    }
    assert_eq!(nat.last(), Some(&"COMMIT"));
    assert_eq!(
        TPROXY_ROUTES.map(|r| r.join(" ")),
        [
            "rule add fwmark 1337 lookup 133",
            "route add local default dev lo table 133"
        ]
    );
    assert_eq!(InterceptionMode::Tproxy.proxy_user(), (0, 1337));
    assert_eq!(InterceptionMode::Redirect.proxy_user(), (1337, 1337));
}
