//! The stream target's input: a stream's first request, whether the first context arrives
//! before anything else, then requests and pushes in any order; and [`run`], which drives a
//! [`StreamState`] through them as the ConnectionActor does and checks what must always hold.
//!
//! Requests are structured: type URLs of the four served types or junk, resource names from
//! the names the contexts have (or junk), nonces that answer an earlier response (or junk),
//! versions, NACK details, nodes. Byte format, one field at a time (a missing byte reads 0):
//!
//! ```text
//! input    flags (bit 0: Delta, bit 1: the first context before the ops), request, op*
//! op       byte % 4 == 3: a push (the next step of the context chain), else a request
//! request  type nonce version error node n names*(n % 9) n unsubscribe*(n % 5)
//!          n (name initial-version)*(n % 5)
//! type     byte % 5 < 4: that served type, else junk text
//! name     byte < 0xF0: NAMES[byte % len], else junk text
//! nonce    byte % 5: empty, last of this type, last of any type, earlier (byte), junk text
//! version  byte % 3: empty, the last sent of this type, junk text
//! error    0: none, else text
//! node     0: none, 0xFF: junk id text, else NODES[(byte - 1) % len]
//! initial  byte % 2: the version last sent of that name, junk text
//! text     length byte % 33, then that many bytes (lossy UTF-8)
//! ```

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use axon_model::proxy::NodeInfo;
use axon_xds::protocol::stream::{Output, Protocol, StreamState};
use axon_xds::resource::{DeltaRequest, Request, ResourceType, Response, XdsRequest};

use crate::contexts;

/// Node ids a real proxy could have; the router's labels select the contexts' Gateway.
pub const NODES: &[(&str, &[(&str, &str)])] = &[
    ("sidecar~10.1.1.1~pod-1.shop~shop.svc.cluster.local", &[]),
    (
        "router~10.1.1.2~gw-1.istio-system~istio-system.svc.cluster.local",
        &[("istio", "ingressgateway")],
    ),
    ("sidecar~10.1.1.3~pod-2.other~other.svc.cluster.local", &[]),
];

/// Resource names the contexts generate, and a few near misses.
pub const NAMES: &[&str] = &[
    "outbound|9080||a.shop.svc.cluster.local",
    "outbound|9080||b.shop.svc.cluster.local",
    "outbound|9080||c.shop.svc.cluster.local",
    "9080",
    "http.8080",
    "BlackHoleCluster",
    "PassthroughCluster",
    "virtualOutbound",
    "virtualInbound",
    "0.0.0.0_9080",
    "*",
    "",
];

#[derive(Debug, Clone, PartialEq)]
pub enum TypeUrl {
    Known(ResourceType),
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Name {
    Known(u8),
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Nonce {
    Empty,
    LastOfType,
    LastOfAny,
    Earlier(u8),
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Version {
    Empty,
    LastOfType,
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Absent,
    Known(u8),
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub enum Initial {
    LastSent,
    Junk(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Req {
    pub type_url: TypeUrl,
    pub nonce: Nonce,
    pub version: Version,
    pub error: Option<String>,
    pub node: Node,
    pub names: Vec<Name>,
    pub unsubscribe: Vec<Name>,
    pub initial: Vec<(Name, Initial)>,
}

impl Req {
    /// A request of a served type with nothing else set.
    pub fn of(t: ResourceType) -> Req {
        Req {
            type_url: TypeUrl::Known(t),
            nonce: Nonce::Empty,
            version: Version::Empty,
            error: None,
            node: Node::Absent,
            names: Vec::new(),
            unsubscribe: Vec::new(),
            initial: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Request(Req),
    Push,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    pub delta: bool,
    pub context_first: bool,
    pub first: Req,
    pub ops: Vec<Op>,
}

// ---- Decoding ------------------------------------------------------------------------

fn byte(u: &mut Unstructured) -> arbitrary::Result<u8> {
    u8::arbitrary(u)
}

fn text(u: &mut Unstructured) -> arbitrary::Result<String> {
    let len = (byte(u)? % 33) as usize;
    let bytes = u.bytes(len.min(u.len()))?;
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

fn name(u: &mut Unstructured) -> arbitrary::Result<Name> {
    let b = byte(u)?;
    Ok(if b < 0xF0 {
        Name::Known(b % NAMES.len() as u8)
    } else {
        Name::Junk(text(u)?)
    })
}

fn req(u: &mut Unstructured) -> arbitrary::Result<Req> {
    let t = byte(u)?;
    let type_url = if t % 5 < 4 {
        TypeUrl::Known(ResourceType::PUSH_ORDER[(t % 5) as usize])
    } else {
        TypeUrl::Junk(text(u)?)
    };
    let nonce = match byte(u)? % 5 {
        0 => Nonce::Empty,
        1 => Nonce::LastOfType,
        2 => Nonce::LastOfAny,
        3 => Nonce::Earlier(byte(u)?),
        _ => Nonce::Junk(text(u)?),
    };
    let version = match byte(u)? % 3 {
        0 => Version::Empty,
        1 => Version::LastOfType,
        _ => Version::Junk(text(u)?),
    };
    let error = match byte(u)? {
        0 => None,
        _ => Some(text(u)?),
    };
    let node = match byte(u)? {
        0 => Node::Absent,
        0xFF => Node::Junk(text(u)?),
        b => Node::Known((b - 1) % NODES.len() as u8),
    };
    let mut names = Vec::new();
    for _ in 0..byte(u)? % 9 {
        names.push(name(u)?);
    }
    let mut unsubscribe = Vec::new();
    for _ in 0..byte(u)? % 5 {
        unsubscribe.push(name(u)?);
    }
    let mut initial = Vec::new();
    for _ in 0..byte(u)? % 5 {
        let n = name(u)?;
        let v = match byte(u)? % 2 {
            0 => Initial::LastSent,
            _ => Initial::Junk(text(u)?),
        };
        initial.push((n, v));
    }
    Ok(Req {
        type_url,
        nonce,
        version,
        error,
        node,
        names,
        unsubscribe,
        initial,
    })
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let flags = byte(u)?;
        let first = req(u)?;
        let mut ops = Vec::new();
        while !u.is_empty() {
            ops.push(match byte(u)? % 4 {
                3 => Op::Push,
                _ => Op::Request(req(u)?),
            });
        }
        Ok(Input {
            delta: flags & 1 != 0,
            context_first: flags & 2 != 0,
            first,
            ops,
        })
    }
}

// ---- Encoding (the seed writer) -------------------------------------------------------

fn put_text(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(32)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_name(out: &mut Vec<u8>, n: &Name) {
    match n {
        Name::Known(i) => out.push(*i),
        Name::Junk(s) => {
            out.push(0xF0);
            put_text(out, s);
        }
    }
}

fn put_req(out: &mut Vec<u8>, r: &Req) {
    match &r.type_url {
        TypeUrl::Known(t) => out.push(
            ResourceType::PUSH_ORDER
                .iter()
                .position(|x| x == t)
                .unwrap() as u8,
        ),
        TypeUrl::Junk(s) => {
            out.push(4);
            put_text(out, s);
        }
    }
    match &r.nonce {
        Nonce::Empty => out.push(0),
        Nonce::LastOfType => out.push(1),
        Nonce::LastOfAny => out.push(2),
        Nonce::Earlier(i) => out.extend([3, *i]),
        Nonce::Junk(s) => {
            out.push(4);
            put_text(out, s);
        }
    }
    match &r.version {
        Version::Empty => out.push(0),
        Version::LastOfType => out.push(1),
        Version::Junk(s) => {
            out.push(2);
            put_text(out, s);
        }
    }
    match &r.error {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_text(out, s);
        }
    }
    match &r.node {
        Node::Absent => out.push(0),
        Node::Known(i) => out.push(i + 1),
        Node::Junk(s) => {
            out.push(0xFF);
            put_text(out, s);
        }
    }
    out.push(r.names.len() as u8);
    r.names.iter().for_each(|n| put_name(out, n));
    out.push(r.unsubscribe.len() as u8);
    r.unsubscribe.iter().for_each(|n| put_name(out, n));
    out.push(r.initial.len() as u8);
    for (n, v) in &r.initial {
        put_name(out, n);
        match v {
            Initial::LastSent => out.push(0),
            Initial::Junk(s) => {
                out.push(1);
                put_text(out, s);
            }
        }
    }
}

impl Input {
    /// The bytes that decode to this input (names, lists and texts within the format's
    /// bounds).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![u8::from(self.delta) | (u8::from(self.context_first) << 1)];
        put_req(&mut out, &self.first);
        for op in &self.ops {
            match op {
                Op::Push => out.push(3),
                Op::Request(r) => {
                    out.push(0);
                    put_req(&mut out, r);
                }
            }
        }
        out
    }
}

// ---- Running ----------------------------------------------------------------------------

/// What the stream sent, to resolve the next requests' nonces and versions.
#[derive(Default)]
struct History {
    /// Every nonce sent, in order, with its type URL.
    nonces: Vec<(String, String)>,
    /// The last (nonce, version) sent per type URL.
    last: BTreeMap<String, (String, String)>,
    /// The last version sent per resource name (Delta).
    versions: BTreeMap<String, String>,
    seen: HashSet<String>,
}

/// What a run did, for the seed writer's report.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub connected: bool,
    pub responses: usize,
    pub resources: usize,
}

fn name_str(n: &Name) -> String {
    match n {
        Name::Known(i) => NAMES[*i as usize % NAMES.len()].to_string(),
        Name::Junk(s) => s.clone(),
    }
}

fn build(r: &Req, delta: bool, h: &History) -> Request {
    let type_url = match &r.type_url {
        TypeUrl::Known(t) => t.url(),
        TypeUrl::Junk(s) => s.clone(),
    };
    let last = h.last.get(&type_url);
    let response_nonce = match &r.nonce {
        Nonce::Empty => String::new(),
        Nonce::LastOfType => last.map(|l| l.0.clone()).unwrap_or_default(),
        Nonce::LastOfAny => h.nonces.last().map(|n| n.1.clone()).unwrap_or_default(),
        Nonce::Earlier(i) => match h.nonces.len() {
            0 => String::new(),
            n => h.nonces[*i as usize % n].1.clone(),
        },
        Nonce::Junk(s) => s.clone(),
    };
    let version_info = match &r.version {
        Version::Empty => String::new(),
        Version::LastOfType => last.map(|l| l.1.clone()).unwrap_or_default(),
        Version::Junk(s) => s.clone(),
    };
    let node = match &r.node {
        Node::Absent => None,
        Node::Known(i) => {
            let (id, labels) = NODES[*i as usize % NODES.len()];
            Some(NodeInfo {
                id: id.to_string(),
                labels: labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            })
        }
        Node::Junk(id) => Some(NodeInfo {
            id: id.clone(),
            ..Default::default()
        }),
    };
    let names: Vec<String> = r.names.iter().map(name_str).collect();
    if delta {
        Request::Delta(DeltaRequest {
            type_url,
            subscribe: names,
            unsubscribe: r.unsubscribe.iter().map(name_str).collect(),
            initial_versions: r
                .initial
                .iter()
                .map(|(n, v)| {
                    let n = name_str(n);
                    let v = match v {
                        Initial::LastSent => h.versions.get(&n).cloned().unwrap_or_default(),
                        Initial::Junk(s) => s.clone(),
                    };
                    (n, v)
                })
                .collect(),
            response_nonce,
            error_detail: r.error.clone(),
            node,
        })
    } else {
        Request::Sotw(XdsRequest {
            type_url,
            version_info,
            response_nonce,
            resource_names: names.into_iter().collect(),
            error_detail: r.error.clone(),
            node,
        })
    }
}

/// Records what a step sent and checks it: a stream answers in its own protocol, and no
/// nonce is ever sent twice.
fn check(out: Output, delta: bool, h: &mut History, summary: &mut Summary) {
    for response in out.responses {
        let (type_url, nonce, version) = match &response {
            Response::Sotw(r) => {
                assert!(!delta, "a SotW response on a Delta stream");
                summary.resources += r.resources.len();
                (r.type_url.clone(), r.nonce.clone(), r.version_info.clone())
            }
            Response::Delta(r) => {
                assert!(delta, "a Delta response on a SotW stream");
                summary.resources += r.resources.len();
                for (res, v) in &r.resources {
                    h.versions.insert(res.name.clone(), v.clone());
                }
                (
                    r.type_url.clone(),
                    r.nonce.clone(),
                    r.system_version_info.clone(),
                )
            }
        };
        assert!(h.seen.insert(nonce.clone()), "nonce {nonce:?} sent twice");
        // Encoding a response must not fail either.
        let framed = axon_xds::wire::encode(&response);
        assert!(framed.len() >= 5);
        summary.responses += 1;
        h.nonces.push((type_url.clone(), nonce.clone()));
        h.last.insert(type_url, (nonce, version));
    }
}

/// Drives one stream through `input`: connect with the first request, as the
/// ConnectionActor does (a stream whose first request is refused ends there), then the
/// first context if it comes first, then the ops; a push is the chain's next step (the
/// first one, when no context came first), and pushes past the chain's end do nothing.
pub fn run(input: &Input) -> Summary {
    let mut summary = Summary::default();
    let chain = contexts::chain();
    let delta = input.delta;
    let mut h = History::default();
    let mut s = StreamState::new(Protocol::from_delta(delta), Arc::default());
    let first = build(&input.first, delta, &h);
    if s.connect(&first).is_err() {
        return summary;
    }
    summary.connected = true;
    check(s.on_request(first), delta, &mut h, &mut summary);
    let mut next = 0;
    if input.context_first {
        check(
            s.on_context(chain[0].ctx.clone()),
            delta,
            &mut h,
            &mut summary,
        );
        next = 1;
    }
    for op in &input.ops {
        match op {
            Op::Request(r) => {
                let req = build(r, delta, &h);
                check(s.on_request(req), delta, &mut h, &mut summary);
            }
            Op::Push => {
                if let Some(step) = chain.get(next) {
                    let out = s.on_push(step.ctx.clone(), &step.request);
                    check(out, delta, &mut h, &mut summary);
                    next += 1;
                }
            }
        }
    }
    let status = s.status(1, 0.0);
    assert_eq!(status.protocol, if delta { "delta" } else { "sotw" });
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let mut eds = Req::of(ResourceType::Endpoint);
        eds.names = vec![Name::Known(0), Name::Junk("x|y".into())];
        eds.nonce = Nonce::Earlier(7);
        eds.error = Some("bad".into());
        eds.initial = vec![(Name::Known(1), Initial::Junk("v".into()))];
        let mut first = Req::of(ResourceType::Cluster);
        first.node = Node::Known(1);
        let input = Input {
            delta: true,
            context_first: true,
            first,
            ops: vec![Op::Request(eds), Op::Push],
        };
        let bytes = input.encode();
        let decoded = Input::arbitrary_take_rest(Unstructured::new(&bytes)).unwrap();
        assert_eq!(decoded, input);
    }
}
