//! ServiceObjectIndex tests: k8s-openapi objects in, ServiceEntry configs out, no I/O.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Namespace, ObjectReference, Pod, PodSpec, Service, ServicePort as K8sPort, ServiceSpec,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;
use axon_config::config_set::SourceId;
use axon_config::config_set::merge_sources;
use axon_config::file_set::compare;
use axon_config::mesh::MeshConfig;
use axon_config::parse::{DocOutcome, parse_documents};
use axon_model::push_context::PushContext;
use axon_model::push_request::{PushRequest, TriggerReason};

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(ns.into()),
        name: Some(name.into()),
        resource_version: Some("1".into()),
        ..Default::default()
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A ClusterIP Service with `(name, port)` ports targeting `port + 8000`.
fn mk_service(ns: &str, name: &str, ports: &[(&str, i32)]) -> Service {
    Service {
        metadata: meta(ns, name),
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.0.0.10".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p)| K8sPort {
                        name: Some(n.to_string()),
                        port: *p,
                        target_port: Some(IntOrString::Int(p + 8000)),
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An EndpointSlice of `service` with `(port name, port)` ports and `(address, pod, ready)`
/// endpoints.
fn mk_slice(
    ns: &str,
    name: &str,
    service: &str,
    ports: &[(&str, i32)],
    endpoints: &[(&str, &str, bool)],
) -> EndpointSlice {
    let mut m = meta(ns, name);
    m.labels = Some(labels(&[(SERVICE_NAME_LABEL, service)]));
    EndpointSlice {
        metadata: m,
        address_type: "IPv4".into(),
        ports: Some(
            ports
                .iter()
                .map(|(n, p)| EndpointPort {
                    name: Some(n.to_string()),
                    port: Some(*p),
                    ..Default::default()
                })
                .collect(),
        ),
        endpoints: endpoints
            .iter()
            .map(|(addr, pod, ready)| Endpoint {
                addresses: vec![addr.to_string()],
                conditions: Some(EndpointConditions {
                    ready: Some(*ready),
                    ..Default::default()
                }),
                target_ref: Some(ObjectReference {
                    kind: Some("Pod".into()),
                    name: Some(pod.to_string()),
                    namespace: Some(ns.into()),
                    ..Default::default()
                }),
                zone: Some("zone-a".into()),
                ..Default::default()
            })
            .collect(),
    }
}

fn mk_pod(ns: &str, name: &str, pod_labels: &[(&str, &str)]) -> Pod {
    let mut m = meta(ns, name);
    m.labels = Some(labels(pod_labels));
    Pod {
        metadata: m,
        spec: Some(PodSpec {
            service_account_name: Some("reviews-sa".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn mk_namespace(name: &str, ns_labels: &[(&str, &str)]) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels(ns_labels)),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn index() -> ServiceObjectIndex {
    ServiceObjectIndex::new("cluster.local", NamespaceFilter::new(None))
}

fn entry<'a>(set: &'a ConfigSet, ns: &str, name: &str) -> &'a ServiceEntry {
    let key = ConfigKey::new(ConfigKind::ServiceEntry, ns, format!("svc:{name}"));
    match set.get(&key).map(|c| &c.spec) {
        Some(Spec::ServiceEntry(se)) => se,
        other => panic!("no ServiceEntry {key}: {other:?}"),
    }
}

fn addresses(se: &ServiceEntry) -> Vec<&str> {
    se.endpoints.iter().map(|e| e.address.as_str()).collect()
}

#[test]
fn a_service_with_named_ports_becomes_a_service_entry() {
    let mut idx = index();
    let mut svc = mk_service("shop", "reviews", &[("http-web", 9080), ("grpc", 9090)]);
    if let Some(spec) = svc.spec.as_mut()
        && let Some(ports) = spec.ports.as_mut()
    {
        ports.push(K8sPort {
            name: Some("metrics".into()),
            port: 9100,
            app_protocol: Some("http".into()),
            target_port: Some(IntOrString::String("metrics".into())),
            ..Default::default()
        });
    }
    svc.metadata.annotations = Some(labels(&[(EXPORT_TO_ANNOTATION, ".,istio-system")]));
    idx.apply_service(&svc);
    let configs = idx.configs();
    let config = configs.values().next().expect("one config");
    assert_eq!(config.key.to_string(), "ServiceEntry/shop/svc:reviews");
    assert_eq!(
        config.labels.get(SOURCE_LABEL).map(String::as_str),
        Some("kubernetes")
    );
    let se = entry(&configs, "shop", "reviews");
    assert_eq!(se.hosts, ["reviews.shop.svc.cluster.local"]);
    assert_eq!(se.addresses, ["10.0.0.10"]);
    assert_eq!(se.location, Location::MeshInternal);
    assert_eq!(se.resolution, Resolution::Static);
    assert_eq!(se.export_to, [".", "istio-system"]);
    let ports: Vec<(&str, u32, &str, Option<u32>)> = se
        .ports
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.number,
                p.protocol.as_str(),
                p.target_port,
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("http-web", 9080, "HTTP", Some(17080)),
            ("grpc", 9090, "GRPC", Some(17090)),
            ("metrics", 9100, "HTTP", None),
        ]
    );
    // The cluster domain is configurable for Kubernetes hostnames.
    let mut other = ServiceObjectIndex::new("corp.internal", NamespaceFilter::new(None));
    other.apply_service(&svc);
    assert_eq!(
        entry(&other.configs(), "shop", "reviews").hosts,
        ["reviews.shop.svc.corp.internal"]
    );
}

#[test]
fn endpoint_slices_split_across_slices_are_merged_with_pod_labels() {
    let mut idx = index();
    idx.apply_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.apply_pod(&mk_pod(
        "shop",
        "r1",
        &[("app", "reviews"), ("version", "v1")],
    ));
    idx.apply_pod(&mk_pod(
        "shop",
        "r2",
        &[("app", "reviews"), ("version", "v2")],
    ));
    idx.apply_slice(&mk_slice(
        "shop",
        "reviews-a",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.1", "r1", true)],
    ));
    idx.apply_slice(&mk_slice(
        "shop",
        "reviews-b",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.2", "r2", true), ("10.1.0.3", "r3", false)],
    ));
    let before = idx.configs();
    let se = entry(&before, "shop", "reviews");
    assert_eq!(
        addresses(se),
        ["10.1.0.1", "10.1.0.2"],
        "not-ready r3 is left out"
    );
    let v1 = &se.endpoints[0];
    assert_eq!(v1.ports, BTreeMap::from([("http".to_string(), 8080)]));
    assert_eq!(v1.labels.get("version").map(String::as_str), Some("v1"));
    assert_eq!(v1.service_account, "reviews-sa");
    assert_eq!(v1.locality, "/zone-a");

    // One slice goes away: an endpoints-only change.
    idx.delete_slice(&mk_slice("shop", "reviews-b", "reviews", &[], &[]));
    let after = idx.configs();
    assert_eq!(addresses(entry(&after, "shop", "reviews")), ["10.1.0.1"]);
    let (changed, endpoints_only) = compare(&before, &after);
    assert_eq!(changed.len(), 1);
    assert!(endpoints_only);
}

#[test]
fn a_pod_label_change_is_an_endpoints_only_change_and_status_is_no_change() {
    let mut idx = index();
    idx.apply_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.apply_slice(&mk_slice(
        "shop",
        "reviews-a",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.1", "r1", true)],
    ));
    let no_pod = idx.configs();
    assert!(
        entry(&no_pod, "shop", "reviews").endpoints[0]
            .labels
            .is_empty()
    );
    idx.apply_pod(&mk_pod("shop", "r1", &[("version", "v1")]));
    let v1 = idx.configs();
    idx.apply_pod(&mk_pod("shop", "r1", &[("version", "v2")]));
    let v2 = idx.configs();
    let (changed, endpoints_only) = compare(&v1, &v2);
    assert_eq!(changed.len(), 1);
    assert!(endpoints_only);
    assert_eq!(
        entry(&v2, "shop", "reviews").endpoints[0]
            .labels
            .get("version")
            .map(String::as_str),
        Some("v2")
    );

    // A new resourceVersion and status, same labels: nothing changes, the Arc is shared.
    let mut pod = mk_pod("shop", "r1", &[("version", "v2")]);
    pod.metadata.resource_version = Some("99".into());
    pod.status = Some(Default::default());
    idx.apply_pod(&pod);
    let mut svc = mk_service("shop", "reviews", &[("http", 9080)]);
    svc.metadata.resource_version = Some("42".into());
    svc.status = Some(Default::default());
    idx.apply_service(&svc);
    let same = idx.configs();
    assert!(compare(&v2, &same).0.is_empty());
    assert!(Arc::ptr_eq(
        v2.values().next().unwrap(),
        same.values().next().unwrap()
    ));
}

#[test]
fn headless_external_name_and_publish_not_ready() {
    let mut idx = index();
    let mut headless = mk_service("db", "pg", &[("tcp-pg", 5432)]);
    if let Some(spec) = headless.spec.as_mut() {
        spec.cluster_ip = Some("None".into());
    }
    idx.apply_service(&headless);
    idx.apply_slice(&mk_slice(
        "db",
        "pg-a",
        "pg",
        &[("tcp-pg", 5432)],
        &[("10.2.0.1", "pg-0", true)],
    ));
    let mut external = mk_service("db", "ext", &[("https", 443)]);
    if let Some(spec) = external.spec.as_mut() {
        spec.type_ = Some("ExternalName".into());
        spec.external_name = Some("db.example.com".into());
        spec.cluster_ip = None;
    }
    idx.apply_service(&external);
    let mut all = mk_service("db", "all", &[("http", 80)]);
    if let Some(spec) = all.spec.as_mut() {
        spec.publish_not_ready_addresses = Some(true);
    }
    idx.apply_service(&all);
    idx.apply_slice(&mk_slice(
        "db",
        "all-a",
        "all",
        &[("http", 8080)],
        &[("10.2.0.9", "x", false)],
    ));
    let configs = idx.configs();

    let pg = entry(&configs, "db", "pg");
    assert_eq!(pg.resolution, Resolution::None);
    // A headless Service's endpoints are its pods (a sidecar's listener per pod).
    assert!(pg.addresses.is_empty());
    assert_eq!(addresses(pg), ["10.2.0.1"]);
    assert_eq!(pg.ports[0].protocol, "TCP");
    let ext = entry(&configs, "db", "ext");
    assert_eq!(ext.resolution, Resolution::Dns);
    assert_eq!(addresses(ext), ["db.example.com"]);
    assert_eq!(ext.ports[0].protocol, "HTTPS");
    // istiod's `MeshExternal` for an ExternalName Service; the others are in the mesh.
    assert_eq!(ext.location, Location::MeshExternal);
    assert_eq!(pg.location, Location::MeshInternal);
    assert_eq!(addresses(entry(&configs, "db", "all")), ["10.2.0.9"]);

    // Deleting the Service removes its entry; its slices stay held for a new Service.
    idx.delete_service(&headless);
    assert_eq!(idx.configs().len(), 2);
}

#[test]
fn a_relist_replaces_the_kind_without_losing_or_duplicating() {
    let mut idx = index();
    for kind in [
        ServiceKind::Service,
        ServiceKind::EndpointSlice,
        ServiceKind::Pod,
    ] {
        idx.init(kind);
    }
    idx.init_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.init_service(&mk_service("shop", "ratings", &[("http", 9080)]));
    idx.init_slice(&mk_slice(
        "shop",
        "reviews-a",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.1", "r1", true)],
    ));
    for kind in [
        ServiceKind::Service,
        ServiceKind::EndpointSlice,
        ServiceKind::Pod,
    ] {
        idx.init_done(kind);
    }
    let first = idx.configs();
    assert_eq!(first.len(), 2);

    // After a 410: ratings was deleted and reviews gained an endpoint meanwhile.
    idx.init(ServiceKind::Service);
    idx.init(ServiceKind::EndpointSlice);
    idx.init_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.init_slice(&mk_slice(
        "shop",
        "reviews-a",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.1", "r1", true), ("10.1.0.2", "r2", true)],
    ));
    assert_eq!(
        idx.configs().len(),
        2,
        "the old state serves until the list is done"
    );
    idx.init_done(ServiceKind::Service);
    idx.init_done(ServiceKind::EndpointSlice);
    let second = idx.configs();
    assert_eq!(second.len(), 1);
    assert_eq!(
        addresses(entry(&second, "shop", "reviews")),
        ["10.1.0.1", "10.1.0.2"]
    );
    let (changed, _) = compare(&first, &second);
    assert_eq!(changed.len(), 2);
}

#[test]
fn the_namespace_selector_drops_other_namespaces() {
    let filter = NamespaceFilter::new(Some("mesh=on".parse().unwrap()));
    let mut idx = ServiceObjectIndex::new("cluster.local", filter);
    idx.init(ServiceKind::Namespace);
    idx.init_namespace(&mk_namespace("shop", &[("mesh", "on")]));
    idx.init_namespace(&mk_namespace("other", &[]));
    let change = idx.init_done(ServiceKind::Namespace);
    assert_eq!(change.added.len(), 1);
    idx.apply_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.apply_service(&mk_service("other", "secret", &[("http", 9080)]));
    idx.apply_pod(&mk_pod("other", "p", &[]));
    // The service of `shop`, and `shop` itself (its labels); nothing of `other`.
    let configs = idx.configs();
    let kinds: Vec<(ConfigKind, &str)> =
        configs.keys().map(|k| (k.kind, k.name.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (ConfigKind::ServiceEntry, "svc:reviews"),
            (ConfigKind::Namespace, "shop")
        ]
    );
    assert_eq!(
        idx.counts()["pods"],
        0,
        "objects of other namespaces are not held"
    );

    // The namespace stops matching: its objects are dropped.
    let change = idx.apply_namespace(&mk_namespace("shop", &[("mesh", "off")]));
    assert_eq!(change.removed.len(), 1);
    assert!(idx.configs().is_empty());
    assert_eq!(idx.counts()["services"], 0);
    // It matches again: the registry relists (added is reported).
    assert_eq!(
        idx.apply_namespace(&mk_namespace("shop", &[("mesh", "on")]))
            .added
            .len(),
        1
    );
}

#[test]
fn a_config_directory_entry_wins_the_host_and_the_key() {
    let mut idx = index();
    idx.apply_service(&mk_service("shop", "reviews", &[("http", 9080)]));
    idx.apply_slice(&mk_slice(
        "shop",
        "reviews-a",
        "reviews",
        &[("http", 8080)],
        &[("10.1.0.1", "r1", true)],
    ));
    let kube = idx.configs();
    // A ServiceEntry whose name sorts after `svc:reviews`, for the same host.
    let yaml = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: zz-reviews, namespace: shop}\nspec:\n  hosts: [reviews.shop.svc.cluster.local]\n  location: MESH_INTERNAL\n  resolution: STATIC\n  ports: [{number: 9080, name: http, protocol: HTTP}]\n  endpoints: [{address: 127.0.0.1}]\n";
    let DocOutcome::Config(file_config) = parse_documents(yaml, "default").remove(0).outcome else {
        panic!("the fixture parses")
    };
    let files: ConfigSet = [(file_config.key.clone(), Arc::new(*file_config))].into();
    let sources: BTreeMap<SourceId, Arc<ConfigSet>> = [
        ("files", Arc::new(files)),
        (crate::registry::kubernetes::SERVICES_SOURCE, kube),
    ]
    .into();
    let merged = merge_sources(&sources);
    let ctx = PushContext::build(
        None,
        &merged,
        &PushRequest::full_push(TriggerReason::Config, std::time::Instant::now()),
        &Arc::new(MeshConfig::default()),
    );
    let service = ctx
        .service("reviews.shop.svc.cluster.local")
        .expect("the host");
    assert_eq!(service.source.name, "zz-reviews");
    assert_eq!(
        ctx.endpoints("reviews.shop.svc.cluster.local", 9080)[0].address,
        "127.0.0.1"
    );
}
