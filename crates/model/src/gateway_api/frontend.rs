//! A Gateway's client-certificate validation (`spec.tls.frontend`, istiod's `buildTLS` with
//! `resolveGatewayTLS` and `buildCaCertificateReference`): a terminating listener whose port
//! has a validation becomes `MUTUAL` (`OPTIONAL_MUTUAL`, skipping verification, for
//! `AllowInsecureFallback`) with the CA of the one `caCertificateRefs` entry as
//! `caCertCredentialName`: `configmap://NS/NAME-cacert` for a ConfigMap,
//! `kubernetes-gateway://NS/NAME-cacert` for a Secret; another namespace's needs a
//! ReferenceGrant. A reference that cannot be used is reported (`InvalidCACertificateRef`,
//! `InvalidCACertificateKind`, `RefNotPermitted`) and the listener stays as it was without it.

use axon_config::config::{Config, ConfigKey, ConfigKind};
use axon_config::gateway_api::Listener;
use axon_config::gateway_api::gateway::FrontendValidation;
use serde_json::json;

use super::{Inputs, Problems};

pub(crate) fn apply(
    inputs: &Inputs,
    config: &Config,
    l: &Listener,
    v: &FrontendValidation,
    mode: &str,
    out: &mut serde_json::Value,
    problems: &mut Problems,
) {
    let mut fail = |message: String| {
        problems.add(&config.key, format!("listener {:?}: {message}", l.name));
    };
    if v.ca_certificate_refs.len() > 1 {
        fail("only one caCertificateRef is supported (InvalidCACertificateRef)".into());
        return;
    }
    let r = &v.ca_certificate_refs[0];
    let ns = r
        .namespace
        .clone()
        .unwrap_or_else(|| config.namespace().to_string());
    let (scheme, held, kind) = match (r.group.as_str(), r.kind.as_str()) {
        ("", "ConfigMap") => (
            crate::secrets::KUBERNETES_CONFIGMAP_PREFIX,
            crate::secrets::configmap_secret_name(&r.name),
            "ConfigMap",
        ),
        ("", "Secret") => (
            crate::secrets::KUBERNETES_GATEWAY_PREFIX,
            r.name.clone(),
            "Secret",
        ),
        (group, kind) => {
            fail(format!(
                "invalid CA certificate reference {group}/{kind}/{}, only secret and configmap are allowed (InvalidCACertificateKind)",
                r.name
            ));
            return;
        }
    };
    if !inputs.reference_allowed(
        ConfigKind::KubernetesGateway,
        config.namespace(),
        ("", kind, &r.name),
        &ns,
    ) {
        fail(format!(
            "caCertificateRef {ns}/{} not accessible to a Gateway in namespace {:?} (missing a ReferenceGrant?) (RefNotPermitted)",
            r.name,
            config.namespace()
        ));
        return;
    }
    let roots = inputs
        .configs
        .get(&ConfigKey::new(
            ConfigKind::Secret,
            ns.as_str(),
            held.as_str(),
        ))
        .is_some_and(|c| matches!(&c.spec, axon_config::config::Spec::Secret(s) if s.ca.is_some()));
    if !roots {
        fail(format!(
            "invalid CA certificate reference {kind} {ns}/{}: not found or without a CA certificate (InvalidCACertificateRef)",
            r.name
        ));
        return;
    }
    let insecure = v.mode == "AllowInsecureFallback";
    let (mutual, skip) = match mode {
        // The listener's own terminate mode wins over the validation's.
        "MUTUAL" => ("MUTUAL", false),
        "OPTIONAL_MUTUAL" => ("OPTIONAL_MUTUAL", false),
        _ if insecure => ("OPTIONAL_MUTUAL", true),
        _ => ("MUTUAL", false),
    };
    out["mode"] = json!(mutual);
    out["insecureSkipVerify"] = json!(skip);
    out["caCertCredentialName"] = json!(format!(
        "{scheme}{ns}/{}{}",
        r.name,
        crate::secrets::CA_SUFFIX
    ));
}
