//! Writes the committed seed corpora, `fuzz/seeds/<target>/`, from the repository's tests:
//!
//! - `yaml`: `config/demo/*.yaml`, and the Istio YAML string literals of the unit and
//!   integration tests (`src/**/*.rs`, `tests/*.rs`: literals holding `apiVersion:`, `{{`
//!   of `format!` templates unescaped, placeholders left as they are).
//! - `requests`: prost-encoded, gRPC-framed `DiscoveryRequest`s and `DeltaDiscoveryRequest`s
//!   like those of `src/xds/decode.rs`, `src/xds/wire.rs` and the stream tests.
//! - `stream`: the scenarios of `src/xds/stream/tests.rs` in the stream target's format.
//! - `kube`: watch-event scripts of the objects of `tests/it/support/fake_kube.rs`,
//!   `tests/it/kube/fake_api.rs` and the index tests.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example
//! write-seeds`. It replaces the four directories and prints what each seed did.

use std::fs;
use std::path::{Path, PathBuf};

use axon_fuzz::stream_input::{Initial, Input, Name, Node, Nonce, Op, Req, TypeUrl, Version};
use axon_xds::resource::ResourceType;
use envoy_types::pb::envoy::config::core::v3::Node as PbNode;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use serde_json::{Value, json};

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let seeds = root.join("fuzz/seeds");
    write(&seeds.join("yaml"), yaml_seeds(&root));
    write(&seeds.join("requests"), request_seeds());
    let stream = stream_seeds();
    for (name, input) in &stream {
        println!("stream/{name}: {:?}", axon_fuzz::stream_input::run(input));
    }
    write(
        &seeds.join("stream"),
        stream.into_iter().map(|(n, i)| (n, i.encode())).collect(),
    );
    let kube = kube_seeds();
    for (name, script) in &kube {
        println!("kube/{name}: {:?}", axon_fuzz::kube_script::run(script));
    }
    write(
        &seeds.join("kube"),
        kube.into_iter().map(|(n, s)| (n, s.into_bytes())).collect(),
    );
}

/// Replaces the generated seeds of one target (a seed kept from a finding, `crash-*` or
/// `found-*`, stays).
fn write(dir: &Path, seeds: Vec<(String, Vec<u8>)>) {
    fs::create_dir_all(dir).unwrap();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("crash-") && !name.starts_with("found-") {
            fs::remove_file(&path).unwrap();
        }
    }
    for (name, bytes) in &seeds {
        fs::write(dir.join(name), bytes).unwrap();
    }
    println!("{}: {} seeds", dir.display(), seeds.len());
}

// ---- yaml ---------------------------------------------------------------------------------

fn yaml_seeds(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut demo: Vec<PathBuf> = fs::read_dir(root.join("config/demo"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    demo.sort();
    for path in demo {
        let name = format!("demo-{}", path.file_name().unwrap().to_string_lossy());
        out.push((name, fs::read(&path).unwrap()));
    }
    let mut sources = Vec::new();
    rust_files(&root.join("src"), &mut sources);
    rust_files(&root.join("tests"), &mut sources);
    sources.sort();
    let mut seen = std::collections::BTreeSet::new();
    for path in sources {
        let text = fs::read_to_string(&path).unwrap();
        let stem = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace(['/', '.'], "_");
        for (i, lit) in string_literals(&text).into_iter().enumerate() {
            if !lit.contains("apiVersion:") || lit.len() < 60 || !seen.insert(lit.clone()) {
                continue;
            }
            let lit = fill_placeholders(&lit)
                .replace("{{", "{")
                .replace("}}", "}");
            out.push((format!("{stem}-{i}.yaml"), lit.into_bytes()));
        }
    }
    // At most a few dozen: the demo files, then the literals in path order, evenly thinned.
    let keep = 40;
    if out.len() > keep {
        let step = out.len() as f64 / keep as f64;
        out = (0..keep)
            .map(|i| out[(i as f64 * step) as usize].clone())
            .collect();
    }
    out
}

/// A `format!` template's placeholders (`{name}`, `{ns}`, ...) as plausible values; `{{`
/// and `}}` are left for the caller to unescape.
fn fill_placeholders(template: &str) -> String {
    let value = |p: &str| match p {
        "ns" | "namespace" => "shop",
        "ip" | "addr" | "a_ip" => "10.0.0.1",
        "host" => "a.shop.svc.cluster.local",
        p if p.contains("port") || p.contains("weight") => "80",
        _ => "a",
    };
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(tail) = after.strip_prefix('{') {
            out.push_str("{{");
            rest = tail;
            continue;
        }
        let ident = after
            .find('}')
            .map(|close| &after[..close])
            .filter(|i| !i.is_empty() && i.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
        match ident {
            Some(ident) => {
                out.push_str(value(ident));
                rest = &after[ident.len() + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The string literals of Rust source, unescaped: `"..."` (with `\n`, `\t`, `\"`, `\\`,
/// `\'` and line continuations) and raw `r"..."` / `r#"..."#`. Enough for the tests' YAML.
fn string_literals(src: &str) -> Vec<String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '\'' {
            // A char literal ('"', '\n') or a lifetime: skip the quoted char if there is one.
            if chars.get(i + 1) == Some(&'\\') {
                i += 4;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c == 'r' && matches!(chars.get(i + 1), Some('"' | '#')) {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                i += 1;
                continue;
            }
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            let rest: String = chars[j + 1..].iter().collect();
            match rest.find(&close) {
                Some(end) => {
                    out.push(rest[..end].to_string());
                    i = j + 1 + rest[..end].chars().count() + close.len();
                }
                None => break,
            }
        } else if c == '"' {
            let mut s = String::new();
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                    match chars.get(i) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some('\n') => {
                            while chars.get(i + 1).is_some_and(|c| c.is_whitespace()) {
                                i += 1;
                            }
                        }
                        Some(&other) => s.push(other),
                        None => {}
                    }
                } else {
                    s.push(chars[i]);
                }
                i += 1;
            }
            out.push(s);
            i += 1;
        } else {
            i += 1;
        }
    }
    out
}

// ---- requests -------------------------------------------------------------------------

const EDS_URL: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const CDS_URL: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const NODE: &str = "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local";

fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// A seed: the mode byte (Delta or not), the chunk size byte, the framed messages.
fn body(delta: bool, chunk: u8, messages: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![u8::from(delta), chunk];
    for m in messages {
        out.extend(frame(m));
    }
    out
}

fn sotw(nonce: &str, version: &str, names: &[&str], node: bool, error: bool) -> Vec<u8> {
    DiscoveryRequest {
        version_info: version.into(),
        type_url: EDS_URL.into(),
        response_nonce: nonce.into(),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        node: node.then(|| PbNode {
            id: NODE.into(),
            cluster: "c".into(),
            ..Default::default()
        }),
        error_detail: error.then(|| Status {
            code: 3,
            message: "bad".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

fn request_seeds() -> Vec<(String, Vec<u8>)> {
    let first = sotw("", "", &["a", "b"], true, false);
    let ack = sotw("1-1", "1", &["a", "b"], false, false);
    let nack = sotw("1-1", "1", &["a", "b"], false, true);
    let many: Vec<String> = (0..100).map(|i| format!("cluster-{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let big = sotw("", "", &many, true, false);
    let cds = DiscoveryRequest {
        type_url: CDS_URL.into(),
        node: Some(PbNode {
            id: NODE.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let unknown = DiscoveryRequest {
        type_url: "type.googleapis.com/some.Unknown".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let delta_first = DeltaDiscoveryRequest {
        node: Some(PbNode {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: EDS_URL.into(),
        resource_names_subscribe: vec!["a".into(), "b".into()],
        initial_resource_versions: [("a".to_string(), "0000000000000000".to_string())].into(),
        ..Default::default()
    }
    .encode_to_vec();
    let delta_ack = DeltaDiscoveryRequest {
        type_url: EDS_URL.into(),
        response_nonce: "1-1".into(),
        resource_names_unsubscribe: vec!["a".into()],
        error_detail: Some(Status {
            code: 3,
            message: "rejected".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec();
    let mut truncated = frame(&first);
    truncated.truncate(truncated.len() - 3);
    let mut compressed = frame(&ack);
    compressed[0] = 1;
    vec![
        (
            "sotw-first.bin".into(),
            body(false, 0, std::slice::from_ref(&first)),
        ),
        (
            "sotw-first-ack-nack.bin".into(),
            body(false, 6, &[first.clone(), ack.clone(), nack]),
        ),
        ("sotw-100-names.bin".into(), body(false, 63, &[big])),
        (
            "sotw-cds-unknown.bin".into(),
            body(false, 1, &[cds, unknown]),
        ),
        ("sotw-empty.bin".into(), body(false, 0, &[Vec::new()])),
        (
            "sotw-truncated.bin".into(),
            [vec![0, 9], truncated].concat(),
        ),
        (
            "sotw-compressed.bin".into(),
            [vec![0, 9], compressed].concat(),
        ),
        (
            "delta-first-ack.bin".into(),
            body(true, 4, &[delta_first, delta_ack]),
        ),
        (
            "delta-as-sotw.bin".into(),
            body(false, 0, &[sotw("n", "v", &["x"], true, true)]),
        ),
    ]
}

// ---- stream -------------------------------------------------------------------------------

const CDS: ResourceType = ResourceType::Cluster;
const EDS: ResourceType = ResourceType::Endpoint;
const LDS: ResourceType = ResourceType::Listener;
const RDS: ResourceType = ResourceType::Route;
/// Indexes into `stream_input::NAMES`.
const A: Name = Name::Known(0);
const B: Name = Name::Known(1);
const ROUTE: Name = Name::Known(3);

fn first(t: ResourceType) -> Req {
    Req {
        node: Node::Known(0),
        ..Req::of(t)
    }
}

fn sub(t: ResourceType, names: Vec<Name>) -> Req {
    Req {
        names,
        ..Req::of(t)
    }
}

fn ack(t: ResourceType, names: Vec<Name>) -> Req {
    Req {
        names,
        nonce: Nonce::LastOfType,
        version: Version::LastOfType,
        ..Req::of(t)
    }
}

fn rq(r: Req) -> Op {
    Op::Request(r)
}

/// Subscribe and ACK CDS, EDS (a, b), LDS, RDS, as Envoy does.
fn synced() -> Vec<Op> {
    let mut ops = Vec::new();
    for (t, names) in [
        (CDS, vec![]),
        (EDS, vec![A, B]),
        (LDS, vec![]),
        (RDS, vec![ROUTE]),
    ] {
        ops.push(rq(sub(t, names.clone())));
        ops.push(rq(ack(t, names)));
    }
    ops
}

fn stream_seeds() -> Vec<(String, Input)> {
    let input = |delta, context_first, first, ops| Input {
        delta,
        context_first,
        first,
        ops,
    };
    let mut seeds = Vec::new();
    for delta in [false, true] {
        let p = if delta { "delta" } else { "sotw" };
        seeds.push((
            format!("{p}-synced-then-pushes.bin"),
            input(
                delta,
                true,
                first(CDS),
                [
                    synced(),
                    vec![Op::Push, rq(ack(EDS, vec![A, B])), Op::Push],
                    synced(),
                    vec![Op::Push, Op::Push, Op::Push, Op::Push, Op::Push],
                ]
                .concat(),
            ),
        ));
        seeds.push((
            format!("{p}-before-the-first-context.bin"),
            input(
                delta,
                false,
                first(CDS),
                vec![rq(sub(EDS, vec![A])), Op::Push, rq(ack(CDS, vec![]))],
            ),
        ));
        let stale = Req {
            nonce: Nonce::Junk("1-999".into()),
            ..sub(EDS, vec![A, B])
        };
        let nack = Req {
            error: Some("rejected".into()),
            ..ack(EDS, vec![A])
        };
        seeds.push((
            format!("{p}-ack-stale-nack-more.bin"),
            input(
                delta,
                true,
                first(EDS),
                vec![
                    rq(ack(EDS, vec![A])),
                    rq(stale),
                    rq(nack),
                    rq(ack(EDS, vec![A, B])),
                ],
            ),
        ));
        seeds.push((
            format!("{p}-always-respond-eds.bin"),
            input(
                delta,
                true,
                first(EDS),
                vec![
                    rq(sub(CDS, vec![])),
                    rq(ack(EDS, vec![A])),
                    rq(ack(EDS, vec![A])),
                ],
            ),
        ));
        let reconnect = Req {
            nonce: Nonce::Junk("7-42".into()),
            version: Version::Junk("7".into()),
            ..first(CDS)
        };
        seeds.push((
            format!("{p}-reconnect.bin"),
            input(delta, true, reconnect, vec![]),
        ));
        let unknown = Req {
            type_url: TypeUrl::Junk("type.googleapis.com/some.Unknown".into()),
            ..Req::of(CDS)
        };
        seeds.push((
            format!("{p}-unknown-type.bin"),
            input(
                delta,
                true,
                first(CDS),
                vec![rq(ack(CDS, vec![])), rq(unknown.clone()), rq(unknown)],
            ),
        ));
        let router = Req {
            node: Node::Known(1),
            ..Req::of(LDS)
        };
        seeds.push((
            format!("{p}-router.bin"),
            input(
                delta,
                true,
                router,
                vec![
                    rq(sub(CDS, vec![])),
                    rq(sub(RDS, vec![Name::Known(4)])),
                    Op::Push,
                    Op::Push,
                ],
            ),
        ));
    }
    let unsubscribe = Req {
        unsubscribe: vec![A],
        ..ack(EDS, vec![])
    };
    seeds.push((
        "delta-subscribe-unsubscribe.bin".into(),
        input(
            true,
            true,
            Req {
                names: vec![A],
                ..first(EDS)
            },
            vec![
                rq(Req {
                    nonce: Nonce::LastOfType,
                    ..sub(EDS, vec![B])
                }),
                rq(unsubscribe),
            ],
        ),
    ));
    let with_versions = Req {
        names: vec![A, B],
        initial: vec![
            (A, Initial::LastSent),
            (B, Initial::Junk("0000000000000000".into())),
        ],
        ..first(EDS)
    };
    seeds.push((
        "delta-initial-versions.bin".into(),
        input(true, true, with_versions, vec![]),
    ));
    seeds.push((
        "bad-node.bin".into(),
        input(
            false,
            true,
            Req {
                node: Node::Junk("not-an-istio-id".into()),
                ..Req::of(CDS)
            },
            vec![],
        ),
    ));
    seeds
}

// ---- kube -------------------------------------------------------------------------------

fn line(op: &str, kind: &str, object: &Value) -> String {
    format!("{op} {kind} {object}\n")
}

fn namespace(name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn service(ns: &str, name: &str, ports: &[(&str, u16)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p, "protocol": "TCP", "targetPort": p}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": name, "namespace": ns},
           "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ports": ports}})
}

fn pod(ns: &str, name: &str, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": labels},
           "spec": {"serviceAccountName": "default", "containers": [{"name": "app", "image": "app"}]},
           "status": {"phase": "Running", "podIP": "127.0.0.1"}})
}

fn slice(ns: &str, name: &str, svc: &str, port: (&str, u16), eps: &[(&str, &str)]) -> Value {
    let eps: Vec<Value> = eps
        .iter()
        .map(|(addr, pod)| {
            json!({"addresses": [addr], "conditions": {"ready": true}, "zone": "z1",
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": pod}})
        })
        .collect();
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
           "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
           "addressType": "IPv4",
           "ports": [{"name": port.0, "port": port.1, "protocol": "TCP"}],
           "endpoints": eps})
}

const V1: &str = "networking.istio.io/v1";

fn istio(op: &str, kind: &str, object: Value) -> String {
    format!("{op} {kind} {V1} {object}\n")
}

fn gateway() -> Value {
    json!({"metadata": {"name": "ingress", "namespace": "istio-system"},
           "spec": {"selector": {"istio": "ingressgateway"},
                    "servers": [{"port": {"number": 8080, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}})
}

fn destination_rule() -> Value {
    json!({"metadata": {"name": "backend", "namespace": "demo"},
           "spec": {"host": "backend", "subsets": [{"name": "v1", "labels": {"version": "v1"}},
                                                   {"name": "v2", "labels": {"version": "v2"}}]}})
}

fn virtual_service(subset: &str) -> Value {
    let host = "backend.demo.svc.cluster.local";
    json!({"metadata": {"name": "backend", "namespace": "demo", "resourceVersion": "1"},
           "spec": {"hosts": ["*"], "gateways": ["istio-system/ingress"],
                    "http": [{"match": [{"headers": {"x-version": {"exact": "v2"}}}],
                              "route": [{"destination": {"host": host, "subset": "v2"}}]},
                             {"route": [{"destination": {"host": host, "subset": subset}}]}]},
           "status": {"observedGeneration": 1}})
}

/// The fake cluster of `tests/it/kube/fake_api.rs`, listed (init, list, done) per kind.
fn demo_cluster(watch: bool) -> String {
    let op = if watch { "apply" } else { "list" };
    let mut s = String::from("selector mesh=on\n");
    let kinds = [
        (
            "ns",
            vec![
                namespace("demo", &[("mesh", "on")]),
                namespace("istio-system", &[("mesh", "on")]),
                namespace("other", &[]),
            ],
        ),
        (
            "svc",
            vec![
                service("demo", "backend", &[("http", 80)]),
                service("other", "secret", &[("http", 80)]),
            ],
        ),
        (
            "pod",
            vec![
                pod(
                    "demo",
                    "backend-v1",
                    &[
                        ("app", "backend"),
                        ("version", "v1"),
                        ("topology.kubernetes.io/region", "r1"),
                    ],
                ),
                pod(
                    "demo",
                    "backend-v2",
                    &[
                        ("app", "backend"),
                        ("version", "v2"),
                        ("istio-locality", "r.z.s"),
                    ],
                ),
            ],
        ),
        (
            "slice",
            vec![
                slice(
                    "demo",
                    "backend-v1",
                    "backend",
                    ("http", 8081),
                    &[("127.0.0.1", "backend-v1")],
                ),
                slice(
                    "demo",
                    "backend-v2",
                    "backend",
                    ("http", 8082),
                    &[("127.0.0.2", "backend-v2")],
                ),
                slice(
                    "other",
                    "secret",
                    "secret",
                    ("http", 8081),
                    &[("127.0.0.1", "s")],
                ),
            ],
        ),
    ];
    for (kind, objects) in kinds {
        if !watch {
            s += &format!("init {kind}\n");
        }
        for o in &objects {
            s += &line(op, kind, o);
        }
        if !watch {
            s += &format!("done {kind}\n");
        }
    }
    for (kind, object) in [
        ("Gateway", gateway()),
        ("DestinationRule", destination_rule()),
        ("VirtualService", virtual_service("v1")),
    ] {
        if !watch {
            s += &format!("init {kind}\n");
        }
        s += &istio(op, kind, object);
        if !watch {
            s += &format!("done {kind}\n");
        }
    }
    s + "push\n"
}

fn kube_seeds() -> Vec<(String, String)> {
    let mut seeds = vec![
        ("demo-cluster-listed.txt".to_string(), demo_cluster(false)),
        ("demo-cluster-watched.txt".to_string(), demo_cluster(true)),
    ];
    // Pods change labels, a slice loses its endpoint, the namespace stops matching.
    let mut changes = demo_cluster(false);
    changes += &line(
        "apply",
        "pod",
        &pod(
            "demo",
            "backend-v1",
            &[("app", "backend"), ("version", "v3")],
        ),
    );
    changes += &line(
        "apply",
        "slice",
        &slice("demo", "backend-v1", "backend", ("http", 8081), &[]),
    );
    changes += &istio("apply", "VirtualService", virtual_service("v2"));
    changes += &line("delete", "pod", &pod("demo", "backend-v2", &[]));
    changes += "push\n";
    changes += &line("apply", "ns", &namespace("demo", &[]));
    changes += "delete VirtualService demo backend\npush\n";
    seeds.push(("demo-cluster-changes.txt".into(), changes));
    // Headless, ExternalName, publishNotReadyAddresses, exportTo, IPv6, no selector.
    let mut shapes = String::new();
    shapes += &line(
        "apply",
        "svc",
        &json!({"metadata": {"name": "h", "namespace": "shop"},
        "spec": {"clusterIP": "None", "ports": [{"name": "grpc", "port": 9090, "appProtocol": "grpc"}]}}),
    );
    shapes += &line(
        "apply",
        "svc",
        &json!({"metadata": {"name": "ext", "namespace": "shop",
            "annotations": {"networking.istio.io/exportTo": ".,istio-system"}},
        "spec": {"type": "ExternalName", "externalName": "example.com", "ports": [{"name": "https", "port": 443}]}}),
    );
    shapes += &line(
        "apply",
        "svc",
        &json!({"metadata": {"name": "nr", "namespace": "shop"},
        "spec": {"clusterIP": "fd00::10", "clusterIPs": ["fd00::10", "10.0.0.9"], "publishNotReadyAddresses": true,
                 "ports": [{"name": "tcp-db", "port": 5432, "targetPort": "db"}, {"port": 0}, {"port": 70000}]}}),
    );
    shapes += &line(
        "apply",
        "slice",
        &json!({"metadata": {"name": "nr-1", "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "nr"}},
        "addressType": "IPv6",
        "ports": [{"name": "tcp-db", "port": 15432}],
        "endpoints": [{"addresses": ["fd00::1"], "conditions": {"ready": false}},
                      {"addresses": ["fd00::2"], "targetRef": {"kind": "Pod", "name": "db-0"}}]}),
    );
    shapes += &line(
        "apply",
        "slice",
        &json!({"metadata": {"name": "fqdn", "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "h"}},
        "addressType": "FQDN", "endpoints": [{"addresses": ["a.example.com"]}]}),
    );
    shapes += &line(
        "apply",
        "pod",
        &json!({"metadata": {"name": "db-0", "namespace": "shop",
        "labels": {"app": "db", "topology.istio.io/subzone": "s1"}}, "spec": {"serviceAccountName": "db", "containers": []}}),
    );
    shapes += "push\n";
    shapes += &line(
        "delete",
        "svc",
        &json!({"metadata": {"name": "h", "namespace": "shop"}}),
    );
    shapes += "push\n";
    seeds.push(("service-shapes.txt".into(), shapes));
    // The Istio index: an invalid update keeps the last good version; a relist.
    let mut istio_seed = String::new();
    let vs = |name: &str, host: &str| {
        json!({"metadata": {"name": name, "namespace": "shop", "resourceVersion": "1"},
               "spec": {"hosts": [host], "http": [{"route": [{"destination": {"host": host}}]}]}})
    };
    istio_seed += &istio("apply", "VirtualService", vs("r", "reviews"));
    istio_seed += &istio(
        "apply",
        "VirtualService",
        json!({"metadata": {"name": "r", "namespace": "shop"},
        "spec": {"hosts": "reviews", "http": [{"route": []}]}}),
    );
    istio_seed += &istio(
        "apply",
        "VirtualService",
        json!({"metadata": {"name": "n", "namespace": "shop"}}),
    );
    istio_seed += "init VirtualService\n";
    istio_seed += &istio("list", "VirtualService", vs("a", "a"));
    istio_seed += &istio("list", "VirtualService", vs("d", "d"));
    istio_seed += "done VirtualService\n";
    istio_seed += &format!("apply Gateway networking.istio.io/v1beta1 {}\n", gateway());
    istio_seed += &format!(
        "apply ServiceEntry networking.istio.io/v1alpha3 {}\n",
        json!({
        "metadata": {"name": "se", "namespace": "shop"},
        "spec": {"hosts": ["db.example.com"], "location": "MESH_EXTERNAL", "resolution": "DNS",
                 "ports": [{"number": 5432, "name": "tcp", "protocol": "TCP"}]}})
    );
    istio_seed += &format!(
        "apply Sidecar networking.istio.io/v2 {}\n",
        json!({
        "metadata": {"name": "default", "namespace": "shop"}, "spec": {"egress": [{"hosts": ["./*"]}]}})
    );
    istio_seed += "delete VirtualService shop n\npush\n";
    seeds.push(("istio-objects.txt".into(), istio_seed));
    seeds
}
