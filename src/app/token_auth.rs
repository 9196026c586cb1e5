//! `--token-auth kubernetes`: the wiring of bearer-token authentication on the xDS TLS port,
//! the transport's [`TokenAuth`] over the Kubernetes registry's TokenReview call (the one
//! place both are known).

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::limits::Limits;
use axon_metrics::Metrics;
use axon_model::token_review::ReviewStatus;
use axon_transport::token_auth::{TokenAuth, TokenAuthLimits, TokenReviewer};

/// How bearer tokens are checked on `--xds-tls-addr`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenAuthMode {
    /// A Kubernetes TokenReview (the in-cluster config, or KUBECONFIG outside a cluster).
    Kubernetes,
}

struct KubeReviewer(kube::Client);

impl TokenReviewer for KubeReviewer {
    fn review(
        &self,
        token: String,
        audiences: Vec<String>,
    ) -> BoxFuture<'static, Result<ReviewStatus, String>> {
        let client = self.0.clone();
        Box::pin(async move {
            crate::registry::kubernetes::token_review::review(&client, token, audiences).await
        })
    }
}

/// The token authenticator: reviews with `client`, identities in `trust_domain`.
pub fn kubernetes(
    client: kube::Client,
    trust_domain: &str,
    audiences: &[String],
    limits: &Limits,
    metrics: &Metrics,
) -> Arc<TokenAuth> {
    let audiences = audiences
        .iter()
        .map(|a| a.trim().to_string())
        .filter(|a| !a.is_empty())
        .collect();
    Arc::new(TokenAuth::new(
        Arc::new(KubeReviewer(client)),
        trust_domain,
        audiences,
        TokenAuthLimits {
            cache_entries: limits.token_cache_entries,
            cache_ttl: limits.token_cache_ttl,
            max_reviews: limits.max_token_reviews,
            review_timeout: limits.token_review_timeout,
        },
        Some(metrics.token_reviews.clone()),
    ))
}
