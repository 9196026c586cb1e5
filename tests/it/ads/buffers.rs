//! The bounds on what streams buffer and hold before admission, with raw HTTP/2 (the `h2`
//! crate) clients that misbehave: stalled partial messages wait within their budget and are
//! cut at `message_timeout` (read from `axon_request_buffer_bytes` and
//! `axon_pending_request_buffer_bytes`); hostile partial messages of streams not yet
//! admitted leave room for an admitted proxy's large request; one connection holds at most
//! `max_connection_request_buffer_bytes`; past `max_pending_streams` the connection holding
//! the most silent streams is closed, or (one each) the oldest silent stream past
//! `pending_stream_grace`, so a real proxy still gets in.

use crate::support;
use crate::support::ads_client;
use crate::support::raw_h2;

use std::time::{Duration, Instant};

use ads_client::{CDS, LDS, runtime};
use raw_h2::*;
use support::*;

const MIB: usize = 1 << 20;

/// The peak of `name` sampled every 20 ms for `over`.
async fn peak(axon: &Axon, name: &str, over: Duration) -> f64 {
    let mut peak = 0.0f64;
    let deadline = Instant::now() + over;
    while Instant::now() < deadline {
        peak = peak.max(metric(axon, name));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    peak
}

/// Waits until `name` is at least `value`.
async fn reaches(axon: &Axon, name: &str, value: f64, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if metric(axon, name) >= value {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[test]
fn stalled_partial_messages_wait_within_their_budget_and_are_cut_in_time() {
    // 8 MiB over every stream: a quarter, 2 MiB, for the streams not yet admitted.
    let (_d, _l, axon) = start(
        "message_timeout = \"2s\"\nmax_request_buffer_bytes = 8388608\nfirst_request_timeout = \"30s\"\n",
    );
    let rss_before = axon.rss_kib();
    runtime().block_on(async {
        // Forty streams, each announcing a 3 MiB request and sending 1 MiB of it.
        let mut conns = Vec::new();
        for _ in 0..4 {
            conns.push(h2_connect(axon.xds_addr()).await);
        }
        let mut streams = Vec::new();
        for i in 0..40 {
            let (mut body, response) = open(&mut conns[i % 4]).await;
            let data = partial(3 << 20, MIB);
            body.reserve_capacity(data.len());
            body.send_data(data, false).unwrap();
            streams.push((body, response));
        }
        assert!(
            reaches(&axon, "axon_pending_request_buffer_bytes", MIB as f64, Duration::from_secs(5)).await,
            "nothing buffered?"
        );
        let pending = peak(&axon, "axon_pending_request_buffer_bytes", Duration::from_secs(1)).await;
        let total = metric(&axon, "axon_request_buffer_bytes");
        eprintln!("[buffers] 40 stalled 1 MiB partial requests: pending peak {pending} bytes, total {total}");
        assert!(pending <= (2 * MIB) as f64, "pending buffered {pending} bytes, over 2 MiB");
        assert!(total <= (2 * MIB) as f64, "the pending streams' bytes are all there is: {total}");
        // Every stream ends at message_timeout, the ones that waited for room saying so.
        let mut waited = 0;
        for (_body, response) in streams {
            let (code, message) = grpc_status(response, Duration::from_secs(15)).await;
            assert_eq!(code, "4", "DEADLINE_EXCEEDED: {message}");
            assert!(message.contains("message_timeout"), "{message}");
            if message.contains("max_pending_request_buffer_bytes") {
                waited += 1;
            }
        }
        eprintln!("[buffers] {waited} of 40 waited for room among the pending streams' bytes");
        // (Not all: HTTP/2 flow control holds back a client whose connection window the
        // waiting streams' unread bytes fill.)
        assert!(waited >= 1, "2 MiB holds at most two of 40 streams' 1 MiB: none waited");
    });
    assert!(
        wait_until(Duration::from_secs(5), || {
            metric(&axon, "axon_request_buffer_bytes") == 0.0
                && metric(&axon, "axon_pending_request_buffer_bytes") == 0.0
                && metric(&axon, "axon_request_errors{reason=\"message_timeout\"}") == 40.0
        }),
        "the buffers were not given back, or the errors not counted: {}",
        metric(&axon, "axon_request_errors{reason=\"message_timeout\"}")
    );
    let grew = axon.rss_kib().saturating_sub(rss_before) / 1024;
    eprintln!("[buffers] axon RSS grew {grew} MiB");
    assert!(grew < 100, "axon RSS grew {grew} MiB");
}

#[test]
fn hostile_partial_messages_leave_room_for_an_admitted_proxys_large_request() {
    // 2 MiB over every stream: a quarter, 512 KiB, for the streams not yet admitted.
    let (_d, _l, axon) = start(
        "message_timeout = \"20s\"\nmax_request_buffer_bytes = 2097152\nfirst_request_timeout = \"30s\"\n",
    );
    runtime().block_on(async {
        // Twenty streams that never finish their first request (100 KB each sent) fill the
        // pending streams' 512 KiB (less a frame: the one that did not fit).
        let mut hostile = Vec::new();
        let mut conns = Vec::new();
        for _ in 0..4 {
            conns.push(h2_connect(axon.xds_addr()).await);
        }
        for i in 0..20 {
            let (mut body, response) = open(&mut conns[i % 4]).await;
            body.send_data(partial(1 << 20, 100_000), false).unwrap();
            hostile.push((body, response));
        }
        assert!(
            reaches(&axon, "axon_pending_request_buffer_bytes", (512 * 1024 - 16 * 1024) as f64, Duration::from_secs(10)).await,
            "the pending streams' budget did not fill: {}",
            metric(&axon, "axon_pending_request_buffer_bytes")
        );
        // A proxy gets in at once (its first request is whole in one frame: no room needed)...
        let started = Instant::now();
        let (mut body, mut responses) = real_proxy(axon.xds_addr(), "gw-healthy").await;
        let admitted = started.elapsed();
        // ... and its 600 KB request (tens of DATA frames, e.g. an EDS request naming every
        // cluster) is read whole: a NACK with a long message, then an LDS request.
        let nack = request("gw-healthy", CDS, |r| {
            r.error_detail = Some(envoy_types::pb::google::rpc::Status {
                code: 3,
                message: "x".repeat(600_000),
                details: vec![],
            });
        });
        body.reserve_capacity(nack.len());
        body.send_data(nack, false).unwrap();
        body.send_data(request("gw-healthy", LDS, |_| {}), false)
            .unwrap();
        let lds = responses.next_of(LDS, Duration::from_secs(10)).await;
        eprintln!(
            "[buffers] with the pending budget full: admitted in {admitted:?}, its 600 KB request read in {:?}",
            started.elapsed()
        );
        assert!(lds.is_some(), "the large request was not read: no LDS answer after it");
        assert!(
            admitted < Duration::from_secs(5),
            "the proxy waited {admitted:?} to get in"
        );
        assert_eq!(
            metric(&axon, "axon_request_errors{reason=\"message_timeout\"}"),
            0.0,
            "no stream was cut"
        );
        drop(hostile);
    });
}

#[test]
fn one_connection_holds_at_most_its_share() {
    // Every stream may be pending here; a connection holds at most 256 KiB.
    let (_d, _l, axon) = start(
        "message_timeout = \"4s\"\nfirst_request_timeout = \"30s\"\n\
         max_pending_request_buffer_bytes = 67108864\nmax_connection_request_buffer_bytes = 262144\n",
    );
    runtime().block_on(async {
        // Connection A: three streams of 100 KB each (300 KB); connection B: one.
        let mut a = h2_connect(axon.xds_addr()).await;
        let mut b = h2_connect(axon.xds_addr()).await;
        let mut a_streams = Vec::new();
        for _ in 0..3 {
            let (mut body, response) = open(&mut a).await;
            body.send_data(partial(1 << 20, 100_000), false).unwrap();
            a_streams.push((body, response));
        }
        let (mut b_body, b_response) = open(&mut b).await;
        b_body.send_data(partial(1 << 20, 100_000), false).unwrap();
        // A holds its 256 KiB (less a frame, the one that did not fit), B its 100 KB.
        let b_bytes = 100_005.0;
        let (share, frame) = (262_144.0, 16_384.0);
        assert!(
            reaches(
                &axon,
                "axon_request_buffer_bytes",
                share - frame + b_bytes,
                Duration::from_secs(10)
            )
            .await,
            "A's share and B's stream are not buffered: {}",
            metric(&axon, "axon_request_buffer_bytes")
        );
        let total = peak(
            &axon,
            "axon_request_buffer_bytes",
            Duration::from_millis(500),
        )
        .await;
        eprintln!("[buffers] A (3 × 100 KB, 256 KiB share) and B (100 KB): peak {total} bytes");
        assert!(
            total <= share + b_bytes,
            "buffered {total} bytes, over A's share and B's stream"
        );
        // Every stream ends at message_timeout; B's waited for nothing.
        for (_body, response) in a_streams {
            let (code, message) = grpc_status(response, Duration::from_secs(15)).await;
            assert_eq!(code, "4", "{message}");
        }
        let (code, message) = grpc_status(b_response, Duration::from_secs(15)).await;
        assert_eq!(code, "4", "{message}");
        assert!(
            !message.contains("max_connection_request_buffer_bytes"),
            "B waited for nothing: {message}"
        );
    });
}

#[test]
fn past_max_pending_streams_the_connection_holding_the_most_is_closed() {
    let (_d, _l, axon) = start("max_pending_streams = 5\nfirst_request_timeout = \"30s\"\n");
    runtime().block_on(async {
        // Five streams that never send a request, on one connection.
        let mut send = h2_connect(axon.xds_addr()).await;
        let mut silent = Vec::new();
        for _ in 0..5 {
            silent.push(open(&mut send).await);
        }
        assert!(
            reaches(&axon, "axon_pending_streams", 5.0, Duration::from_secs(10)).await,
            "5 streams wait"
        );
        // A real proxy's stream, past the bound: the silent connection is closed (GOAWAY,
        // its streams ended with UNAVAILABLE), the proxy is served.
        let _proxy = real_proxy(axon.xds_addr(), "gw-real").await;
        for (_body, response) in silent {
            let (code, message) = grpc_status(response, Duration::from_secs(10)).await;
            assert_eq!(code, "14", "UNAVAILABLE: {message}");
        }
        assert!(
            reaches(&axon, "axon_rejected_streams{reason=\"max_pending_streams\"}", 5.0, Duration::from_secs(5)).await,
            "the closed connection's 5 streams are counted"
        );
        eprintln!("[buffers] max_pending_streams = 5: the connection holding 5 silent streams closed for a real proxy");
    });
}

#[test]
fn past_max_pending_streams_with_one_stream_per_connection_the_oldest_is_closed() {
    let (_d, _l, axon) = start(
        "max_pending_streams = 3\npending_stream_grace = \"300ms\"\nfirst_request_timeout = \"30s\"\n",
    );
    runtime().block_on(async {
        // Three connections, one silent stream each.
        let mut conns = Vec::new();
        let mut silent = Vec::new();
        for _ in 0..3 {
            let mut send = h2_connect(axon.xds_addr()).await;
            silent.push(open(&mut send).await);
            conns.push(send);
        }
        assert!(reaches(&axon, "axon_pending_streams", 3.0, Duration::from_secs(10)).await);
        // Past the grace (the bound is defined by it), a real proxy's stream closes the oldest.
        tokio::time::sleep(Duration::from_millis(400)).await;
        let _proxy = real_proxy(axon.xds_addr(), "gw-real").await;
        // One of the three (the oldest: connections race to be first) is closed.
        assert!(
            reaches(
                &axon,
                "axon_rejected_streams{reason=\"max_pending_streams\"}",
                1.0,
                Duration::from_secs(5)
            )
            .await,
            "no silent stream closed"
        );
        let ends = silent.into_iter().map(|(body, response)| async move {
            let ended = tokio::time::timeout(Duration::from_secs(2), async {
                let response = response.await.expect("response headers");
                let mut data = response.into_body();
                while let Some(Ok(_)) = data.data().await {}
                let trailers = data.trailers().await.ok().flatten().unwrap_or_default();
                trailers
                    .get("grpc-status")
                    .map(|v| v.to_str().unwrap().to_string())
            })
            .await
            .ok()
            .flatten();
            (body, ended)
        });
        let ends = futures::future::join_all(ends).await;
        let closed: Vec<_> = ends.iter().filter_map(|(_, code)| code.clone()).collect();
        assert_eq!(closed, ["8"], "one closed, RESOURCE_EXHAUSTED");
        assert_eq!(
            metric(&axon, "axon_pending_streams"),
            2.0,
            "2 silent streams still wait"
        );
    });
}
