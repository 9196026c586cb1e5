//! The tables of [`super`]: every message of the Istio networking API that the `spec` of the
//! seven kinds axon reads can reach, each field by its JSON name, with its kind and whether
//! axon applies it.
//!
//! Written from istio/api at commit b8f8791d9653b2edc77a071d48887e582cfe84bf
//! (2026-07-21, "Add outlier detection failure matcher (#3741)"). Proto files covered:
//!
//! - `networking/v1alpha3/virtual_service.proto` (also `Destination`, `PortSelector`,
//!   `Percent`, `StringMatch`, used by the other kinds)
//! - `networking/v1alpha3/destination_rule.proto` (also `ConnectionPoolSettings`, used by
//!   Sidecar)
//! - `networking/v1alpha3/gateway.proto` (also `ServerTLSSettings`, used by Sidecar ingress)
//! - `networking/v1alpha3/service_entry.proto` (`ServiceEntry`, `ServicePort`; not the status
//!   messages `ServiceEntryStatus` and `ServiceEntryAddress`, which no spec reaches)
//! - `networking/v1alpha3/workload_entry.proto`
//! - `networking/v1alpha3/workload_group.proto` (`ReadinessProbe` and its HTTP, TCP, exec
//!   and gRPC checks)
//! - `networking/v1alpha3/sidecar.proto` (also `WorkloadSelector` with `labels`, used by
//!   ServiceEntry)
//! - `type/v1beta1/selector.proto`: `istio.type.v1beta1.WorkloadSelector` (`matchLabels`),
//!   DestinationRule's selector. Its `PortSelector` and `PolicyTargetReference` are not
//!   reached (the networking messages use the networking package's `PortSelector`).
//!
//! `v1beta1` and `v1` are generated from these same protos. Every message's field list was
//! checked against the `v1alpha3`, `v1beta1` and `v1` schemas of
//! `kubernetes/customresourcedefinitions.gen.yaml` at the same commit: they agree, including
//! HTTPRoute's `mirror_percent`, the CRD's alternative name of `mirrorPercent`.
//!
//! Conventions:
//! - A field's name is its proto `json_name` (lowerCamelCase of the proto name). Deprecated
//!   fields are kept, and every member of every oneof is a field of the enclosing message
//!   (oneofs have no JSON wrapper).
//! - A nested message is named `Outer.Inner` (as istio.io's reference names it); one from
//!   another package by its full name.
//! - `Kind::Scalar`: strings, numbers, bools, bytes, enums, `Duration`, wrapper values, and
//!   lists of those. `Kind::ScalarMap`: `map<string, string>` and `map<string, uint32>`
//!   (`WorkloadEntry.ports`, `LocalityLoadBalancerSetting.Distribute.to`).
//! - A message used from several places (`Destination`, `StringMatch`, `PortSelector`,
//!   `WorkloadEntry`, `ConnectionPoolSettings`, `ServerTLSSettings`, ...) has one `applied` per
//!   field; where its parent field is `No` it is reported as a whole there, so its own marks
//!   matter only under the parents that are `Yes`.
//!
//! `Applied::Yes` marks exactly the fields that axon's generators (`xds::{cds, eds, lds, rds,
//! grpc}` and the model they read: `push_context`, `sidecar_scope`, `gateway`, `service`,
//! `visibility`) read so that they change what a proxy is sent, or which proxy gets it; each
//! says where. A field only parsed or validated is `No`. When a generator starts reading a
//! field, mark it here.

use super::{Applied, Field, Kind, Message};

// ---- networking/v1alpha3/virtual_service.proto ----

pub static VIRTUAL_SERVICE: Message = Message {
    name: "VirtualService",
    fields: &[
        // A list. Applied: `push_context::virtual_services` (by host),
        // `EgressScope::virtual_services_for` (sidecar routes), `rds::gateway_virtual_hosts` (a
        // virtual host per host).
        Field {
            name: "hosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `push_context::virtual_services` (by gateway, `mesh` when empty),
        // read by `sidecar_scope::sidecar_scope` and `rds::gateway_virtual_hosts`.
        Field {
            name: "gateways",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `rds::translate_routes`.
        Field {
            name: "http",
            kind: Kind::Message(&HTTP_ROUTE),
            applied: Applied::Yes,
        },
        // A list. Applied: on gateways, `lds::gateway_l4` (PASSTHROUGH servers); on
        // sidecars, `lds::sidecar_l4` (TLS and HTTPS ports).
        Field {
            name: "tls",
            kind: Kind::Message(&TLS_ROUTE),
            applied: Applied::Yes,
        },
        // A list. Applied: on gateways, `lds::gateway_l4` (TCP and terminated TLS servers);
        // on sidecars, `lds::sidecar_l4` (TCP ports).
        Field {
            name: "tcp",
            kind: Kind::Message(&TCP_ROUTE),
            applied: Applied::Yes,
        },
        // A list. Applied: `sidecar_scope::sidecar_scope` (which mesh VirtualServices a sidecar
        // imports; gateways do not check it).
        Field {
            name: "exportTo",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static DESTINATION: Message = Message {
    name: "Destination",
    fields: &[
        // Applied: `rds::route_action` (the cluster name).
        Field {
            name: "host",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::route_action` (the cluster name).
        Field {
            name: "subset",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::route_action` (the cluster name).
        Field {
            name: "port",
            kind: Kind::Message(&PORT_SELECTOR),
            applied: Applied::Yes,
        },
    ],
};

// `redirect`, `directResponse`, `rewrite`, `timeout`, `retries`, `headers`, `fault`, the
// mirrors and `corsPolicy` applied: `rds::action::translate` (istiod's `TranslateRoute`);
// `delegate`: `push_context::delegate` (istiod's `MergeHTTPRoutes`).
pub(super) static HTTP_ROUTE: Message = Message {
    name: "HTTPRoute",
    fields: &[
        // Applied: `rds::translate_routes` (the Envoy route's name).
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `rds::translate_routes` (a route per match, `applies`, `route_match`).
        Field {
            name: "match",
            kind: Kind::Message(&HTTP_MATCH_REQUEST),
            applied: Applied::Yes,
        },
        // A list. Applied: `rds::route_action`.
        Field {
            name: "route",
            kind: Kind::Message(&HTTP_ROUTE_DESTINATION),
            applied: Applied::Yes,
        },
        Field {
            name: "redirect",
            kind: Kind::Message(&HTTP_REDIRECT),
            applied: Applied::Yes,
        },
        Field {
            name: "directResponse",
            kind: Kind::Message(&HTTP_DIRECT_RESPONSE),
            applied: Applied::Yes,
        },
        Field {
            name: "delegate",
            kind: Kind::Message(&DELEGATE),
            applied: Applied::Yes,
        },
        Field {
            name: "rewrite",
            kind: Kind::Message(&HTTP_REWRITE),
            applied: Applied::Yes,
        },
        Field {
            name: "timeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "retries",
            kind: Kind::Message(&HTTP_RETRY),
            applied: Applied::Yes,
        },
        Field {
            name: "fault",
            kind: Kind::Message(&HTTP_FAULT_INJECTION),
            applied: Applied::Yes,
        },
        Field {
            name: "mirror",
            kind: Kind::Message(&DESTINATION),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "mirrors",
            kind: Kind::Message(&HTTP_MIRROR_POLICY),
            applied: Applied::Yes,
        },
        // Deprecated.
        Field {
            name: "mirrorPercent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // The CRD's `+kubebuilder:altName` of `mirrorPercent`: the same field. Deprecated.
        Field {
            name: "mirror_percent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "mirrorPercentage",
            kind: Kind::Message(&PERCENT),
            applied: Applied::Yes,
        },
        Field {
            name: "corsPolicy",
            kind: Kind::Message(&CORS_POLICY),
            applied: Applied::Yes,
        },
        Field {
            name: "headers",
            kind: Kind::Message(&HEADERS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static DELEGATE: Message = Message {
    name: "Delegate",
    fields: &[
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "namespace",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::headers::operations` (route and destination header operations).
pub(super) static HEADERS: Message = Message {
    name: "Headers",
    fields: &[
        Field {
            name: "request",
            kind: Kind::Message(&HEADERS_HEADER_OPERATIONS),
            applied: Applied::Yes,
        },
        Field {
            name: "response",
            kind: Kind::Message(&HEADERS_HEADER_OPERATIONS),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::headers::operations`.
pub(super) static HEADERS_HEADER_OPERATIONS: Message = Message {
    name: "Headers.HeaderOperations",
    fields: &[
        Field {
            name: "set",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        Field {
            name: "add",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "remove",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static TLS_ROUTE: Message = Message {
    name: "TLSRoute",
    fields: &[
        // A list. Applied: `lds::gateway_l4`.
        Field {
            name: "match",
            kind: Kind::Message(&TLS_MATCH_ATTRIBUTES),
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::l4::route_filters`.
        Field {
            name: "route",
            kind: Kind::Message(&ROUTE_DESTINATION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static TCP_ROUTE: Message = Message {
    name: "TCPRoute",
    fields: &[
        // A list. Applied: `lds::gateway_l4`.
        Field {
            name: "match",
            kind: Kind::Message(&L4_MATCH_ATTRIBUTES),
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::l4::route_filters`.
        Field {
            name: "route",
            kind: Kind::Message(&ROUTE_DESTINATION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static HTTP_MATCH_REQUEST: Message = Message {
    name: "HTTPMatchRequest",
    fields: &[
        // Applied: `rds::translate_routes` (the Envoy route's name, `ROUTE.MATCH`).
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (path specifier).
        Field {
            name: "uri",
            kind: Kind::Message(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (a `:scheme` header matcher).
        Field {
            name: "scheme",
            kind: Kind::Message(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (a `:method` header matcher).
        Field {
            name: "method",
            kind: Kind::Message(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (an `:authority` header matcher).
        Field {
            name: "authority",
            kind: Kind::Message(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (header matchers).
        Field {
            name: "headers",
            kind: Kind::MapOf(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::applies`.
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::applies` (the proxy's labels, as istiod's `sourceMatchHTTP`).
        Field {
            name: "sourceLabels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // A list. Applied: `rds::applies`.
        Field {
            name: "gateways",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (query parameter matchers).
        Field {
            name: "queryParams",
            kind: Kind::MapOf(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (`case_sensitive`).
        Field {
            name: "ignoreUriCase",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::route_match` (inverted header matchers).
        Field {
            name: "withoutHeaders",
            kind: Kind::MapOf(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // Applied: `rds::applies` (the proxy's namespace).
        Field {
            name: "sourceNamespace",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `rds::translate_routes` (the Envoy route's `stat_prefix`).
        Field {
            name: "statPrefix",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static HTTP_ROUTE_DESTINATION: Message = Message {
    name: "HTTPRouteDestination",
    fields: &[
        // Applied: `rds::route_action`.
        Field {
            name: "destination",
            kind: Kind::Message(&DESTINATION),
            applied: Applied::Yes,
        },
        // Applied: `rds::route_action` (weighted clusters).
        Field {
            name: "weight",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "headers",
            kind: Kind::Message(&HEADERS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static ROUTE_DESTINATION: Message = Message {
    name: "RouteDestination",
    fields: &[
        // Applied: `lds::l4::route_filters` (the cluster).
        Field {
            name: "destination",
            kind: Kind::Message(&DESTINATION),
            applied: Applied::Yes,
        },
        // Applied: `lds::l4::route_filters` (weighted clusters).
        Field {
            name: "weight",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static L4_MATCH_ATTRIBUTES: Message = Message {
    name: "L4MatchAttributes",
    fields: &[
        // A list.
        Field {
            // Applied: a sidecar's chain for the subnets (`lds::sidecar_l4`); gateways ignore
            // it, as istiod's (`convertTLSMatchToL4Match`).
            name: "destinationSubnets",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::l4::single_match`, `lds::sidecar_l4::sidecar_match`.
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "sourceSubnet",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        // Applied on sidecars: `lds::sidecar_l4::sidecar_match` (the proxy's labels);
        // gateways ignore it, as istiod's `l4SingleMatch`.
        Field {
            name: "sourceLabels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::l4::single_match`.
        Field {
            name: "gateways",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied on sidecars: `lds::sidecar_l4::sidecar_match` (the proxy's namespace);
        // gateways ignore it, as istiod's `l4SingleMatch`.
        Field {
            name: "sourceNamespace",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static TLS_MATCH_ATTRIBUTES: Message = Message {
    name: "TLSMatchAttributes",
    fields: &[
        // A list. Applied: `lds::gateway_l4::passthrough_chains`, `lds::sidecar_l4::service_chains`
        // (a filter chain by SNI).
        Field {
            name: "sniHosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            // Applied: a sidecar's chain for the subnets (`lds::sidecar_l4`); gateways ignore
            // it, as istiod's (`convertTLSMatchToL4Match`).
            name: "destinationSubnets",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::l4::single_match`, `lds::sidecar_l4::sidecar_match`.
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied on sidecars: `lds::sidecar_l4::sidecar_match` (the proxy's labels);
        // gateways ignore it, as istiod's `l4SingleMatch`.
        Field {
            name: "sourceLabels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::l4::single_match`.
        Field {
            name: "gateways",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied on sidecars: `lds::sidecar_l4::sidecar_match` (the proxy's namespace);
        // gateways ignore it, as istiod's `l4SingleMatch`.
        Field {
            name: "sourceNamespace",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::redirect_action`.
pub(super) static HTTP_REDIRECT: Message = Message {
    name: "HTTPRedirect",
    fields: &[
        Field {
            name: "uri",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "authority",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `redirect_port`.
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `redirect_port`.
        Field {
            name: "derivePort",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "scheme",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "redirectCode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "prefixRewrite",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::direct_response`.
pub(super) static HTTP_DIRECT_RESPONSE: Message = Message {
    name: "HTTPDirectResponse",
    fields: &[
        Field {
            name: "status",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "body",
            kind: Kind::Message(&HTTP_BODY),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::direct_response`.
pub(super) static HTTP_BODY: Message = Message {
    name: "HTTPBody",
    fields: &[
        // Oneof `specifier`.
        Field {
            name: "string",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `specifier`.
        Field {
            name: "bytes",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::route_action`.
pub(super) static HTTP_REWRITE: Message = Message {
    name: "HTTPRewrite",
    fields: &[
        Field {
            name: "uri",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "authority",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "uriRegexRewrite",
            kind: Kind::Message(&REGEX_REWRITE),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::route_action`.
pub(super) static REGEX_REWRITE: Message = Message {
    name: "RegexRewrite",
    fields: &[
        Field {
            name: "match",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "rewrite",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static STRING_MATCH: Message = Message {
    name: "StringMatch",
    fields: &[
        // Oneof `match_type`. Applied: `rds::route_match`, `rds::string_matcher`.
        Field {
            name: "exact",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `match_type`. Applied: `rds::route_match`, `rds::string_matcher`.
        Field {
            name: "prefix",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `match_type`. Applied: `rds::route_match`, `rds::string_matcher`.
        Field {
            name: "regex",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `match_type`: newer than the commit above (the corpus's istio/api fixtures
        // use it). Applied: `rds::route_match`, `rds::string_matcher`.
        Field {
            name: "suffix",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::action::retry_policy` (istiod's `retry.ConvertPolicy`).
pub(super) static HTTP_RETRY: Message = Message {
    name: "HTTPRetry",
    fields: &[
        Field {
            name: "attempts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "perTryTimeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "retryOn",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "retryRemoteLocalities",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "retryIgnorePreviousHosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "backoff",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters::cors` (istiod's `TranslateCORSPolicy`).
pub(super) static CORS_POLICY: Message = Message {
    name: "CorsPolicy",
    fields: &[
        // A list, deprecated.
        Field {
            name: "allowOrigin",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "allowOrigins",
            kind: Kind::Message(&STRING_MATCH),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "allowMethods",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "allowHeaders",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "exposeHeaders",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "maxAge",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "allowCredentials",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "unmatchedPreflights",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters::fault` (istiod's `TranslateFault`; `exponentialDelay` and `http2Error` are rejected, as by istiod).
pub(super) static HTTP_FAULT_INJECTION: Message = Message {
    name: "HTTPFaultInjection",
    fields: &[
        Field {
            name: "delay",
            kind: Kind::Message(&HTTP_FAULT_INJECTION_DELAY),
            applied: Applied::Yes,
        },
        Field {
            name: "abort",
            kind: Kind::Message(&HTTP_FAULT_INJECTION_ABORT),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters::fault`.
pub(super) static HTTP_FAULT_INJECTION_DELAY: Message = Message {
    name: "HTTPFaultInjection.Delay",
    fields: &[
        // Deprecated.
        Field {
            name: "percent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `http_delay_type`.
        Field {
            name: "fixedDelay",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `http_delay_type`.
        Field {
            name: "exponentialDelay",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "percentage",
            kind: Kind::Message(&PERCENT),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters::fault`.
pub(super) static HTTP_FAULT_INJECTION_ABORT: Message = Message {
    name: "HTTPFaultInjection.Abort",
    fields: &[
        // Oneof `error_type`.
        Field {
            name: "httpStatus",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `error_type`.
        Field {
            name: "grpcStatus",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `error_type`.
        Field {
            name: "http2Error",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "percentage",
            kind: Kind::Message(&PERCENT),
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters::mirror_policies`.
pub(super) static HTTP_MIRROR_POLICY: Message = Message {
    name: "HTTPMirrorPolicy",
    fields: &[
        Field {
            name: "destination",
            kind: Kind::Message(&DESTINATION),
            applied: Applied::Yes,
        },
        Field {
            name: "percentage",
            kind: Kind::Message(&PERCENT),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static PORT_SELECTOR: Message = Message {
    name: "PortSelector",
    fields: &[
        // Applied: `rds::route_action`.
        Field {
            name: "number",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Every field applied: `rds::filters` (a fraction of a million).
pub(super) static PERCENT: Message = Message {
    name: "Percent",
    fields: &[Field {
        name: "value",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

// ---- networking/v1alpha3/destination_rule.proto ----

pub static DESTINATION_RULE: Message = Message {
    name: "DestinationRule",
    fields: &[
        // Applied: `push_context::index_destination_rules`.
        Field {
            name: "host",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "trafficPolicy",
            kind: Kind::Message(&TRAFFIC_POLICY),
            applied: Applied::Yes,
        },
        // A list. Applied: `cds::generate` (a cluster per subset), `eds::load_assignment_for`,
        // `PushContext::subset_endpoints`.
        Field {
            name: "subsets",
            kind: Kind::Message(&SUBSET),
            applied: Applied::Yes,
        },
        // A list. Applied: `PushContext::destination_rule_for` (read by `cds::generate`,
        // `eds::load_assignment_for`, `sidecar_scope::finish`).
        Field {
            name: "exportTo",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `PushContext::destination_rule_for_workload` (the selected workloads'
        // proxies only, as istiod's `SidecarScope.DestinationRule`).
        Field {
            name: "workloadSelector",
            kind: Kind::Message(&TYPE_WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
    ],
};

// Applied: `model::traffic_policy::cluster_policy` (istiod's merge), `cds::to_cluster`
// (`cds::{pool, outlier, lb, tls}`), `rds::hash` (the consistent hash of routes).
pub(super) static TRAFFIC_POLICY: Message = Message {
    name: "TrafficPolicy",
    fields: &[
        Field {
            name: "loadBalancer",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "connectionPool",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "outlierDetection",
            kind: Kind::Message(&OUTLIER_DETECTION),
            applied: Applied::Yes,
        },
        Field {
            name: "tls",
            kind: Kind::Message(&CLIENT_TLS_SETTINGS),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "portLevelSettings",
            kind: Kind::Message(&TRAFFIC_POLICY_PORT_TRAFFIC_POLICY),
            applied: Applied::Yes,
        },
        Field {
            name: "tunnel",
            kind: Kind::Message(&TRAFFIC_POLICY_TUNNEL_SETTINGS),
            applied: Applied::No,
        },
        Field {
            name: "proxyProtocol",
            kind: Kind::Message(&TRAFFIC_POLICY_PROXY_PROTOCOL),
            applied: Applied::Yes,
        },
        Field {
            name: "retryBudget",
            kind: Kind::Message(&TRAFFIC_POLICY_RETRY_BUDGET),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static TRAFFIC_POLICY_PORT_TRAFFIC_POLICY: Message = Message {
    name: "TrafficPolicy.PortTrafficPolicy",
    fields: &[
        Field {
            name: "port",
            kind: Kind::Message(&PORT_SELECTOR),
            applied: Applied::Yes,
        },
        Field {
            name: "loadBalancer",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "connectionPool",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "outlierDetection",
            kind: Kind::Message(&OUTLIER_DETECTION),
            applied: Applied::Yes,
        },
        Field {
            name: "tls",
            kind: Kind::Message(&CLIENT_TLS_SETTINGS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static TRAFFIC_POLICY_TUNNEL_SETTINGS: Message = Message {
    name: "TrafficPolicy.TunnelSettings",
    fields: &[
        Field {
            name: "protocol",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "targetHost",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "targetPort",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

pub(super) static TRAFFIC_POLICY_PROXY_PROTOCOL: Message = Message {
    name: "TrafficPolicy.ProxyProtocol",
    fields: &[Field {
        name: "version",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

pub(super) static TRAFFIC_POLICY_RETRY_BUDGET: Message = Message {
    name: "TrafficPolicy.RetryBudget",
    fields: &[
        Field {
            name: "percent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "minRetryConcurrency",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "budgetInterval",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SUBSET: Message = Message {
    name: "Subset",
    fields: &[
        // Applied: `cds::generate` (`outbound|PORT|SUBSET|HOST`), `eds::load_assignment_for`.
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `eds::load_assignment_for` (which endpoints a subset cluster has).
        Field {
            name: "labels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        Field {
            name: "trafficPolicy",
            kind: Kind::Message(&TRAFFIC_POLICY),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOAD_BALANCER_SETTINGS: Message = Message {
    name: "LoadBalancerSettings",
    fields: &[
        // Oneof `lb_policy`.
        Field {
            name: "simple",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `lb_policy`.
        Field {
            name: "consistentHash",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB),
            applied: Applied::Yes,
        },
        // Applied: `eds::locality` (priorities and weights per proxy locality, also on DNS
        // clusters' inline assignments), `cds::locality` (the cluster's locality config).
        Field {
            name: "localityLbSetting",
            kind: Kind::Message(&LOCALITY_LOAD_BALANCER_SETTING),
            applied: Applied::Yes,
        },
        // Applied: `eds::locality` (regions bucketed), `cds::locality` (Envoy's zone-aware
        // config).
        Field {
            name: "zoneAwareLbSetting",
            kind: Kind::Message(&ZONE_AWARE_LOAD_BALANCER_SETTING),
            applied: Applied::Yes,
        },
        Field {
            name: "warmupDurationSecs",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "warmup",
            kind: Kind::Message(&WARMUP_CONFIGURATION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB: Message = Message {
    name: "LoadBalancerSettings.ConsistentHashLB",
    fields: &[
        // Oneof `hash_key`.
        Field {
            name: "httpHeaderName",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `hash_key`.
        Field {
            name: "httpCookie",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_HTTP_COOKIE),
            applied: Applied::Yes,
        },
        // Oneof `hash_key`.
        Field {
            name: "useSourceIp",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `hash_key`.
        Field {
            name: "httpQueryParameterName",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Oneof `hash_algorithm`.
        Field {
            name: "ringHash",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_RING_HASH),
            applied: Applied::Yes,
        },
        // Oneof `hash_algorithm`.
        Field {
            name: "maglev",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_MAG_LEV),
            applied: Applied::Yes,
        },
        // Deprecated.
        Field {
            name: "minimumRingSize",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_RING_HASH: Message = Message {
    name: "LoadBalancerSettings.ConsistentHashLB.RingHash",
    fields: &[Field {
        name: "minimumRingSize",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

pub(super) static LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_MAG_LEV: Message = Message {
    name: "LoadBalancerSettings.ConsistentHashLB.MagLev",
    fields: &[Field {
        name: "tableSize",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

pub(super) static LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_HTTP_COOKIE: Message = Message {
    name: "LoadBalancerSettings.ConsistentHashLB.HTTPCookie",
    fields: &[
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "path",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "ttl",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "attributes",
            kind: Kind::Message(&LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_HTTP_COOKIE_ATTRIBUTE),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOAD_BALANCER_SETTINGS_CONSISTENT_HASH_LB_HTTP_COOKIE_ATTRIBUTE: Message =
    Message {
        name: "LoadBalancerSettings.ConsistentHashLB.HTTPCookie.Attribute",
        fields: &[
            Field {
                name: "name",
                kind: Kind::Scalar,
                applied: Applied::Yes,
            },
            Field {
                name: "value",
                kind: Kind::Scalar,
                applied: Applied::Yes,
            },
        ],
    };

pub(super) static WARMUP_CONFIGURATION: Message = Message {
    name: "WarmupConfiguration",
    fields: &[
        Field {
            name: "duration",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "minimumPercent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "aggression",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Applied: `cds::pool`, for DestinationRules' outbound clusters and, as istiod, the inbound
// ones (`traffic_policy::inbound`: the own service's rule, a Sidecar's `inboundConnectionPool`
// and ingress listeners' `connectionPool`).
pub(super) static CONNECTION_POOL_SETTINGS: Message = Message {
    name: "ConnectionPoolSettings",
    fields: &[
        Field {
            name: "tcp",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_TCP_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "http",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_HTTP_SETTINGS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static CONNECTION_POOL_SETTINGS_TCP_SETTINGS: Message = Message {
    name: "ConnectionPoolSettings.TCPSettings",
    fields: &[
        Field {
            name: "maxConnections",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "connectTimeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "tcpKeepalive",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_TCP_SETTINGS_TCP_KEEPALIVE),
            applied: Applied::Yes,
        },
        Field {
            name: "maxConnectionDuration",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "idleTimeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static CONNECTION_POOL_SETTINGS_TCP_SETTINGS_TCP_KEEPALIVE: Message = Message {
    name: "ConnectionPoolSettings.TCPSettings.TcpKeepalive",
    fields: &[
        Field {
            name: "probes",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "time",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "interval",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static CONNECTION_POOL_SETTINGS_HTTP_SETTINGS: Message = Message {
    name: "ConnectionPoolSettings.HTTPSettings",
    fields: &[
        Field {
            name: "http1MaxPendingRequests",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "http2MaxRequests",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "maxRequestsPerConnection",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "maxRetries",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "idleTimeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "h2UpgradePolicy",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "useClientProtocol",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "maxConcurrentStreams",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "http2KeepAlive",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_HTTP_SETTINGS_CONNECTION_KEEPALIVE),
            applied: Applied::Yes,
        },
        // Newer than the commit above (the corpus's istio/api fixtures use it).
        Field {
            name: "http2ProtocolOptions",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_HTTP_SETTINGS_HTTP2_PROTOCOL_OPTIONS),
            applied: Applied::No,
        },
    ],
};

pub(super) static CONNECTION_POOL_SETTINGS_HTTP_SETTINGS_HTTP2_PROTOCOL_OPTIONS: Message =
    Message {
        name: "ConnectionPoolSettings.HTTPSettings.HTTP2ProtocolOptions",
        fields: &[Field {
            name: "connectionKeepalive",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS_HTTP_SETTINGS_CONNECTION_KEEPALIVE),
            applied: Applied::No,
        }],
    };

pub(super) static CONNECTION_POOL_SETTINGS_HTTP_SETTINGS_CONNECTION_KEEPALIVE: Message = Message {
    name: "ConnectionPoolSettings.HTTPSettings.ConnectionKeepalive",
    fields: &[
        Field {
            name: "interval",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "timeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Applied: `cds::outlier`. `consecutiveErrors` is deprecated and istiod ignores it too.
// MeshConfig's `DefaultTrafficPolicy` (istio/api `mesh/v1alpha1/config.proto`), checked by
// `mesh::parse` (its not-applied fields are reported at load, not in the README's list of
// networking fields). Applied: `traffic_policy::cluster_policy_in`, `traffic_policy::inbound`,
// `cds::passthrough`.
pub static MESH_DEFAULT_TRAFFIC_POLICY: Message = Message {
    name: "DefaultTrafficPolicy",
    fields: &[
        Field {
            name: "connectionPool",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "outlierDetection",
            kind: Kind::Message(&OUTLIER_DETECTION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static OUTLIER_DETECTION: Message = Message {
    name: "OutlierDetection",
    fields: &[
        // Deprecated.
        Field {
            name: "consecutiveErrors",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "splitExternalLocalOriginErrors",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "consecutiveLocalOriginFailures",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "consecutiveGatewayErrors",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "consecutive5xxErrors",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "interval",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "baseEjectionTime",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "maxEjectionPercent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "minHealthPercent",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "outlierDetectionHttpErrorCodes",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// Applied: `cds::tls`, certificates read by Envoy from the files, or `credentialName` from a
// Secret (or a ConfigMap's CA, `configmap://`) over SDS (`xds::sds`). `mode: ISTIO_MUTUAL`
// is noted by `model::applied`.
pub(super) static CLIENT_TLS_SETTINGS: Message = Message {
    name: "ClientTLSSettings",
    fields: &[
        Field {
            name: "mode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "clientCertificate",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "privateKey",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "caCertificates",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "credentialName",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "subjectAltNames",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "sni",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "insecureSkipVerify",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "caCrl",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOCALITY_LOAD_BALANCER_SETTING: Message = Message {
    name: "LocalityLoadBalancerSetting",
    fields: &[
        // A list.
        Field {
            name: "distribute",
            kind: Kind::Message(&LOCALITY_LOAD_BALANCER_SETTING_DISTRIBUTE),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "failover",
            kind: Kind::Message(&LOCALITY_LOAD_BALANCER_SETTING_FAILOVER),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "failoverPriority",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "enabled",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOCALITY_LOAD_BALANCER_SETTING_DISTRIBUTE: Message = Message {
    name: "LocalityLoadBalancerSetting.Distribute",
    fields: &[
        Field {
            name: "from",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "to",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static LOCALITY_LOAD_BALANCER_SETTING_FAILOVER: Message = Message {
    name: "LocalityLoadBalancerSetting.Failover",
    fields: &[
        Field {
            name: "from",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "to",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static ZONE_AWARE_LOAD_BALANCER_SETTING: Message = Message {
    name: "ZoneAwareLoadBalancerSetting",
    fields: &[
        Field {
            name: "enabled",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "failover",
            kind: Kind::Message(&ZONE_AWARE_LOAD_BALANCER_SETTING_FAILOVER),
            applied: Applied::Yes,
        },
        // A list.
        Field {
            name: "failoverPriority",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "minClusterSize",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static ZONE_AWARE_LOAD_BALANCER_SETTING_FAILOVER: Message = Message {
    name: "ZoneAwareLoadBalancerSetting.Failover",
    fields: &[
        Field {
            name: "from",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "to",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// ---- networking/v1alpha3/gateway.proto ----

pub static GATEWAY: Message = Message {
    name: "Gateway",
    fields: &[
        // A list. Applied: `gateway::merge`.
        Field {
            name: "servers",
            kind: Kind::Message(&SERVER),
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge` (which gateway proxies), `sidecar_scope::scope_key`,
        // `gateway_scope`.
        Field {
            name: "selector",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SERVER: Message = Message {
    name: "Server",
    fields: &[
        // Applied: `gateway::merge`.
        Field {
            name: "port",
            kind: Kind::Message(&PORT),
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge` (the listener address in `lds::gateway_listeners`).
        Field {
            name: "bind",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `GatewayServer::exposes` (read by `rds::gateway_virtual_hosts`).
        Field {
            name: "hosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge` (the server's kind, SNI hosts), `lds::server_tls`,
        // `rds::gateway_virtual_hosts` (`httpsRedirect`).
        Field {
            name: "tls",
            kind: Kind::Message(&SERVER_TLS_SETTINGS),
            applied: Applied::Yes,
        },
        Field {
            name: "defaultEndpoint",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        // Applied: `lds::gateway` (an HTTPS filter chain's stat prefix).
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static PORT: Message = Message {
    name: "Port",
    fields: &[
        // Applied: `gateway::merge` (a listener and a route configuration per port).
        Field {
            name: "number",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge` (HTTP-like, HTTPS, TLS, TCP-like servers; GRPC-WEB's
        // `grpc_web` filter in `lds::gateway`).
        Field {
            name: "protocol",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge` (the route configuration names of HTTPS servers).
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Deprecated. Applied as istiod: rejected on a Gateway (`validate::gateway`: no
        // impact on Gateways); the listening port comes from the gateway's Service
        // (`gateway::workload_ports`).
        Field {
            name: "targetPort",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SERVER_TLS_SETTINGS: Message = Message {
    name: "ServerTLSSettings",
    fields: &[
        // Applied: `rds::gateway_virtual_hosts` (`require_tls`).
        Field {
            name: "httpsRedirect",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `gateway::merge`, `lds::server_tls` (ISTIO_MUTUAL and AUTO_PASSTHROUGH noted by
        // `model::applied`).
        Field {
            name: "mode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls` (SDS `file-cert:`).
        Field {
            name: "serverCertificate",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls` (SDS `file-cert:`).
        Field {
            name: "privateKey",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls` (SDS `file-root:`).
        Field {
            name: "caCertificates",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "caCrl",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls` (SDS `kubernetes://NAME`, `-cacert`).
        Field {
            name: "credentialName",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls`.
        Field {
            name: "credentialNames",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "caCertCredentialName",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls`.
        Field {
            name: "tlsCertificates",
            kind: Kind::Message(&SERVER_TLS_SETTINGS_TLS_CERTIFICATE),
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls`.
        Field {
            name: "subjectAltNames",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls` (with credentialName, as istiod).
        Field {
            name: "verifyCertificateSpki",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls` (with credentialName, as istiod).
        Field {
            name: "verifyCertificateHash",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "minProtocolVersion",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "maxProtocolVersion",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::server_tls` (those istiod knows).
        Field {
            name: "cipherSuites",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "insecureSkipVerify",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SERVER_TLS_SETTINGS_TLS_CERTIFICATE: Message = Message {
    name: "ServerTLSSettings.TLSCertificate",
    fields: &[
        // Applied: `lds::server_tls`.
        Field {
            name: "serverCertificate",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `lds::server_tls`.
        Field {
            name: "privateKey",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "caCertificates",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

// ---- networking/v1alpha3/service_entry.proto ----

pub static SERVICE_ENTRY: Message = Message {
    name: "ServiceEntry",
    fields: &[
        // A list. Applied: `service::services_of` (a service per host).
        Field {
            name: "hosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `service::services_of` (a sidecar's listener per address,
        // `lds::outbound`; the virtual hosts' domains, `rds::sidecar`).
        Field {
            name: "addresses",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `service::services_of`, `service::endpoints_of`.
        Field {
            name: "ports",
            kind: Kind::Message(&SERVICE_PORT),
            applied: Applied::Yes,
        },
        // Applied: `service::services_of` (`Service::mesh_external`: `cds::tls`, the `istio`
        // cluster metadata in `cds::to_cluster`).
        Field {
            name: "location",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::services_of` (the cluster type in `cds::to_cluster`),
        // `push_context::endpoints::service_endpoints`.
        Field {
            name: "resolution",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `service::endpoints_of`.
        Field {
            name: "endpoints",
            kind: Kind::Message(&WORKLOAD_ENTRY),
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (the WorkloadEntries it selects).
        Field {
            name: "workloadSelector",
            kind: Kind::Message(&WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
        // A list. Applied: `service::services_of` (`Service::export_to`, read by
        // `sidecar_scope::sidecar_scope` and `gateway_scope`).
        Field {
            name: "exportTo",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `cds::tls`, the names a DestinationRule's SIMPLE or MUTUAL `tls`
        // checks when it names none (as istiod for ServiceEntry services).
        Field {
            name: "subjectAltNames",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        // Applied: `service::services_of` (clusters, listeners, routes).
        Field {
            name: "number",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::services_of` (`is_http` in `lds::sidecar_listeners`,
        // `rds::sidecar_virtual_hosts`, `lds::virtual_inbound`).
        Field {
            name: "protocol",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (a WorkloadEntry's port by name).
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of`, `push_context::endpoints::service_endpoints`.
        Field {
            name: "targetPort",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// ---- networking/v1alpha3/workload_entry.proto ----

pub static WORKLOAD_ENTRY: Message = Message {
    name: "WorkloadEntry",
    fields: &[
        // Applied: `service::endpoints_of` (`eds::to_lb_endpoint`, the address index).
        Field {
            name: "address",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of`.
        Field {
            name: "ports",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (selection by a ServiceEntry, subset labels in
        // `eds::load_assignment_for`).
        Field {
            name: "labels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (the endpoint's `topology.istio.io/network` label,
        // read by `failoverPriority` in `eds::locality`). axon has no east-west gateways, so
        // every network's endpoints are reached directly, as istiod's without gateways.
        Field {
            name: "network",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (`eds::load_assignment_for` groups by it).
        Field {
            name: "locality",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (`eds::to_lb_endpoint`).
        Field {
            name: "weight",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `service::endpoints_of` (`PushContext::service_accounts`: the SANs an
        // ISTIO_MUTUAL cluster checks, `cds::tls`).
        Field {
            name: "serviceAccount",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// ---- networking/v1alpha3/workload_group.proto ----

pub static WORKLOAD_GROUP: Message = Message {
    name: "WorkloadGroup",
    fields: &[
        Field {
            name: "metadata",
            kind: Kind::Message(&WORKLOAD_GROUP_OBJECT_META),
            applied: Applied::No,
        },
        Field {
            name: "template",
            kind: Kind::Message(&WORKLOAD_ENTRY),
            applied: Applied::No,
        },
        Field {
            name: "probe",
            kind: Kind::Message(&READINESS_PROBE),
            applied: Applied::No,
        },
    ],
};

pub(super) static WORKLOAD_GROUP_OBJECT_META: Message = Message {
    name: "WorkloadGroup.ObjectMeta",
    fields: &[
        Field {
            name: "labels",
            kind: Kind::ScalarMap,
            applied: Applied::No,
        },
        Field {
            name: "annotations",
            kind: Kind::ScalarMap,
            applied: Applied::No,
        },
    ],
};

pub(super) static READINESS_PROBE: Message = Message {
    name: "ReadinessProbe",
    fields: &[
        Field {
            name: "initialDelaySeconds",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "timeoutSeconds",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "periodSeconds",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "successThreshold",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "failureThreshold",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        // Oneof `health_check_method`.
        Field {
            name: "httpGet",
            kind: Kind::Message(&HTTP_HEALTH_CHECK_CONFIG),
            applied: Applied::No,
        },
        // Oneof `health_check_method`.
        Field {
            name: "tcpSocket",
            kind: Kind::Message(&TCP_HEALTH_CHECK_CONFIG),
            applied: Applied::No,
        },
        // Oneof `health_check_method`.
        Field {
            name: "exec",
            kind: Kind::Message(&EXEC_HEALTH_CHECK_CONFIG),
            applied: Applied::No,
        },
        // Oneof `health_check_method`.
        Field {
            name: "grpc",
            kind: Kind::Message(&GRPC_HEALTH_CHECK_CONFIG),
            applied: Applied::No,
        },
    ],
};

pub(super) static HTTP_HEALTH_CHECK_CONFIG: Message = Message {
    name: "HTTPHealthCheckConfig",
    fields: &[
        Field {
            name: "path",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "host",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "scheme",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        // A list.
        Field {
            name: "httpHeaders",
            kind: Kind::Message(&HTTP_HEADER),
            applied: Applied::No,
        },
    ],
};

pub(super) static GRPC_HEALTH_CHECK_CONFIG: Message = Message {
    name: "GrpcHealthCheckConfig",
    fields: &[
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "service",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

pub(super) static HTTP_HEADER: Message = Message {
    name: "HTTPHeader",
    fields: &[
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "value",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

pub(super) static TCP_HEALTH_CHECK_CONFIG: Message = Message {
    name: "TCPHealthCheckConfig",
    fields: &[
        Field {
            name: "host",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        Field {
            name: "port",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

pub(super) static EXEC_HEALTH_CHECK_CONFIG: Message = Message {
    name: "ExecHealthCheckConfig",
    fields: &[
        // A list.
        Field {
            name: "command",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

// ---- networking/v1alpha3/sidecar.proto ----

pub static SIDECAR: Message = Message {
    name: "Sidecar",
    fields: &[
        // Applied: `sidecar_scope::select_sidecar`.
        Field {
            name: "workloadSelector",
            kind: Kind::Message(&WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
        // A list. Applied: `sidecar_scope::ingress` (the inbound ports, replacing the
        // service endpoints'), `lds::inbound_listener`, `cds::inbound_cluster`.
        Field {
            name: "ingress",
            kind: Kind::Message(&ISTIO_INGRESS_LISTENER),
            applied: Applied::Yes,
        },
        // A list. Applied: `sidecar_scope::sidecar_scope`.
        Field {
            name: "egress",
            kind: Kind::Message(&ISTIO_EGRESS_LISTENER),
            applied: Applied::Yes,
        },
        // Applied: `traffic_policy::inbound` (`cds::inbound_cluster`).
        Field {
            name: "inboundConnectionPool",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS),
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::OutboundPolicy` (`lds::fallthrough_cluster`,
        // `rds::catch_all_virtual_host`).
        Field {
            name: "outboundTrafficPolicy",
            kind: Kind::Message(&OUTBOUND_TRAFFIC_POLICY),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static ISTIO_INGRESS_LISTENER: Message = Message {
    name: "IstioIngressListener",
    fields: &[
        // Applied: `sidecar_scope::ingress` (number and protocol).
        Field {
            name: "port",
            kind: Kind::Message(&SIDECAR_PORT),
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::ingress` (the bound listener's address).
        Field {
            name: "bind",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::ingress` (NONE, or DEFAULT on a proxy that intercepts
        // nothing: a bound listener `lds::inbound_listener`).
        Field {
            name: "captureMode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::ingress` (`127.0.0.1:P`, `0.0.0.0:P`, none: the original
        // destination; `unix://` is noted by `model::applied`).
        Field {
            name: "defaultEndpoint",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied where the port's PeerAuthentication mode is DISABLE, as istiod: `lds::inbound`.
        Field {
            name: "tls",
            kind: Kind::Message(&SERVER_TLS_SETTINGS),
            applied: Applied::Yes,
        },
        // Applied: `traffic_policy::inbound` (`cds::inbound_cluster`).
        Field {
            name: "connectionPool",
            kind: Kind::Message(&CONNECTION_POOL_SETTINGS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static ISTIO_EGRESS_LISTENER: Message = Message {
    name: "IstioEgressListener",
    fields: &[
        // Applied: `sidecar_scope::sidecar_scope` (`lds::sidecar_listeners`,
        // `rds::sidecar_virtual_hosts`).
        Field {
            name: "port",
            kind: Kind::Message(&SIDECAR_PORT),
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::sidecar_scope` (`lds::sidecar_listeners`).
        Field {
            name: "bind",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::sidecar_scope` (`NONE`: a bound listener on 127.0.0.1 in
        // `lds::sidecar_listeners`).
        Field {
            name: "captureMode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // A list. Applied: `sidecar_scope::sidecar_scope` (`HostImport`).
        Field {
            name: "hosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static WORKLOAD_SELECTOR: Message = Message {
    name: "WorkloadSelector",
    fields: &[
        // Applied: `sidecar_scope::select_sidecar`, `service::endpoints_of`.
        Field {
            name: "labels",
            kind: Kind::ScalarMap,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static OUTBOUND_TRAFFIC_POLICY: Message = Message {
    name: "OutboundTrafficPolicy",
    fields: &[
        // Applied: `sidecar_scope::OutboundPolicy` (REGISTRY_ONLY: `block_all`, 502, and
        // `BlackHoleCluster`).
        Field {
            name: "mode",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::OutboundPolicy` (the cluster of `allow_any` and of the
        // TCP fall-through).
        Field {
            name: "egressProxy",
            kind: Kind::Message(&DESTINATION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static SIDECAR_PORT: Message = Message {
    name: "SidecarPort",
    fields: &[
        // Applied: `sidecar_scope::sidecar_scope`.
        Field {
            name: "number",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Applied: `sidecar_scope::sidecar_scope` (an egress listener declared TCP, TLS,
        // HTTPS, MONGO, …: a TCP listener in `lds::sidecar_listeners`; HTTP-like or none:
        // an HTTP one). Sidecar ingress ports are not applied (`ingress`).
        Field {
            name: "protocol",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
        // Deprecated.
        Field {
            name: "targetPort",
            kind: Kind::Scalar,
            applied: Applied::No,
        },
    ],
};

// ---- type/v1beta1/selector.proto ----

pub(super) static TYPE_WORKLOAD_SELECTOR: Message = Message {
    name: "istio.type.v1beta1.WorkloadSelector",
    fields: &[Field {
        name: "matchLabels",
        kind: Kind::ScalarMap,
        applied: Applied::Yes,
    }],
};

// ---- security/v1/peer_authentication.proto ----

pub static PEER_AUTHENTICATION: Message = Message {
    name: "PeerAuthentication",
    fields: &[
        // Applied: `model::peer_authn` (which workloads), `lds::inbound` (their chains).
        Field {
            name: "selector",
            kind: Kind::Message(&TYPE_WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
        // Applied: `model::peer_authn::compose`, `cds` auto mTLS (a namespace's mode).
        Field {
            name: "mtls",
            kind: Kind::Message(&PEER_AUTHENTICATION_MUTUAL_TLS),
            applied: Applied::Yes,
        },
        // A map by workload port. Applied: `model::peer_authn::compose`, `lds::inbound`.
        Field {
            name: "portLevelMtls",
            kind: Kind::MapOf(&PEER_AUTHENTICATION_MUTUAL_TLS),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static PEER_AUTHENTICATION_MUTUAL_TLS: Message = Message {
    name: "PeerAuthentication.MutualTLS",
    fields: &[Field {
        name: "mode",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

// ---- security/v1/authorization_policy.proto ----

pub static AUTHORIZATION_POLICY: Message = Message {
    name: "AuthorizationPolicy",
    fields: &[
        // Applied: `model::authz` (which workloads), `lds::authz` (their filters).
        Field {
            name: "selector",
            kind: Kind::Message(&TYPE_WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
        // Applied: `model::authz` (a Gateway API Gateway's proxies; istiod's waypoint-only
        // kinds select no sidecar or gateway, as in istiod).
        Field {
            name: "targetRef",
            kind: Kind::Message(&POLICY_TARGET_REFERENCE),
            applied: Applied::Yes,
        },
        Field {
            name: "targetRefs",
            kind: Kind::Message(&POLICY_TARGET_REFERENCE),
            applied: Applied::Yes,
        },
        // A list. Applied: `lds::authz`.
        Field {
            name: "rules",
            kind: Kind::Message(&AUTHZ_RULE),
            applied: Applied::Yes,
        },
        Field {
            name: "action",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "provider",
            kind: Kind::Message(&AUTHZ_EXTENSION_PROVIDER),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static POLICY_TARGET_REFERENCE: Message = Message {
    name: "istio.type.v1beta1.PolicyTargetReference",
    fields: &[
        Field {
            name: "group",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "kind",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "namespace",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static AUTHZ_EXTENSION_PROVIDER: Message = Message {
    name: "AuthorizationPolicy.ExtensionProvider",
    fields: &[Field {
        name: "name",
        kind: Kind::Scalar,
        applied: Applied::Yes,
    }],
};

pub(super) static AUTHZ_RULE: Message = Message {
    name: "Rule",
    fields: &[
        Field {
            name: "from",
            kind: Kind::Message(&AUTHZ_RULE_FROM),
            applied: Applied::Yes,
        },
        Field {
            name: "to",
            kind: Kind::Message(&AUTHZ_RULE_TO),
            applied: Applied::Yes,
        },
        Field {
            name: "when",
            kind: Kind::Message(&AUTHZ_CONDITION),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static AUTHZ_RULE_FROM: Message = Message {
    name: "Rule.From",
    fields: &[Field {
        name: "source",
        kind: Kind::Message(&AUTHZ_SOURCE),
        applied: Applied::Yes,
    }],
};

pub(super) static AUTHZ_RULE_TO: Message = Message {
    name: "Rule.To",
    fields: &[Field {
        name: "operation",
        kind: Kind::Message(&AUTHZ_OPERATION),
        applied: Applied::Yes,
    }],
};

pub(super) static AUTHZ_SOURCE: Message = Message {
    name: "Source",
    fields: &[
        Field {
            name: "principals",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notPrincipals",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "requestPrincipals",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notRequestPrincipals",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "namespaces",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notNamespaces",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "serviceAccounts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notServiceAccounts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "trustDomains",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notTrustDomains",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "ipBlocks",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notIpBlocks",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "remoteIpBlocks",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notRemoteIpBlocks",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static AUTHZ_OPERATION: Message = Message {
    name: "Operation",
    fields: &[
        Field {
            name: "hosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notHosts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "ports",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notPorts",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "methods",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notMethods",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "paths",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notPaths",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static AUTHZ_CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        Field {
            name: "key",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "values",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "notValues",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

// ---- security/v1/request_authentication.proto, jwt.proto ----

pub static REQUEST_AUTHENTICATION: Message = Message {
    name: "RequestAuthentication",
    fields: &[
        // Applied: `model::request_authn` (which workloads).
        Field {
            name: "selector",
            kind: Kind::Message(&TYPE_WORKLOAD_SELECTOR),
            applied: Applied::Yes,
        },
        // Applied: `model::request_authn` (a Gateway API Gateway's proxies, as istiod).
        Field {
            name: "targetRef",
            kind: Kind::Message(&POLICY_TARGET_REFERENCE),
            applied: Applied::Yes,
        },
        Field {
            name: "targetRefs",
            kind: Kind::Message(&POLICY_TARGET_REFERENCE),
            applied: Applied::Yes,
        },
        // Applied: `xds::lds::authn` (the JWT filter), the binary's JWKS resolver.
        Field {
            name: "jwtRules",
            kind: Kind::Message(&JWT_RULE),
            applied: Applied::Yes,
        },
    ],
};

pub(super) static JWT_RULE: Message = Message {
    name: "JWTRule",
    fields: &[
        Field {
            name: "issuer",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "audiences",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        // Fetched by the binary's JWKS resolver and inlined, as istiod.
        Field {
            name: "jwksUri",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "jwks",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "fromHeaders",
            kind: Kind::Message(&JWT_HEADER),
            applied: Applied::Yes,
        },
        Field {
            name: "fromParams",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "fromCookies",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "outputPayloadToHeader",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "forwardOriginalToken",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "outputClaimToHeaders",
            kind: Kind::Message(&CLAIM_TO_HEADER),
            applied: Applied::Yes,
        },
        // The JWKS fetch's timeout (the resolver's, as istiod's).
        Field {
            name: "timeout",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "spaceDelimitedClaims",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static JWT_HEADER: Message = Message {
    name: "JWTHeader",
    fields: &[
        Field {
            name: "name",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "prefix",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};

pub(super) static CLAIM_TO_HEADER: Message = Message {
    name: "ClaimToHeader",
    fields: &[
        Field {
            name: "header",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
        Field {
            name: "claim",
            kind: Kind::Scalar,
            applied: Applied::Yes,
        },
    ],
};
