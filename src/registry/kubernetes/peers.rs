//! The peer replicas from Kubernetes: the EndpointSlices of a headless Service
//! (`--peer-service NAME`, in axon's own namespace) give the other replicas' monitoring
//! addresses, sent to the Fleet actor as [`SetPeers`] whenever they change.
//!
//! [`PeerIndex`] is pure (EndpointSlices in, addresses out, tested without I/O): every ready
//! endpoint of the Service's slices, at the slice's port named `http-monitoring` or
//! `monitoring` (else this replica's own monitoring port), but this replica itself (by its
//! pod name in the endpoint's `targetRef`, or its address). A relist replaces what the index
//! holds at its end, as the other registries' stores do. [`watch`] is the shell: a kube
//! watcher (default backoff) on the slices labelled `kubernetes.io/service-name=NAME`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use actix::Recipient;
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};

use crate::actors::fleet::SetPeers;

/// Who this replica is, so that it is not its own peer.
#[derive(Debug, Clone, Default)]
pub struct Own {
    /// The pod name (`POD_NAME`, `--replica-name`).
    pub name: Option<String>,
    /// The pod IP (`POD_IP`).
    pub ip: Option<IpAddr>,
    /// The monitoring port, used when a slice names no monitoring port.
    pub port: u16,
}

/// The peer Service's EndpointSlices, as peer addresses.
#[derive(Debug, Default)]
pub struct PeerIndex {
    own: Own,
    slices: BTreeMap<String, Vec<String>>,
    /// A (re)list in progress: replaces `slices` at its end.
    listing: Option<BTreeMap<String, Vec<String>>>,
}

impl PeerIndex {
    pub fn new(own: Own) -> PeerIndex {
        PeerIndex {
            own,
            ..Default::default()
        }
    }

    /// Applies one watch event; returns whether the peers changed.
    pub fn on_event(&mut self, event: Event<EndpointSlice>) -> bool {
        let before = self.peers();
        match event {
            Event::Init => self.listing = Some(BTreeMap::new()),
            Event::InitApply(slice) => {
                let (name, addrs) = self.addresses(&slice);
                self.listing.get_or_insert_default().insert(name, addrs);
            }
            Event::InitDone => {
                if let Some(listed) = self.listing.take() {
                    self.slices = listed;
                }
            }
            Event::Apply(slice) => {
                let (name, addrs) = self.addresses(&slice);
                self.slices.insert(name, addrs);
            }
            Event::Delete(slice) => {
                self.slices
                    .remove(&slice.metadata.name.clone().unwrap_or_default());
            }
        }
        self.peers() != before
    }

    /// Every peer's monitoring address, sorted, once each.
    pub fn peers(&self) -> Vec<String> {
        let mut all: Vec<String> = self.slices.values().flatten().cloned().collect();
        all.sort();
        all.dedup();
        all
    }

    fn addresses(&self, slice: &EndpointSlice) -> (String, Vec<String>) {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let port = slice
            .ports
            .iter()
            .flatten()
            .find(|p| matches!(p.name.as_deref(), Some("http-monitoring" | "monitoring")))
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(self.own.port);
        let mut out = Vec::new();
        for endpoint in &slice.endpoints {
            let ready = endpoint.conditions.as_ref().and_then(|c| c.ready) != Some(false);
            let pod = endpoint.target_ref.as_ref().and_then(|r| r.name.as_deref());
            if !ready || (pod.is_some() && pod == self.own.name.as_deref()) {
                continue;
            }
            for address in &endpoint.addresses {
                let Ok(ip) = address.parse::<IpAddr>() else {
                    continue;
                };
                if Some(ip) == self.own.ip {
                    continue;
                }
                out.push(std::net::SocketAddr::new(ip, port).to_string());
            }
        }
        (name, out)
    }
}

/// Watches the EndpointSlices of `service` in `namespace` and sends the Fleet actor the
/// peers whenever they change; runs until the Fleet actor stops.
pub async fn watch(
    client: kube::Client,
    namespace: String,
    service: String,
    own: Own,
    to: Recipient<SetPeers>,
) {
    let api = Api::<EndpointSlice>::namespaced(client, &namespace);
    let config =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
    let mut index = PeerIndex::new(own);
    let mut stream = watcher(api, config).default_backoff().boxed();
    while let Some(next) = stream.next().await {
        match next {
            Ok(event) => {
                if index.on_event(event) && to.send(SetPeers(index.peers())).await.is_err() {
                    return;
                }
            }
            Err(error) => {
                tracing::warn!(%error, %service, "watching the peer Service's EndpointSlices failed; retrying with backoff");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(name: &str, endpoints: serde_json::Value, ports: serde_json::Value) -> EndpointSlice {
        serde_json::from_value(json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "istio-system",
                         "labels": {"kubernetes.io/service-name": "axon-peers"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": ports,
        }))
        .unwrap()
    }

    fn endpoint(ip: &str, pod: &str, ready: bool) -> serde_json::Value {
        json!({"addresses": [ip], "conditions": {"ready": ready},
               "targetRef": {"kind": "Pod", "name": pod, "namespace": "istio-system"}})
    }

    fn own() -> Own {
        Own {
            name: Some("axon-0".into()),
            ip: Some("10.0.0.1".parse().unwrap()),
            port: 15014,
        }
    }

    #[test]
    fn ready_endpoints_but_this_replica_are_the_peers() {
        let mut index = PeerIndex::new(own());
        index.on_event(Event::Init);
        index.on_event(Event::InitApply(slice(
            "axon-peers-a",
            json!([
                endpoint("10.0.0.1", "axon-0", true),
                endpoint("10.0.0.2", "axon-1", true),
                endpoint("10.0.0.3", "axon-2", false),
            ]),
            json!([{"name": "http-monitoring", "port": 9000}]),
        )));
        assert!(index.peers().is_empty(), "nothing until the list is done");
        assert!(index.on_event(Event::InitDone));
        assert_eq!(index.peers(), ["10.0.0.2:9000"]);
        // A second slice without a monitoring port: this replica's own port.
        assert!(index.on_event(Event::Apply(slice(
            "axon-peers-b",
            json!([endpoint("10.0.0.4", "axon-3", true), {"addresses": ["10.0.0.5"]}]),
            json!([{"name": "grpc-xds", "port": 15010}]),
        ))));
        assert_eq!(
            index.peers(),
            ["10.0.0.2:9000", "10.0.0.4:15014", "10.0.0.5:15014"],
            "no conditions is ready"
        );
        assert!(!index.on_event(Event::Apply(slice(
            "axon-peers-b",
            json!([{"addresses": ["10.0.0.5"]}, endpoint("10.0.0.4", "axon-3", true)]),
            json!([]),
        ))));
        assert!(index.on_event(Event::Delete(slice("axon-peers-a", json!([]), json!([])))));
        assert_eq!(index.peers(), ["10.0.0.4:15014", "10.0.0.5:15014"]);
    }

    #[test]
    fn a_relist_replaces_what_was_held() {
        let mut index = PeerIndex::new(own());
        index.on_event(Event::Apply(slice(
            "old",
            json!([endpoint("10.0.0.9", "axon-9", true)]),
            json!([]),
        )));
        index.on_event(Event::Init);
        index.on_event(Event::InitApply(slice(
            "new",
            json!([endpoint("10.0.0.2", "axon-1", true)]),
            json!([]),
        )));
        assert_eq!(
            index.peers(),
            ["10.0.0.9:15014"],
            "the old state serves meanwhile"
        );
        index.on_event(Event::InitDone);
        assert_eq!(index.peers(), ["10.0.0.2:15014"]);
    }
}
