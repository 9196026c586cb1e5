//! `loadBalancer.localityLbSetting` and `loadBalancer.zoneAwareLbSetting`, checked as
//! istiod's `ValidateLocalityLbSetting` and `ValidateZoneAwareLbSetting`
//! (`pkg/config/validation/agent/validation.go`): `distribute` and `failover` exclusive,
//! each `distribute.to` summing to 100 with weights in [1, 100], localities that do not
//! overlap and carry a wildcard only at the end, failover between two different plain
//! regions, and no topology label in `failoverPriority` beside `failover` (zone-aware: at
//! all, its regions and zones being implicit).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use super::fields::{Errors, nullable, typed};
use crate::labels::{REGION_LABEL, SUBZONE_LABEL, ZONE_LABEL};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LocalitySetting {
    #[serde(default, deserialize_with = "nullable")]
    distribute: Vec<Distribute>,
    #[serde(default, deserialize_with = "nullable")]
    failover: Vec<Failover>,
    #[serde(default, deserialize_with = "nullable")]
    failover_priority: Vec<String>,
    #[allow(dead_code)]
    enabled: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ZoneAwareSetting {
    #[allow(dead_code)]
    enabled: Option<bool>,
    #[serde(default, deserialize_with = "nullable")]
    failover: Vec<Failover>,
    #[serde(default, deserialize_with = "nullable")]
    failover_priority: Vec<String>,
    #[allow(dead_code)]
    min_cluster_size: Option<u32>,
}

#[derive(Deserialize)]
struct Distribute {
    #[serde(default)]
    from: String,
    #[serde(default, deserialize_with = "nullable")]
    to: BTreeMap<String, i64>,
}

#[derive(Deserialize)]
struct Failover {
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
}

const TOPOLOGY: [&str; 3] = [REGION_LABEL, ZONE_LABEL, SUBZONE_LABEL];

pub(super) fn locality_lb(errs: &mut Errors, path: &str, value: &Value) {
    let Some(lb) = typed::<LocalitySetting>(errs, path, value) else {
        return;
    };
    if !lb.distribute.is_empty() && !lb.failover.is_empty() {
        errs.add(
            path,
            "can not simultaneously specify 'distribute' and 'failover'",
        );
        return;
    }
    if !lb.failover.is_empty()
        && let Some(label) = lb
            .failover_priority
            .iter()
            .find(|l| TOPOLOGY.contains(&l.as_str()))
    {
        errs.add(
                format!("{path}.failoverPriority"),
                format!(
                    "can not simultaneously set 'failover' and topology label '{label}' in 'failover_priority'"
                ),
            );
        return;
    }
    for (i, d) in lb.distribute.iter().enumerate() {
        let p = format!("{path}.distribute[{i}].to");
        if d.to.values().any(|w| *w <= 0 || *w > 100) {
            errs.add(p, "locality weight must be in range [1, 100]");
            return;
        }
        let total: i64 = d.to.values().sum();
        if total != 100 {
            errs.add(p, format!("total locality weight {total} != 100"));
            return;
        }
        if let Err(e) = localities(d.to.keys().map(String::as_str)) {
            errs.add(p, e);
        }
    }
    if let Err(e) = localities(lb.distribute.iter().map(|d| d.from.as_str())) {
        errs.add(format!("{path}.distribute"), e);
    }
    failovers(errs, path, &lb.failover, "locality lb failover");
}

pub(super) fn zone_aware_lb(errs: &mut Errors, path: &str, value: &Value) {
    let Some(lb) = typed::<ZoneAwareSetting>(errs, path, value) else {
        return;
    };
    for label in lb
        .failover_priority
        .iter()
        .filter(|l| TOPOLOGY.contains(&l.as_str()))
    {
        errs.add(
            format!("{path}.failoverPriority"),
            format!(
                "'failover_priority' for zone aware lb must not use topology label '{label}'; region- and zone-level routing are handled automatically"
            ),
        );
    }
    failovers(errs, path, &lb.failover, "zone aware lb failover");
}

fn failovers(errs: &mut Errors, path: &str, failover: &[Failover], what: &str) {
    for (i, f) in failover.iter().enumerate() {
        let p = format!("{path}.failover[{i}]");
        if f.from == f.to {
            errs.add(
                &p,
                format!("{what} settings must specify different regions"),
            );
        }
        if f.from.contains('/') || f.to.contains('/') {
            errs.add(&p, format!("{what} only specify region"));
        }
        if f.from.contains('*') || f.to.contains('*') {
            errs.add(&p, format!("{what} region should not contain '*' wildcard"));
        }
    }
}

/// istiod's `validateLocalities`: each a `region[/zone[/subzone]]` without empty parts, a
/// `*` only as its last character, none overlapping one before it (a region, or a zone, that
/// an earlier entry covers whole).
fn localities<'a>(list: impl Iterator<Item = &'a str>) -> Result<(), String> {
    type Zones = BTreeMap<String, BTreeMap<String, bool>>;
    let mut seen: BTreeMap<String, Zones> = BTreeMap::new();
    let whole = || BTreeMap::from([("*".to_string(), true)]);
    for locality in list {
        let stars = locality.matches('*').count();
        if stars > 1 || (stars == 1 && !locality.ends_with('*')) {
            return Err(format!(
                "locality {locality} wildcard '*' number can not exceed 1 and must be in the end"
            ));
        }
        let overlap = || format!("locality {locality} overlap with previous specified ones");
        if seen.contains_key("*") {
            return Err(overlap());
        }
        let parts: Vec<&str> = locality.splitn(3, '/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "locality {locality} must not contain empty region/zone/subzone info"
            ));
        }
        let region = parts[0].to_string();
        match parts[..] {
            [_] => {
                if seen.contains_key(&region) {
                    return Err(overlap());
                }
                seen.insert(region, BTreeMap::from([("*".to_string(), whole())]));
            }
            [_, zone] => {
                let zones = seen.entry(region).or_default();
                if zones.contains_key("*") || zones.contains_key(zone) {
                    return Err(overlap());
                }
                zones.insert(zone.to_string(), whole());
            }
            [_, zone, subzone] => {
                let zones = seen.entry(region).or_default();
                if zones.contains_key("*") {
                    return Err(overlap());
                }
                let subzones = zones.entry(zone.to_string()).or_default();
                if subzones.get("*") == Some(&true) || subzones.get(subzone) == Some(&true) {
                    return Err(overlap());
                }
                subzones.insert(subzone.to_string(), true);
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: fn(&mut Errors, &str, &Value), yaml: &str) -> Vec<String> {
        let value: Value = serde_saphyr_or_json(yaml);
        let mut errs = Errors(Vec::new());
        f(&mut errs, "lb", &value);
        errs.0
    }

    fn serde_saphyr_or_json(text: &str) -> Value {
        serde_json::from_str(text).expect("test input is JSON")
    }

    #[test]
    fn locality_rules_as_istiod() {
        let ok = [
            r#"{"distribute": [{"from": "r1/z1/*", "to": {"r1/z1/*": 80, "r2/*": 20}}]}"#,
            r#"{"failover": [{"from": "r1", "to": "r2"}]}"#,
            r#"{"failoverPriority": ["topology.kubernetes.io/region", "a"]}"#,
            r#"{"enabled": false}"#,
        ];
        for yaml in ok {
            assert_eq!(check(locality_lb, yaml), Vec::<String>::new(), "{yaml}");
        }
        let bad = [
            (
                r#"{"distribute": [{"from": "r1", "to": {"r1": 80}}], "failover": [{"from": "r1", "to": "r2"}]}"#,
                "can not simultaneously specify 'distribute' and 'failover'",
            ),
            (
                r#"{"distribute": [{"from": "r1", "to": {"r1": 80}}]}"#,
                "total locality weight 80 != 100",
            ),
            (
                r#"{"distribute": [{"from": "r1", "to": {"r1": 0, "r2": 100}}]}"#,
                "locality weight must be in range [1, 100]",
            ),
            (
                r#"{"distribute": [{"from": "r1/*/z", "to": {"r1": 100}}]}"#,
                "wildcard '*' number can not exceed 1 and must be in the end",
            ),
            (
                r#"{"distribute": [{"from": "r1", "to": {"r1": 50, "r1/z1": 50}}]}"#,
                "overlap with previous specified ones",
            ),
            (
                r#"{"distribute": [{"from": "r1//z", "to": {"r1": 100}}]}"#,
                "must not contain empty region/zone/subzone info",
            ),
            (
                r#"{"failover": [{"from": "r1", "to": "r1"}]}"#,
                "must specify different regions",
            ),
            (
                r#"{"failover": [{"from": "r1/z1", "to": "r2"}]}"#,
                "only specify region",
            ),
            (
                r#"{"failover": [{"from": "r1", "to": "r2"}], "failoverPriority": ["topology.kubernetes.io/zone"]}"#,
                "can not simultaneously set 'failover' and topology label",
            ),
        ];
        for (yaml, want) in bad {
            let got = check(locality_lb, yaml);
            assert!(got.iter().any(|m| m.contains(want)), "{yaml}: {got:?}");
        }
    }

    #[test]
    fn zone_aware_rules_as_istiod() {
        assert!(
            check(
                zone_aware_lb,
                r#"{"failover": [{"from": "r1", "to": "r2"}], "minClusterSize": 2}"#
            )
            .is_empty()
        );
        let got = check(
            zone_aware_lb,
            r#"{"failoverPriority": ["topology.kubernetes.io/region"]}"#,
        );
        assert!(got[0].contains("must not use topology label"), "{got:?}");
        let got = check(
            zone_aware_lb,
            r#"{"failover": [{"from": "r1", "to": "r1/z"}]}"#,
        );
        assert!(got[0].contains("only specify"), "{got:?}");
    }
}
