//! The ADS protocol, driven by a scripted client against a real `axon serve`: every response
//! has a fresh nonce; an ACK is not answered; a stale nonce is ignored; a NACK is counted and
//! not answered; a full push goes CDS, EDS, LDS, RDS; bad first requests close the stream.

mod support;

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_client::AggregatedDiscoveryServiceClient,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use support::{Axon, ConfigDir};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const GATEWAY_ID: &str = "router~10.0.0.1~gw-1.istio-system~istio-system.svc.cluster.local";

fn mesh(weight_v1: u32) -> String {
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw, namespace: istio-system}}
spec:
  selector: {{istio: ingressgateway}}
  servers: [{{port: {{number: 18080, name: http, protocol: HTTP}}, hosts: ["*"]}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: svc, namespace: demo}}
spec:
  hosts: [svc.demo.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 10.0.0.9, labels: {{version: v1}}}}, {{address: 10.0.0.10, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: svc, namespace: demo}}
spec:
  host: svc
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc, namespace: demo}}
spec:
  hosts: ["*"]
  gateways: [istio-system/gw]
  http:
  - route:
    - {{destination: {{host: svc, subset: v1}}, weight: {weight_v1}}}
    - {{destination: {{host: svc, subset: v2}}, weight: {}}}
"#,
        100 - weight_v1
    )
}

/// The names the scripted client keeps subscribed, per type.
fn subscribed(type_url: &str) -> &'static [&'static str] {
    match type_url {
        EDS => &["outbound|80|v1|svc.demo.svc.cluster.local"],
        RDS => &["http.18080"],
        _ => &[],
    }
}

fn node(id: &str) -> Node {
    let s = |v: &str| Value {
        kind: Some(Kind::StringValue(v.to_string())),
    };
    Node {
        id: id.to_string(),
        metadata: Some(Struct {
            fields: [
                ("NAMESPACE".to_string(), s("istio-system")),
                (
                    "LABELS".to_string(),
                    Value {
                        kind: Some(Kind::StructValue(Struct {
                            fields: [("istio".to_string(), s("ingressgateway"))].into(),
                        })),
                    },
                ),
            ]
            .into(),
        }),
        ..Default::default()
    }
}

/// One scripted ADS stream.
struct Client {
    tx: mpsc::Sender<DiscoveryRequest>,
    rx: Streaming<DiscoveryResponse>,
    last_version: String,
}

impl Client {
    async fn connect(axon: &Axon) -> Client {
        let mut client =
            AggregatedDiscoveryServiceClient::connect(format!("http://{}", axon.xds_addr()))
                .await
                .expect("connecting to axon");
        let (tx, rx) = mpsc::channel(16);
        let rx = client
            .stream_aggregated_resources(ReceiverStream::new(rx))
            .await
            .expect("opening the ADS stream")
            .into_inner();
        Client {
            tx,
            rx,
            last_version: String::new(),
        }
    }

    async fn send(&self, req: DiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    async fn request(&self, type_url: &str, names: &[&str], nonce: &str, node: Option<Node>) {
        self.send(DiscoveryRequest {
            type_url: type_url.to_string(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            response_nonce: nonce.to_string(),
            node,
            ..Default::default()
        })
        .await
    }

    async fn ack(&self, r: &DiscoveryResponse, names: &[&str]) {
        self.send(DiscoveryRequest {
            type_url: r.type_url.clone(),
            version_info: r.version_info.clone(),
            response_nonce: r.nonce.clone(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            ..Default::default()
        })
        .await
    }

    async fn next(&mut self) -> DiscoveryResponse {
        let r = tokio::time::timeout(Duration::from_secs(15), self.rx.message())
            .await
            .expect("a response within 15 s")
            .expect("no stream error")
            .expect("stream still open");
        self.last_version = r.version_info.clone();
        r
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn nonces_acks_nacks_and_push_order() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &mesh(100));
    let axon = Axon::start(dir.path());
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let mut nonces = std::collections::BTreeSet::new();

        c.request(CDS, &[], "", Some(node(GATEWAY_ID))).await;
        let cds = c.next().await;
        assert_eq!(cds.type_url, CDS);
        assert!(!cds.nonce.is_empty() && !cds.version_info.is_empty());
        assert_eq!(cds.resources.len(), 4, "black hole + 3 clusters");
        nonces.insert(cds.nonce.clone());

        // The ACK is not answered: the next response on the stream answers LDS.
        c.ack(&cds, &[]).await;
        c.request(LDS, &[], "", None).await;
        let lds = c.next().await;
        assert_eq!(lds.type_url, LDS, "an ACK must not be answered");
        assert!(nonces.insert(lds.nonce.clone()), "nonces are unique");
        c.ack(&lds, &[]).await;

        // A stale nonce is ignored; a new EDS subscription is answered.
        c.request(CDS, &[], "not-a-nonce-we-sent", None).await;
        let names = subscribed(EDS);
        c.request(EDS, names, "", None).await;
        let eds = c.next().await;
        assert_eq!(eds.type_url, EDS, "a stale nonce must be ignored");
        assert_eq!(eds.resources.len(), 1);
        assert!(nonces.insert(eds.nonce.clone()));

        // A NACK is recorded and not answered.
        c.send(DiscoveryRequest {
            type_url: EDS.to_string(),
            response_nonce: eds.nonce.clone(),
            resource_names: names.iter().map(|n| n.to_string()).collect(),
            error_detail: Some(RpcStatus {
                code: 3,
                message: "scripted rejection".into(),
                details: vec![],
            }),
            ..Default::default()
        })
        .await;
        c.request(RDS, &["http.18080"], "", None).await;
        let rds = c.next().await;
        assert_eq!(rds.type_url, RDS, "a NACK must not be answered");
        assert!(nonces.insert(rds.nonce.clone()));
        c.ack(&rds, &["http.18080"]).await;
        let eds_ack = DiscoveryResponse {
            nonce: eds.nonce.clone(),
            ..eds.clone()
        };
        c.ack(&eds_ack, names).await;
        assert!(
            support::wait_until(Duration::from_secs(5), || axon
                .metrics()
                .contains("pilot_total_xds_rejects{type=\"eds\"} 1")),
            "{}",
            axon.metrics()
        );
        assert!(
            axon.logs().contains("scripted rejection"),
            "the NACK is logged"
        );

        // A config change: a full push in the order CDS, EDS, LDS, RDS, with a new version.
        dir.write("mesh.yaml", &mesh(50));
        let mut order = Vec::new();
        for _ in 0..4 {
            let r = c.next().await;
            assert_ne!(r.version_info, cds.version_info, "a new version");
            assert!(nonces.insert(r.nonce.clone()), "nonces are unique");
            order.push(r.type_url.clone());
            c.ack(&r, subscribed(&r.type_url)).await;
        }
        assert_eq!(order, [CDS, EDS, LDS, RDS]);
        assert!(axon.metrics().contains("pilot_xds 1"), "{}", axon.metrics());
        let version: u64 = c.last_version.parse().unwrap();

        // The same spec saved again (a comment added) builds nothing and pushes nothing: the
        // next real change is exactly one version later.
        let before = axon.log_len();
        dir.write("mesh.yaml", &format!("# saved again\n{}", mesh(50)));
        assert!(
            axon.wait_for_log_line_after(before, Duration::from_secs(10), |l| l
                .contains("no config changed"))
                .is_some(),
            "the re-save is seen"
        );
        dir.write(
            "extra.yaml",
            &mesh(50).replace(
                "name: svc, namespace: demo}\nspec:\n  hosts: [\"*\"]",
                "name: svc2, namespace: demo}\nspec:\n  hosts: [\"*\"]",
            ),
        );
        let r = c.next().await;
        assert_eq!(r.type_url, CDS);
        assert_eq!(
            r.version_info,
            (version + 1).to_string(),
            "no push for the re-save"
        );
        c.ack(&r, &[]).await;
        for _ in 0..3 {
            let r = c.next().await;
            c.ack(&r, subscribed(&r.type_url)).await;
        }

        // Deleting the files removes their config: the next CDS has only the black hole.
        dir.remove("extra.yaml");
        dir.remove("mesh.yaml");
        // (The two deletions may land in one push or two: read until CDS has shrunk.)
        loop {
            let r = c.next().await;
            if r.type_url == CDS && r.resources.len() == 1 {
                break; // only BlackHoleCluster is left
            }
            c.ack(&r, subscribed(&r.type_url)).await;
        }
    });
}

#[test]
fn bad_first_requests_close_only_their_stream() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &mesh(100));
    let axon = Axon::start(dir.path());
    runtime().block_on(async {
        let mut good = Client::connect(&axon).await;
        good.request(CDS, &[], "", Some(node(GATEWAY_ID))).await;
        let first = good.next().await;

        for (node, why) in [
            (None, "node"),
            (
                Some(node("envoy-without-istio-id")),
                "envoy-without-istio-id",
            ),
        ] {
            let mut bad = Client::connect(&axon).await;
            bad.request(CDS, &[], "", node).await;
            let status = tokio::time::timeout(Duration::from_secs(15), bad.rx.message())
                .await
                .expect("an answer")
                .expect_err("the stream is closed with an error");
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().contains(why), "{}", status.message());
        }

        // The good stream is undisturbed.
        good.ack(&first, &[]).await;
        good.request(LDS, &[], "", None).await;
        assert_eq!(good.next().await.type_url, LDS);
    });
}

fn scoped_mesh(b_weight: u32) -> String {
    let se = |ns: &str| {
        format!(
            r#"apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: svc, namespace: {ns}}}
spec:
  hosts: [svc.{ns}.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{{number: 80, name: http, protocol: HTTP}}]
  endpoints: [{{address: 10.0.0.9, labels: {{version: v1}}}}, {{address: 10.0.0.10, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: svc, namespace: {ns}}}
spec:
  host: svc
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
"#
        )
    };
    format!(
        r#"{}{}apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  egress: [{{hosts: ["./*"]}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: svc, namespace: b}}
spec:
  hosts: [svc]
  http:
  - route:
    - {{destination: {{host: svc, subset: v1}}, weight: {}}}
    - {{destination: {{host: svc, subset: v2}}, weight: {b_weight}}}
"#,
        se("a"),
        se("b"),
        100 - b_weight
    )
}

#[test]
fn a_change_outside_a_proxys_scope_sends_it_nothing() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &scoped_mesh(0));
    let axon = Axon::start(dir.path());
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        let mut sidecar = node("sidecar~10.3.0.1~app-1.a~a.svc.cluster.local");
        sidecar.metadata.as_mut().unwrap().fields.insert(
            "NAMESPACE".into(),
            Value {
                kind: Some(Kind::StringValue("a".into())),
            },
        );
        c.request(CDS, &[], "", Some(sidecar)).await;
        let cds = c.next().await;
        assert_eq!(
            cds.resources.len(),
            5,
            "black hole, passthrough, svc.a x3 (not svc.b)"
        );
        c.ack(&cds, &[]).await;

        // VirtualService svc in b: outside the Sidecar's `./*`. A context is built, and
        // this proxy is not sent anything for it.
        let before = axon.log_len();
        dir.write("mesh.yaml", &scoped_mesh(50));
        let built = axon
            .wait_for_log_line_after(before, Duration::from_secs(10), |l| {
                l.contains("push context built") && l.contains("changed=1")
            })
            .expect("the change to b is built");
        let version: u64 = built
            .split("version=")
            .nth(1)
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("a version in the log line");

        // An in-scope change (a DestinationRule in a) is the next thing it receives.
        let in_scope = scoped_mesh(50).replacen(
            "name: v2, labels: {version: v2}",
            "name: v3, labels: {version: v2}",
            1,
        );
        dir.write("mesh.yaml", &in_scope);
        let r = c.next().await;
        assert_eq!(r.type_url, CDS);
        assert_eq!(
            r.version_info,
            (version + 1).to_string(),
            "the first response after the change in b is the change in a"
        );
    });
}

#[test]
fn an_endpoint_change_is_pushed_as_eds_only() {
    let dir = ConfigDir::new();
    dir.write("mesh.yaml", &mesh(100));
    let axon = Axon::start(dir.path());
    runtime().block_on(async {
        let mut c = Client::connect(&axon).await;
        c.request(CDS, &[], "", Some(node(GATEWAY_ID))).await;
        let cds = c.next().await;
        c.ack(&cds, &[]).await;
        c.request(EDS, subscribed(EDS), "", None).await;
        let eds = c.next().await;
        c.ack(&eds, subscribed(EDS)).await;

        // Only the inline endpoints of the ServiceEntry change.
        dir.write("mesh.yaml", &mesh(100).replace("10.0.0.9", "10.0.0.19"));
        let r = c.next().await;
        assert_eq!(r.type_url, EDS, "no CDS before it: an EDS-only push");
        assert_ne!(r.version_info, eds.version_info);
        assert!(
            axon.wait_for_log("full=false", Duration::from_secs(5)),
            "an incremental context: {}",
            axon.logs()
        );
        c.ack(&r, subscribed(EDS)).await;

        // An endpoint of a cluster this client does not watch (v2) changes: nothing is sent;
        // the next response is the following config change, CDS first.
        dir.write(
            "mesh.yaml",
            &mesh(100)
                .replace("10.0.0.9", "10.0.0.19")
                .replace("10.0.0.10", "10.0.0.20"),
        );
        assert!(
            support::wait_until(Duration::from_secs(10), || axon
                .logs()
                .matches("full=false")
                .count()
                >= 2),
            "the second endpoint change is built"
        );
        dir.write(
            "mesh.yaml",
            &mesh(50)
                .replace("10.0.0.9", "10.0.0.19")
                .replace("10.0.0.10", "10.0.0.20"),
        );
        let r = c.next().await;
        assert_eq!(
            r.type_url, CDS,
            "the unwatched endpoint change sent nothing"
        );
    });
}
