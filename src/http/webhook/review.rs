//! An AdmissionReview in, its answer out: the decision of the validating webhook, pure (no
//! I/O), as istiod's `pkg/webhooks/validation/server` decides. The object is checked by the
//! very parser and validation `axon validate` and the config directory use, so the messages
//! are theirs: an unknown field named with its path, the offending field's path and reason.
//!
//! - CREATE and UPDATE are validated; any other operation is allowed (istiod: "unsupported
//!   webhook operation").
//! - A valid object is allowed; the fields axon accepts and does not apply are its
//!   AdmissionReview `warnings` (kubectl prints them).
//! - A kind axon does not apply (Telemetry, EnvoyFilter, ...) is allowed with a warning that
//!   says so; a Kubernetes object axon reads is allowed.
//! - An invalid object is refused (`allowed: false`, `status.code` 400, the reason in
//!   `status.message`, which `kubectl apply` prints after `denied the request:`).
//!
//! The answer names the request's `uid` and has the request's `apiVersion` (`v1`, or
//! `v1beta1`, which the API server may still send).

use serde::Deserialize;
use serde_json::{Value, json};

use axon_config::parse::{DocOutcome, parse_documents};

/// Why a body is not an AdmissionReview (answered 400, as istiod's "could not decode body").
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ReviewError {
    #[error("could not decode body: {0}")]
    Decode(String),
    #[error("apiVersion {0:?} is not admission.k8s.io/v1 or v1beta1")]
    ApiVersion(String),
    #[error("kind {0:?} is not AdmissionReview")]
    Kind(String),
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: String,
    kind: String,
    request: Option<Request>,
}

/// What the webhook decided, for its metrics (istiod's `galley_validation_*`).
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Allowed,
    /// Not validated (an operation other than CREATE and UPDATE): allowed.
    Skipped,
    /// Refused, and why: `invalid_config` or `yaml_decode_error` (istiod's reasons).
    Refused(&'static str),
}

/// An answered review: the AdmissionReview to send back, the resource it was about
/// (group, version, resource) and the verdict.
#[derive(Debug, Clone)]
pub struct Reviewed {
    pub answer: Value,
    pub resource: [String; 3],
    pub verdict: Verdict,
}

#[derive(Deserialize, Default)]
struct GroupVersionResource {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    resource: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    uid: String,
    #[serde(default)]
    resource: GroupVersionResource,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    object: Option<Value>,
}

/// The AdmissionReview answering `body`, and what was decided.
pub fn review(body: &[u8]) -> Result<Reviewed, ReviewError> {
    let review: Review =
        serde_json::from_slice(body).map_err(|e| ReviewError::Decode(e.to_string()))?;
    if !matches!(
        review.api_version.as_str(),
        "admission.k8s.io/v1" | "admission.k8s.io/v1beta1"
    ) {
        return Err(ReviewError::ApiVersion(review.api_version));
    }
    if review.kind != "AdmissionReview" {
        return Err(ReviewError::Kind(review.kind));
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    let (mut response, verdict) = decide(&request);
    response["uid"] = Value::String(request.uid);
    let r = request.resource;
    Ok(Reviewed {
        answer: json!({
            "apiVersion": review.api_version,
            "kind": "AdmissionReview",
            "response": response,
        }),
        resource: [r.group, r.version, r.resource],
        verdict,
    })
}

fn allowed(warnings: Vec<String>) -> (Value, Verdict) {
    let answer = if warnings.is_empty() {
        json!({"allowed": true})
    } else {
        json!({"allowed": true, "warnings": warnings})
    };
    (answer, Verdict::Allowed)
}

fn denied(message: String, reason: &'static str) -> (Value, Verdict) {
    let answer = json!({
        "allowed": false,
        "status": {"status": "Failure", "code": 400, "reason": "BadRequest", "message": message},
    });
    (answer, Verdict::Refused(reason))
}

fn decide(request: &Request) -> (Value, Verdict) {
    if !matches!(request.operation.as_str(), "CREATE" | "UPDATE") {
        return (json!({"allowed": true}), Verdict::Skipped);
    }
    let Some(object) = &request.object else {
        return denied("the request has no object".to_string(), "yaml_decode_error");
    };
    let kind = object["kind"].as_str().unwrap_or("object");
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or(request.name.as_str());
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or(request.namespace.as_str());
    let what = format!("{kind} {namespace}/{name}");
    // JSON is YAML: the object goes through the parser every config does.
    let text = object.to_string();
    let default_namespace = if request.namespace.is_empty() {
        "default"
    } else {
        request.namespace.as_str()
    };
    let Some(doc) = parse_documents(&text, default_namespace).into_iter().next() else {
        return denied(format!("{what}: an empty object"), "yaml_decode_error");
    };
    match doc.outcome {
        DocOutcome::Invalid(error) => {
            let reason = match error {
                axon_config::parse::DocError::Yaml(_)
                | axon_config::parse::DocError::NotAnObject => "yaml_decode_error",
                _ => "invalid_config",
            };
            denied(format!("{what}: {error}"), reason)
        }
        DocOutcome::Config(_) => {
            allowed(doc.notes.iter().map(|n| format!("{what}: {n}")).collect())
        }
        DocOutcome::Unsupported { api_version, kind } => allowed(vec![format!(
            "{kind} ({api_version}) is not applied by axon: what it says is not enforced"
        )]),
        DocOutcome::Kubernetes(_) | DocOutcome::Empty => allowed(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(operation: &str, object: Value) -> Vec<u8> {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
                "resource": {"group": "networking.istio.io", "version": "v1", "resource": "virtualservices"},
                "namespace": "shop",
                "name": "reviews",
                "operation": operation,
                "userInfo": {"username": "admin"},
                "object": object,
                "dryRun": false,
            }
        })
        .to_string()
        .into_bytes()
    }

    fn virtual_service(http: Value) -> Value {
        json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": "reviews", "namespace": "shop"},
            "spec": {"hosts": ["reviews"], "http": http},
        })
    }

    #[test]
    fn a_valid_object_is_allowed_and_answers_its_uid() {
        let body = request(
            "CREATE",
            virtual_service(json!([{"route": [{"destination": {"host": "reviews"}}]}])),
        );
        let answer = review(&body).unwrap().answer;
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(
            answer["response"]["uid"],
            "705ab4f5-6393-11e8-b7cc-42010a800002"
        );
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }

    #[test]
    fn an_unknown_field_is_refused_with_its_path() {
        let body = request(
            "UPDATE",
            virtual_service(json!([{"route": [{"destinaton": {"host": "reviews"}}]}])),
        );
        let answer = review(&body).unwrap().answer;
        let response = &answer["response"];
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 400);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("VirtualService shop/reviews: "),
            "{message}"
        );
        assert!(message.contains("spec.http[0].route[0]"), "{message}");
        assert!(message.contains("destinaton"), "{message}");
    }

    #[test]
    fn fields_not_applied_are_warnings() {
        let body = request(
            "CREATE",
            virtual_service(json!([{
                "route": [{"destination": {"host": "reviews"}}],
                "mirror": {"host": "reviews-shadow"},
            }])),
        );
        let answer = review(&body).unwrap().answer;
        let response = &answer["response"];
        assert_eq!(response["allowed"], true);
        let warnings = response["warnings"].as_array();
        let shown = warnings.map(|w| {
            w.iter()
                .any(|w| w.as_str().unwrap().contains("not applied"))
        });
        // Either mirror is applied (no warning) or it is named as not applied.
        assert!(warnings.is_none() || shown == Some(true), "{answer}");
    }

    #[test]
    fn delete_and_unknown_kinds_are_allowed_and_garbage_is_an_error() {
        let gone = review(&request("DELETE", Value::Null)).unwrap();
        assert_eq!(gone.verdict, Verdict::Skipped);
        let gone = gone.answer;
        assert_eq!(gone["response"]["allowed"], true);
        let wasm = json!({
            "apiVersion": "extensions.istio.io/v1alpha1",
            "kind": "WasmPlugin",
            "metadata": {"name": "w", "namespace": "shop"},
            "spec": {"url": "oci://example/stats:1"},
        });
        let answer = review(&request("CREATE", wasm)).unwrap().answer;
        assert_eq!(answer["response"]["allowed"], true);
        assert!(
            answer["response"]["warnings"][0]
                .as_str()
                .unwrap()
                .contains("not applied by axon")
        );
        assert!(matches!(review(b"{"), Err(ReviewError::Decode(_))));
        assert!(matches!(
            review(br#"{"apiVersion":"v1","kind":"AdmissionReview"}"#),
            Err(ReviewError::ApiVersion(_))
        ));
        assert!(matches!(
            review(br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#),
            Err(ReviewError::NoRequest)
        ));
    }

    #[test]
    fn a_telemetry_is_validated_as_istiod_validates_it() {
        let telemetry = |sampling: u32| {
            json!({
                "apiVersion": "telemetry.istio.io/v1",
                "kind": "Telemetry",
                "metadata": {"name": "t", "namespace": "shop"},
                "spec": {"tracing": [{"randomSamplingPercentage": sampling}]},
            })
        };
        let ok = review(&request("CREATE", telemetry(10))).unwrap().answer;
        assert_eq!(ok["response"]["allowed"], true, "{ok}");
        assert!(
            ok["response"].get("warnings").is_none_or(|w| w.is_null()),
            "{ok}"
        );
        let bad = review(&request("CREATE", telemetry(101))).unwrap().answer;
        assert_eq!(bad["response"]["allowed"], false, "{bad}");
        assert!(
            bad.to_string().contains("randomSamplingPercentage"),
            "{bad}"
        );
    }
}
