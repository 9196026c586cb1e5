//! Semantic validation of Istio configs, as Istio's CRD schema (OpenAPI + CEL) does it.
//!
//! Called by [`super::parse`] on every typed config; returns every reason a config is invalid.
//!
//! The rules are those of Istio's two validation layers: the CRD schema generated from
//! istio/api (types, enums, ranges and the CEL `x-kubernetes-validations` rules) and the
//! validating webhook of istiod (istio/istio `pkg/config/validation`). What Istio only warns
//! about is accepted here. Where a rule of those layers would reject configs that the Istio
//! project itself publishes as valid samples or test data, the published configs win; those
//! places say "Deviation".
//!
//! Every message is `<field path>: <reason>`, for example
//! `spec.ports[1].number: port must be between 1-65535`. Map entries are written with their
//! key in brackets: `spec.ports[http]`.
//!
//! Sub-objects that axon keeps as `serde_json::Value` (DestinationRule traffic policies,
//! Gateway server `tls`, Sidecar `ingress` and `outboundTrafficPolicy`, VirtualService `tcp`
//! and `tls` routes, WorkloadGroup `probe` and `metadata`) are read here into private serde
//! shapes. As everywhere in axon, fields those shapes do not name are ignored, so only what
//! the typed model (and these shapes) can see is checked.
//!
//! Layout: `mod.rs` dispatches on the kind; one file per kind (`service_entry`, `workload`
//! for WorkloadEntry and WorkloadGroup, `destination_rule`, `virtual_service`, `gateway`,
//! `sidecar`, `peer_authentication`, `request_authentication`), with the parts several kinds share in their own files (`traffic_policy` and
//! `tls` for DestinationRule, Gateway and Sidecar settings, `http_route` for VirtualService
//! HTTP matches, `names` for host, label and address checks, `fields` for the message
//! collector and the small value checks and parsers). Unit tests sit next to what they test;
//! `fixtures` holds the YAML fixture helpers they share.

mod authorization_policy;
mod destination;
mod destination_rule;
mod fields;
#[cfg(test)]
mod fixtures;
mod gateway;
mod gateway_api;
mod http_action;
mod http_route;
mod locality;
mod names;
mod peer_authentication;
mod request_authentication;
mod service_entry;
mod sidecar;
mod telemetry;
mod tls;
mod traffic_policy;
mod virtual_service;
mod workload;

pub use fields::{Protocol, parse_duration, protocol};

/// istiod's checks of a `localityLbSetting` (also the mesh config's): the reasons it fails.
pub fn locality_lb_setting(value: &serde_json::Value) -> Vec<String> {
    let mut errs = fields::Errors(Vec::new());
    locality::locality_lb(&mut errs, "localityLbSetting", value);
    errs.0
}

/// istiod's checks of the mesh config's `defaultTrafficPolicy` (a DestinationRule's, for its
/// `connectionPool` and `outlierDetection`): the reasons it fails.
pub fn default_traffic_policy(value: &serde_json::Value) -> Vec<String> {
    let mut errs = fields::Errors(Vec::new());
    traffic_policy::default_traffic_policy(&mut errs, "defaultTrafficPolicy", value);
    errs.0
}

/// istiod's checks of a `zoneAwareLbSetting` (also the mesh config's): the reasons it fails.
pub fn zone_aware_lb_setting(value: &serde_json::Value) -> Vec<String> {
    let mut errs = fields::Errors(Vec::new());
    locality::zone_aware_lb(&mut errs, "zoneAwareLbSetting", value);
    errs.0
}

use super::config::{Config, Spec};
use fields::Errors;
use workload::AddressRule;

/// Checks one config. `Err` holds one message per problem, each naming the field.
pub fn validate(config: &Config) -> Result<(), Vec<String>> {
    let mut errs = Errors::default();
    let namespace = config.namespace();
    match &config.spec {
        Spec::ServiceEntry(se) => service_entry::service_entry(&mut errs, se, namespace),
        Spec::WorkloadEntry(we) => {
            workload::workload_entry(&mut errs, "spec", we, AddressRule::IpOrFqdn)
        }
        Spec::WorkloadGroup(wg) => workload::workload_group(&mut errs, wg),
        Spec::VirtualService(vs) => virtual_service::virtual_service(&mut errs, vs, namespace),
        Spec::DestinationRule(dr) => destination_rule::destination_rule(&mut errs, dr, namespace),
        Spec::Gateway(gw) => gateway::gateway(&mut errs, gw, config.name()),
        Spec::Sidecar(sc) => sidecar::sidecar(&mut errs, sc),
        Spec::PeerAuthentication(pa) => peer_authentication::peer_authentication(&mut errs, pa),
        Spec::AuthorizationPolicy(ap) => authorization_policy::authorization_policy(&mut errs, ap),
        Spec::RequestAuthentication(ra) => {
            request_authentication::request_authentication(&mut errs, ra)
        }
        Spec::Telemetry(t) => telemetry::telemetry(&mut errs, t),
        // Checked as it is decoded (`secrets::decode`); a fetched JWKS by the resolver.
        Spec::Secret(_) | Spec::Jwks(_) | Spec::Namespace(_) | Spec::ConfigMap(_) => {}
        Spec::GatewayClass(c) => gateway_api::gateway_class(&mut errs, c),
        Spec::KubernetesGateway(g) => gateway_api::gateway(&mut errs, g),
        Spec::HttpRoute(r) => gateway_api::http_route(&mut errs, r),
        Spec::GrpcRoute(r) => gateway_api::grpc_route(&mut errs, r),
        Spec::TlsRoute(r) => gateway_api::l4_route(&mut errs, config.kind(), r),
        Spec::TcpRoute(r) => gateway_api::l4_route(&mut errs, config.kind(), r),
        Spec::ReferenceGrant(g) => gateway_api::reference_grant(&mut errs, g),
        Spec::BackendTlsPolicy(p) => gateway_api::backend_tls_policy(&mut errs, p),
    }
    errs.finish()
}

#[cfg(test)]
mod tests {
    use super::fixtures::check;

    #[test]
    fn every_problem_is_reported_with_its_field_path() {
        let errs = check(
            "ServiceEntry",
            "hosts: ['*']\nports: [{name: a, number: 0}, {name: a, number: 70000}]\nresolution: DNS\naddresses: [10.0.0.0/8]",
        )
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "spec.hosts[0]: hostname cannot be wildcard",
                "spec.addresses: CIDR addresses are allowed only for NONE/STATIC resolution types",
                "spec.ports[0].number: port must be between 1-65535",
                "spec.ports[1].number: port must be between 1-65535",
                "spec.ports[1].name: Duplicate value: \"a\"",
            ]
        );
    }
}
