//! Who a caller on the TLS port is: its client certificate's SPIFFE identity, else its
//! bearer token's (`--token-auth`, reviewed by [`token_auth`](crate::token_auth)); and, for
//! an ADS stream, whether that identity may be the proxy its first request names (istiod's
//! rule, `axon_model::identity`). Refusals of ADS streams are counted in
//! `pilot_xds_auth_failures{type}` and logged once per identity or proxy; the CA service
//! (`ca_service.rs`) counts and logs its own.

use axon_xds::Request;
use axon_xds::protocol::stream::CloseReason;

use super::{Inner, server, token_auth};

/// The bearer token of a request's `authorization` header.
pub(crate) fn bearer<B>(request: &http::Request<B>) -> Option<String> {
    request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(axon_model::token_review::bearer_token)
        .map(str::to_string)
}

/// Why a caller on the TLS port proved no identity.
pub(crate) enum Proof {
    /// No certificate identity and no token that proves one (UNAUTHENTICATED).
    Unauthenticated(String),
    /// The token could not be reviewed (UNAVAILABLE: retry).
    Unavailable(String),
}

impl Inner {
    /// The TLS port's check of the first request: the client proved an identity (its
    /// certificate's, else its bearer token's), and that identity may be the proxy the node
    /// names (istiod's rule, `model::identity`).
    pub(crate) async fn authorize(
        &self,
        authn: server::Authn,
        first: &Request,
    ) -> Result<(), CloseReason> {
        let node = first.node();
        let identity = self
            .authenticate(authn, node.map_or("", |n| n.id.as_str()))
            .await?;
        let Some(node) = node else {
            return Ok(()); // the stream's state machine refuses a first request without a node
        };
        let Ok(proxy) = axon_model::proxy::Proxy::from_node(node.clone()) else {
            return Ok(()); // likewise for a malformed node id
        };
        let checked = axon_model::identity::authorize(
            &identity,
            &self.trust_domain,
            &proxy,
            node.service_account.as_deref(),
        );
        checked.map_err(|denied| {
            self.count_failure(denied.reason());
            if self.first_time(identity.to_string()) {
                tracing::warn!(
                    identity = %identity,
                    proxy = %axon_config::log_safe::Escaped(&proxy.id),
                    reason = %denied,
                    "xDS: permission denied (logged once per identity)"
                );
            }
            CloseReason::PermissionDenied(denied.to_string())
        })
    }

    /// Who the client proved to be: its certificate's SPIFFE identity, else its bearer
    /// token's (with `--token-auth`); counted and logged as an ADS stream's refusal.
    async fn authenticate(
        &self,
        authn: server::Authn,
        proxy: &str,
    ) -> Result<axon_model::identity::Identity, CloseReason> {
        match self.prove(authn).await {
            Ok(identity) => Ok(identity),
            Err(Proof::Unauthenticated(why)) => {
                self.count_failure("unauthenticated");
                if self.first_time(format!("unauthenticated {proxy}")) {
                    tracing::warn!(
                        proxy = %axon_config::log_safe::Escaped(proxy),
                        reason = %why,
                        "xDS: unauthenticated (logged once per proxy)"
                    );
                }
                Err(CloseReason::Unauthenticated(why))
            }
            Err(Proof::Unavailable(why)) => {
                self.count_failure("unavailable");
                tracing::warn!(
                    proxy = %axon_config::log_safe::Escaped(proxy),
                    error = %why,
                    "xDS: a bearer token could not be reviewed; the stream is refused with UNAVAILABLE"
                );
                Err(CloseReason::Unavailable(why))
            }
        }
    }

    /// The identity a caller on the TLS port proved: its certificate's, else its bearer
    /// token's (with `--token-auth`). Neither counts nor logs (the ADS and CA callers do).
    pub(crate) async fn prove(
        &self,
        authn: server::Authn,
    ) -> Result<axon_model::identity::Identity, Proof> {
        if let Some(identity) = authn.identity {
            return Ok(identity);
        }
        let (Some(token), Some(auth)) = (authn.token.as_deref(), &self.token_auth) else {
            let how = if self.token_auth.is_some() {
                "a client certificate with a SPIFFE identity \
                 (spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT) or a service-account \
                 token (authorization: Bearer TOKEN)"
            } else {
                "a client certificate with a SPIFFE identity \
                 (spiffe://TRUST_DOMAIN/ns/NAMESPACE/sa/SERVICE_ACCOUNT); this axon checks no \
                 bearer tokens (--token-auth)"
            };
            return Err(Proof::Unauthenticated(format!(
                "the xDS TLS port needs {how}"
            )));
        };
        match auth.authenticate(token).await {
            Ok(identity) => Ok(identity),
            Err(token_auth::TokenAuthError::Rejected(why)) => Err(Proof::Unauthenticated(format!(
                "the bearer token proves no identity: {why}"
            ))),
            Err(e @ token_auth::TokenAuthError::Unavailable(_)) => {
                Err(Proof::Unavailable(e.to_string()))
            }
        }
    }

    fn count_failure(&self, reason: &str) {
        self.metrics
            .xds_auth_failures
            .with_label_values(&[reason])
            .inc();
    }

    /// Whether `key` is logged for the first time (the set is bounded: past it, nothing is).
    fn first_time(&self, key: String) -> bool {
        let mut logged = self.denied_logged.lock().unwrap_or_else(|e| e.into_inner());
        logged.len() < 10_000 && logged.insert(key)
    }
}
