//! Clients that try to wear the ADS port down, one bound each: streams that never send a
//! request hold no `max_streams` slot and are closed at `first_request_timeout`; a partial
//! message is cut at `message_timeout`, and what partial messages buffer stays under
//! `max_request_buffer_bytes` (read from `axon_request_buffer_bytes`); a message larger than
//! `max_message_size` and a malformed one end their stream with INVALID_ARGUMENT; a
//! connection with no stream is closed at `idle_connection_timeout`; at `max_connections`
//! (from the file-descriptor limit) new connections are closed at once and the monitoring
//! port keeps answering. Raw HTTP/2 (the `h2`
//! crate) where a well-behaved client library would not misbehave.

#[path = "support/ads_client.rs"]
mod ads_client;
mod support;

use std::io::Read;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ads_client::{CDS, gateway_node, runtime};
use bytes::Bytes;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use prost::Message;
use support::*;

const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: svc, namespace: demo}\nspec:\n  hosts: [svc.demo.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 80, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.9}]\n";

fn start(limits: &str) -> (ConfigDir, ConfigDir, Axon) {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let limits_dir = ConfigDir::new();
    limits_dir.write("limits.toml", limits);
    let path = limits_dir.file("limits.toml").display().to_string();
    let axon = Axon::start_with_args(dir.path(), &["--limits", &path]);
    (dir, limits_dir, axon)
}

/// A raw HTTP/2 connection to axon's xDS port.
async fn h2_connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("h2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Opens a SotW stream; returns its request body and response.
async fn open(
    send: &mut h2::client::SendRequest<Bytes>,
) -> (h2::SendStream<Bytes>, h2::client::ResponseFuture) {
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://axon{SOTW_PATH}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let mut ready = send.clone().ready().await.expect("h2 ready");
    let (response, body) = ready.send_request(request, false).expect("send request");
    *send = ready;
    (body, response)
}

/// The `grpc-status` a stream ends with (from its trailers or trailers-only headers).
async fn grpc_status(response: h2::client::ResponseFuture, within: Duration) -> (String, String) {
    tokio::time::timeout(within, async {
        let response = response.await.expect("response headers");
        let header = |h: &http::HeaderMap| {
            (
                h.get("grpc-status")
                    .map(|v| v.to_str().unwrap().to_string()),
                h.get("grpc-message")
                    .map(|v| v.to_str().unwrap().to_string()),
            )
        };
        if let (Some(code), message) = header(response.headers()) {
            return (code, message.unwrap_or_default());
        }
        let mut body = response.into_body();
        while let Some(chunk) = body.data().await {
            if chunk.is_err() {
                break;
            }
        }
        let trailers = body.trailers().await.ok().flatten().unwrap_or_default();
        let (code, message) = header(&trailers);
        (
            code.unwrap_or_else(|| "none".into()),
            message.unwrap_or_default(),
        )
    })
    .await
    .expect("the stream ended in time")
}

fn framed(message: &[u8]) -> Bytes {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    Bytes::from(out)
}

fn cds_request(pod: &str) -> Bytes {
    let node = gateway_node(&format!(
        "router~10.0.0.1~{pod}.istio-system~istio-system.svc.cluster.local"
    ));
    let req = DiscoveryRequest {
        type_url: CDS.to_string(),
        node: Some(node),
        ..Default::default()
    };
    framed(&req.encode_to_vec())
}

fn metric(axon: &Axon, name: &str) -> f64 {
    axon.metric(&format!("{name} ")).unwrap_or(-1.0)
}

#[test]
fn streams_that_never_speak_hold_no_slot_and_are_closed_in_time() {
    let (_d, _l, axon) = start("max_streams = 3\nfirst_request_timeout = \"1s\"\n");
    runtime().block_on(async {
        let mut send = h2_connect(axon.xds_addr()).await;
        // Ten streams that never send a request.
        let mut silent = Vec::new();
        for _ in 0..10 {
            silent.push(open(&mut send).await);
        }
        // A real proxy still gets in (and two more): the silent ones hold no slot.
        let mut speaking = Vec::new();
        for i in 0..3 {
            let (mut body, response) = open(&mut send).await;
            body.send_data(cds_request(&format!("gw-{i}")), false)
                .unwrap();
            let response = tokio::time::timeout(Duration::from_secs(10), response)
                .await
                .expect("headers")
                .expect("response");
            let mut data = response.into_body();
            let first = tokio::time::timeout(Duration::from_secs(10), data.data())
                .await
                .expect("a CDS response within 10 s");
            assert!(
                first.is_some_and(|d| d.is_ok()),
                "proxy {i} got no response"
            );
            speaking.push((body, data));
        }
        // The silent ones are closed with DEADLINE_EXCEEDED.
        let started = Instant::now();
        for (_body, response) in silent {
            let (code, message) = grpc_status(response, Duration::from_secs(10)).await;
            assert_eq!(code, "4", "DEADLINE_EXCEEDED: {message}");
            assert!(message.contains("first_request_timeout"), "{message}");
        }
        eprintln!(
            "[hostile] silent streams closed {:?} after the proxies got in",
            started.elapsed()
        );
    });
}

#[test]
fn a_stalled_partial_message_is_cut_and_buffers_stay_bounded() {
    let (_d, _l, axon) = start(
        "message_timeout = \"2s\"\nmax_request_buffer_bytes = 8388608\nfirst_request_timeout = \"30s\"\n",
    );
    let rss_before = axon.rss_kib();
    runtime().block_on(async {
        // Forty streams, each announcing a 3 MiB request and sending 1 MiB of it.
        let mut streams = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..4 {
            conns.push(h2_connect(axon.xds_addr()).await);
        }
        for i in 0..40 {
            let send = &mut conns[i % 4];
            let (mut body, response) = open(send).await;
            let mut head = vec![0u8];
            head.extend_from_slice(&(3u32 << 20).to_be_bytes());
            head.extend(std::iter::repeat_n(0x0a, 1 << 20));
            body.reserve_capacity(head.len());
            body.send_data(Bytes::from(head), false).unwrap();
            streams.push((body, response));
        }
        // The buffered bytes stay under the bound.
        let mut peak = 0.0f64;
        let deadline = Instant::now() + Duration::from_secs(1);
        while Instant::now() < deadline {
            peak = peak.max(metric(&axon, "axon_request_buffer_bytes"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(peak > 0.0, "nothing buffered?");
        assert!(peak <= 8_388_608.0, "buffered {peak} bytes, over the bound");
        // Every stream ends: over the budget at once, the rest at message_timeout.
        let mut by_reason = std::collections::BTreeMap::<String, usize>::new();
        for (_body, response) in streams {
            let (code, message) = grpc_status(response, Duration::from_secs(15)).await;
            assert_eq!(code, "3", "INVALID_ARGUMENT: {message}");
            let reason = if message.contains("message_timeout") {
                "message_timeout"
            } else if message.contains("max_request_buffer_bytes") {
                "max_request_buffer_bytes"
            } else {
                panic!("unexpected reason: {message}")
            };
            *by_reason.entry(reason.to_string()).or_default() += 1;
        }
        eprintln!("[hostile] 40 stalled 1 MiB partial requests ended by: {by_reason:?}, peak buffered {peak} bytes");
        assert!(by_reason.contains_key("message_timeout") && by_reason.contains_key("max_request_buffer_bytes"));
    });
    assert!(
        wait_until(Duration::from_secs(5), || metric(
            &axon,
            "axon_request_buffer_bytes"
        ) == 0.0),
        "the buffers were not given back"
    );
    let grew = axon.rss_kib().saturating_sub(rss_before) / 1024;
    eprintln!("[hostile] axon RSS grew {grew} MiB");
    assert!(grew < 100, "axon RSS grew {grew} MiB");
}

#[test]
fn oversized_and_malformed_requests_end_with_invalid_argument() {
    let (_d, _l, axon) = start("");
    runtime().block_on(async {
        let mut send = h2_connect(axon.xds_addr()).await;
        // A 16 MiB request announced: refused before any of it is buffered.
        let (mut body, response) = open(&mut send).await;
        let mut head = vec![0u8];
        head.extend_from_slice(&(16u32 << 20).to_be_bytes());
        body.send_data(Bytes::from(head), false).unwrap();
        let (code, message) = grpc_status(response, Duration::from_secs(10)).await;
        assert_eq!(code, "3", "{message}");
        assert!(message.contains("max_message_size"), "{message}");
        // Not a protobuf.
        let (mut body, response) = open(&mut send).await;
        body.send_data(framed(&[0xff; 12]), false).unwrap();
        let (code, message) = grpc_status(response, Duration::from_secs(10)).await;
        assert_eq!(code, "3", "{message}");
        // A malformed request after a good one: the stream ends with INVALID_ARGUMENT too.
        let (mut body, response) = open(&mut send).await;
        body.send_data(cds_request("gw-bad"), false).unwrap();
        let response = response.await.unwrap();
        let mut data = response.into_body();
        assert!(
            data.data().await.is_some_and(|d| d.is_ok()),
            "no CDS answer"
        );
        body.send_data(framed(&[0xff; 12]), false).unwrap();
        while let Some(Ok(_)) = data.data().await {}
        let trailers = data.trailers().await.ok().flatten().unwrap_or_default();
        assert_eq!(
            trailers.get("grpc-status").map(|v| v.to_str().unwrap()),
            Some("3"),
            "{trailers:?}"
        );
    });
}

#[test]
fn a_connection_with_no_stream_is_closed_at_the_idle_timeout() {
    let (_d, _l, axon) = start("idle_connection_timeout = \"1s\"\n");
    let started = Instant::now();
    // A TCP connection that never even sends the HTTP/2 preface.
    let mut tcp = std::net::TcpStream::connect(axon.xds_addr()).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 1024];
    loop {
        match tcp.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    let closed = started.elapsed();
    eprintln!("[hostile] a silent connection was closed after {closed:?}");
    assert!(
        closed >= Duration::from_millis(900) && closed < Duration::from_secs(8),
        "{closed:?}"
    );
}

#[test]
fn client_strings_are_escaped_and_repeated_warnings_held_back() {
    let (_d, _l, axon) = start("");
    runtime().block_on(async {
        let mut client = ads_client::Client::connect(&axon).await;
        // A node id with a newline, trying to forge a log line.
        let forged = "router~10.0.0.1~gw.istio-system~istio-system.svc.cluster.local\n2026-12-01T00:00:00.000000Z  INFO axon: forged";
        client.first_cds(gateway_node(forged)).await;
        // Twenty requests for a type axon does not serve: one warning, not twenty.
        for _ in 0..20 {
            client
                .request("type.googleapis.com/not.a.Type", &[], "", None)
                .await;
            client.next().await;
        }
    });
    assert!(
        axon.wait_for_log("ADS: unknown type requested", Duration::from_secs(5)),
        "no warning at all"
    );
    assert_eq!(
        axon.count_log("ADS: unknown type requested"),
        1,
        "{}",
        axon.logs()
    );
    let logs = axon.logs();
    assert!(
        !logs
            .lines()
            .any(|l| l.starts_with("2026-12-01T00:00:00.000000Z")),
        "a forged line got through:\n{logs}"
    );
    assert!(
        logs.contains("svc.cluster.local\\n2026-12-01"),
        "the newline is shown escaped:\n{logs}"
    );
}

#[test]
fn at_the_descriptor_limit_connections_are_refused_and_monitoring_answers() {
    // 256 descriptors: max_connections is 192, the rest is axon's own.
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", MESH);
    let axon = Axon::start_wrapped(dir.path(), &[], &["prlimit", "--nofile=256:256", "--"]);
    assert!(
        axon.wait_for_log("max_connections=192", Duration::from_secs(5)),
        "the listening line does not say max_connections=192"
    );
    assert!(
        wait_until(Duration::from_secs(10), || axon
            .monitoring_get("/ready")
            .status
            == 200),
        "axon did not get ready"
    );
    let mut held = Vec::new();
    for _ in 0..300 {
        held.push(std::net::TcpStream::connect(axon.xds_addr()).expect("connect"));
    }
    let refused = || metric(&axon, "axon_xds_refused_connections");
    assert!(
        wait_until(Duration::from_secs(10), || refused() >= 108.0),
        "refused {} of 300",
        refused()
    );
    for path in ["/ready", "/healthz", "/metrics"] {
        let response = axon.monitoring_get(path);
        assert_eq!(response.status, 200, "{path} at the limit: {response:?}");
    }
    assert_eq!(
        metric(&axon, "axon_xds_accept_errors"),
        0.0,
        "the descriptors ran out"
    );
    assert!(axon.wait_for_log("xDS connections at max_connections", Duration::from_secs(5)));

    // The refused ones were closed at once; once some held ones go, a proxy gets in.
    let mut closed = 0;
    for tcp in &mut held {
        tcp.set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        closed += usize::from(matches!(tcp.read(&mut [0u8; 64]), Ok(0)));
    }
    assert!(closed >= 108, "only {closed} connections were closed");
    held.clear();
    assert!(
        wait_until(Duration::from_secs(10), || {
            runtime().block_on(async {
                let mut send = h2_connect(axon.xds_addr()).await;
                let (mut body, response) = open(&mut send).await;
                body.send_data(cds_request("gw-after"), false).unwrap();
                let Ok(Ok(response)) = tokio::time::timeout(Duration::from_secs(5), response).await
                else {
                    return false;
                };
                let first =
                    tokio::time::timeout(Duration::from_secs(5), response.into_body().data()).await;
                matches!(first, Ok(Some(Ok(_))))
            })
        }),
        "no proxy got in after the connections went"
    );
}

#[test]
fn a_connection_may_open_max_streams_per_connection_at_once() {
    let (_d, _l, axon) = start("max_streams_per_connection = 3\n");
    runtime().block_on(async {
        let mut send = h2_connect(axon.xds_addr()).await;
        // The server's SETTINGS say 3; the client then holds a fourth stream back.
        let started = Instant::now();
        while send.current_max_send_streams() != 3 {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "SETTINGS_MAX_CONCURRENT_STREAMS is {}",
                send.current_max_send_streams()
            );
            send = send.ready().await.expect("h2 ready");
            tokio::task::yield_now().await;
        }
        let mut streams = Vec::new();
        for _ in 0..3 {
            streams.push(open(&mut send).await);
        }
        // A fourth waits (axon's response headers go out as soon as a stream opens).
        let (_body, fourth) = open(&mut send).await;
        tokio::pin!(fourth);
        assert!(
            tokio::time::timeout(Duration::from_millis(500), &mut fourth)
                .await
                .is_err(),
            "a fourth stream was opened"
        );
        // One ends: the fourth opens.
        drop(streams.pop());
        let headers = tokio::time::timeout(Duration::from_secs(10), &mut fourth).await;
        assert!(
            matches!(headers, Ok(Ok(_))),
            "the fourth stream did not open after one ended: {headers:?}"
        );
    });
}
