//! gRPC framing of xDS messages, written by hand so that the encoded resources are shared.
//!
//! A response is a gRPC message (a 5-byte prefix and a protobuf `DiscoveryResponse` or
//! `DeltaDiscoveryResponse`), [`Framed`] in two parts. A SotW response's `head` holds the
//! prefix and the stream's own fields (version, type, nonce); its `shared` part is the view's
//! `resources` field, encoded once per [`ResourceSet`](super::resource::ResourceSet) and
//! shared by reference by every stream sent that view, so that a push to many proxies copies
//! no resource bytes. A Delta response differs per stream and is one buffer of exactly its
//! size. Nothing is kept per stream once written, so no per-stream encode buffer grows to the
//! largest message and stays. Requests are read with a [`FrameReader`] whose buffer is
//! released as soon as it is empty.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint};

use super::resource::{DeltaResponse, Resource, Response, XdsResponse};

/// The largest request a [`FrameReader`] accepts unless told otherwise (gRPC's default
/// `max_message_size`, 4 MiB; Envoy's EDS requests name every cluster, which stays far below).
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

/// A framed gRPC message in two parts: `head` (the prefix and this stream's own fields) and
/// `shared` (the resources, encoded once per view and shared by reference across streams).
/// On the wire the message is `head` followed by `shared`.
#[derive(Debug, Clone, PartialEq)]
pub struct Framed {
    pub head: Bytes,
    pub shared: Bytes,
}

impl Framed {
    pub fn len(&self) -> usize {
        self.head.len() + self.shared.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole message in one buffer (a copy, for tests and tools).
    pub fn to_bytes(&self) -> Bytes {
        let mut all = BytesMut::with_capacity(self.len());
        all.put_slice(&self.head);
        all.put_slice(&self.shared);
        all.freeze()
    }
}

/// Writes protobuf fields into one buffer of a known size.
struct Writer {
    head: BytesMut,
}

impl Writer {
    fn key(&mut self, tag: u32, wire: WireType) {
        encode_key(tag, wire, &mut self.head);
    }

    fn string(&mut self, tag: u32, s: &str) {
        if s.is_empty() {
            return;
        }
        self.key(tag, WireType::LengthDelimited);
        encode_varint(s.len() as u64, &mut self.head);
        self.head.put_slice(s.as_bytes());
    }

    fn len_prefix(&mut self, tag: u32, len: usize) {
        self.key(tag, WireType::LengthDelimited);
        encode_varint(len as u64, &mut self.head);
    }

    /// Appends a resource's encoded bytes.
    fn bytes(&mut self, bytes: &Bytes) {
        self.head.put_slice(bytes);
    }

    /// A `config.core.v3.ControlPlane { identifier }` field, if there is one.
    fn control_plane(&mut self, tag: u32, identifier: Option<&str>) {
        if let Some(id) = identifier {
            self.len_prefix(tag, string_field_len(1, id));
            self.string(1, id);
        }
    }

    fn finish(self) -> Bytes {
        self.head.freeze()
    }
}

fn string_field_len(tag: u32, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        prost::encoding::key_len(tag) + encoded_len_varint(s.len() as u64) + s.len()
    }
}

/// The encoded length of a `ControlPlane` message field, if there is one.
fn control_plane_len(tag: u32, identifier: Option<&str>) -> usize {
    identifier.map_or(0, |id| message_field_len(tag, string_field_len(1, id)))
}

fn message_field_len(tag: u32, len: usize) -> usize {
    prost::encoding::key_len(tag) + encoded_len_varint(len as u64) + len
}

/// The encoded length of a resource as a `google.protobuf.Any`.
fn any_len(r: &Resource) -> usize {
    string_field_len(1, &r.type_url) + message_field_len(2, r.value.len())
}

fn put_any(c: &mut Writer, r: &Resource) {
    c.string(1, &r.type_url);
    c.len_prefix(2, r.value.len());
    c.bytes(&r.value);
}

/// A writer for a message of `len` bytes, after the gRPC prefix (uncompressed, the length),
/// with room for `capacity` bytes of it.
fn prefixed(len: usize, capacity: usize) -> Writer {
    let mut head = BytesMut::with_capacity(5 + capacity);
    head.put_u8(0);
    head.put_u32(len as u32);
    Writer { head }
}

/// The repeated `resources` field of a `DiscoveryResponse`: what every proxy of a view is
/// sent, encoded once ([`ResourceSet::sotw_encoded`](super::resource::ResourceSet)).
fn sotw_resources(resources: &[Resource]) -> Bytes {
    let len = resources
        .iter()
        .map(|res| message_field_len(2, any_len(res)))
        .sum();
    let mut c = Writer {
        head: BytesMut::with_capacity(len),
    };
    for res in resources {
        c.len_prefix(2, any_len(res));
        put_any(&mut c, res);
    }
    c.finish()
}

/// A SotW `DiscoveryResponse`, framed: this stream's fields first (protobuf fields may come
/// in any order), then the view's shared resources.
/// A response as the message its stream sends: at most two buffers (a chunk per resource
/// would be an HTTP/2 frame per resource), the stream's own fields and the view's shared
/// resources.
pub fn encode(response: &Response) -> Framed {
    match response {
        Response::Sotw(r) => encode_sotw(r),
        Response::Delta(r) => encode_delta(r),
    }
}

pub fn encode_sotw(r: &XdsResponse) -> Framed {
    let shared = r.resources.sotw_encoded(sotw_resources);
    let own = string_field_len(1, &r.version_info)
        + string_field_len(4, &r.type_url)
        + string_field_len(5, &r.nonce)
        + control_plane_len(6, r.control_plane.as_deref());
    let mut c = prefixed(own + shared.len(), own);
    c.string(1, &r.version_info);
    c.string(4, &r.type_url);
    c.string(5, &r.nonce);
    c.control_plane(6, r.control_plane.as_deref());
    Framed {
        head: c.finish(),
        shared,
    }
}

/// The encoded length of a Delta `Resource { name, version, resource }`.
fn delta_resource_len(res: &Resource, version: &str) -> usize {
    string_field_len(3, &res.name)
        + string_field_len(1, version)
        + message_field_len(2, any_len(res))
}

/// The repeated `resources` field of a `DeltaDiscoveryResponse` holding the whole of a
/// view's set, each at its own version: encoded once per set
/// ([`ResourceSet::delta_encoded`](super::resource::ResourceSet)).
fn delta_resources(resources: &[Resource]) -> Bytes {
    let versions: Vec<String> = resources.iter().map(Resource::content_version).collect();
    let len = resources
        .iter()
        .zip(&versions)
        .map(|(res, v)| message_field_len(2, delta_resource_len(res, v)))
        .sum();
    let mut c = Writer {
        head: BytesMut::with_capacity(len),
    };
    for (res, version) in resources.iter().zip(&versions) {
        put_delta_resource(&mut c, res, version);
    }
    c.finish()
}

fn put_delta_resource(c: &mut Writer, res: &Resource, version: &str) {
    c.len_prefix(2, delta_resource_len(res, version));
    c.string(3, &res.name);
    c.string(1, version);
    c.len_prefix(2, any_len(res));
    put_any(c, res);
}

/// A `DeltaDiscoveryResponse`: a small head and, when it answers with a whole set (a first
/// answer, a full change), that set's shared encoding; else one buffer (its resources differ
/// per stream).
pub fn encode_delta(r: &DeltaResponse) -> Framed {
    let shared = r
        .whole
        .as_ref()
        .map(|set| set.delta_encoded(delta_resources));
    let resources_len: usize = match &shared {
        Some(bytes) => bytes.len(),
        None => r
            .resources
            .iter()
            .map(|(res, v)| message_field_len(2, delta_resource_len(res, v)))
            .sum(),
    };
    let removed_len: usize = r
        .removed
        .iter()
        .map(|n| message_field_len(6, n.len()))
        .sum();
    let len = string_field_len(1, &r.system_version_info)
        + resources_len
        + string_field_len(4, &r.type_url)
        + removed_len
        + string_field_len(5, &r.nonce)
        + control_plane_len(7, r.control_plane.as_deref());
    let own = len - shared.as_ref().map_or(0, Bytes::len);
    let mut c = prefixed(len, own);
    c.string(1, &r.system_version_info);
    c.string(4, &r.type_url);
    c.string(5, &r.nonce);
    c.control_plane(7, r.control_plane.as_deref());
    for name in &r.removed {
        c.len_prefix(6, name.len());
        c.head.put_slice(name.as_bytes());
    }
    if shared.is_none() {
        for (res, version) in &r.resources {
            put_delta_resource(&mut c, res, version);
        }
    }
    Framed {
        head: c.finish(),
        shared: shared.unwrap_or_default(),
    }
}

/// Why a request stream cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("compressed gRPC messages are not supported")]
    Compressed,
    #[error("a request of {0} bytes is over the limit of {1} (max_message_size)")]
    TooLarge(usize, usize),
    #[error("the request is not a valid message: {0}")]
    Decode(String),
}

/// Reassembles gRPC messages from body chunks. It holds what has arrived of the message being
/// read and nothing more: a message announced as large reserves nothing until its bytes come.
#[derive(Debug)]
pub struct FrameReader {
    buf: BytesMut,
    max: usize,
}

impl Default for FrameReader {
    fn default() -> Self {
        FrameReader::with_limit(MAX_REQUEST_BYTES)
    }
}

impl FrameReader {
    /// A reader of messages of at most `max` bytes.
    pub fn with_limit(max: usize) -> FrameReader {
        FrameReader {
            buf: BytesMut::new(),
            max,
        }
    }

    /// Bytes buffered of a message not yet complete (0 between messages).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    pub fn push(&mut self, chunk: Bytes) {
        if self.buf.is_empty() && self.buf.capacity() == 0 {
            self.buf = BytesMut::from(chunk.as_ref());
        } else {
            self.buf.extend_from_slice(&chunk);
        }
    }

    /// The next complete message, decoded, if one is buffered.
    pub fn next_message<M: prost::Message + Default>(&mut self) -> Result<Option<M>, FrameError> {
        let Some(message) = self.next_frame()? else {
            return Ok(None);
        };
        M::decode(message)
            .map(Some)
            .map_err(|e| FrameError::Decode(e.to_string()))
    }

    /// The next complete message's bytes, if one is buffered.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        if self.buf[0] != 0 {
            return Err(FrameError::Compressed);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > self.max {
            return Err(FrameError::TooLarge(len, self.max));
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        self.buf.advance(5);
        let message = self.buf.split_to(len);
        if self.buf.is_empty() {
            // Give the memory back between requests: an idle stream holds nothing.
            self.buf = BytesMut::new();
        }
        Ok(Some(message.freeze()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::ResourceSet;
    use envoy_types::pb::envoy::service::discovery::v3::{
        DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    };
    use prost::Message;

    fn res(name: &str, body: &[u8]) -> Resource {
        Resource::from_encoded(
            name,
            "type.googleapis.com/x".into(),
            Bytes::copy_from_slice(body),
        )
    }

    fn unframe(all: Bytes) -> Bytes {
        assert_eq!(all[0], 0);
        let len = u32::from_be_bytes([all[1], all[2], all[3], all[4]]) as usize;
        assert_eq!(len, all.len() - 5, "the prefix has the message length");
        Bytes::copy_from_slice(&all[5..])
    }

    #[test]
    fn sotw_responses_decode_as_prost_encodes_them() {
        let r = XdsResponse {
            type_url: "type.googleapis.com/x".into(),
            version_info: "7".into(),
            nonce: "7-1".into(),
            resources: std::sync::Arc::new(
                vec![res("a", b"\x0a\x01a"), res("b", &[9u8; 300])].into(),
            ),
            control_plane: Some("{\"ID\":\"axon-0\"}".into()),
        };
        let decoded = DiscoveryResponse::decode(unframe(encode_sotw(&r).to_bytes())).unwrap();
        assert_eq!(decoded.version_info, "7");
        assert_eq!(decoded.nonce, "7-1");
        assert_eq!(decoded.type_url, "type.googleapis.com/x");
        assert_eq!(decoded.resources.len(), 2);
        assert_eq!(decoded.resources[1].value, vec![9u8; 300]);
        assert_eq!(decoded.resources[0].type_url, "type.googleapis.com/x");
        assert_eq!(
            decoded.control_plane.unwrap().identifier,
            "{\"ID\":\"axon-0\"}"
        );
    }

    #[test]
    fn responses_of_one_view_share_the_encoded_resources() {
        let set: std::sync::Arc<ResourceSet> =
            std::sync::Arc::new(vec![res("big", &[1u8; 4096]), res("small", b"x")].into());
        let to = |nonce: &str| XdsResponse {
            type_url: "t".into(),
            version_info: "1".into(),
            nonce: nonce.into(),
            resources: set.clone(),
            control_plane: None,
        };
        let (a, b) = (encode_sotw(&to("n-1")), encode_sotw(&to("n-2")));
        assert_eq!(a.len(), 5 + unframe(a.to_bytes()).len());
        assert_eq!(
            a.head.len(),
            5 + 3 + 3 + 5,
            "the head holds only the stream's fields"
        );
        assert_eq!(
            a.shared.as_ptr(),
            b.shared.as_ptr(),
            "the resources are encoded once and shared, not copied"
        );
        let decoded = DiscoveryResponse::decode(unframe(b.to_bytes())).unwrap();
        assert_eq!(decoded.nonce, "n-2");
        assert_eq!(decoded.resources.len(), 2);
    }

    #[test]
    fn delta_responses_decode_as_prost_encodes_them() {
        let r = DeltaResponse {
            type_url: "t".into(),
            system_version_info: "3".into(),
            nonce: "3-9".into(),
            resources: vec![(res("a", b"xyz"), "v1".into())],
            removed: vec!["gone".into()],
            control_plane: Some("cp".into()),
            whole: None,
        };
        let d = DeltaDiscoveryResponse::decode(unframe(encode_delta(&r).to_bytes())).unwrap();
        assert_eq!(
            (d.system_version_info.as_str(), d.nonce.as_str()),
            ("3", "3-9")
        );
        assert_eq!(d.removed_resources, ["gone"]);
        assert_eq!(d.resources[0].name, "a");
        assert_eq!(d.resources[0].version, "v1");
        assert_eq!(d.resources[0].resource.as_ref().unwrap().value, b"xyz");
        assert_eq!(d.control_plane.unwrap().identifier, "cp");
    }

    #[test]
    fn a_whole_set_is_encoded_once_for_every_delta_stream_and_decodes_the_same() {
        let set = std::sync::Arc::new(ResourceSet::from(vec![res("a", b"xyz"), res("b", b"q")]));
        let response = |nonce: &str, whole: bool| DeltaResponse {
            type_url: "t".into(),
            system_version_info: "3".into(),
            nonce: nonce.into(),
            resources: set
                .iter()
                .map(|r| (r.clone(), r.content_version()))
                .collect(),
            removed: vec!["gone".into()],
            control_plane: None,
            whole: whole.then(|| set.clone()),
        };
        let (a, b) = (
            encode_delta(&response("n-1", true)),
            encode_delta(&response("n-2", true)),
        );
        assert_eq!(
            a.shared.as_ptr(),
            b.shared.as_ptr(),
            "the resources are encoded once and shared, not copied"
        );
        let shared = DeltaDiscoveryResponse::decode(unframe(b.to_bytes())).unwrap();
        let own = DeltaDiscoveryResponse::decode(unframe(
            encode_delta(&response("n-2", false)).to_bytes(),
        ))
        .unwrap();
        assert_eq!(shared, own);
        assert_eq!(shared.resources.len(), 2);
        assert_eq!(shared.resources[1].version, set[1].content_version());
    }

    #[test]
    fn the_reader_reassembles_split_messages_and_releases_its_buffer() {
        let req = DiscoveryRequest {
            type_url: "t".into(),
            resource_names: (0..100).map(|i| format!("cluster-{i}")).collect(),
            ..Default::default()
        };
        let body = req.encode_to_vec();
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(body.len() as u32).to_be_bytes());
        framed.extend_from_slice(&body);
        let mut reader = FrameReader::default();
        for chunk in framed.chunks(7) {
            assert_eq!(reader.next_message::<DiscoveryRequest>(), Ok(None));
            reader.push(Bytes::copy_from_slice(chunk));
        }
        assert_eq!(reader.next_message::<DiscoveryRequest>(), Ok(Some(req)));
        assert_eq!(reader.buf.capacity(), 0, "nothing is held between requests");
        reader.push(Bytes::from_static(&[1, 0, 0, 0, 0]));
        assert_eq!(
            reader.next_message::<DiscoveryRequest>(),
            Err(FrameError::Compressed)
        );
    }
}
