//! Localities (`region/zone/subzone`) and the locality load balancing a cluster gets, as
//! istiod decides them (`pilot/pkg/networking/core/loadbalancer/loadbalancer.go`,
//! `pilot/pkg/xds/ads.go` `setTopologyLabels`):
//!
//! - a proxy's locality comes from its topology labels (`topology.kubernetes.io/region`,
//!   `topology.kubernetes.io/zone`, `topology.istio.io/subzone`), else its `istio-locality`
//!   label (`region.zone.subzone`), else Envoy's `node.locality`;
//! - the setting that applies to a cluster: the DestinationRule's `zoneAwareLbSetting`, else
//!   its `localityLbSetting` (none when `enabled: false`), else the mesh's (istiod's default
//!   mesh config enables locality load balancing); failover takes effect only where the
//!   cluster's policy has `outlierDetection`, or Envoy would never leave priority 0.
//!
//! Pure: the priorities themselves are set on Envoy's load assignments by `xds::eds`.

use axon_config::istio::traffic_policy::{
    LoadBalancerSettings, LocalityLbSetting, TrafficPolicy, ZoneAwareLbSetting,
};
use axon_config::istio::{DestinationRule, Labels};
use axon_config::mesh::MeshConfig;

pub use axon_config::labels::{
    LOCALITY_LABEL, NETWORK_LABEL, REGION_LABEL, SUBZONE_LABEL, ZONE_LABEL,
};

/// A locality; empty parts are unknown.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Locality {
    pub region: String,
    pub zone: String,
    pub subzone: String,
}

impl Locality {
    /// Istio's `region/zone/subzone` form (missing parts empty).
    pub fn parse(text: &str) -> Locality {
        let mut parts = text.splitn(3, '/').map(str::to_string);
        Locality {
            region: parts.next().unwrap_or_default(),
            zone: parts.next().unwrap_or_default(),
            subzone: parts.next().unwrap_or_default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.region.is_empty() && self.zone.is_empty() && self.subzone.is_empty()
    }

    /// `region/zone/subzone`, without trailing empty parts.
    pub fn label(&self) -> String {
        format!("{}/{}/{}", self.region, self.zone, self.subzone)
            .trim_end_matches('/')
            .to_string()
    }

    /// istiod's `LbPriority`: 0 when region, zone and subzone are all `ep`'s, 1 when region
    /// and zone are, 2 when the region is, else 3.
    pub fn lb_priority(&self, ep: &Locality) -> u32 {
        if self.region != ep.region {
            3
        } else if self.zone != ep.zone {
            2
        } else if self.subzone != ep.subzone {
            1
        } else {
            0
        }
    }

    /// istiod's `LocalityMatch`: whether this locality is in `rule` (`region`,
    /// `region/zone`, `region/zone/subzone`, each part may be `*`; a missing part matches any).
    pub fn matches(&self, rule: &str) -> bool {
        let rule = Locality::parse(rule);
        let part = |rule: &str, mine: &str, optional: bool| {
            rule == "*" || (optional && rule.is_empty()) || rule == mine
        };
        part(&rule.region, &self.region, false)
            && part(&rule.zone, &self.zone, true)
            && part(&rule.subzone, &self.subzone, true)
    }

    /// The proxy's locality, as istiod's `setTopologyLabels`: its topology labels, else its
    /// `istio-locality` label, else what Envoy's `node.locality` says.
    pub fn of_proxy(labels: &Labels, node: Option<Locality>) -> Locality {
        let region = labels.get(REGION_LABEL);
        let zone = labels.get(ZONE_LABEL);
        let subzone = labels.get(SUBZONE_LABEL);
        if region.is_some() || zone.is_some() || subzone.is_some() {
            let part = |v: Option<&String>| v.cloned().unwrap_or_default();
            return Locality {
                region: part(region),
                zone: part(zone),
                subzone: part(subzone),
            };
        }
        if let Some(l) = labels.get(LOCALITY_LABEL).filter(|l| !l.is_empty()) {
            return Locality::parse(&l.replace('.', "/"));
        }
        node.unwrap_or_default()
    }

    /// `labels` with this locality's topology labels and `network` added, as istiod's
    /// `AugmentLabels` gives them to proxies and endpoints (read by `failoverPriority`; a
    /// network label already set is kept).
    pub fn augment(&self, labels: &Labels, network: &str) -> Labels {
        let mut out = labels.clone();
        if !network.is_empty() {
            out.entry(NETWORK_LABEL.to_string())
                .or_insert_with(|| network.to_string());
        }
        for (key, value) in [
            (REGION_LABEL, &self.region),
            (ZONE_LABEL, &self.zone),
            (SUBZONE_LABEL, &self.subzone),
        ] {
            if !value.is_empty() {
                out.insert(key.to_string(), value.clone());
            }
        }
        out
    }
}

/// The locality load balancing that applies to a cluster.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LbSetting<'a> {
    Locality(&'a LocalityLbSetting),
    ZoneAware(&'a ZoneAwareLbSetting),
}

impl<'a> LbSetting<'a> {
    /// istiod's `GetEffectiveLbSetting`: the rule's zone-aware setting, else its locality
    /// setting (`None` when it says `enabled: false`), else the mesh's, zone-aware first.
    pub fn effective(
        lb: Option<&'a LoadBalancerSettings>,
        mesh: &'a MeshConfig,
    ) -> Option<LbSetting<'a>> {
        if let Some(z) = lb.and_then(|lb| lb.zone_aware_lb_setting.as_ref()) {
            return Some(LbSetting::ZoneAware(z));
        }
        let setting = match lb.and_then(|lb| lb.locality_lb_setting.as_ref()) {
            Some(l) => l,
            None => {
                if let Some(z) = &mesh.zone_aware_lb_setting {
                    return Some(LbSetting::ZoneAware(z));
                }
                mesh.locality_lb_setting.as_ref()?
            }
        };
        (setting.enabled != Some(false)).then_some(LbSetting::Locality(setting))
    }

    /// Whether the load assignment depends on who asks: a failover (with outlier detection,
    /// or always for zone-aware routing) or a `distribute` rule orders or weighs the
    /// localities relative to the proxy.
    pub fn per_proxy(&self, outlier_detection: bool) -> bool {
        match self {
            LbSetting::Locality(l) => !l.distribute.is_empty() || outlier_detection,
            LbSetting::ZoneAware(z) => z.enabled != Some(false),
        }
    }

    /// The labels whose values on the proxy decide the priorities (`failoverPriority`, read
    /// only when there is no `distribute`).
    pub fn failover_priority(&self) -> &'a [String] {
        match self {
            LbSetting::Locality(l) if l.distribute.is_empty() => &l.failover_priority,
            LbSetting::ZoneAware(z) if z.enabled != Some(false) => &z.failover_priority,
            _ => &[],
        }
    }
}

/// Whether some cluster of `dr`'s host may get endpoints ordered or weighed per proxy (with
/// the mesh's default setting, which enables locality failover): some policy of the rule
/// has outlier detection, a `distribute` rule or a zone-aware setting. Only then does a
/// load assignment depend on who asks.
pub fn rule_depends_on_locality(dr: &DestinationRule) -> bool {
    fn part(lb: Option<&LoadBalancerSettings>, outlier: bool) -> bool {
        outlier
            || lb.is_some_and(|lb| {
                lb.zone_aware_lb_setting.is_some()
                    || lb
                        .locality_lb_setting
                        .as_ref()
                        .is_some_and(|l| !l.distribute.is_empty())
            })
    }
    fn policy(p: &TrafficPolicy) -> bool {
        part(p.load_balancer.as_ref(), p.outlier_detection.is_some())
            || p.port_level_settings
                .iter()
                .flatten()
                .any(|e| part(e.load_balancer.as_ref(), e.outlier_detection.is_some()))
    }
    dr.traffic_policy
        .iter()
        .chain(dr.subsets.iter().filter_map(|s| s.traffic_policy.as_ref()))
        .any(|doc| policy(&doc.policy))
}

/// The label names `dr`'s `failoverPriority` entries read (their values on a proxy are part
/// of what its load assignments depend on).
pub fn failover_labels(dr: &DestinationRule) -> impl Iterator<Item = &str> {
    fn of(lb: Option<&LoadBalancerSettings>) -> impl Iterator<Item = &String> {
        let lb = lb.into_iter();
        let locality = lb
            .clone()
            .filter_map(|lb| lb.locality_lb_setting.as_ref())
            .flat_map(|l| &l.failover_priority);
        let zone = lb
            .filter_map(|lb| lb.zone_aware_lb_setting.as_ref())
            .flat_map(|z| &z.failover_priority);
        locality.chain(zone)
    }
    dr.traffic_policy
        .iter()
        .chain(dr.subsets.iter().filter_map(|s| s.traffic_policy.as_ref()))
        .flat_map(|doc| {
            let p = &doc.policy;
            of(p.load_balancer.as_ref()).chain(
                p.port_level_settings
                    .iter()
                    .flatten()
                    .flat_map(|e| of(e.load_balancer.as_ref())),
            )
        })
        .map(|entry| priority_label(entry).0)
}

/// The label name of a `failoverPriority` entry (`label` or `label=value`) and the value the
/// proxy is taken to have (`None`: its own).
pub fn priority_label(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('=') {
        Some((label, value)) => (label, Some(value)),
        None => (entry, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Locality {
        Locality::parse(s)
    }

    #[test]
    fn priorities_by_shared_prefix() {
        let me = loc("r1/z1/s1");
        assert_eq!(me.lb_priority(&loc("r1/z1/s1")), 0);
        assert_eq!(me.lb_priority(&loc("r1/z1/s2")), 1);
        assert_eq!(me.lb_priority(&loc("r1/z2/s1")), 2);
        assert_eq!(me.lb_priority(&loc("r2/z1/s1")), 3);
        assert_eq!(Locality::default().lb_priority(&Locality::default()), 0);
    }

    #[test]
    fn matches_rules_with_wildcards() {
        let me = loc("r1/z1/s1");
        for rule in ["r1", "r1/*", "r1/z1", "r1/z1/*", "r1/z1/s1", "*"] {
            assert!(me.matches(rule), "{rule}");
        }
        for rule in ["r2", "r1/z2", "r1/z1/s2", "r2/*"] {
            assert!(!me.matches(rule), "{rule}");
        }
    }

    #[test]
    fn proxy_locality_prefers_labels_over_node() {
        let node = Some(loc("nr/nz"));
        let labels: Labels = [(ZONE_LABEL.to_string(), "z".to_string())].into();
        assert_eq!(Locality::of_proxy(&labels, node.clone()), loc("/z"));
        let labels: Labels = [(LOCALITY_LABEL.to_string(), "a.b.c".to_string())].into();
        assert_eq!(Locality::of_proxy(&labels, node.clone()), loc("a/b/c"));
        assert_eq!(Locality::of_proxy(&Labels::new(), node), loc("nr/nz"));
        assert_eq!(loc("r/z").label(), "r/z");
        assert_eq!(loc("r/z").augment(&Labels::new(), "").len(), 2);
        let net: Labels = [(NETWORK_LABEL.to_string(), "mine".to_string())].into();
        assert_eq!(loc("").augment(&net, "other")[NETWORK_LABEL], "mine");
        assert_eq!(loc("").augment(&Labels::new(), "n1")[NETWORK_LABEL], "n1");
    }

    #[test]
    fn effective_setting_as_istiod() {
        let mesh_config = MeshConfig::default();
        let mesh = mesh_config.locality_lb_setting.clone().unwrap();
        assert!(matches!(
            LbSetting::effective(None, &mesh_config),
            Some(LbSetting::Locality(_))
        ));
        let off = LoadBalancerSettings {
            locality_lb_setting: Some(LocalityLbSetting {
                enabled: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(LbSetting::effective(Some(&off), &mesh_config), None);
        let zone = LoadBalancerSettings {
            zone_aware_lb_setting: Some(ZoneAwareLbSetting::default()),
            ..off.clone()
        };
        assert!(matches!(
            LbSetting::effective(Some(&zone), &mesh_config),
            Some(LbSetting::ZoneAware(_))
        ));
        let zoned = MeshConfig {
            zone_aware_lb_setting: Some(ZoneAwareLbSetting::default()),
            ..MeshConfig::default()
        };
        assert!(matches!(
            LbSetting::effective(None, &zoned),
            Some(LbSetting::ZoneAware(_))
        ));
        assert!(!LbSetting::Locality(&mesh).per_proxy(false));
        assert!(LbSetting::Locality(&mesh).per_proxy(true));
        assert_eq!(priority_label("a=b"), ("a", Some("b")));
        assert_eq!(priority_label("a"), ("a", None));
    }
}
