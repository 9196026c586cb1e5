//! RequestAuthentication, as istiod's `ValidateRequestAuthentication` checks it: at most one
//! of `selector`, `targetRef` and `targetRefs`; each target reference named, in its own
//! namespace, to a kind istiod accepts; the selector's labels as every selector's; and each
//! JWT rule's (`validateJwtRule`): non-empty audiences, an issuer or a `jwksUri`, a `jwksUri`
//! of scheme http or https, inline `jwks` that parse as a JWK set, non-empty header, query
//! and cookie locations, claim-to-header pairs with both set and a strict header name; and,
//! beyond istiod (its proto types it), a `timeout` that parses as a duration.

use super::fields::{Errors, duration, re};
use super::names::selector;
use crate::istio::{JwtRule, MatchLabels, PolicyTargetReference, RequestAuthentication};

pub(super) fn request_authentication(errs: &mut Errors, ra: &RequestAuthentication) {
    policy_selection(
        errs,
        ra.selector.as_ref(),
        ra.target_ref.as_ref(),
        &ra.target_refs,
    );
    for (i, rule) in ra.jwt_rules.iter().enumerate() {
        jwt_rule(errs, &format!("spec.jwtRules[{i}]"), rule);
    }
}

/// How a policy selects its workloads (RequestAuthentication's, Telemetry's): at most one of
/// `selector`, `targetRef` and `targetRefs`, the selector's labels as every selector's, and
/// each target reference as [`target_ref`] checks it.
pub(super) fn policy_selection(
    errs: &mut Errors,
    selection: Option<&MatchLabels>,
    one: Option<&PolicyTargetReference>,
    many: &[PolicyTargetReference],
) {
    let set = usize::from(selection.is_some())
        + usize::from(one.is_some())
        + usize::from(!many.is_empty());
    if set > 1 {
        errs.add(
            "spec",
            "only one of targetRefs or workloadSelector can be set",
        );
    }
    if let Some(sel) = selection {
        selector(errs, "spec.selector.matchLabels", &sel.match_labels);
    }
    if let Some(target) = one {
        target_ref(errs, "spec.targetRef", target);
    }
    for (i, target) in many.iter().enumerate() {
        target_ref(errs, &format!("spec.targetRefs[{i}]"), target);
    }
}

/// The group/kind pairs istiod's `allowedTargetRefs` holds (the core group is empty).
const ALLOWED_TARGETS: [(&str, &str); 4] = [
    ("", "Service"),
    ("networking.istio.io", "ServiceEntry"),
    ("gateway.networking.k8s.io", "Gateway"),
    ("gateway.networking.k8s.io", "GatewayClass"),
];

/// istiod's `validatePolicyTargetReference`.
pub(super) fn target_ref(errs: &mut Errors, path: &str, target: &PolicyTargetReference) {
    if target.name.is_empty() {
        errs.add(path, "targetRef name must be set");
    }
    if !target.namespace.is_empty() {
        errs.add(
            path,
            "targetRef namespace must not be set; cross namespace referencing is not supported",
        );
    }
    let group = if target.group == "core" {
        ""
    } else {
        &target.group
    };
    if !ALLOWED_TARGETS.contains(&(group, target.kind.as_str())) {
        errs.add(
            path,
            format!(
                "targetRef must be to one of Service, ServiceEntry, gateway.networking.k8s.io \
                 Gateway or GatewayClass but was {}/{}",
                target.group, target.kind
            ),
        );
    }
}

fn jwt_rule(errs: &mut Errors, path: &str, rule: &JwtRule) {
    if rule.audiences.iter().any(String::is_empty) {
        errs.add(
            format!("{path}.audiences"),
            "audience must be non-empty string",
        );
    }
    if rule.issuer.is_empty() && rule.jwks_uri.is_empty() {
        errs.add(path, "issuer or jwksUri must be non-empty string");
    }
    if !rule.jwks_uri.is_empty()
        && let Err(e) = jwks_uri(&rule.jwks_uri)
    {
        errs.add(format!("{path}.jwksUri"), e);
    }
    if !rule.jwks.is_empty()
        && let Err(e) = jwk_set(&rule.jwks)
    {
        errs.add(format!("{path}.jwks"), format!("jwks parse error: {e}"));
    }
    for (i, header) in rule.from_headers.iter().enumerate() {
        if header.name.is_empty() {
            errs.add(
                format!("{path}.fromHeaders[{i}].name"),
                "location header name must be non-empty string",
            );
        }
    }
    if rule.from_params.iter().any(String::is_empty) {
        errs.add(
            format!("{path}.fromParams"),
            "location query must be non-empty string",
        );
    }
    if rule.from_cookies.iter().any(String::is_empty) {
        errs.add(
            format!("{path}.fromCookies"),
            "cookie name must be non-empty string",
        );
    }
    static STRICT_HEADER: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| re("^[-_A-Za-z0-9]+$"));
    for (i, pair) in rule.output_claim_to_headers.iter().enumerate() {
        let p = format!("{path}.outputClaimToHeaders[{i}]");
        if pair.claim.is_empty() || pair.header.is_empty() {
            errs.add(
                p,
                "outputClaimToHeaders header and claim value must be non-empty string",
            );
        } else if !STRICT_HEADER.is_match(&pair.header) {
            errs.add(
                p,
                format!("header name {} is not a valid header name", pair.header),
            );
        }
    }
    if let Some(timeout) = &rule.timeout {
        duration(errs, &format!("{path}.timeout"), timeout, false);
    }
}

/// istiod's `ParseJwksURI`: an http or https URL with a host (and a numeric port, if any).
pub(super) fn jwks_uri(uri: &str) -> Result<(), String> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(format!("URI scheme \"\" is not supported: {uri}"));
    };
    if scheme != "http" && scheme != "https" {
        return Err(format!("URI scheme {scheme:?} is not supported"));
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => return Err(format!("invalid IPv6 host in {uri:?}")),
        },
        None => match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err(format!("{uri:?} has no host"));
    }
    if let Some(port) = port
        && !port.is_empty()
        && port.parse::<u16>().is_err()
    {
        return Err(format!("invalid port {port:?}"));
    }
    Ok(())
}

/// Whether `text` is a JWK set (`{"keys": [...]}`, each key with a `kty`) or a single JWK,
/// as the `jwk.Parse` istiod validates with accepts.
pub(super) fn jwk_set(text: &str) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let has_kty = |k: &serde_json::Value| k.get("kty").and_then(|v| v.as_str()).is_some();
    match value.get("keys") {
        Some(serde_json::Value::Array(keys)) => match keys.iter().position(|k| !has_kty(k)) {
            Some(i) => Err(format!("key {i} has no \"kty\"")),
            None => Ok(()),
        },
        Some(_) => Err("\"keys\" is not an array".to_string()),
        None if has_kty(&value) => Ok(()),
        None => Err("neither a JWK set nor a JWK".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::check;

    const JWKS: &str = r#"{"keys":[{"kty":"RSA","e":"AQAB","n":"xyz"}]}"#;

    #[test]
    fn a_complete_policy_is_valid() {
        let spec = format!(
            "selector: {{matchLabels: {{app: a}}}}
jwtRules:
- issuer: https://issuer.example
  audiences: [a, b]
  jwksUri: https://issuer.example:8443/jwks.json
  fromHeaders: [{{name: x-jwt, prefix: 'Bearer '}}]
  fromParams: [token]
  fromCookies: [session]
  outputPayloadToHeader: x-payload
  forwardOriginalToken: true
  outputClaimToHeaders: [{{header: x-group, claim: group}}]
  timeout: 3s
  spaceDelimitedClaims: [roles]
- issuer: inline
  jwks: '{JWKS}'"
        );
        assert_eq!(check("RequestAuthentication", &spec), Ok(()));
        assert_eq!(
            check(
                "RequestAuthentication",
                "targetRef: {group: gateway.networking.k8s.io, kind: Gateway, name: gw}"
            ),
            Ok(())
        );
    }

    #[test]
    fn istiod_rules() {
        let errs = |spec: &str| check("RequestAuthentication", spec).unwrap_err();
        assert_eq!(
            errs("selector: {matchLabels: {app: a}}\ntargetRef: {kind: Service, name: s}"),
            vec!["spec: only one of targetRefs or workloadSelector can be set"]
        );
        assert_eq!(
            errs("targetRefs: [{kind: Deployment, name: d, namespace: other}]"),
            vec![
                "spec.targetRefs[0]: targetRef namespace must not be set; cross namespace referencing is not supported",
                "spec.targetRefs[0]: targetRef must be to one of Service, ServiceEntry, gateway.networking.k8s.io Gateway or GatewayClass but was /Deployment"
            ]
        );
        assert_eq!(
            errs("jwtRules: [{audiences: ['']}]"),
            vec![
                "spec.jwtRules[0].audiences: audience must be non-empty string",
                "spec.jwtRules[0]: issuer or jwksUri must be non-empty string"
            ]
        );
        assert_eq!(
            errs("jwtRules: [{issuer: i, jwksUri: 'ftp://h/k'}]"),
            vec!["spec.jwtRules[0].jwksUri: URI scheme \"ftp\" is not supported"]
        );
        assert_eq!(
            errs("jwtRules: [{issuer: i, jwks: '{\"keys\": 3}'}]"),
            vec!["spec.jwtRules[0].jwks: jwks parse error: \"keys\" is not an array"]
        );
        assert_eq!(
            errs(
                "jwtRules: [{issuer: i, fromHeaders: [{prefix: x}], fromParams: [''], fromCookies: ['']}]"
            ),
            vec![
                "spec.jwtRules[0].fromHeaders[0].name: location header name must be non-empty string",
                "spec.jwtRules[0].fromParams: location query must be non-empty string",
                "spec.jwtRules[0].fromCookies: cookie name must be non-empty string"
            ]
        );
        assert_eq!(
            errs(
                "jwtRules: [{issuer: i, outputClaimToHeaders: [{header: x}, {header: 'a b', claim: c}]}]"
            ),
            vec![
                "spec.jwtRules[0].outputClaimToHeaders[0]: outputClaimToHeaders header and claim value must be non-empty string",
                "spec.jwtRules[0].outputClaimToHeaders[1]: header name a b is not a valid header name"
            ]
        );
        assert_eq!(
            errs("jwtRules: [{issuer: i, timeout: soon}]"),
            vec!["spec.jwtRules[0].timeout: invalid duration \"soon\""]
        );
    }
}
