//! Which DestinationRule a proxy uses for a host, as istiod's `PushContext.destinationRule`
//! and `SidecarScope.DestinationRule` choose it (`pilot/pkg/model/push_context.go`,
//! `sidecar.go`):
//!
//! 1. the rules of the proxy's own namespace (those it can see itself: any `exportTo` that
//!    includes its namespace; for a proxy in the root namespace, only the rules private to
//!    it),
//! 2. else the rules of the service's namespace exported to the proxy's,
//! 3. else the rules of the root namespace exported to it;
//!
//! in each, the most specific host: the host itself, else the longest wildcard that matches
//! (`*.example.com`, `*`). Among that host's rules, one with a `workloadSelector` (a rule
//! private to its namespace, as istiod makes it) that selects the proxy's labels comes
//! first, else the rules without a selector, merged as istiod's `mergeDestinationRule` merges
//! them: the first (by creation time, then name and namespace, as istiod's) with the subsets of the later
//! ones whose names it does not have, and the first traffic policy set.

use std::borrow::Cow;

use super::*;
use axon_config::istio::Labels;

/// The rule a proxy uses for a host: one rule, or several merged.
#[derive(Debug, Clone)]
pub struct ChosenRule<'a> {
    /// The rules merged into `rule`, in order (one, unless several match alike).
    pub configs: Vec<&'a Config>,
    pub rule: Cow<'a, DestinationRule>,
}

/// Which namespace's rules, and how they must be exported.
#[derive(Clone, Copy)]
enum Bucket<'a> {
    /// Rules in `0` that a proxy there sees: not exported away from it.
    Local(&'a str),
    /// Rules in the root namespace private to it.
    RootLocal(&'a str),
    /// Rules in `owner` exported (beyond `owner` alone) to `client`.
    Exported { owner: &'a str, client: &'a str },
}

impl PushContext {
    /// The DestinationRule of `hostname` that a proxy in `namespace` with `labels` uses
    /// (`None` labels: rules with a `workloadSelector` never apply).
    pub fn destination_rule_for_workload(
        &self,
        hostname: &str,
        namespace: &str,
        labels: Option<&Labels>,
    ) -> Option<ChosenRule<'_>> {
        let root = self.mesh.root_namespace.as_str();
        let first = if namespace != root {
            Bucket::Local(namespace)
        } else {
            Bucket::RootLocal(root)
        };
        let service_namespace = self.service(hostname).map(|s| s.namespace.as_str());
        let buckets = [
            Some(first),
            service_namespace.map(|owner| Bucket::Exported {
                owner,
                client: namespace,
            }),
            Some(Bucket::Exported {
                owner: root,
                client: namespace,
            }),
        ];
        // The first bucket with a rule for the host decides, even when none of that host's
        // rules applies to this proxy (istiod's `MostSpecificHostMatch`, then the selector).
        let rules = buckets
            .into_iter()
            .flatten()
            .map(|b| self.most_specific(hostname, b))
            .find(|rules| !rules.is_empty())?;
        let selected = rules.iter().find(|(_, dr)| {
            dr.workload_selector
                .as_ref()
                .is_some_and(|ws| labels.is_some_and(|l| labels_match(&ws.match_labels, l)))
        });
        if let Some((config, dr)) = selected {
            return Some(ChosenRule {
                configs: vec![config],
                rule: Cow::Borrowed(dr),
            });
        }
        let plain: Vec<(&Config, &DestinationRule)> = rules
            .into_iter()
            .filter(|(_, dr)| dr.workload_selector.is_none())
            .collect();
        let (first, rest) = plain.split_first()?;
        let mut rule = Cow::Borrowed(first.1);
        for (_, later) in rest {
            let merged = rule.to_mut();
            for subset in &later.subsets {
                if !merged.subsets.iter().any(|s| s.name == subset.name) {
                    merged.subsets.push(subset.clone());
                }
            }
            // istiod's `mergeDestinationRule`: of one origin (both the user's, or both made
            // of BackendTLSPolicies) the first policy wins; a user's rule and a policy's
            // merge, the user's fields winning.
            if merged.backend_policy == later.backend_policy {
                if merged.traffic_policy.is_none() {
                    merged.traffic_policy = later.traffic_policy.clone();
                }
            } else if later.backend_policy {
                merged.traffic_policy = axon_config::istio::traffic_policy::PolicyDoc::under(
                    merged.traffic_policy.as_ref(),
                    later.traffic_policy.as_ref(),
                );
            } else {
                merged.traffic_policy = axon_config::istio::traffic_policy::PolicyDoc::under(
                    later.traffic_policy.as_ref(),
                    merged.traffic_policy.as_ref(),
                );
                merged.backend_policy = false;
            }
        }
        Some(ChosenRule {
            configs: plain.iter().map(|(c, _)| *c).collect(),
            rule,
        })
    }

    /// The rules of `namespace` whose `workloadSelector` selects `labels`, in key order.
    pub fn destination_rules_selecting(
        &self,
        namespace: &str,
        labels: &Labels,
    ) -> impl Iterator<Item = &Config> {
        self.destination_rules
            .with_selector
            .get(namespace)
            .into_iter()
            .flatten()
            .filter(move |c| match &c.spec {
                Spec::DestinationRule(dr) => dr
                    .workload_selector
                    .as_ref()
                    .is_some_and(|ws| labels_match(&ws.match_labels, labels)),
                _ => false,
            })
            .map(|c| c.as_ref())
    }

    /// The rules of `bucket` for the most specific host that matches `hostname`.
    fn most_specific(&self, hostname: &str, bucket: Bucket) -> Vec<(&Config, &DestinationRule)> {
        // In istiod's order: creation time, then name, then namespace.
        let in_bucket = |host: &str| -> Vec<(&Config, &DestinationRule)> {
            let mut rules: Vec<(&Config, &DestinationRule)> = self
                .destination_rules_of(host)
                .filter(|(c, dr)| self.in_bucket(c, dr, bucket))
                .collect();
            rules.sort_by(|a, b| a.0.creation_order(b.0));
            rules
        };
        let exact = in_bucket(hostname);
        if !exact.is_empty() {
            return exact;
        }
        // Wildcard hosts sort before any name (`*` is below every host character); the
        // longest that matches is the most specific.
        let mut wildcards: Vec<&str> = self
            .destination_rules
            .by_host
            .range::<str, _>((
                std::ops::Bound::Included("*"),
                std::ops::Bound::Excluded("+"),
            ))
            .map(|(h, _)| h.as_str())
            .filter(|h| host::matches(h, hostname))
            .collect();
        wildcards.sort_by_key(|h| std::cmp::Reverse(h.len()));
        wildcards
            .into_iter()
            .map(in_bucket)
            .find(|rules| !rules.is_empty())
            .unwrap_or_default()
    }

    fn in_bucket(&self, config: &Config, dr: &DestinationRule, bucket: Bucket) -> bool {
        let namespace = config.namespace();
        let export = self.export_to(ConfigKind::DestinationRule, &dr.export_to, namespace);
        // istiod makes a rule with a selector private to its namespace.
        let private = dr.workload_selector.is_some()
            || matches!(&export, ExportTo::Namespaces(set)
                if set.len() == 1 && set.contains(namespace));
        match bucket {
            Bucket::Local(ns) => {
                namespace == ns && (dr.workload_selector.is_some() || export.visible_from(ns))
            }
            Bucket::RootLocal(root) => namespace == root && private,
            Bucket::Exported { owner, client } => {
                namespace == owner && !private && export.visible_from(client)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::fixtures::context;
    use axon_config::istio::Labels;

    const RULES: &str = "
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: svc, namespace: shop}
spec: {hosts: [a.shop.example.com], ports: [{number: 80, name: http, protocol: HTTP}], resolution: STATIC}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: shop-exact, namespace: shop}
spec: {host: a.shop.example.com}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: shop-private, namespace: shop}
spec: {host: b.shop.example.com, exportTo: ['.']}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: wide, namespace: web}
spec: {host: '*.example.com'}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: narrow, namespace: web}
spec: {host: '*.shop.example.com'}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: selected, namespace: web}
spec: {host: c.example.com, workloadSelector: {matchLabels: {app: canary}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: root, namespace: istio-system}
spec: {host: '*'}
";

    fn name(
        ctx: &crate::push_context::PushContext,
        host: &str,
        ns: &str,
        labels: &[(&str, &str)],
    ) -> Option<String> {
        let labels: Labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        ctx.destination_rule_for_workload(host, ns, Some(&labels))
            .map(|c| c.configs[0].key.name.clone())
    }

    #[test]
    fn the_proxys_namespace_then_the_services_then_the_root() {
        let ctx = context(RULES);
        // A proxy in web: its namespace's most specific wildcard.
        assert_eq!(
            name(&ctx, "a.shop.example.com", "web", &[]).as_deref(),
            Some("narrow")
        );
        assert_eq!(
            name(&ctx, "x.example.com", "web", &[]).as_deref(),
            Some("wide")
        );
        // A proxy in shop: its own rule; in another namespace: the service's exported rule.
        assert_eq!(
            name(&ctx, "a.shop.example.com", "shop", &[]).as_deref(),
            Some("shop-exact")
        );
        assert_eq!(
            name(&ctx, "a.shop.example.com", "other", &[]).as_deref(),
            Some("shop-exact")
        );
        // Not exported: the root namespace's catch-all instead.
        assert_eq!(
            name(&ctx, "b.shop.example.com", "other", &[]).as_deref(),
            Some("root")
        );
        assert_eq!(
            name(&ctx, "b.shop.example.com", "shop", &[]).as_deref(),
            Some("shop-private")
        );
        // The root's rule is exported everywhere, and a root proxy sees no rule of web.
        assert_eq!(
            name(&ctx, "x.example.com", "other", &[]).as_deref(),
            Some("root")
        );
        assert_eq!(
            name(&ctx, "x.example.com", "istio-system", &[]).as_deref(),
            Some("root")
        );
    }

    #[test]
    fn a_workload_selector_applies_to_the_workloads_it_selects_only() {
        let ctx = context(RULES);
        assert_eq!(
            name(&ctx, "c.example.com", "web", &[("app", "canary")]).as_deref(),
            Some("selected")
        );
        // Another workload of web: the exact host's only rule does not apply, and istiod does
        // not fall back to a wildcard one.
        assert_eq!(name(&ctx, "c.example.com", "web", &[("app", "main")]), None);
        // Elsewhere the selector rule is private: the root's.
        assert_eq!(
            name(&ctx, "c.example.com", "other", &[("app", "canary")]).as_deref(),
            Some("root")
        );
    }

    #[test]
    fn rules_of_one_host_merge_their_subsets_and_the_first_policy() {
        let ctx = context(
            "
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: web}
spec: {host: m.example.com, subsets: [{name: v1, labels: {v: '1'}}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b, namespace: web}
spec:
  host: m.example.com
  trafficPolicy: {loadBalancer: {simple: RANDOM}}
  subsets: [{name: v1, labels: {v: other}}, {name: v2, labels: {v: '2'}}]
",
        );
        let chosen = ctx.destination_rule_for("m.example.com", "web").unwrap();
        let names: Vec<&str> = chosen.configs.iter().map(|c| c.key.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let subsets: Vec<(&str, &str)> = chosen
            .rule
            .subsets
            .iter()
            .map(|s| (s.name.as_str(), s.labels["v"].as_str()))
            .collect();
        assert_eq!(subsets, [("v1", "1"), ("v2", "2")], "the first v1 kept");
        assert!(
            chosen.rule.traffic_policy.is_some(),
            "b's policy, a having none"
        );
    }

    #[test]
    fn rules_of_one_host_are_taken_in_creation_order() {
        let ctx = context(
            "
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: a, namespace: web, creationTimestamp: '2026-12-02T10:00:00Z'}
spec: {host: m.example.com, subsets: [{name: v1, labels: {v: a}}]}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b, namespace: web, creationTimestamp: '2026-12-01T10:00:00Z'}
spec:
  host: m.example.com
  trafficPolicy: {loadBalancer: {simple: RANDOM}}
  subsets: [{name: v1, labels: {v: b}}]
",
        );
        let chosen = ctx.destination_rule_for("m.example.com", "web").unwrap();
        let names: Vec<&str> = chosen.configs.iter().map(|c| c.key.name.as_str()).collect();
        assert_eq!(names, ["b", "a"], "the older first, whatever the names");
        assert_eq!(
            chosen.rule.subsets[0].labels["v"], "b",
            "the older rule's v1 kept"
        );
    }
}
