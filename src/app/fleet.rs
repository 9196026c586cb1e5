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

/// This replica's name: `--replica-name`, else `POD_NAME`, else the host name (`HOSTNAME`,
/// or the kernel's), else `axon`.
pub fn replica_name(flag: Option<&str>) -> String {
    if let Some(name) = flag.filter(|n| !n.is_empty()) {
        return name.to_string();
    }
    if let Ok(name) = std::env::var("POD_NAME")
        && !name.is_empty()
    {
        return name;
    }
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "axon".to_string())
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

/// Starts the Fleet actor and what feeds it its peers.
pub fn start(
    replica: &str,
    source: PeerSource,
    monitoring_port: u16,
    ads: &AdsService,
    client: HttpPeers,
    limits: &Limits,
    metrics: &Metrics,
) -> Addr<Fleet> {
    let fleet = Fleet::new(
        FleetSettings {
            replica: replica.to_string(),
            poll_interval: limits.peer_poll_interval,
            max_peers: limits.max_peers,
            slack: limits.rebalance_slack,
            rate: limits.rebalance_rate,
        },
        Arc::new(ads.clone()),
        Arc::new(client),
        metrics.clone(),
    )
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
    fleet
}
