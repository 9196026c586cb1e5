//! The Kubernetes TokenReview call (`authentication.k8s.io/v1`) that proves a bearer token
//! on the xDS TLS port: the token and the audiences asked go in, the API server's
//! [`ReviewStatus`] comes out. What the status proves is the model's
//! ([`axon_model::token_review`]); caching and bounds are the transport's.

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use axon_model::token_review::ReviewStatus;

/// Asks the API server about `token`. An `Err` is no answer (the API server unreachable or
/// refusing axon the review, e.g. without RBAC for `tokenreviews`), not a rejection.
pub async fn review(
    client: &kube::Client,
    token: String,
    audiences: Vec<String>,
) -> Result<ReviewStatus, String> {
    let request = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token),
            audiences: (!audiences.is_empty()).then_some(audiences),
        },
        ..Default::default()
    };
    let api: Api<TokenReview> = Api::all(client.clone());
    let answer = api
        .create(&PostParams::default(), &request)
        .await
        .map_err(|e| format!("TokenReview: {e}"))?;
    let status = answer.status.unwrap_or_default();
    let user = status.user.unwrap_or_default();
    Ok(ReviewStatus {
        authenticated: status.authenticated.unwrap_or(false),
        username: user.username.unwrap_or_default(),
        groups: user.groups.unwrap_or_default(),
        audiences: status.audiences.unwrap_or_default(),
        error: status.error,
    })
}
