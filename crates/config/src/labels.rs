//! The well-known label names that Istio's and Kubernetes' objects carry and that config
//! validation and the model both read: topology (locality) and network.

pub const REGION_LABEL: &str = "topology.kubernetes.io/region";
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
pub const SUBZONE_LABEL: &str = "topology.istio.io/subzone";
/// istiod's (mostly internal) locality override label, `region.zone.subzone`.
pub const LOCALITY_LABEL: &str = "istio-locality";
/// Istio's network label (`failoverPriority` may read it; a first entry naming it only
/// breaks ties).
pub const NETWORK_LABEL: &str = "topology.istio.io/network";
