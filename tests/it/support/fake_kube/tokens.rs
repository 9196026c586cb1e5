//! The fake API server's TokenReview (`POST /apis/authentication.k8s.io/v1/tokenreviews`):
//! tokens the test declares with [`FakeKube::accept_token`] are authenticated as their
//! service account, for their audiences; any other is not (as the API server answers a
//! forged or expired token). Reviews are counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::FakeKube;

/// The tokens the fake accepts, and the reviews it answered.
#[derive(Default)]
pub struct TokenBook {
    /// token → (namespace, service account, audiences).
    accepted: HashMap<String, (String, String, Vec<String>)>,
    reviews: u64,
}

pub type Tokens = Arc<Mutex<TokenBook>>;

impl FakeKube {
    /// `token` is from now on `system:serviceaccount:NAMESPACE:SERVICE_ACCOUNT`, for `audiences`.
    pub fn accept_token(
        &self,
        token: &str,
        namespace: &str,
        service_account: &str,
        audiences: &[&str],
    ) {
        self.tokens.lock().unwrap().accepted.insert(
            token.to_string(),
            (
                namespace.to_string(),
                service_account.to_string(),
                audiences.iter().map(|a| a.to_string()).collect(),
            ),
        );
    }

    /// TokenReviews answered so far.
    pub fn token_reviews(&self) -> u64 {
        self.tokens.lock().unwrap().reviews
    }
}

/// Answers a TokenReview as the API server does: the audiences asked must meet the token's.
pub async fn review(
    State(tokens): State<Tokens>,
    Json(request): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let token = request["spec"]["token"].as_str().unwrap_or_default();
    let asked: Vec<String> = request["spec"]["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut book = tokens.lock().unwrap();
    book.reviews += 1;
    let status = match book.accepted.get(token) {
        Some((ns, sa, audiences)) => {
            let met: Vec<&String> = audiences
                .iter()
                .filter(|a| asked.is_empty() || asked.contains(a))
                .collect();
            if met.is_empty() {
                json!({"authenticated": false, "error": "[invalid bearer token, token audiences are invalid]"})
            } else {
                json!({
                    "authenticated": true,
                    "audiences": met,
                    "user": {
                        "username": format!("system:serviceaccount:{ns}:{sa}"),
                        "uid": "00000000-0000-0000-0000-000000000001",
                        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
                    },
                })
            }
        }
        None => {
            json!({"authenticated": false, "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]"})
        }
    };
    let mut answer = request.clone();
    answer["status"] = status;
    answer["apiVersion"] = json!("authentication.k8s.io/v1");
    answer["kind"] = json!("TokenReview");
    (StatusCode::CREATED, Json(answer))
}
