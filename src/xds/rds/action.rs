//! An `HTTPRoute`'s action as an Envoy `RouteAction`: its destinations as one cluster or
//! weighted clusters, with istiod's defaults.

use envoy_types::pb::envoy::config::route::v3::{
    RouteAction, WeightedCluster, route_action::ClusterSpecifier, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::google::protobuf::{Duration, UInt32Value};

use crate::model::host;
use crate::model::istio::HttpRoute;
use crate::model::push_context::PushContext;
use crate::model::service::outbound_cluster_name;

/// The route action of an HTTP route: one cluster, or weighted clusters. `None` when the
/// route has no destination.
pub(super) fn route_action(
    ctx: &PushContext,
    namespace: &str,
    http: &HttpRoute,
) -> Option<RouteAction> {
    let destinations: Vec<(String, u32)> = http
        .route
        .iter()
        .filter_map(|rd| {
            let d = rd.destination.as_ref()?;
            let hostname = host::resolve(&d.host, namespace);
            let port = d
                .port
                .as_ref()
                .map(|p| p.number)
                .filter(|p| *p != 0)
                .or_else(|| {
                    ctx.service(&hostname)
                        .and_then(|s| s.ports.first())
                        .map(|p| p.number)
                })
                .unwrap_or(80);
            let name = outbound_cluster_name(port, &d.subset, &hostname);
            Some((name, u32::try_from(rd.weight).unwrap_or(0)))
        })
        .collect();
    let cluster_specifier = match destinations.as_slice() {
        [] => return None,
        [(name, _)] => ClusterSpecifier::Cluster(name.clone()),
        many => {
            let total: u32 = many.iter().map(|(_, w)| w).sum();
            ClusterSpecifier::WeightedClusters(WeightedCluster {
                clusters: many
                    .iter()
                    .filter(|(_, w)| total == 0 || *w > 0)
                    .map(|(name, w)| ClusterWeight {
                        name: name.clone(),
                        weight: Some(UInt32Value {
                            value: if total == 0 { 1 } else { *w },
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })
        }
    };
    Some(RouteAction {
        cluster_specifier: Some(cluster_specifier),
        // istiod disables Envoy's 15 s default route timeout.
        timeout: Some(Duration {
            seconds: 0,
            nanos: 0,
        }),
        ..Default::default()
    })
}
