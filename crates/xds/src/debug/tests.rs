//! The debug types without sockets: a stream hands a debug request to its shell and frames
//! the answer; syncz is istiod's (`debugSyncz`, `debugSyncStatus`, the caller's namespace);
//! the config dump has Envoy's sections and redacts keys.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::admin::v3::{ClustersConfigDump, ListenersConfigDump};
use envoy_types::pb::envoy::config::core::v3::DataSource;
use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    Secret, TlsCertificate, secret,
};
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use envoy_types::pb::envoy::service::status::v3::{ClientConfig, ConfigStatus};
use prost::Message;

use super::dump::{DumpFilter, REDACTED, redact};
use super::*;
use crate::csds::{config_status, syncz};
use crate::protocol::stream::{Protocol, StreamState};
use crate::resource::{DeltaRequest, Request, ResourceType, Response, XdsRequest};
use axon_model::fixtures::configs;
use axon_model::proxy::NodeInfo;
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

const MESH: &str = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: a, namespace: shop}\nspec:\n  hosts: [a.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 9080, name: http, protocol: HTTP}]\n  endpoints: [{address: 10.0.0.1}]\n";

fn context() -> Arc<PushContext> {
    let req = PushRequest::full_push(TriggerReason::Config, Instant::now());
    Arc::new(PushContext::build(
        None,
        &configs(MESH),
        &req,
        &Arc::default(),
    ))
}

fn node(id: &str) -> NodeInfo {
    NodeInfo {
        id: id.into(),
        istio_version: Some("1.28.0".into()),
        cluster_id: Some("Kubernetes".into()),
        ..Default::default()
    }
}

fn sotw(type_url: &str, names: &[&str], id: &str) -> Request {
    Request::Sotw(XdsRequest {
        type_url: type_url.into(),
        resource_names: names.iter().copied().collect(),
        node: Some(node(id)),
        ..Default::default()
    })
}

const PROXY: &str = "sidecar~10.1.1.1~pod-1.shop~shop.svc.cluster.local";

/// A proxy's stream that asked for clusters and listeners and has the first context.
fn proxy_stream(delta: bool) -> StreamState {
    let mut s = StreamState::new(Protocol::from_delta(delta), Arc::default());
    let first = sotw(ResourceType::Cluster.as_str(), &[], PROXY);
    s.connect(&first).unwrap();
    s.on_context(context());
    for t in [ResourceType::Cluster, ResourceType::Listener] {
        let req = if delta {
            Request::Delta(DeltaRequest {
                type_url: t.url(),
                ..Default::default()
            })
        } else {
            sotw(t.as_str(), &[], PROXY)
        };
        s.on_request(req);
    }
    s
}

#[test]
fn a_debug_request_goes_to_the_shell_and_starts_no_watch() {
    let mut s = StreamState::new(Protocol::Sotw, Arc::default());
    let req = sotw(
        SYNCZ,
        &[],
        "sidecar~10.0.0.9~istioctl.istio-system~istio-system.svc.cluster.local",
    );
    s.connect(&req).unwrap();
    let out = s.on_request(req);
    assert!(
        out.responses.is_empty(),
        "the shell answers, not the state machine"
    );
    let query = out.debug.expect("a debug query");
    assert_eq!(query.kind, Some(DebugType::Syncz));
    assert!(
        s.status(1, 0.0).types.is_empty(),
        "no subscription was made"
    );

    let unknown = s.on_request(sotw("istio.io/debug/nonsense", &[], ""));
    assert_eq!(unknown.debug.unwrap().kind, None);
    let dump = s.on_request(sotw(CONFIG_DUMP, &["pod-1.shop"], ""));
    assert_eq!(dump.debug.unwrap().dump_target(), Some("pod-1.shop"));
    let two = s.on_request(sotw(CONFIG_DUMP, &["a", "b"], ""));
    assert_eq!(
        two.debug.unwrap().dump_target(),
        None,
        "exactly one proxy, as istiod"
    );
}

#[test]
fn a_debug_answer_carries_the_replica_and_decodes_as_envoy_decodes_it() {
    let mut s = proxy_stream(false);
    let query = DebugQuery {
        kind: Some(DebugType::Syncz),
        type_url: SYNCZ.into(),
        names: vec![],
    };
    let status = s.status(7, 1.0);
    let resources = syncz(std::slice::from_ref(&status), None);
    let id = control_plane_identifier("axon-0", "0.1.0");
    let response = s.debug_response(&query, resources, Some(id.clone()));
    let framed = crate::wire::encode(&response).to_bytes();
    let decoded = DiscoveryResponse::decode(&framed[5..]).unwrap();
    assert_eq!(decoded.type_url, SYNCZ);
    assert_eq!(decoded.control_plane.unwrap().identifier, id);
    let cp: serde_json::Value = serde_json::from_str(&id).unwrap();
    assert_eq!(
        cp["ID"], "axon-0",
        "istioctl names a replica's answers by its ID"
    );
    assert_eq!(decoded.resources.len(), 1);
    let config = ClientConfig::decode(decoded.resources[0].value.as_slice()).unwrap();
    let node = config.node.unwrap();
    assert_eq!(node.id, PROXY);
    let meta = node.metadata.unwrap().fields;
    assert!(meta.contains_key("CLUSTER_ID") && meta.contains_key("ISTIO_VERSION"));
    let types: Vec<_> = config
        .generic_xds_configs
        .iter()
        .map(|g| (g.type_url.as_str(), g.config_status))
        .collect();
    assert_eq!(
        types,
        [
            (ResourceType::Cluster.as_str(), ConfigStatus::Stale as i32),
            (ResourceType::Listener.as_str(), ConfigStatus::Stale as i32),
        ],
        "sorted by type URL; sent and not yet ACKed"
    );
}

#[test]
fn a_delta_stream_is_answered_in_delta() {
    let mut s = proxy_stream(true);
    let query = DebugQuery {
        kind: Some(DebugType::Syncz),
        type_url: SYNCZ.into(),
        names: vec![],
    };
    let status = s.status(1, 0.0);
    assert_eq!(status.types.len(), 2);
    let res = syncz(&[status], None);
    match s.debug_response(&query, res, None) {
        Response::Delta(d) => assert_eq!(d.resources[0].0.name, PROXY),
        Response::Sotw(_) => panic!("a Delta stream gets Delta"),
    }
}

#[test]
fn sync_states_are_istiods() {
    let mut s = proxy_stream(false);
    let status = s.status(1, 0.0);
    let cds = &status.types[0];
    assert_eq!(config_status(cds), ConfigStatus::Stale);
    let nonce = cds.nonce_sent.clone().unwrap();
    let version = cds.version_sent.clone().unwrap();
    s.on_request(Request::Sotw(XdsRequest {
        type_url: ResourceType::Cluster.url(),
        response_nonce: nonce.clone(),
        version_info: version,
        ..Default::default()
    }));
    assert_eq!(
        config_status(&s.status(1, 0.0).types[0]),
        ConfigStatus::Synced
    );
    s.on_request(Request::Sotw(XdsRequest {
        type_url: ResourceType::Listener.url(),
        response_nonce: s.status(1, 0.0).types[1].nonce_sent.clone().unwrap(),
        error_detail: Some("bad listener".into()),
        ..Default::default()
    }));
    let lds = &s.status(1, 0.0).types[1];
    assert_eq!(config_status(lds), ConfigStatus::Error);
    let mut not_sent = lds.clone();
    not_sent.nonce_sent = None;
    not_sent.last_error = None;
    assert_eq!(config_status(&not_sent), ConfigStatus::NotSent);
}

#[test]
fn syncz_leaves_out_debug_clients_and_other_namespaces() {
    let proxy = proxy_stream(false).status(1, 0.0);
    let mut client = StreamState::new(Protocol::Sotw, Arc::default());
    client
        .connect(&sotw(
            SYNCZ,
            &[],
            "sidecar~10.0.0.9~x.istio-system~istio-system.svc.cluster.local",
        ))
        .unwrap();
    let client = client.status(2, 0.0);
    let all = [proxy, client];
    assert_eq!(
        syncz(&all, None).len(),
        1,
        "istioctl's own stream is no proxy"
    );
    assert_eq!(syncz(&all, Some("shop")).len(), 1);
    assert!(syncz(&all, Some("other")).is_empty());
}

#[test]
fn only_a_verified_caller_outside_the_system_namespace_is_restricted() {
    let caller = |ns: &str, verified: bool| {
        let mut p = axon_model::fixtures::proxy("sidecar", "10.0.0.1", ns, &[]);
        p.verified = verified;
        p
    };
    assert_eq!(
        caller_namespace(&caller("shop", false), "istio-system"),
        None
    );
    assert_eq!(
        caller_namespace(&caller("istio-system", true), "istio-system"),
        None
    );
    assert_eq!(
        caller_namespace(&caller("shop", true), "istio-system"),
        Some("shop".into())
    );
    assert!(names_proxy(PROXY, PROXY));
    assert!(
        names_proxy(PROXY, "pod-1.shop"),
        "istioctl proxy-status POD.NS"
    );
    assert!(!names_proxy(PROXY, "pod-1"));
}

#[test]
fn the_dump_has_envoys_sections_and_json() {
    let s = proxy_stream(false);
    let dump = s.config_dump(&DumpFilter::default()).unwrap();
    let types: Vec<_> = dump
        .configs
        .iter()
        .map(|a| a.type_url.rsplit('.').next().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "BootstrapConfigDump",
            "ClustersConfigDump",
            "ListenersConfigDump",
            "ScopedRoutesConfigDump",
            "RoutesConfigDump",
            "SecretsConfigDump"
        ]
    );
    let clusters = ClustersConfigDump::decode(dump.configs[1].value.as_slice()).unwrap();
    assert!(!clusters.dynamic_active_clusters.is_empty());
    let listeners = ListenersConfigDump::decode(dump.configs[2].value.as_slice()).unwrap();
    assert!(
        listeners
            .dynamic_listeners
            .iter()
            .all(|l| !l.name.is_empty())
    );

    let json = s.config_dump_json(&DumpFilter::default()).unwrap().unwrap();
    let first = &json["configs"][1]["dynamic_active_clusters"][0]["cluster"];
    assert_eq!(first["@type"], ResourceType::Cluster.as_str());
    assert!(first["name"].is_string());

    let cds = DumpFilter {
        types: DumpFilter::parse_types("CDS").unwrap(),
        ..Default::default()
    };
    let only = s.config_dump_resources(&cds);
    assert!(!only.is_empty());
    assert!(
        only.iter()
            .all(|r| r.type_url == ResourceType::Cluster.as_str()),
        "?types=cds: clusters alone"
    );
    assert!(
        DumpFilter::parse_types("cds,xds")
            .unwrap_err()
            .contains("xds")
    );

    // Envoy's ?resource=FIELD: the items of that field, each with its @type.
    let field = |f: &str| DumpFilter {
        resource: Some(f.into()),
        ..Default::default()
    };
    let active = s
        .config_dump_json(&field("dynamic_active_clusters"))
        .unwrap()
        .unwrap();
    let items = active["configs"].as_array().unwrap();
    assert_eq!(items.len(), clusters.dynamic_active_clusters.len());
    assert_eq!(
        items[0]["@type"],
        "type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster"
    );
    let endpoints = s
        .config_dump_json(&field("dynamic_endpoint_configs"))
        .unwrap()
        .unwrap();
    assert!(
        endpoints["configs"].is_array(),
        "endpoints come with ?resource= alone"
    );
    assert!(matches!(
        s.config_dump_json(&field("no_such_field")).unwrap(),
        Err(json::JsonError::NoSuchResource(_))
    ));
}

#[test]
fn keys_are_redacted_as_envoy_redacts_them() {
    let inline = |b: &[u8]| {
        Some(DataSource {
            specifier: Some(Specifier::InlineBytes(b.to_vec())),
            ..Default::default()
        })
    };
    let secret = Secret {
        name: "kubernetes://cert".into(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(b"CERT"),
            private_key: inline(b"KEY"),
            ..Default::default()
        })),
    };
    let Some(secret::Type::TlsCertificate(t)) = redact(secret).r#type else {
        panic!("still a certificate");
    };
    assert_eq!(
        t.certificate_chain,
        inline(b"CERT"),
        "a certificate is public"
    );
    assert_eq!(t.private_key, inline(REDACTED.as_bytes()));
}

#[test]
fn istio_debug_names_a_path_and_its_query() {
    assert_eq!(
        DebugType::parse("istio.io/debug"),
        Some(Some(DebugType::Http))
    );
    assert_eq!(
        DebugType::parse("istio.io/debugger"),
        None,
        "not a debug type"
    );
    let (path, query) = debug_path("config_dump?proxyID=a-1.shop&types=cds");
    assert_eq!(path, "config_dump");
    assert_eq!(
        query,
        [
            ("proxyID".to_string(), "a-1.shop".to_string()),
            ("types".to_string(), "cds".to_string())
        ]
    );
    assert_eq!(debug_path("/syncz"), ("syncz", vec![]));
}
