//! The validating webhook over HTTPS, as the API server calls it: `POST /validate` with the
//! AdmissionReview JSON a real API server posts for `kubectl apply` (object with its
//! server-set metadata, `managedFields`, the options), over TLS to a certificate axon's CA
//! issued; an invalid VirtualService is refused with its field's path, a valid one allowed;
//! a body past `max_webhook_request_bytes` and a wrong content type are refused.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use serde_json::{Value, json};

use crate::support::{Axon, ConfigDir};

/// An HTTPS POST over HTTP/1.1 (`Connection: close`); returns the status and body.
fn post(
    addr: SocketAddr,
    root: &std::path::Path,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, String) {
    let config = crate::support::pki::client_config(root, b"http/1.1");
    // The name the API server dials: the webhook Service's.
    let name = ServerName::try_from("istiod.istio-system.svc").unwrap();
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: istiod.istio-system.svc:443\r\nContent-Type: {content_type}\r\nAccept: application/json, */*\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).unwrap();
    let _ = tls.write_all(body);
    let mut answer = Vec::new();
    let _ = tls.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// What the API server posts for `kubectl apply` of `spec` as VirtualService shop/reviews.
fn admission_review(spec: Value) -> Vec<u8> {
    let object = json!({
        "apiVersion": "networking.istio.io/v1",
        "kind": "VirtualService",
        "metadata": {
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"networking.istio.io/v1\"}\n"
            },
            "creationTimestamp": "2026-12-06T15:00:00Z",
            "generation": 1,
            "managedFields": [{
                "apiVersion": "networking.istio.io/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {".": {}, "f:hosts": {}}},
                "manager": "kubectl-client-side-apply",
                "operation": "Update",
                "time": "2026-12-06T15:00:00Z"
            }],
            "name": "reviews",
            "namespace": "shop",
            "uid": "0d3e7b1c-9b7e-4c39-8d0b-5c8f6d2a9e41"
        },
        "spec": spec,
    });
    json!({
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": "b3f4b2a0-6c2b-4d7e-9a51-3e2f7c1d8e90",
            "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
            "resource": {"group": "networking.istio.io", "version": "v1", "resource": "virtualservices"},
            "requestKind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
            "requestResource": {"group": "networking.istio.io", "version": "v1", "resource": "virtualservices"},
            "name": "reviews",
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "kubectl-client-side-apply", "fieldValidation": "Strict"}
        }
    })
    .to_string()
    .into_bytes()
}

#[test]
fn the_webhook_refuses_an_invalid_virtual_service_with_its_path_and_allows_a_valid_one() {
    let config = ConfigDir::new();
    config.write("mesh.yaml", "");
    let ca_dir = tempfile::tempdir().unwrap();
    let ca = ca_dir.path().to_str().unwrap();
    let axon = Axon::start_with_args(
        config.path(),
        &[
            "--xds-tls-addr",
            "127.0.0.1:0",
            "--ca-dir",
            ca,
            "--webhook-addr",
            "127.0.0.1:0",
        ],
    );
    let addr = axon.webhook_addr().expect("the webhook's address");
    let root = ca_dir.path().join("root-cert.pem");

    let valid = admission_review(json!({
        "hosts": ["reviews"],
        "http": [{"route": [{"destination": {"host": "reviews", "subset": "v1"}}]}],
    }));
    let (status, body) = post(addr, &root, "/validate", "application/json", &valid);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        answer["response"]["uid"],
        "b3f4b2a0-6c2b-4d7e-9a51-3e2f7c1d8e90"
    );
    assert_eq!(answer["response"]["allowed"], true, "{answer}");

    let invalid = admission_review(json!({
        "hosts": ["reviews"],
        "http": [{"route": [{"destination": {"host": "reviews"}, "weight": 50}], "timeout": "soon"}],
    }));
    let (status, body) = post(addr, &root, "/validate", "application/json", &invalid);
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("VirtualService shop/reviews: "),
        "{message}"
    );
    assert!(
        message.contains("spec.http[0].timeout"),
        "the field's path: {message}"
    );

    let unknown = admission_review(json!({
        "hosts": ["reviews"],
        "http": [{"route": [{"destination": {"host": "reviews"}}], "retires": {"attempts": 3}}],
    }));
    let (_, body) = post(addr, &root, "/validate", "application/json", &unknown);
    let answer: Value = serde_json::from_str(&body).unwrap();
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("retires"),
        "the unknown field named: {message}"
    );

    // Bounded, and what is not an AdmissionReview is told so.
    let (status, _) = post(addr, &root, "/validate", "text/plain", &valid);
    assert_eq!(status, 415);
    let huge = vec![b' '; 5 << 20];
    let (status, _) = post(addr, &root, "/validate", "application/json", &huge);
    assert!(
        status == 413 || status == 0,
        "a body past max_webhook_request_bytes: {status}"
    );
    let (status, body) = post(
        addr,
        &root,
        "/validate",
        "application/json",
        b"{\"kind\":1}",
    );
    assert_eq!(status, 400, "{body}");
    // The other webhooks still answer.
    let (status, _) = post(addr, &root, "/validate/", "application/json", &valid);
    assert_eq!(status, 200);

    // Counted as istiod counts them.
    let metrics = axon.metrics();
    let has = |prefix: &str| metrics.lines().any(|l| l.starts_with(prefix));
    assert!(
        has(
            "galley_validation_passed{group=\"networking.istio.io\",resource=\"virtualservices\",version=\"v1\"} 2"
        ),
        "{metrics}"
    );
    assert!(
        has(
            "galley_validation_failed{group=\"networking.istio.io\",reason=\"invalid_config\",resource=\"virtualservices\",version=\"v1\"} 2"
        ),
        "{metrics}"
    );
    assert!(
        has("galley_validation_http_error{status=\"415\"} 1"),
        "{metrics}"
    );
}
