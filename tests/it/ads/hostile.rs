//! Clients that try to wear the ADS port down, one bound each: streams that never send a
//! request hold no `max_streams` slot and are closed at `first_request_timeout`; a message
//! larger than `max_message_size` ends its stream with RESOURCE_EXHAUSTED, a malformed one
//! with INVALID_ARGUMENT; a
//! connection with no stream is closed at `idle_connection_timeout`; at `max_connections`
//! (from the file-descriptor limit) new connections are closed at once and the monitoring
//! port keeps answering. The bounds on partial messages are in `ads_buffers.rs`. And the
//! same close for a well-behaved proxy: at `max_connection_age` its connection goes away and
//! its stream ends with UNAVAILABLE, so that it reconnects (elsewhere, behind a balancer).

use crate::support;
use crate::support::ads_client;
use crate::support::raw_h2;

use std::io::Read;
use std::time::{Duration, Instant};

use ads_client::{gateway_node, runtime};
use bytes::Bytes;
use raw_h2::*;
use support::*;

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
fn oversized_and_malformed_requests_end_their_stream() {
    let (_d, _l, axon) = start("");
    runtime().block_on(async {
        let mut send = h2_connect(axon.xds_addr()).await;
        // A 16 MiB request announced: refused before any of it is buffered.
        let (mut body, response) = open(&mut send).await;
        let mut head = vec![0u8];
        head.extend_from_slice(&(16u32 << 20).to_be_bytes());
        body.send_data(Bytes::from(head), false).unwrap();
        let (code, message) = grpc_status(response, Duration::from_secs(10)).await;
        assert_eq!(code, "8", "RESOURCE_EXHAUSTED, as gRPC: {message}");
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
    assert_eq!(
        metric(&axon, "axon_xds_max_connections"),
        192.0,
        "max_connections is not 192"
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

#[test]
fn at_max_connection_age_the_stream_ends_unavailable() {
    let (_d, _l, axon) = start("max_connection_age = \"1s\"\nclose_grace = \"10s\"\n");
    runtime().block_on(async {
        let opened = Instant::now();
        let (_body, responses) = real_proxy(axon.xds_addr(), "gw-aged").await;
        let (code, message) = responses.status(Duration::from_secs(10)).await;
        assert_eq!(code, "14", "UNAVAILABLE: {message}");
        assert!(message.contains("max_connection_age"), "{message}");
        // The age is jittered by at most 10%.
        assert!(
            opened.elapsed() >= Duration::from_millis(900),
            "closed after {:?}",
            opened.elapsed()
        );
    });
}
