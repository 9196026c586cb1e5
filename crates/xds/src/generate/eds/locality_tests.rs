//! Unit tests of `eds::locality`, after istiod's `loadbalancer_test.go` cases.

use super::*;
use axon_config::istio::traffic_policy::{LocalityLbSetting, ZoneAwareLbSetting};
use envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint;

fn endpoint(locality: &str, labels: &[(&str, &str)]) -> Endpoint {
    Endpoint {
        address: "10.0.0.1".into(),
        port: 80,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        weight: 1,
        locality: locality.into(),
        network: String::new(),
        service_account: String::new(),
    }
}

/// One group per locality of `endpoints` (in their order), each endpoint weighing 1.
fn groups(endpoints: &[Endpoint]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for ep in endpoints {
        let lb = LbEndpoint {
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            ..Default::default()
        };
        match out.iter_mut().find(|g| g.locality.label() == ep.locality) {
            Some(g) => {
                g.envoy.lb_endpoints.push(lb);
                g.endpoints.push(ep);
                let w = g.envoy.load_balancing_weight.map_or(0, |w| w.value);
                g.envoy.load_balancing_weight = Some(UInt32Value { value: w + 1 });
            }
            None => out.push(Group {
                locality: Locality::parse(&ep.locality),
                envoy: LocalityLbEndpoints {
                    lb_endpoints: vec![lb],
                    load_balancing_weight: Some(UInt32Value { value: 1 }),
                    ..Default::default()
                },
                endpoints: vec![ep],
            }),
        }
    }
    out
}

fn run(
    endpoints: &[Endpoint],
    proxy: &str,
    labels: &[(&str, &str)],
    setting: LbSetting<'_>,
    outlier: bool,
) -> Vec<LocalityLbEndpoints> {
    let locality = Locality::parse(proxy);
    let labels: Labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let receiver = Receiver {
        locality: &locality,
        labels: &labels,
    };
    apply(groups(endpoints), &receiver, setting, outlier)
}

fn priorities(out: &[LocalityLbEndpoints]) -> Vec<u32> {
    out.iter().map(|l| l.priority).collect()
}

fn failover(from: &str, to: &str) -> LocalityFailover {
    LocalityFailover {
        from: from.into(),
        to: to.into(),
    }
}

fn five_localities() -> Vec<Endpoint> {
    ["r1/z1/s1", "r1/z1/s2", "r1/z2/s1", "r2/z1/s1", "r3/z1/s1"]
        .iter()
        .map(|l| endpoint(l, &[]))
        .collect()
}

#[test]
fn default_failover_orders_by_shared_prefix() {
    let eps = five_localities();
    let setting = LocalityLbSetting::default();
    let out = run(&eps, "r1/z1/s1", &[], LbSetting::Locality(&setting), true);
    assert_eq!(priorities(&out), [0, 1, 2, 3, 3]);
}

#[test]
fn no_failover_without_outlier_detection() {
    let eps = five_localities();
    let setting = LocalityLbSetting::default();
    let out = run(&eps, "r1/z1/s1", &[], LbSetting::Locality(&setting), false);
    assert_eq!(priorities(&out), [0, 0, 0, 0, 0]);
}

#[test]
fn failover_region_comes_before_the_others() {
    let eps = five_localities();
    let setting = LocalityLbSetting {
        failover: vec![failover("r1", "r3")],
        ..Default::default()
    };
    let out = run(&eps, "r1/z1/s1", &[], LbSetting::Locality(&setting), true);
    assert_eq!(priorities(&out), [0, 1, 2, 4, 3]);
    // A proxy of another region does not use r1's rule.
    let out = run(&eps, "r2/z1/s1", &[], LbSetting::Locality(&setting), true);
    assert_eq!(priorities(&out), [1, 1, 1, 0, 1], "3 renumbered as 1");
}

#[test]
fn distribute_weighs_and_drops_localities() {
    let eps = vec![
        endpoint("r1/z1/s1", &[]),
        endpoint("r1/z1/s1", &[]),
        endpoint("r1/z2/s1", &[]),
        endpoint("r2/z1/s1", &[]),
    ];
    let setting = LocalityLbSetting {
        distribute: vec![LocalityDistribute {
            from: "r1/z1/*".into(),
            to: [("r1/z1/*".to_string(), 80), ("r2/*".to_string(), 20)].into(),
        }],
        ..Default::default()
    };
    let out = run(&eps, "r1/z1/s1", &[], LbSetting::Locality(&setting), false);
    let weights: Vec<u32> = out
        .iter()
        .map(|l| l.load_balancing_weight.map_or(0, |w| w.value))
        .collect();
    assert_eq!(weights, [80, 1, 20]);
    assert!(
        out[1].lb_endpoints.is_empty(),
        "r1/z2 is not named: dropped"
    );
    assert_eq!(out[0].lb_endpoints.len(), 2);
    // A wildcard's share is split by the localities' weights, rounded up.
    let setting = LocalityLbSetting {
        distribute: vec![LocalityDistribute {
            from: "r1".into(),
            to: [("r1/*".to_string(), 100)].into(),
        }],
        ..Default::default()
    };
    let out = run(&eps, "r1/z1/s1", &[], LbSetting::Locality(&setting), false);
    let weights: Vec<u32> = out
        .iter()
        .map(|l| l.load_balancing_weight.map_or(0, |w| w.value))
        .collect();
    assert_eq!(weights, [67, 34, 1]);
    assert!(out[2].lb_endpoints.is_empty());
    // A proxy no rule is from: unchanged.
    let out = run(&eps, "r9/z1/s1", &[], LbSetting::Locality(&setting), true);
    assert!(out.iter().all(|l| !l.lb_endpoints.is_empty()));
}

#[test]
fn failover_priority_splits_by_shared_labels() {
    let eps = vec![
        endpoint("r1/z1", &[("a", "x"), ("b", "y")]),
        endpoint("r1/z1", &[("a", "x"), ("b", "z")]),
        endpoint("r1/z1", &[("a", "w")]),
    ];
    let setting = LocalityLbSetting {
        failover_priority: vec!["a".into(), "b".into()],
        ..Default::default()
    };
    let proxy = [("a", "x"), ("b", "y")];
    let out = run(&eps, "r1/z1", &proxy, LbSetting::Locality(&setting), true);
    assert_eq!(priorities(&out), [0, 1, 2]);
    assert!(out.iter().all(|l| l.lb_endpoints.len() == 1));
    // `label=value` compares with the value, not the proxy's own.
    let setting = LocalityLbSetting {
        failover_priority: vec!["a=w".into(), "b".into()],
        ..Default::default()
    };
    let out = run(&eps, "r1/z1", &proxy, LbSetting::Locality(&setting), true);
    // e1 and e2 differ on `a` (priority 2), e3 matches `a` but not `b` (1).
    assert_eq!(priorities(&out), [0, 1]);
    assert_eq!(out[0].lb_endpoints.len(), 1);
    assert_eq!(out[1].lb_endpoints.len(), 2);
    // The topology labels come from the endpoints' localities.
    let eps = vec![endpoint("r1/z1", &[]), endpoint("r1/z2", &[])];
    let setting = LocalityLbSetting {
        failover_priority: vec![axon_model::locality::ZONE_LABEL.into()],
        ..Default::default()
    };
    let proxy = [(axon_model::locality::ZONE_LABEL, "z2")];
    let out = run(&eps, "r1/z2", &proxy, LbSetting::Locality(&setting), true);
    assert_eq!(priorities(&out), [1, 0]);
}

#[test]
fn a_leading_network_label_only_breaks_ties() {
    let eps = vec![
        endpoint("r1", &[(NETWORK_LABEL, "n2"), ("a", "x")]),
        endpoint("r1", &[(NETWORK_LABEL, "n1"), ("a", "v")]),
        endpoint("r1", &[(NETWORK_LABEL, "n1"), ("a", "x")]),
    ];
    let setting = LocalityLbSetting {
        failover_priority: vec![NETWORK_LABEL.into(), "a".into()],
        ..Default::default()
    };
    let proxy = [(NETWORK_LABEL, "n1"), ("a", "x")];
    let out = run(&eps, "r1", &proxy, LbSetting::Locality(&setting), true);
    // Same network and label: 0; same network, other label: 1; other network: 2.
    let by_priority: Vec<(u32, usize)> = out
        .iter()
        .map(|l| (l.priority, l.lb_endpoints.len()))
        .collect();
    assert_eq!(by_priority, [(0, 1), (1, 1), (2, 1)]);
}

#[test]
fn zone_aware_buckets_regions() {
    let eps: Vec<Endpoint> = ["r1/z1", "r1/z2", "r2/z1", "r3/z1"]
        .iter()
        .map(|l| endpoint(l, &[]))
        .collect();
    let setting = ZoneAwareLbSetting {
        failover: vec![failover("r1", "r3")],
        ..Default::default()
    };
    let out = run(&eps, "r1/z1", &[], LbSetting::ZoneAware(&setting), false);
    assert_eq!(priorities(&out), [0, 0, 2, 1]);
    let off = ZoneAwareLbSetting {
        enabled: Some(false),
        ..setting
    };
    let out = run(&eps, "r1/z1", &[], LbSetting::ZoneAware(&off), false);
    assert_eq!(priorities(&out), [0, 0, 0, 0]);
}

#[test]
fn the_endpoints_network_is_its_network_label() {
    let mut far = endpoint("r1", &[]);
    far.network = "n2".into();
    let mut near = endpoint("r1", &[]);
    near.network = "n1".into();
    let eps = vec![far, near];
    let mut grouped = groups(&eps);
    // Tell the two apart by weight: far 7, near 9.
    grouped[0].envoy.lb_endpoints[0].load_balancing_weight = Some(UInt32Value { value: 7 });
    grouped[0].envoy.lb_endpoints[1].load_balancing_weight = Some(UInt32Value { value: 9 });
    let setting = LocalityLbSetting {
        failover_priority: vec![NETWORK_LABEL.into()],
        ..Default::default()
    };
    // The proxy's labels as `Proxy` augments them: its NETWORK as the label.
    let locality = Locality::parse("r1");
    let labels: Labels = [(NETWORK_LABEL.to_string(), "n1".to_string())].into();
    let receiver = Receiver {
        locality: &locality,
        labels: &labels,
    };
    let out = apply(grouped, &receiver, LbSetting::Locality(&setting), true);
    let by_priority: Vec<(u32, u32)> = out
        .iter()
        .map(|l| (l.priority, l.load_balancing_weight.map_or(0, |w| w.value)))
        .collect();
    assert_eq!(by_priority, [(0, 9), (1, 7)], "the proxy's network first");
}
