//! The few protobuf fields the load tool reads and writes, as minimal prost messages of its
//! own: a response is decoded without its resources unless they are CDS or LDS, and then
//! only down to the cluster name and type, and the listener's HCM `rds.route_config_name`.
//! Requests are encoded by hand from borrowed names.

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use prost::Message;
use prost::encoding::{encode_key, encode_varint, string};

pub(crate) const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
pub(crate) const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
pub(crate) const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
pub(crate) const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
pub(crate) const TYPES: [&str; 4] = [CDS, EDS, LDS, RDS];
const HCM: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

pub(crate) const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
pub(crate) const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

pub(crate) fn type_index(url: &str) -> Option<usize> {
    TYPES.iter().position(|t| *t == url)
}

/// `DiscoveryResponse` without resources (they are skipped, not copied).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SotwHeader {
    #[prost(string, tag = "1")]
    pub version_info: String,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
}

/// `DiscoveryResponse.resources` only, each `Any` as its `value` bytes (zero-copy).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SotwResources {
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<AnyValue>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AnyValue {
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct AnyFull {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// `DeltaDiscoveryResponse` without resources.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeltaHeader {
    #[prost(string, tag = "1")]
    pub system_version_info: String,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub nonce: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeltaResources {
    #[prost(message, repeated, tag = "2")]
    pub resources: Vec<DeltaResource>,
    #[prost(string, repeated, tag = "6")]
    pub removed_resources: Vec<String>,
}

/// A `Resource` of a Delta response: its version (kept to resume with), name and body.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeltaResource {
    #[prost(string, tag = "1")]
    pub version: String,
    #[prost(message, optional, tag = "2")]
    pub resource: Option<AnyValue>,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// A Cluster: its name, discovery type (3 = EDS) and EDS service name.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ClusterLite {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int32, optional, tag = "2")]
    pub r#type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub eds_cluster_config: Option<EdsClusterConfigLite>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct EdsClusterConfigLite {
    #[prost(string, tag = "2")]
    pub service_name: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ListenerLite {
    #[prost(message, repeated, tag = "3")]
    pub filter_chains: Vec<FilterChainLite>,
    #[prost(message, optional, tag = "25")]
    pub default_filter_chain: Option<FilterChainLite>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct FilterChainLite {
    #[prost(message, repeated, tag = "3")]
    pub filters: Vec<FilterLite>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct FilterLite {
    #[prost(message, optional, tag = "4")]
    pub typed_config: Option<AnyFull>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct HcmLite {
    #[prost(message, optional, tag = "3")]
    pub rds: Option<RdsLite>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct RdsLite {
    #[prost(string, tag = "2")]
    pub route_config_name: String,
}

/// The first request's fields the replay server reads.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SotwRequestLite {
    #[prost(message, optional, tag = "2")]
    pub node: Option<NodeLite>,
    #[prost(string, tag = "4")]
    pub type_url: String,
    #[prost(string, tag = "5")]
    pub response_nonce: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DeltaRequestLite {
    #[prost(message, optional, tag = "1")]
    pub node: Option<NodeLite>,
    #[prost(string, tag = "2")]
    pub type_url: String,
    #[prost(string, tag = "6")]
    pub response_nonce: String,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct NodeLite {
    #[prost(string, tag = "1")]
    pub id: String,
}

/// The EDS names a Cluster references (its service name, or its name), if it is EDS.
pub(crate) fn eds_name(cluster: &[u8]) -> Option<String> {
    let c = ClusterLite::decode(cluster).ok()?;
    if c.r#type != Some(3) {
        return None;
    }
    Some(
        c.eds_cluster_config
            .map(|e| e.service_name)
            .filter(|s| !s.is_empty())
            .unwrap_or(c.name),
    )
}

/// The route configuration names a Listener's HTTP connection managers reference.
pub(crate) fn route_names(listener: &[u8], out: &mut Vec<String>) {
    let Ok(l) = ListenerLite::decode(listener) else {
        return;
    };
    for chain in l.filter_chains.iter().chain(l.default_filter_chain.iter()) {
        for f in &chain.filters {
            let Some(any) = &f.typed_config else { continue };
            if any.type_url != HCM {
                continue;
            }
            if let Ok(hcm) = HcmLite::decode(any.value.clone())
                && let Some(rds) = hcm.rds
                && !rds.route_config_name.is_empty()
            {
                out.push(rds.route_config_name);
            }
        }
    }
}

/// The 5-byte gRPC prefix and the message, as one frame.
pub(crate) fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

fn put_str(tag: u32, s: &str, buf: &mut BytesMut) {
    if !s.is_empty() {
        string::encode(tag, &s.to_string(), buf);
    }
}

fn put_strs(tag: u32, names: &[String], buf: &mut BytesMut) {
    for n in names {
        string::encode(tag, n, buf);
    }
}

fn put_bytes(tag: u32, b: &[u8], buf: &mut BytesMut) {
    encode_key(tag, prost::encoding::WireType::LengthDelimited, buf);
    encode_varint(b.len() as u64, buf);
    buf.put_slice(b);
}

/// A SotW `DiscoveryRequest`, gRPC-framed. `node` is an encoded `Node` (first request only).
pub(crate) fn sotw_request(
    type_url: &str,
    version: &str,
    nonce: &str,
    names: &[String],
    node: Option<&[u8]>,
) -> Bytes {
    let mut buf = BytesMut::with_capacity(128 + names.iter().map(|n| n.len() + 3).sum::<usize>());
    put_str(1, version, &mut buf);
    if let Some(node) = node {
        put_bytes(2, node, &mut buf);
    }
    put_strs(3, names, &mut buf);
    put_str(4, type_url, &mut buf);
    put_str(5, nonce, &mut buf);
    grpc_frame(&buf)
}

/// A `DeltaDiscoveryRequest`, gRPC-framed.
pub(crate) fn delta_request(
    type_url: &str,
    nonce: &str,
    subscribe: &[String],
    unsubscribe: &[String],
    node: Option<&[u8]>,
) -> Bytes {
    let mut buf =
        BytesMut::with_capacity(128 + subscribe.iter().map(|n| n.len() + 3).sum::<usize>());
    if let Some(node) = node {
        put_bytes(1, node, &mut buf);
    }
    put_str(2, type_url, &mut buf);
    put_strs(3, subscribe, &mut buf);
    put_strs(4, unsubscribe, &mut buf);
    put_str(6, nonce, &mut buf);
    grpc_frame(&buf)
}

/// The first `DeltaDiscoveryRequest` of a type on a resumed stream: the names to subscribe
/// (none: wildcard) and `initial_resource_versions` (tag 5, a map: key 1, value 2), gRPC-framed.
pub(crate) fn delta_resume_request(
    type_url: &str,
    subscribe: &[String],
    have: &HashMap<String, String>,
    node: Option<&[u8]>,
) -> Bytes {
    let mut buf = BytesMut::with_capacity(
        128 + subscribe.iter().map(|n| n.len() + 3).sum::<usize>()
            + have
                .iter()
                .map(|(k, v)| k.len() + v.len() + 8)
                .sum::<usize>(),
    );
    if let Some(node) = node {
        put_bytes(1, node, &mut buf);
    }
    put_str(2, type_url, &mut buf);
    put_strs(3, subscribe, &mut buf);
    let mut entry = BytesMut::new();
    for (name, version) in have {
        entry.clear();
        string::encode(1, name, &mut entry);
        string::encode(2, version, &mut entry);
        put_bytes(5, &entry, &mut buf);
    }
    grpc_frame(&buf)
}

/// Splits complete gRPC messages off a receive buffer.
#[derive(Default)]
pub(crate) struct Deframer {
    buf: BytesMut,
}

impl Deframer {
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete message, if any. The buffer is released when it empties, so a
    /// stream at rest holds no receive memory.
    pub(crate) fn next(&mut self) -> anyhow::Result<Option<Bytes>> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        anyhow::ensure!(
            self.buf[0] == 0,
            "compressed gRPC messages are not supported"
        );
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if self.buf.len() < 5 + len {
            // Reserve once for the whole message instead of growing by doubling.
            self.buf.reserve(5 + len - self.buf.len());
            return Ok(None);
        }
        let mut frame = self.buf.split_to(5 + len);
        let msg = frame.split_off(5).freeze();
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
        Ok(Some(msg))
    }
}
