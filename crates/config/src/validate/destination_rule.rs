//! DestinationRule: the host, the subsets (names and labels), the workload selector and
//! `exportTo`. The traffic policies, of the rule and of each subset, are checked by
//! `traffic_policy`.

use std::collections::HashSet;

use super::fields::{Errors, invalid_subset_name};
use super::names::{dns1123_label, export_to, labels, selector, wildcard_domain};
use super::traffic_policy::traffic_policy;
use crate::istio::DestinationRule;

pub(super) fn destination_rule(errs: &mut Errors, dr: &DestinationRule, namespace: &str) {
    if dr.host.is_empty() {
        errs.add("spec.host", "Required value");
    } else if let Err(e) = wildcard_domain(&dr.host) {
        errs.add("spec.host", e);
    }
    if let Some(policy) = &dr.traffic_policy {
        traffic_policy(errs, "spec.trafficPolicy", &policy.json);
    }
    let mut names = HashSet::new();
    for (i, subset) in dr.subsets.iter().enumerate() {
        let path = format!("spec.subsets[{i}]");
        if subset.name.is_empty() {
            errs.add(format!("{path}.name"), "Required value");
        } else {
            if !names.insert(subset.name.as_str()) {
                errs.add(
                    format!("{path}.name"),
                    format!("Duplicate value: {:?}", subset.name),
                );
            }
            if !dns1123_label(&subset.name) {
                errs.add(format!("{path}.name"), invalid_subset_name(&subset.name));
            }
        }
        labels(errs, &format!("{path}.labels"), &subset.labels);
        if let Some(policy) = &subset.traffic_policy {
            traffic_policy(errs, &format!("{path}.trafficPolicy"), &policy.json);
        }
    }
    if let Some(ws) = &dr.workload_selector {
        selector(errs, "spec.workloadSelector.matchLabels", &ws.match_labels);
    }
    export_to(
        errs,
        "spec.exportTo",
        namespace,
        &dr.export_to,
        false,
        dr.workload_selector.is_some(),
    );
}

#[cfg(test)]
mod tests {
    use crate::validate::fixtures::{invalid, valid};

    #[test]
    fn destination_rule_host_and_subsets() {
        valid(
            "DestinationRule",
            "host: reviews\nsubsets: [{name: v1, labels: {version: v1}}, {name: v2-mysql-vm, labels: {version: v2-mysql-vm}}]",
        );
        invalid(
            "DestinationRule",
            "subsets: [{name: v1}]",
            "spec.host: Required value",
        );
        invalid(
            "DestinationRule",
            "host: reviews\nsubsets: [{labels: {version: v1}}]",
            "spec.subsets[0].name: Required value",
        );
        invalid(
            "DestinationRule",
            "host: reviews\nsubsets: [{name: v1}, {name: v1}]",
            "spec.subsets[1].name: Duplicate value: \"v1\"",
        );
        invalid(
            "DestinationRule",
            "host: reviews\nsubsets: [{name: v1.0}]",
            "spec.subsets[0].name: subset name is invalid",
        );
    }

    #[test]
    fn destination_rule_warmup() {
        let dr = |warmup: &str| {
            format!(
                "host: ratings.prod.svc.cluster.local\ntrafficPolicy: {{loadBalancer: {{warmup: {warmup}}}}}"
            )
        };
        valid("DestinationRule", &dr("{duration: 300s}"));
        valid(
            "DestinationRule",
            &dr("{duration: 300s, minimumPercent: 5.0, aggression: 5.0}"),
        );
        valid(
            "DestinationRule",
            &dr("{duration: 300s, minimumPercent: 0, aggression: 1}"),
        );
        invalid(
            "DestinationRule",
            &dr("{duration: 300s, minimumPercent: 150.0}"),
            "spec.trafficPolicy.loadBalancer.warmup.minimumPercent: Invalid value: 150",
        );
        invalid(
            "DestinationRule",
            &dr("{minimumPercent: 5.0}"),
            "spec.trafficPolicy.loadBalancer.warmup.duration: Required value",
        );
        invalid(
            "DestinationRule",
            &dr("{duration: 300s, aggression: 0.3}"),
            "spec.trafficPolicy.loadBalancer.warmup.aggression: Invalid value: 0.3",
        );
        invalid(
            "DestinationRule",
            &dr("{duration: 0.5ms}"),
            "spec.trafficPolicy.loadBalancer.warmup.duration: duration must be at least 1ms",
        );
        // The same rules in subsets and port-level settings.
        invalid(
            "DestinationRule",
            "host: r\nsubsets: [{name: v1, trafficPolicy: {loadBalancer: {warmup: {minimumPercent: 5}}}}]",
            "spec.subsets[0].trafficPolicy.loadBalancer.warmup.duration: Required value",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}, loadBalancer: {warmup: {duration: 1s, aggression: 0}}}]}",
            "spec.trafficPolicy.portLevelSettings[0].loadBalancer.warmup.aggression: Invalid value: 0",
        );
    }

    #[test]
    fn destination_rule_traffic_policy() {
        // The corpus's "all fields" rule, including the deprecated minimumRingSize.
        valid(
            "DestinationRule",
            r#"
host: destall.default.svc.cluster.local
trafficPolicy:
  loadBalancer: {simple: ROUND_ROBIN}
  connectionPool:
    tcp: {maxConnections: 99, connectTimeout: 6s}
    http: {http2MaxRequests: 33, maxRequestsPerConnection: 65, maxRetries: 4, http1MaxPendingRequests: 14}
  outlierDetection: {interval: 8ms, baseEjectionTime: 1m, maxEjectionPercent: 11}
  tls: {mode: DISABLE}
subsets:
- name: v2
  labels: {version: v2}
  trafficPolicy:
    loadBalancer:
      consistentHash:
        httpCookie: {name: Cookie, ttl: 30s}
        minimumRingSize: 42
"#,
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {}",
            "spec.trafficPolicy: traffic policy must have at least one field",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {connectionPool: {}}",
            "spec.trafficPolicy.connectionPool: connection pool must have at least one field",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {connectionPool: {tcp: {maxConnections: -1}}}",
            "spec.trafficPolicy.connectionPool.tcp.maxConnections: must be non-negative",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {loadBalancer: {simple: FASTEST}}",
            "spec.trafficPolicy.loadBalancer.simple: Unsupported value: \"FASTEST\"",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {ttl: 0s}}}}",
            "spec.trafficPolicy.loadBalancer.consistentHash.httpCookie.name: Required value",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true, minimumRingSize: 42, ringHash: {minimumRingSize: 42}}}}",
            "only one of minimumRingSize or maglev/ringHash can be specified",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {outlierDetection: {maxEjectionPercent: 101}}",
            "spec.trafficPolicy.outlierDetection.maxEjectionPercent: percentage 101 is not in range 0..100",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {outlierDetection: {interval: soon}}",
            "spec.trafficPolicy.outlierDetection.interval: invalid duration \"soon\"",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {portLevelSettings: [{tls: {mode: SIMPLE}}]}",
            "spec.trafficPolicy.portLevelSettings[0].port: Required value",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 70000}, tls: {mode: SIMPLE}}]}",
            "spec.trafficPolicy.portLevelSettings[0].port.number: port must be between 1-65535",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {portLevelSettings: [{port: {number: 80}}]}",
            "spec.trafficPolicy.portLevelSettings[0]: port traffic policy must have at least one field",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {connectionPool: {tcp: {maxConnections: many}}}",
            "spec.trafficPolicy.connectionPool.tcp.maxConnections: invalid type",
        );
    }

    #[test]
    fn destination_rule_tls() {
        // TLS material given as file paths.
        valid(
            "DestinationRule",
            "host: mymongodb.somedomain\ntrafficPolicy: {tls: {mode: MUTUAL, clientCertificate: cert.pem, privateKey: key.pem, caCertificates: root.pem, sni: v1.mymongodb.somedomain, subjectAltNames: [svc]}}",
        );
        valid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {tls: {mode: MUTUAL, credentialName: client-cert}}",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {tls: {mode: MUTUAL, privateKey: key.pem}}",
            "spec.trafficPolicy.tls.clientCertificate: Required value",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {tls: {mode: SIMPLE, credentialName: c, caCertificates: ca.pem}}",
            "cannot specify client certificates or CA certificate or CA CRL if credentialName is set",
        );
        invalid(
            "DestinationRule",
            "host: r\ntrafficPolicy: {tls: {mode: STRICT}}",
            "spec.trafficPolicy.tls.mode: Unsupported value: \"STRICT\"",
        );
    }
}
