//! Type URLs, encoded resources, and the protocol-free request and response that cross
//! between the ADS adapter and a ConnectionActor.

use bytes::Bytes;
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use axon_model::proxy::NodeInfo;

/// The five resource types axon serves, in the order of a full push.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    Cluster,
    Endpoint,
    Listener,
    Route,
    /// SDS: the file-backed certificates of upstream TLS (`sds.rs`).
    Secret,
}

impl ResourceType {
    /// Push order: CDS, EDS, LDS, RDS, SDS (istiod's `PushOrder`).
    pub const PUSH_ORDER: [ResourceType; 5] = [
        ResourceType::Cluster,
        ResourceType::Endpoint,
        ResourceType::Listener,
        ResourceType::Route,
        ResourceType::Secret,
    ];

    pub fn url(self) -> String {
        self.as_str().to_string()
    }

    /// The type URL, without allocating (checked against the protos' own in the tests).
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::Cluster => "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            ResourceType::Endpoint => {
                "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
            }
            ResourceType::Listener => "type.googleapis.com/envoy.config.listener.v3.Listener",
            ResourceType::Route => "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
            ResourceType::Secret => {
                "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
            }
        }
    }

    pub fn parse(url: &str) -> Option<ResourceType> {
        ResourceType::PUSH_ORDER
            .into_iter()
            .find(|t| t.as_str() == url)
    }

    /// istiod's short name, used as the `type` metric label.
    pub fn short(self) -> &'static str {
        match self {
            ResourceType::Cluster => "cds",
            ResourceType::Endpoint => "eds",
            ResourceType::Listener => "lds",
            ResourceType::Route => "rds",
            ResourceType::Secret => "sds",
        }
    }

    /// CDS and LDS are wildcard types: an empty name list means "everything".
    pub fn is_wildcard_type(self) -> bool {
        matches!(self, ResourceType::Cluster | ResourceType::Listener)
    }
}

/// One named resource, encoded once. `value` is shared (`Bytes`): every proxy that is sent
/// this resource is sent these same bytes, without a copy.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    pub name: String,
    pub type_url: String,
    pub value: Bytes,
    /// A hash of `value` ([`axon_config::hash::hash_bytes`]): the resource's Delta version,
    /// the same in every replica and every build.
    pub hash: u64,
}

impl Resource {
    pub fn new<M: Message + Name>(name: impl Into<String>, msg: &M) -> Resource {
        Resource::from_encoded(name, M::type_url(), Bytes::from(msg.encode_to_vec()))
    }

    pub fn from_encoded(name: impl Into<String>, type_url: String, value: Bytes) -> Resource {
        Resource {
            name: name.into(),
            type_url,
            hash: axon_config::hash::hash_bytes(&value),
            value,
        }
    }

    pub fn encoded_len(&self) -> usize {
        self.value.len()
    }

    /// As a protobuf `Any` (a copy, for tests and tools).
    pub fn to_any(&self) -> Any {
        Any {
            type_url: self.type_url.clone(),
            value: self.value.to_vec(),
        }
    }
}

/// The resources generated for one view of one context, shared by every proxy that is sent
/// that view. Their SotW encoding (the repeated `resources` field of a `DiscoveryResponse`)
/// is made once, on first use, and then shared by reference: a response to one more proxy
/// costs its few header bytes, not a copy of the resources.
#[derive(Debug, Default)]
pub struct ResourceSet {
    list: Vec<Resource>,
    sotw: std::sync::OnceLock<Bytes>,
    delta: std::sync::OnceLock<Bytes>,
    digest: std::sync::OnceLock<u64>,
}

impl ResourceSet {
    /// A hash of the set: the sum of every resource's [`Resource::mix`] (of its name and
    /// content), so that equal sets have equal digests in any order and in any process
    /// running this build, and a digest can be updated for a few changed resources without
    /// the others ([`update_digest`]). A Delta stream that has a set recognizes it again
    /// without comparing resources; a SotW response's `version_info` is it
    /// ([`sotw_version`]).
    pub fn digest(&self) -> u64 {
        *self.digest.get_or_init(|| {
            self.list
                .iter()
                .fold(0u64, |sum, r| sum.wrapping_add(r.mix()))
        })
    }

    /// The SotW encoding of the list, made by `encode` the first time it is asked for.
    pub fn sotw_encoded(&self, encode: impl FnOnce(&[Resource]) -> Bytes) -> Bytes {
        self.sotw.get_or_init(|| encode(&self.list)).clone()
    }

    /// The Delta encoding of the whole list with each resource's own version (what every
    /// Delta stream of a view is sent at its first answer), made by `encode` the first time.
    pub fn delta_encoded(&self, encode: impl FnOnce(&[Resource]) -> Bytes) -> Bytes {
        self.delta.get_or_init(|| encode(&self.list)).clone()
    }
}

impl From<Vec<Resource>> for ResourceSet {
    fn from(list: Vec<Resource>) -> ResourceSet {
        ResourceSet {
            list,
            sotw: Default::default(),
            delta: Default::default(),
            digest: Default::default(),
        }
    }
}

impl std::ops::Deref for ResourceSet {
    type Target = Vec<Resource>;

    fn deref(&self) -> &Vec<Resource> {
        &self.list
    }
}

impl PartialEq for ResourceSet {
    fn eq(&self, other: &ResourceSet) -> bool {
        self.list == other.list
    }
}

/// The resource names of a request: slices of the request's own bytes (checked to be UTF-8),
/// not one allocation per name, and a hash of them all, so that a request repeating the
/// names the stream already has (most ACKs) is recognized without materializing them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResourceNames {
    raw: Vec<Bytes>,
    hash: u64,
}

impl ResourceNames {
    /// Names as they were read from a request; each must be UTF-8.
    pub fn from_raw(raw: Vec<Bytes>) -> Result<ResourceNames, std::str::Utf8Error> {
        for name in &raw {
            std::str::from_utf8(name)?;
        }
        // Compared within this process only (with the stream's last list).
        let hash = axon_config::hash::fast_byte_strings(raw.iter().map(|b| &b[..]));
        Ok(ResourceNames { raw, hash })
    }

    /// Equal lists have equal hashes (and different ones, all but certainly, different).
    pub fn hash(&self) -> u64 {
        self.hash
    }

    pub fn len(&self) -> usize {
        self.raw.len()
    }

    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        // Checked in `from_raw`.
        self.raw.iter().filter_map(|b| std::str::from_utf8(b).ok())
    }
}

impl<S: Into<String>> FromIterator<S> for ResourceNames {
    fn from_iter<I: IntoIterator<Item = S>>(names: I) -> ResourceNames {
        let raw = names
            .into_iter()
            .map(|n| Bytes::from(n.into().into_bytes()))
            .collect();
        ResourceNames::from_raw(raw).expect("strings are UTF-8")
    }
}

/// A DiscoveryRequest without protocol types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct XdsRequest {
    pub type_url: String,
    pub version_info: String,
    pub response_nonce: String,
    pub resource_names: ResourceNames,
    /// The NACK message, when Envoy rejected the response this request answers.
    pub error_detail: Option<String>,
    pub node: Option<NodeInfo>,
}

/// A DiscoveryResponse to send. The type URL is a string: an unknown type is answered too.
#[derive(Debug, Clone, PartialEq)]
pub struct XdsResponse {
    pub type_url: String,
    pub version_info: String,
    pub nonce: String,
    /// Shared with every other proxy that is sent the same view of the same context.
    pub resources: std::sync::Arc<ResourceSet>,
    /// `control_plane.identifier`: which replica answers (debug syncz answers only).
    pub control_plane: Option<String>,
}

/// A DeltaDiscoveryRequest without protocol types.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeltaRequest {
    pub type_url: String,
    pub subscribe: Vec<String>,
    pub unsubscribe: Vec<String>,
    /// Versions the client already has (on a reconnect).
    pub initial_versions: std::collections::BTreeMap<String, String>,
    pub response_nonce: String,
    pub error_detail: Option<String>,
    pub node: Option<NodeInfo>,
}

/// A DeltaDiscoveryResponse to send: changed resources with their versions, and removals.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaResponse {
    pub type_url: String,
    pub system_version_info: String,
    pub nonce: String,
    pub resources: Vec<(Resource, String)>,
    pub removed: Vec<String>,
    /// `control_plane.identifier`: which replica answers (debug syncz answers only).
    pub control_plane: Option<String>,
    /// When `resources` is this whole set, in its order, each at its own version: the
    /// encoding is then the set's, shared by every stream of the view
    /// ([`ResourceSet::delta_encoded`]).
    pub whole: Option<std::sync::Arc<ResourceSet>>,
}

/// What a stream receives, in either protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Sotw(XdsRequest),
    Delta(DeltaRequest),
}

impl Request {
    pub fn node(&self) -> Option<&NodeInfo> {
        match self {
            Request::Sotw(r) => r.node.as_ref(),
            Request::Delta(r) => r.node.as_ref(),
        }
    }
}

/// What a stream sends, in either protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Sotw(XdsResponse),
    Delta(DeltaResponse),
}

/// A set's [`ResourceSet::digest`] with the resources `old` replaced by `new` (a partial
/// SotW EDS response: the changed clusters only, the others as the client has them).
pub fn update_digest(digest: u64, old: &[Resource], new: &[Resource]) -> u64 {
    let digest = old.iter().fold(digest, |d, r| d.wrapping_sub(r.mix()));
    new.iter().fold(digest, |d, r| d.wrapping_add(r.mix()))
}

/// [`Resource::mix`] of a resource named `name` whose content hashes to `hash`: what a Delta
/// client holds is digested the same way as the set it was sent.
pub fn mix(name: &str, hash: u64) -> u64 {
    use std::hash::Hasher;
    // Stable, so that equal resources mix equally in every process and every build.
    let mut h = axon_config::hash::StableHasher::new();
    h.write_text(name);
    h.write_u64(hash);
    h.finish()
}

/// The SotW `version_info` of a set whose [`ResourceSet::digest`] is `digest`: the same in
/// every replica that generates the same set.
pub fn sotw_version(digest: u64) -> String {
    format!("{digest:016x}")
}

impl Resource {
    /// A hash of the name and the content: one term of a [`ResourceSet::digest`].
    pub fn mix(&self) -> u64 {
        mix(&self.name, self.hash)
    }

    /// A version that changes exactly when the encoded resource does.
    pub fn content_version(&self) -> String {
        format!("{:016x}", self.hash)
    }
}

/// A protobuf map field (prost's `HashMap`) whose entries iterate, and so encode, in key
/// order. A `HashMap`'s order comes from its random hash keys, different in every map and
/// every process: a map of two entries or more would make the same resource encode (and
/// hash, and be versioned) differently in two replicas, and in two contexts of one. Each
/// map gets fresh keys, so maps are made until one iterates sorted (about `n!` tries for
/// `n` entries; the maps axon fills hold two at most). Past a bound the last one is kept.
pub(crate) fn sorted_map<V: Clone>(
    entries: Vec<(String, V)>,
) -> std::collections::HashMap<String, V> {
    let mut entries = entries;
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries.dedup_by(|a, b| a.0 == b.0);
    let sorted = |m: &std::collections::HashMap<String, V>| {
        m.keys().zip(m.keys().skip(1)).all(|(a, b)| a < b)
    };
    let mut map = std::collections::HashMap::new();
    for _ in 0..1_000 {
        map = entries.iter().cloned().collect();
        if sorted(&map) {
            break;
        }
    }
    map
}

/// `google.protobuf.Struct` with its fields in key order: prost's `Struct` is a hash map,
/// which would encode the same fields differently from map to map ([`sorted_map`]'s
/// concern), so a struct of many fields is encoded as this instead (the same wire format).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SortedStruct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub fields: std::collections::BTreeMap<String, envoy_types::pb::google::protobuf::Value>,
}

/// JSON as a protobuf `Value` (numbers as floats, as protobuf's JSON mapping has them).
pub(crate) fn json_value(v: &serde_json::Value) -> envoy_types::pb::google::protobuf::Value {
    use envoy_types::pb::google::protobuf::{ListValue, Struct, Value, value::Kind};
    let kind = match v {
        serde_json::Value::Null => Kind::NullValue(0),
        serde_json::Value::Bool(b) => Kind::BoolValue(*b),
        serde_json::Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => Kind::StringValue(s.clone()),
        serde_json::Value::Array(a) => Kind::ListValue(ListValue {
            values: a.iter().map(json_value).collect(),
        }),
        serde_json::Value::Object(o) => Kind::StructValue(Struct {
            fields: o.iter().map(|(k, v)| (k.clone(), json_value(v))).collect(),
        }),
    };
    Value { kind: Some(kind) }
}

/// A message as an `Any` (its type URL and encoding), for typed configs.
pub(crate) fn any<M: Message + Name>(msg: &M) -> Any {
    Any {
        type_url: M::type_url(),
        value: msg.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sorted_map_encodes_its_entries_in_key_order_every_time() {
        use envoy_types::pb::envoy::config::route::v3::Route;
        let entries = vec![
            (
                "envoy.filters.http.fault".to_string(),
                any(&Route::default()),
            ),
            ("envoy.filters.http.cors".to_string(), Any::default()),
            ("envoy.filters.http.b".to_string(), Any::default()),
        ];
        let first = Route {
            typed_per_filter_config: sorted_map(entries.clone()),
            ..Default::default()
        }
        .encode_to_vec();
        for _ in 0..50 {
            let map = sorted_map(entries.clone());
            let keys: Vec<&String> = map.keys().collect();
            assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
            let again = Route {
                typed_per_filter_config: map,
                ..Default::default()
            };
            assert_eq!(again.encode_to_vec(), first);
        }
    }

    #[test]
    fn a_digest_is_of_the_set_and_updates_for_a_few_resources() {
        let r = |name: &str, body: &[u8]| {
            Resource::from_encoded(name, "t".into(), Bytes::copy_from_slice(body))
        };
        let (a, b, b2) = (r("a", b"1"), r("b", b"2"), r("b", b"3"));
        let ab = ResourceSet::from(vec![a.clone(), b.clone()]);
        let ba = ResourceSet::from(vec![b.clone(), a.clone()]);
        assert_eq!(ab.digest(), ba.digest(), "in any order");
        let ab2 = ResourceSet::from(vec![a.clone(), b2.clone()]);
        assert_ne!(ab.digest(), ab2.digest());
        assert_eq!(update_digest(ab.digest(), &[b], &[b2]), ab2.digest());
        assert_eq!(sotw_version(ab.digest()).len(), 16);
    }
}
