//! The collections the fake API server serves, and their paths.

/// The collections served: path, apiVersion, kind, plural.
pub(super) const COLLECTIONS: [(&str, &str, &str); 32] = [
    (
        "/apis/coordination.k8s.io/v1/leases",
        "coordination.k8s.io/v1",
        "Lease",
    ),
    ("/api/v1/namespaces", "v1", "Namespace"),
    ("/api/v1/configmaps", "v1", "ConfigMap"),
    ("/api/v1/secrets", "v1", "Secret"),
    ("/api/v1/services", "v1", "Service"),
    ("/api/v1/pods", "v1", "Pod"),
    ("/api/v1/serviceaccounts", "v1", "ServiceAccount"),
    ("/apis/apps/v1/deployments", "apps/v1", "Deployment"),
    (
        "/apis/autoscaling/v2/horizontalpodautoscalers",
        "autoscaling/v2",
        "HorizontalPodAutoscaler",
    ),
    (
        "/apis/policy/v1/poddisruptionbudgets",
        "policy/v1",
        "PodDisruptionBudget",
    ),
    (
        "/apis/discovery.k8s.io/v1/endpointslices",
        "discovery.k8s.io/v1",
        "EndpointSlice",
    ),
    (
        "/apis/networking.istio.io/v1/virtualservices",
        "networking.istio.io/v1",
        "VirtualService",
    ),
    (
        "/apis/networking.istio.io/v1/destinationrules",
        "networking.istio.io/v1",
        "DestinationRule",
    ),
    (
        "/apis/networking.istio.io/v1/gateways",
        "networking.istio.io/v1",
        "Gateway",
    ),
    (
        "/apis/networking.istio.io/v1/serviceentries",
        "networking.istio.io/v1",
        "ServiceEntry",
    ),
    (
        "/apis/networking.istio.io/v1/workloadentries",
        "networking.istio.io/v1",
        "WorkloadEntry",
    ),
    (
        "/apis/networking.istio.io/v1/sidecars",
        "networking.istio.io/v1",
        "Sidecar",
    ),
    (
        "/apis/security.istio.io/v1/peerauthentications",
        "security.istio.io/v1",
        "PeerAuthentication",
    ),
    (
        "/apis/security.istio.io/v1/authorizationpolicies",
        "security.istio.io/v1",
        "AuthorizationPolicy",
    ),
    (
        "/apis/security.istio.io/v1/requestauthentications",
        "security.istio.io/v1",
        "RequestAuthentication",
    ),
    (
        "/apis/telemetry.istio.io/v1/telemetries",
        "telemetry.istio.io/v1",
        "Telemetry",
    ),
    (
        "/apis/extensions.istio.io/v1alpha1/wasmplugins",
        "extensions.istio.io/v1alpha1",
        "WasmPlugin",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/gatewayclasses",
        "gateway.networking.k8s.io/v1",
        "GatewayClass",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/gateways",
        "gateway.networking.k8s.io/v1",
        "Gateway",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/httproutes",
        "gateway.networking.k8s.io/v1",
        "HTTPRoute",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/grpcroutes",
        "gateway.networking.k8s.io/v1",
        "GRPCRoute",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/tlsroutes",
        "gateway.networking.k8s.io/v1",
        "TLSRoute",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/tcproutes",
        "gateway.networking.k8s.io/v1",
        "TCPRoute",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/referencegrants",
        "gateway.networking.k8s.io/v1",
        "ReferenceGrant",
    ),
    (
        "/apis/gateway.networking.k8s.io/v1/backendtlspolicies",
        "gateway.networking.k8s.io/v1",
        "BackendTLSPolicy",
    ),
    // Served at v1alpha2 only (the experimental channel), and not read by axon.
    (
        "/apis/gateway.networking.k8s.io/v1alpha2/udproutes",
        "gateway.networking.k8s.io/v1alpha2",
        "UDPRoute",
    ),
    (
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
    ),
];

pub const SERVICES: &str = "/api/v1/services";
pub const PODS: &str = "/api/v1/pods";
pub const SERVICE_ACCOUNTS: &str = "/api/v1/serviceaccounts";
pub const DEPLOYMENTS: &str = "/apis/apps/v1/deployments";
pub const HORIZONTAL_POD_AUTOSCALERS: &str = "/apis/autoscaling/v2/horizontalpodautoscalers";
pub const POD_DISRUPTION_BUDGETS: &str = "/apis/policy/v1/poddisruptionbudgets";
pub const NAMESPACES: &str = "/api/v1/namespaces";
pub const SECRETS: &str = "/api/v1/secrets";
pub const CONFIG_MAPS: &str = "/api/v1/configmaps";
pub const ENDPOINT_SLICES: &str = "/apis/discovery.k8s.io/v1/endpointslices";
pub const VIRTUAL_SERVICES: &str = "/apis/networking.istio.io/v1/virtualservices";
pub const PEER_AUTHENTICATIONS: &str = "/apis/security.istio.io/v1/peerauthentications";
pub const HTTP_ROUTES: &str = "/apis/gateway.networking.k8s.io/v1/httproutes";
pub const KUBERNETES_GATEWAYS: &str = "/apis/gateway.networking.k8s.io/v1/gateways";
pub const VALIDATING_WEBHOOK_CONFIGURATIONS: &str =
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";

/// The collection path of an object's apiVersion and kind.
pub fn collection_of(api_version: &str, kind: &str) -> &'static str {
    COLLECTIONS
        .iter()
        .find(|(_, v, k)| *v == api_version && *k == kind)
        .map(|(p, _, _)| *p)
        .unwrap_or_else(|| panic!("the fake API serves no {api_version} {kind}"))
}
