//! Decoding of SotW `DiscoveryRequest`s without materializing what a stream repeats.
//!
//! Most requests are ACKs that repeat the previous request's names (an EDS ACK of a sidecar
//! names every cluster it watches) and, from Envoy, the same `Node` on every message. A
//! [`SotwDecoder`] belongs to one stream: it reads the fields by hand, converts the node of
//! the first request only (a stream's node cannot change), and leaves the names as slices of
//! the request's bytes with a hash ([`ResourceNames`]): a repeat is recognized by its hash
//! ([`crate::protocol::subscription::Subscription`]), and nothing of a request is kept after it.

use bytes::{Buf, Bytes};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::rpc::Status;
use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint};

use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;

use crate::resource::{DeltaRequest, Request, ResourceNames, XdsRequest};
use crate::wire::{FrameError, FrameReader};

/// The per-stream decoder of SotW requests.
#[derive(Debug, Default)]
pub struct SotwDecoder {
    node_seen: bool,
}

fn invalid(what: impl std::fmt::Display) -> FrameError {
    FrameError::Decode(what.to_string())
}

fn utf8(bytes: Bytes) -> Result<String, FrameError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| invalid("a string field is not UTF-8"))
}

impl SotwDecoder {
    pub fn decode(&mut self, mut buf: Bytes) -> Result<XdsRequest, FrameError> {
        let mut req = XdsRequest::default();
        let mut names: Vec<Bytes> = Vec::new();
        while buf.has_remaining() {
            let (tag, wire) = decode_key(&mut buf).map_err(invalid)?;
            if wire != WireType::LengthDelimited {
                skip(wire, &mut buf)?;
                continue;
            }
            let len = decode_varint(&mut buf).map_err(invalid)? as usize;
            if len > buf.remaining() {
                return Err(invalid("a field runs past the end of the message"));
            }
            let field = buf.split_to(len);
            match tag {
                1 => req.version_info = utf8(field)?,
                2 if !self.node_seen => {
                    let node = Node::decode(field).map_err(invalid)?;
                    req.node = Some(crate::node::node_info(&node));
                }
                3 => names.push(field),
                4 => req.type_url = utf8(field)?,
                5 => req.response_nonce = utf8(field)?,
                6 => {
                    let s = Status::decode(field).map_err(invalid)?;
                    req.error_detail = Some(format!("{} (code {})", s.message, s.code));
                }
                _ => {}
            }
        }
        self.node_seen |= req.node.is_some();
        req.resource_names =
            ResourceNames::from_raw(names).map_err(|_| invalid("a resource name is not UTF-8"))?;
        Ok(req)
    }
}

/// Skips a field that is not length-delimited.
fn skip(wire: WireType, buf: &mut Bytes) -> Result<(), FrameError> {
    let n = match wire {
        WireType::Varint => {
            decode_varint(buf).map_err(invalid)?;
            0
        }
        WireType::ThirtyTwoBit => 4,
        WireType::SixtyFourBit => 8,
        _ => return Err(invalid("groups are not supported")),
    };
    if buf.remaining() < n {
        return Err(invalid("a field runs past the end of the message"));
    }
    buf.advance(n);
    Ok(())
}

/// The requests of one stream, reassembled from its body's chunks and decoded.
#[derive(Default)]
pub struct RequestReader {
    frames: FrameReader,
    sotw: SotwDecoder,
    delta: bool,
}

impl RequestReader {
    pub fn new(delta: bool) -> RequestReader {
        RequestReader {
            delta,
            ..Default::default()
        }
    }

    /// A reader of requests of at most `max_message_size` bytes.
    pub fn with_limit(delta: bool, max_message_size: usize) -> RequestReader {
        RequestReader {
            frames: FrameReader::with_limit(max_message_size),
            delta,
            ..Default::default()
        }
    }

    /// Bytes buffered of a request not yet complete.
    pub fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// A chunk of the request body.
    pub fn push(&mut self, chunk: Bytes) {
        self.frames.push(chunk);
    }

    /// The next complete request, if one has arrived.
    pub fn next_request(&mut self) -> Result<Option<Request>, FrameError> {
        if self.delta {
            Ok(self
                .frames
                .next_message::<DeltaDiscoveryRequest>()?
                .map(|r| Request::Delta(delta_request(r))))
        } else {
            match self.frames.next_frame()? {
                Some(frame) => self.sotw.decode(frame).map(|r| Some(Request::Sotw(r))),
                None => Ok(None),
            }
        }
    }
}

/// A Delta request, from its protobuf.
pub fn delta_request(r: DeltaDiscoveryRequest) -> DeltaRequest {
    DeltaRequest {
        node: r.node.as_ref().map(crate::node::node_info),
        error_detail: r
            .error_detail
            .map(|s| format!("{} (code {})", s.message, s.code)),
        type_url: r.type_url,
        subscribe: r.resource_names_subscribe,
        unsubscribe: r.resource_names_unsubscribe,
        initial_versions: r.initial_resource_versions.into_iter().collect(),
        response_nonce: r.response_nonce,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

    fn encode(r: &DiscoveryRequest) -> Bytes {
        Bytes::from(r.encode_to_vec())
    }

    fn request(nonce: &str, names: &[&str]) -> DiscoveryRequest {
        DiscoveryRequest {
            version_info: "3".into(),
            type_url: "type.googleapis.com/x".into(),
            response_nonce: nonce.into(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            node: Some(Node {
                id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local".into(),
                ..Default::default()
            }),
            error_detail: Some(Status {
                code: 3,
                message: "bad".into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn decodes_every_field_prost_encodes() {
        let mut d = SotwDecoder::default();
        let r = d.decode(encode(&request("n-1", &["a", "b"]))).unwrap();
        assert_eq!(r.version_info, "3");
        assert_eq!(r.type_url, "type.googleapis.com/x");
        assert_eq!(r.response_nonce, "n-1");
        assert_eq!(r.resource_names.iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(r.error_detail.as_deref(), Some("bad (code 3)"));
        assert_eq!(
            r.node.map(|n| n.id).as_deref(),
            Some("sidecar~10.0.0.1~a.ns~ns.svc.cluster.local")
        );
    }

    #[test]
    fn names_hash_by_content_and_the_node_is_read_once() {
        let mut d = SotwDecoder::default();
        let first = d.decode(encode(&request("", &["a", "b"]))).unwrap();
        let ack = d.decode(encode(&request("n-1", &["a", "b"]))).unwrap();
        assert_eq!(first.resource_names.hash(), ack.resource_names.hash());
        assert!(ack.node.is_none(), "a stream's node is converted once");
        let changed = d.decode(encode(&request("n-2", &["a", "c"]))).unwrap();
        assert_ne!(changed.resource_names.hash(), ack.resource_names.hash());
        // The same bytes split differently are different names.
        let split = d.decode(encode(&request("n-3", &["ac"]))).unwrap();
        assert_eq!(split.resource_names.iter().collect::<Vec<_>>(), ["ac"]);
        assert_ne!(split.resource_names.hash(), changed.resource_names.hash());
    }

    #[test]
    fn malformed_requests_are_errors() {
        let mut d = SotwDecoder::default();
        let mut bad = encode(&request("", &["a"])).to_vec();
        bad.truncate(bad.len() - 3);
        assert!(d.decode(Bytes::from(bad)).is_err());
        let not_utf8 = Bytes::from_static(&[0x1a, 0x02, 0xff, 0xfe]);
        assert!(d.decode(not_utf8).is_err());
    }
}
