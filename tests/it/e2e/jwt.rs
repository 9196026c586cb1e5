//! End-to-end: RequestAuthentication through a real gateway Envoy, as istiod's JWT filter
//! behaves. Keys (ES256, made with ring) and tokens are the test's own; their JWKS is served
//! by a small HTTP server the test runs, which axon's resolver fetches (and, with the refresh
//! interval of the limits file at 1s, fetches again after a rotation). A valid token passes
//! and its payload and claim reach the upstream as headers; an expired one, or one of another
//! issuer, is refused with 401, one for another audience with 403 (Envoy's answer); a request without one passes (only
//! AuthorizationPolicy could refuse it); a VirtualService route on a verified claim
//! (`@request.auth.claims.group`) catches exactly the tokens with that claim.

use crate::support;
use crate::support::scenario;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use scenario::*;
use support::accept::{Acceptor, poke_at};
use support::*;

const CONVERGE: Duration = Duration::from_secs(30);
const ISSUER: &str = "https://issuer.axon.test";
const AUDIENCE: &str = "axon-test";

/// An ES256 key and its JWK.
struct Key {
    pair: EcdsaKeyPair,
    kid: String,
}

impl Key {
    fn new(kid: &str) -> Key {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .unwrap();
        Key {
            pair,
            kid: kid.to_string(),
        }
    }

    fn jwk(&self) -> serde_json::Value {
        // The uncompressed point: 0x04 | X | Y.
        let point = self.pair.public_key().as_ref();
        serde_json::json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": self.kid,
            "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65]),
        })
    }

    /// A JWT with `claims`, signed with this key.
    fn sign(&self, claims: serde_json::Value) -> String {
        let header = serde_json::json!({"alg": "ES256", "typ": "JWT", "kid": self.kid});
        let input = format!(
            "{}.{}",
            B64.encode(header.to_string()),
            B64.encode(claims.to_string())
        );
        let sig = self
            .pair
            .sign(&SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", B64.encode(sig.as_ref()))
    }
}

fn jwks(keys: &[&Key]) -> String {
    serde_json::json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims of a token valid for an hour, with `group`.
fn claims(issuer: &str, audience: &str, group: &str) -> serde_json::Value {
    serde_json::json!({
        "iss": issuer, "sub": "alice", "aud": audience, "group": group,
        "iat": now(), "exp": now() + 3600,
    })
}

/// A JWKS endpoint: answers every GET with the current key set, and counts the requests.
struct JwksServer {
    body: Arc<Mutex<String>>,
    port: u16,
    _acceptor: Acceptor,
}

impl JwksServer {
    fn start(body: String) -> JwksServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let body = Arc::new(Mutex::new(body));
        let served = body.clone();
        let acceptor = Acceptor::spawn("jwks", listener, poke_at(addr), move |conn| {
            answer(conn, &served.lock().unwrap().clone())
        });
        JwksServer {
            body,
            port: addr.port(),
            _acceptor: acceptor,
        }
    }

    fn set(&self, body: String) {
        *self.body.lock().unwrap() = body;
    }

    fn uri(&self) -> String {
        format!("http://127.0.0.1:{}/jwks.json", self.port)
    }
}

fn answer(mut conn: TcpStream, body: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
    let _ = write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

fn request_authentication(jwks_uri: &str) -> String {
    format!(
        r#"apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata:
  name: ingress-jwt
  namespace: istio-system
spec:
  selector:
    matchLabels: {{istio: ingressgateway}}
  jwtRules:
  - issuer: {ISSUER}
    audiences: [{AUDIENCE}]
    jwksUri: {jwks_uri}
    outputPayloadToHeader: x-jwt-payload
    outputClaimToHeaders:
    - {{header: x-jwt-group, claim: group}}
"#
    )
}

const ROUTES: &str = r#"apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: claims
  namespace: demo
spec:
  hosts: ["*"]
  gateways: [istio-system/ingress]
  http:
  - match: [{uri: {prefix: /claims}, headers: {"@request.auth.claims.group": {exact: admin}}}]
    route: [{destination: {host: backend.demo.svc.cluster.local, subset: v2, port: {number: 80}}}]
  - route: [{destination: {host: backend.demo.svc.cluster.local, subset: v1, port: {number: 80}}}]
"#;

#[test]
fn request_authentication_at_a_gateway_as_istiod() {
    let k1 = Key::new("k1");
    let k2 = Key::new("k2");
    let jwks_server = JwksServer::start(jwks(&[&k1]));
    let v1 = EchoUpstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", ROUTES);
    config.write("jwt.yaml", &request_authentication(&jwks_server.uri()));
    let limits_dir = tempfile::tempdir().unwrap();
    let limits = limits_dir.path().join("limits.toml");
    std::fs::write(
        &limits,
        "jwks_refresh_interval = \"1s\"\njwks_refresh_interval_on_failure = \"1s\"\n",
    )
    .unwrap();
    let axon = Axon::start_with_args(config.path(), &["--limits", limits.to_str().unwrap()]);
    let (envoy, port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let get = |path: &str, token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        http_get(Envoy::local(port), path, &headers)
    };

    // A valid token passes, once the keys were fetched (until then the policy fails closed).
    let users = k1.sign(claims(ISSUER, AUDIENCE, "users"));
    let mut last = (0, String::new());
    let fetched = wait_until(CONVERGE, || {
        last = get("/valid", Some(&users));
        last.0 == 200
    });
    assert!(
        fetched,
        "a valid token never passed: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    // Its payload and claim reach the upstream.
    let seen = v1.requests();
    let request = seen
        .iter()
        .rev()
        .find(|r| r.path == "/valid")
        .expect("recorded");
    assert_eq!(
        request.headers.get("x-jwt-group").map(String::as_str),
        Some("users")
    );
    let payload = request.headers.get("x-jwt-payload").expect("x-jwt-payload");
    let decoded: serde_json::Value =
        serde_json::from_slice(&B64.decode(payload.trim_end_matches('=')).unwrap()).unwrap();
    assert_eq!(decoded["sub"], "alice");

    // No token: passes (only an AuthorizationPolicy refuses it).
    assert_eq!(get("/none", None).0, 200);
    // Expired, another issuer, a key not in the JWKS: 401; another audience: 403 (Envoy's
    // filter answers JwtAudienceNotAllowed with 403, under istiod's config as under axon's).
    let mut expired = claims(ISSUER, AUDIENCE, "users");
    expired["exp"] = (now() - 600).into();
    expired["iat"] = (now() - 3600).into();
    let (status, body) = get("/expired", Some(&k1.sign(expired)));
    assert_eq!((status, body.as_str()), (401, "Jwt is expired"));
    let (status, body) = get(
        "/issuer",
        Some(&k1.sign(claims("https://other", AUDIENCE, "users"))),
    );
    assert_eq!(status, 401, "{body}");
    let (status, body) = get(
        "/audience",
        Some(&k1.sign(claims(ISSUER, "other", "users"))),
    );
    assert_eq!(
        (status, body.as_str()),
        (403, "Audiences in Jwt are not allowed")
    );
    let (status, _) = get("/k2", Some(&k2.sign(claims(ISSUER, AUDIENCE, "users"))));
    assert_eq!(status, 401, "a key not in the JWKS");

    // A route on a verified claim: admin's token to v2, users' and none to v1.
    let admin = k1.sign(claims(ISSUER, AUDIENCE, "admin"));
    assert_eq!(
        get("/claims", Some(&admin)),
        (200, "backend-v2".to_string())
    );
    assert_eq!(get("/claims", Some(&users)).0, 200);
    assert_eq!(get("/claims", None).0, 200);
    assert_eq!(v2.hits(), 1, "only the admin token reaches v2");

    // Rotation: the endpoint serves k2 only; the refresh picks it up and pushes.
    jwks_server.set(jwks(&[&k2]));
    let rotated = k2.sign(claims(ISSUER, AUDIENCE, "users"));
    let ok = wait_until(CONVERGE, || {
        last = get("/rotated", Some(&rotated));
        last.0 == 200
    });
    assert!(ok, "the rotated key never verified: {last:?}");
    assert_eq!(get("/old", Some(&users)).0, 401, "the old key is gone");
    assert!(
        axon.metrics().lines().any(|l| l
            .starts_with("pilot_jwks_resolver_network_fetch_success_total ")
            && !l.ends_with(" 0")),
        "fetches are counted"
    );
    // /debug/configz counts the workloads each policy applies to: the gateway has no
    // Service endpoint, so none is counted.
    let configz = axon.debug_json("/debug/configz");
    assert_eq!(
        configz["request_authentication_workloads"]["RequestAuthentication/istio-system/ingress-jwt"],
        0,
        "{configz}"
    );
    assert_no_rejected_updates(&envoy);
}

/// A sidecar's inbound traffic (a Sidecar `ingress` listener bound without capture, whose
/// chain is `virtualInbound`'s): the namespace's RequestAuthentication with inline keys puts
/// the JWT filter there too. Its outbound listeners carry none (istiod's).
#[test]
fn request_authentication_on_a_sidecars_inbound_traffic() {
    use crate::support::sidecar::{CONVERGE, NODE_A, sidecar_options};
    let k1 = Key::new("k1");
    let other = Key::new("other");
    let app = EchoUpstream::start("the-app");
    let inbound = free_port();
    let config = ConfigDir::new();
    config.write(
        "sidecar.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: a}}\nspec:\n  ingress:\n  - port: {{number: {inbound}, protocol: HTTP, name: http-in}}\n    defaultEndpoint: 127.0.0.1:{}\n    captureMode: NONE\n    bind: 127.0.0.1\n  egress: [{{hosts: [\"./*\"]}}]\n",
            app.port()
        ),
    );
    config.write(
        "jwt.yaml",
        &format!(
            "apiVersion: security.istio.io/v1beta1\nkind: RequestAuthentication\nmetadata: {{name: ns-jwt, namespace: a}}\nspec:\n  jwtRules:\n  - issuer: {ISSUER}\n    jwks: '{}'\n    fromHeaders: [{{name: x-token}}]\n    outputClaimToHeaders: [{{header: x-jwt-sub, claim: sub}}]\n",
            jwks(&[&k1])
        ),
    );
    let axon = Axon::start(config.path());
    let envoy = Envoy::start(axon.xds_addr(), sidecar_options(NODE_A, "productpage", "a"));
    let get = |path: &str, token: Option<&str>| {
        let headers: Vec<(&str, &str)> = token.iter().map(|t| ("x-token", *t)).collect();
        http_get(Envoy::local(inbound), path, &headers)
    };
    let valid = k1.sign(claims(ISSUER, AUDIENCE, "users"));
    let mut last = (0, String::new());
    assert!(
        wait_until(CONVERGE, || {
            last = get("/valid", Some(&valid));
            last.0 == 200
        }),
        "the inbound listener never passed a valid token: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    let seen = app.requests();
    let request = seen
        .iter()
        .rev()
        .find(|r| r.path == "/valid")
        .expect("recorded");
    assert_eq!(
        request.headers.get("x-jwt-sub").map(String::as_str),
        Some("alice")
    );
    assert_eq!(get("/none", None).0, 200);
    let (status, body) = get(
        "/forged",
        Some(&other.sign(claims(ISSUER, AUDIENCE, "users"))),
    );
    assert_eq!(status, 401, "{body}");
    assert_no_rejected_updates(&envoy);
}

/// A RequestAuthentication with an AuthorizationPolicy on `requestPrincipals` at a gateway,
/// as istio.io's "require a valid token": a token of `ISSUER/alice` passes, a request without
/// one is refused with 403 `RBAC: access denied`, and one whose claim a `when` condition
/// refuses too.
#[test]
fn request_principals_require_a_valid_token() {
    let k1 = Key::new("k1");
    let jwks_server = JwksServer::start(jwks(&[&k1]));
    let v1 = EchoUpstream::start("backend-v1");
    let v2 = Upstream::start("backend-v2");
    let gw_port = free_port();
    let config = ConfigDir::new();
    config.write("gateway.yaml", &gateway_yaml(gw_port));
    config.write("backend.yaml", &backend_yaml(v1.port(), v2.port()));
    config.write("routes.yaml", ROUTES);
    config.write("jwt.yaml", &request_authentication(&jwks_server.uri()));
    config.write(
        "authz.yaml",
        &format!(
            "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: require-jwt, namespace: istio-system}}\nspec:\n  selector: {{matchLabels: {{istio: ingressgateway}}}}\n  rules:\n  - from: [{{source: {{requestPrincipals: ['{ISSUER}/*']}}}}]\n    when: [{{key: 'request.auth.claims[group]', notValues: [blocked]}}]\n"
        ),
    );
    let axon = Axon::start(config.path());
    let (envoy, port) = start_gateway_listening(&axon, &config, gw_port, CONVERGE);
    let get = |token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        http_get(Envoy::local(port), "/", &headers)
    };
    let alice = k1.sign(claims(ISSUER, AUDIENCE, "users"));
    let mut last = (0, String::new());
    let ok = wait_until(CONVERGE, || {
        last = get(Some(&alice));
        last.0 == 200
    });
    assert!(
        ok,
        "a valid token never passed: {last:?}\n{}",
        describe_envoy(&envoy)
    );
    assert_eq!(get(None), (403, "RBAC: access denied".to_string()));
    let blocked = k1.sign(claims(ISSUER, AUDIENCE, "blocked"));
    assert_eq!(get(Some(&blocked)).0, 403);
    assert_no_rejected_updates(&envoy);
}
