//! A scripted Delta ADS client for tests (`DeltaAggregatedResources`), and what it checks
//! of every response. Include with `#[path = "support/delta_client.rs"] mod delta_client;`
//! beside `#[path = "support/ads_client.rs"] mod ads_client;` and `mod support;`.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;

use crate::support::Axon;
use crate::support::ads_client::{
    CDS, EDS, GATEWAY_ID, LDS, RDS, ROUTE, V1, V2, ads_service, gateway_node, rejection,
};

/// What a Delta client has: name -> version, per type.
pub type Have = BTreeMap<String, BTreeMap<String, String>>;

pub fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

pub fn sorted(names: &[&str]) -> Vec<String> {
    let mut v = strings(names);
    v.sort();
    v
}

/// Names of the resources in a Delta response, sorted.
pub fn names(r: &DeltaDiscoveryResponse) -> Vec<String> {
    let mut n: Vec<String> = r.resources.iter().map(|r| r.name.clone()).collect();
    n.sort();
    n
}

/// name -> version of the resources in a Delta response.
pub fn versions(r: &DeltaDiscoveryResponse) -> BTreeMap<String, String> {
    r.resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect()
}

/// Checks what every Delta response must have.
pub fn check_response(r: &DeltaDiscoveryResponse, nonces: &mut BTreeSet<String>) {
    assert!(!r.nonce.is_empty(), "a nonce: {r:?}");
    assert!(
        !r.system_version_info.is_empty(),
        "a system_version_info: {r:?}"
    );
    assert!(
        nonces.insert(r.nonce.clone()),
        "nonce {} was already used",
        r.nonce
    );
    for res in &r.resources {
        assert!(!res.name.is_empty(), "a resource without a name: {r:?}");
        assert!(!res.version.is_empty(), "{} has no version", res.name);
        assert!(res.resource.is_some(), "{} has no body", res.name);
    }
}

/// One scripted Delta ADS stream.
pub struct Delta {
    pub tx: mpsc::Sender<DeltaDiscoveryRequest>,
    pub rx: Streaming<DeltaDiscoveryResponse>,
}

impl Delta {
    pub async fn connect(axon: &Axon) -> Delta {
        let mut client = ads_service(axon).await;
        let (tx, rx) = mpsc::channel(16);
        let rx = client
            .delta_aggregated_resources(ReceiverStream::new(rx))
            .await
            .expect("opening the Delta ADS stream")
            .into_inner();
        Delta { tx, rx }
    }

    pub async fn send(&self, req: DeltaDiscoveryRequest) {
        self.tx.send(req).await.expect("stream open");
    }

    /// A request: subscribe / unsubscribe names, answering `nonce`.
    pub async fn request(&self, type_url: &str, sub: &[&str], unsub: &[&str], nonce: &str) {
        self.send(DeltaDiscoveryRequest {
            type_url: type_url.to_string(),
            resource_names_subscribe: strings(sub),
            resource_names_unsubscribe: strings(unsub),
            response_nonce: nonce.to_string(),
            ..Default::default()
        })
        .await
    }

    /// The first request of the stream, with the node.
    pub async fn first(&self, type_url: &str, sub: &[&str]) {
        self.send(DeltaDiscoveryRequest {
            node: Some(gateway_node(GATEWAY_ID)),
            type_url: type_url.to_string(),
            resource_names_subscribe: strings(sub),
            ..Default::default()
        })
        .await
    }

    /// The first request, a wildcard CDS with the node; returns the next response.
    pub async fn first_cds(&mut self) -> DeltaDiscoveryResponse {
        self.first(CDS, &[]).await;
        self.next().await
    }

    pub async fn ack(&self, r: &DeltaDiscoveryResponse) {
        self.request(&r.type_url, &[], &[], &r.nonce).await
    }

    pub async fn nack(&self, r: &DeltaDiscoveryResponse, message: &str) {
        self.send(DeltaDiscoveryRequest {
            type_url: r.type_url.clone(),
            response_nonce: r.nonce.clone(),
            error_detail: Some(rejection(message)),
            ..Default::default()
        })
        .await
    }

    pub async fn next(&mut self) -> DeltaDiscoveryResponse {
        tokio::time::timeout(Duration::from_secs(15), self.rx.message())
            .await
            .expect("a response within 15 s")
            .expect("no stream error")
            .expect("stream still open")
    }

    /// From the first request (a wildcard CDS) on: ACKs every response and subscribes EDS
    /// `V1` and `V2`, LDS (wildcard) and RDS `ROUTE` one after the other, checking each
    /// response; returns what the client then has.
    pub async fn subscribe_all(&mut self, nonces: &mut BTreeSet<String>) -> Have {
        let mut have = Have::new();
        self.first(CDS, &[]).await;
        let subscriptions: [(&str, &[&str]); 3] = [(EDS, &[V1, V2]), (LDS, &[]), (RDS, &[ROUTE])];
        let mut pending = subscriptions.iter();
        loop {
            let r = self.next().await;
            check_response(&r, nonces);
            have.entry(r.type_url.clone())
                .or_default()
                .extend(versions(&r));
            self.ack(&r).await;
            match pending.next() {
                Some((type_url, sub)) => self.request(type_url, sub, &[], "").await,
                None => break,
            }
        }
        have
    }
}
