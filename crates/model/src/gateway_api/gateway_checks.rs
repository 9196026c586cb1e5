//! The checks of a whole Gateway that istiod's status reports beside its listeners'
//! (`gateway/gateway_collection.go` `validateParametersRef`, `gateway/conversion.go`
//! `validateBackendClientCertificateRef` and `reportGatewayStatus`): its
//! `infrastructure.parametersRef` (a ConfigMap of its namespace that exists), its
//! `tls.backend.clientCertificateRef` (a Secret with a certificate and key, of another
//! namespace only with a ReferenceGrant) and whether a frontend validation falls back to
//! insecure. Each failure is `(reason, message)` with istiod's words.

use axon_config::config::{ConfigKey, ConfigKind, Spec};
use axon_config::gateway_api::GatewaySpec;
use axon_config::gateway_api::common::SecretObjectReference;

use super::Inputs;

/// A failed check: istiod's reason and message.
pub(crate) type Failure = (String, String);

/// istiod's `validateParametersRef`: the Gateway's `infrastructure.parametersRef` is a
/// ConfigMap (group "", kind ConfigMap) of its namespace, and it exists. A failure makes the
/// Gateway not accepted (`InvalidParameters`); its listeners are served all the same.
pub(crate) fn parameters(inputs: &Inputs, namespace: &str, gw: &GatewaySpec) -> Option<Failure> {
    let params = gw.infrastructure.as_ref()?.parameters_ref.as_ref()?;
    if !(params.group.is_empty() && params.kind == "ConfigMap") {
        return Some((
            "InvalidParameters".into(),
            format!(
                "Unsupported parametersRef group/kind {}/{}, only ConfigMap is supported",
                params.group, params.kind
            ),
        ));
    }
    let present = ConfigKey::new(ConfigKind::ConfigMap, namespace, params.name.as_str());
    let with_ca = ConfigKey::new(
        ConfigKind::Secret,
        namespace,
        format!("configmap/{}", params.name),
    );
    if inputs.configs.contains_key(&present) || inputs.configs.contains_key(&with_ca) {
        return None;
    }
    Some((
        "InvalidParameters".into(),
        format!(
            "parametersRef ConfigMap {namespace}/{} does not exist",
            params.name
        ),
    ))
}

/// istiod's `validateBackendClientCertificateRef`: the certificate a Gateway would present
/// to its backends is a Secret that exists and holds a certificate and key, of another
/// namespace only where a ReferenceGrant allows it. A failure is the Gateway's
/// `ResolvedRefs=False`. (istiod checks it and does not present it: the Gateway API's
/// `GatewayBackendClientCertificate` is not among its supported features; nor does axon.)
pub(crate) fn backend_client_certificate(
    inputs: &Inputs,
    namespace: &str,
    gw: &GatewaySpec,
) -> Option<Failure> {
    let r = gw
        .tls
        .as_ref()?
        .backend
        .as_ref()?
        .client_certificate_ref
        .as_ref()?;
    let invalid = |why: String| {
        Some((
            "InvalidClientCertificateRef".to_string(),
            format!("invalid clientCertificateRef {}, {why}", reference(r)),
        ))
    };
    if !(r.group.is_empty() && r.kind == "Secret") {
        return invalid("only secret is allowed".into());
    }
    let ns = r.namespace.as_deref().unwrap_or(namespace);
    let key = ConfigKey::new(ConfigKind::Secret, ns, r.name.as_str());
    let Some(secret) = inputs.configs.get(&key) else {
        return invalid(format!("secret {ns}/{} not found", r.name));
    };
    match &secret.spec {
        Spec::Secret(s) if s.certificate.is_some() => {}
        _ => {
            return invalid(
                "the certificate is malformed: the Secret holds no certificate and key".into(),
            );
        }
    }
    if ns != namespace
        && !inputs.reference_allowed(
            ConfigKind::KubernetesGateway,
            namespace,
            ("", "Secret", &r.name),
            ns,
        )
    {
        return Some((
            "RefNotPermitted".into(),
            format!(
                "clientCertificateRef {}/{ns} not accessible to a Gateway in namespace {namespace:?} (missing a ReferenceGrant?)",
                r.name
            ),
        ));
    }
    None
}

/// istiod's `secretObjectReferenceString`: `group/kind/name.namespace`.
fn reference(r: &SecretObjectReference) -> String {
    format!(
        "{}/{}/{}.{}",
        r.group,
        r.kind,
        r.name,
        r.namespace.as_deref().unwrap_or_default()
    )
}

/// Whether a frontend validation of the Gateway (its default or a port's) is
/// `AllowInsecureFallback` (istiod's `InsecureFrontendValidationMode` condition).
pub(crate) fn insecure_frontend(gw: &GatewaySpec) -> bool {
    let Some(frontend) = gw.tls.as_ref().and_then(|t| t.frontend.as_ref()) else {
        return false;
    };
    std::iter::once(&frontend.default)
        .chain(frontend.per_port.iter().map(|p| &p.tls))
        .filter_map(|t| t.validation.as_ref())
        .any(|v| v.mode == "AllowInsecureFallback")
}
