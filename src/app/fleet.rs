//! The wiring of several replicas: this replica's name, the Fleet actor, and where its peers
//! come from (`--peers` in file mode, `--peer-service` with `--kubernetes`).

use std::sync::Arc;

use actix::prelude::*;

use crate::actors::fleet::{Fleet, FleetSettings, SetPeers};
use crate::http::peer_client::HttpPeers;
use crate::limits::Limits;
use crate::registry::kubernetes::peers::{self, Own};
use axon_metrics::Metrics;
use axon_transport::AdsService;

/// This replica's name: `--replica-name`, else `POD_NAME` (unique in a cluster), else the
/// host name (`HOSTNAME`, or the kernel's; `axon` without one) with the monitoring port:
/// replicas on one host share the host name, never the port, so each picks its own name.
pub fn replica_name(flag: Option<&str>, monitoring_port: u16) -> String {
    if let Some(name) = flag.filter(|n| !n.is_empty()) {
        return name.to_string();
    }
    if let Ok(name) = std::env::var("POD_NAME")
        && !name.is_empty()
    {
        return name;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "axon".to_string());
    let name = format!("{host}-{monitoring_port}");
    tracing::info!(
        replica = %name,
        "replica name: the host name and the monitoring port (no --replica-name or POD_NAME)"
    );
    name
}

/// Where the peers come from.
pub enum PeerSource {
    None,
    /// `--peers`: the peers' monitoring addresses.
    Static(Vec<String>),
    /// `--peer-service`: the EndpointSlices of this Service, in `namespace`.
    Service {
        client: kube::Client,
        namespace: String,
        service: String,
    },
}

impl PeerSource {
    pub fn configured(&self) -> bool {
        !matches!(self, PeerSource::None)
    }
}

/// Starts the Fleet actor and what feeds it its peers; the receiver resolves when an older
/// replica turns out to have this replica's name.
pub fn start(
    replica: &str,
    source: PeerSource,
    monitoring_port: u16,
    ads: &AdsService,
    client: HttpPeers,
    limits: &Limits,
    metrics: &Metrics,
) -> (Addr<Fleet>, tokio::sync::oneshot::Receiver<String>) {
    let (name_taken, name_taken_rx) = tokio::sync::oneshot::channel();
    let fleet = Fleet::new(
        FleetSettings {
            replica: replica.to_string(),
            poll_interval: limits.peer_poll_interval,
            max_peers: limits.max_peers,
            slack: limits.rebalance_slack,
            rate: limits.rebalance_rate,
            settle: limits.rebalance_settle,
        },
        Arc::new(ads.clone()),
        Arc::new(client),
        metrics.clone(),
    )
    .on_name_taken(name_taken)
    .start();
    match source {
        PeerSource::None => {}
        PeerSource::Static(addrs) => fleet.do_send(SetPeers(addrs)),
        PeerSource::Service {
            client,
            namespace,
            service,
        } => {
            let own = Own {
                name: Some(replica.to_string()),
                ip: std::env::var("POD_IP").ok().and_then(|ip| ip.parse().ok()),
                port: monitoring_port,
            };
            tracing::info!(%namespace, %service, "finding peer replicas through the Service's EndpointSlices");
            tokio::spawn(peers::watch(
                client,
                namespace,
                service,
                own,
                fleet.clone().recipient(),
            ));
        }
    }
    (fleet, name_taken_rx)
}
