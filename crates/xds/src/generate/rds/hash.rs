//! A route's hash policy: the consistent hash of the DestinationRule of each destination
//! (`model::traffic_policy::route_hash`), as istiod's `ConsistentHashToHashPolicy` writes it
//! (`route/route.go`): a header, a cookie (name, path, ttl, attributes), the source IP or a
//! query parameter. The cluster's RING_HASH or MAGLEV load balancer (`cds::lb`) uses it.

use envoy_types::pb::envoy::config::route::v3::route_action::HashPolicy;
use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::{
    ConnectionProperties, Cookie, CookieAttribute, Header, PolicySpecifier, QueryParameter,
};

use axon_config::istio::Destination;
use axon_config::istio::traffic_policy::ConsistentHash;
use axon_model::proxy::Proxy;
use axon_model::push_context::PushContext;
use axon_model::traffic_policy::{route_hash, service_hash};

/// The hash policy of a route to `d` (of a VirtualService whose hosts read as `hosts`
/// says), from the DestinationRule `proxy` uses for its host (as istiod's
/// `hashForVirtualService`: its namespace, and a `workloadSelector` rule that selects it).
pub(super) fn for_destination(
    ctx: &PushContext,
    proxy: &Proxy,
    hosts: super::hosts::Hosts,
    d: &Destination,
) -> Option<HashPolicy> {
    let hostname = hosts.resolve(&d.host);
    let chosen =
        ctx.destination_rule_for_workload(&hostname, &proxy.namespace, Some(&proxy.labels))?;
    let port = d.port.as_ref().map(|p| p.number).filter(|p| *p != 0);
    to_hash_policy(route_hash(&chosen.rule, &d.subset, port)?)
}

/// The hash policy of the default route to a service's `port` (no VirtualService), from
/// the DestinationRule `proxy` uses.
pub(super) fn for_service(
    ctx: &PushContext,
    proxy: &Proxy,
    hostname: &str,
    port: u32,
) -> Option<HashPolicy> {
    let chosen =
        ctx.destination_rule_for_workload(hostname, &proxy.namespace, Some(&proxy.labels))?;
    to_hash_policy(service_hash(&chosen.rule, port)?)
}

/// istiod's `ConsistentHashToHashPolicy`; `None` for a hash without a key.
fn to_hash_policy(hash: &ConsistentHash) -> Option<HashPolicy> {
    let specifier = if let Some(name) = &hash.http_header_name {
        PolicySpecifier::Header(Header {
            header_name: name.clone(),
            ..Default::default()
        })
    } else if let Some(cookie) = &hash.http_cookie {
        PolicySpecifier::Cookie(Cookie {
            name: cookie.name.clone(),
            ttl: cookie.ttl.as_deref().map(|t| super::duration(Some(t))),
            path: cookie.path.clone(),
            attributes: cookie
                .attributes
                .iter()
                .flatten()
                .map(|a| CookieAttribute {
                    name: a.name.clone(),
                    value: a.value.clone(),
                })
                .collect(),
        })
    } else if let Some(source_ip) = hash.use_source_ip {
        PolicySpecifier::ConnectionProperties(ConnectionProperties { source_ip })
    } else if let Some(name) = &hash.http_query_parameter_name {
        PolicySpecifier::QueryParameter(QueryParameter { name: name.clone() })
    } else {
        return None;
    };
    Some(HashPolicy {
        policy_specifier: Some(specifier),
        terminal: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(yaml: &str) -> ConsistentHash {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn each_key_as_istiod_writes_it() {
        let header = to_hash_policy(&hash("httpHeaderName: x-user")).unwrap();
        assert_eq!(
            header.policy_specifier,
            Some(PolicySpecifier::Header(Header {
                header_name: "x-user".into(),
                ..Default::default()
            }))
        );
        let cookie = to_hash_policy(&hash(
            "httpCookie: {name: s, path: /a, ttl: 5s, attributes: [{name: SameSite, value: Strict}]}",
        ))
        .unwrap();
        let Some(PolicySpecifier::Cookie(c)) = cookie.policy_specifier else {
            panic!()
        };
        assert_eq!((c.name.as_str(), c.path.as_str()), ("s", "/a"));
        assert_eq!(c.ttl.unwrap().seconds, 5);
        assert_eq!(c.attributes[0].name, "SameSite");
        assert_eq!(
            to_hash_policy(&hash("useSourceIp: true"))
                .unwrap()
                .policy_specifier,
            Some(PolicySpecifier::ConnectionProperties(
                ConnectionProperties { source_ip: true }
            ))
        );
        assert_eq!(
            to_hash_policy(&hash("httpQueryParameterName: u"))
                .unwrap()
                .policy_specifier,
            Some(PolicySpecifier::QueryParameter(QueryParameter {
                name: "u".into()
            }))
        );
        assert_eq!(
            to_hash_policy(&hash("ringHash: {minimumRingSize: 8}")),
            None
        );
    }
}
