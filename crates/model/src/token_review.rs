//! Bearer tokens on the xDS TLS port, as istiod's `KubeJWTAuthenticator` takes them
//! (`security/pkg/server/ca/authenticate/kubeauth`, `security/pkg/k8s/tokenreview`): the
//! token from the `authorization` metadata, the identity a Kubernetes TokenReview's answer
//! proves (`system:serviceaccount:NS:SA` in the group `system:serviceaccounts`, for one of
//! the audiences asked), and how long the answer may be trusted (the token's `exp`).
//!
//! Pure: the review itself is the Kubernetes registry's, the cache the transport's.

use base64::Engine;

use super::identity::Identity;

/// What a TokenReview answered (`status` of `authentication.k8s.io/v1` TokenReview).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReviewStatus {
    pub authenticated: bool,
    pub username: String,
    pub groups: Vec<String>,
    /// The audiences the token was found valid for (empty: the API server's own).
    pub audiences: Vec<String>,
    /// The API server's reason, when it gave one.
    pub error: Option<String>,
}

/// Why a token proves no identity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRejected {
    #[error("the token review failed: {0}")]
    Error(String),
    #[error("the token is not authenticated")]
    NotAuthenticated,
    #[error("the token is not a service account's ({username})")]
    NotServiceAccount { username: String },
    #[error("the token is not for audience {wanted} (it is for {found})")]
    Audience { wanted: String, found: String },
}

/// The token of an `authorization` header value `Bearer TOKEN` (the scheme is
/// case-insensitive, as RFC 6750 has it); `None` for any other value.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The identity a review proves, in `trust_domain`. `audiences` are those asked for; the
/// answer must name one of them when it names any (an API server without audience support
/// answers none).
pub fn identity_from_review(
    status: &ReviewStatus,
    trust_domain: &str,
    audiences: &[String],
) -> Result<Identity, TokenRejected> {
    if let Some(error) = status.error.as_ref().filter(|e| !e.is_empty()) {
        return Err(TokenRejected::Error(error.clone()));
    }
    if !status.authenticated {
        return Err(TokenRejected::NotAuthenticated);
    }
    let not_sa = || TokenRejected::NotServiceAccount {
        username: status.username.clone(),
    };
    if !status.groups.iter().any(|g| g == "system:serviceaccounts") {
        return Err(not_sa());
    }
    let parts: Vec<&str> = status.username.split(':').collect();
    let [system, kind, namespace, service_account] = parts.as_slice() else {
        return Err(not_sa());
    };
    if *system != "system" || *kind != "serviceaccount" || namespace.is_empty() {
        return Err(not_sa());
    }
    if service_account.is_empty() {
        return Err(not_sa());
    }
    if !audiences.is_empty()
        && !status.audiences.is_empty()
        && !status.audiences.iter().any(|a| audiences.contains(a))
    {
        return Err(TokenRejected::Audience {
            wanted: audiences.join(","),
            found: status.audiences.join(","),
        });
    }
    Ok(Identity {
        trust_domain: trust_domain.to_string(),
        namespace: namespace.to_string(),
        service_account: service_account.to_string(),
    })
}

/// The `exp` claim of a JWT (seconds since the epoch), read without checking the signature
/// (the TokenReview did); `None` when the token is no JWT or has no `exp`.
pub fn jwt_expiry(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("exp")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(username: &str, groups: &[&str], audiences: &[&str]) -> ReviewStatus {
        ReviewStatus {
            authenticated: true,
            username: username.to_string(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            error: None,
        }
    }

    const SA_GROUPS: &[&str] = &[
        "system:serviceaccounts",
        "system:serviceaccounts:demo",
        "system:authenticated",
    ];

    #[test]
    fn bearer_tokens_are_taken_from_the_header() {
        assert_eq!(bearer_token("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearerabc"), None);
    }

    #[test]
    fn a_service_account_review_proves_its_identity() {
        let aud = vec!["istio-ca".to_string()];
        let id = identity_from_review(
            &status("system:serviceaccount:demo:web", SA_GROUPS, &["istio-ca"]),
            "cluster.local",
            &aud,
        )
        .unwrap();
        assert_eq!(id.to_string(), "spiffe://cluster.local/ns/demo/sa/web");
        // An API server that reports no audiences is taken at its word.
        assert!(
            identity_from_review(
                &status("system:serviceaccount:demo:web", SA_GROUPS, &[]),
                "cluster.local",
                &aud,
            )
            .is_ok()
        );
    }

    #[test]
    fn reviews_that_prove_nothing_are_rejected_with_the_reason() {
        let aud = vec!["istio-ca".to_string()];
        let check = |s: &ReviewStatus| identity_from_review(s, "cluster.local", &aud);
        let mut not = status("system:serviceaccount:demo:web", SA_GROUPS, &[]);
        not.authenticated = false;
        assert_eq!(check(&not), Err(TokenRejected::NotAuthenticated));
        let mut error = not.clone();
        error.error = Some("token expired".into());
        assert_eq!(
            check(&error),
            Err(TokenRejected::Error("token expired".into()))
        );
        // A user, not a service account; a service account outside its group; bad names.
        for (user, groups) in [
            ("alice", &["system:authenticated"][..]),
            (
                "system:serviceaccount:demo:web",
                &["system:authenticated"][..],
            ),
            ("system:serviceaccount:demo", SA_GROUPS),
            ("system:serviceaccount::web", SA_GROUPS),
            ("system:serviceaccount:demo:", SA_GROUPS),
            ("system:node:demo:web", SA_GROUPS),
        ] {
            assert!(
                matches!(
                    check(&status(user, groups, &[])),
                    Err(TokenRejected::NotServiceAccount { .. })
                ),
                "{user}"
            );
        }
        assert!(matches!(
            check(&status(
                "system:serviceaccount:demo:web",
                SA_GROUPS,
                &["https://kubernetes.default.svc"]
            )),
            Err(TokenRejected::Audience { .. })
        ));
    }

    #[test]
    fn the_expiry_is_read_from_the_jwt_payload() {
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let jwt = format!(
            "{}.{}.sig",
            b64(r#"{"alg":"RS256"}"#),
            b64(r#"{"exp":1893456000,"sub":"system:serviceaccount:demo:web"}"#)
        );
        assert_eq!(jwt_expiry(&jwt), Some(1_893_456_000));
        let no_exp = format!("{}.{}.sig", b64("{}"), b64(r#"{"sub":"x"}"#));
        assert_eq!(jwt_expiry(&no_exp), None);
        assert_eq!(jwt_expiry("opaque-token"), None);
        assert_eq!(jwt_expiry("a.!!!.c"), None);
    }
}
