//! The `status` subresource of the fake API server: `PATCH …/NAME/status` with a JSON merge
//! patch (`application/merge-patch+json`) sets the object's `status` from the patch's, as the
//! API server does, and the labels and annotations of the patch's `metadata`, with a new
//! resourceVersion sent to open watches; writes of `status` are counted apart
//! ([`super::FakeKube::status_writes`]).

use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use super::{COLLECTIONS, Shared, json_response, not_found};

/// The answer to a `PATCH` of a status subresource; `None` for anything else.
pub(super) fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    body: &Bytes,
) -> Option<Response> {
    if *method != Method::PATCH {
        return None;
    }
    let object_path = path.strip_suffix("/status")?;
    let (head, name) = object_path.rsplit_once('/')?;
    let (collection, namespace) = match head.split_once("/namespaces/") {
        Some((prefix, rest)) => {
            let (namespace, plural) = rest.split_once('/')?;
            (format!("{prefix}/{plural}"), namespace.to_string())
        }
        None => (head.to_string(), String::new()),
    };
    let (path, _, kind) = COLLECTIONS
        .iter()
        .find(|(p, _, _)| *p == collection)
        .copied()?;
    let Ok(patch) = serde_json::from_slice::<Value>(body) else {
        return Some(json_response(
            StatusCode::BAD_REQUEST,
            json!({"kind": "Status", "message": "not JSON", "code": 400}),
        ));
    };
    let mut inner = shared.inner.lock().unwrap();
    let key = (namespace.clone(), name.to_string());
    let Some(mut object) = inner.collections[path].objects.get(&key).cloned() else {
        return Some(not_found(&format!("{kind} {namespace}/{name}")));
    };
    if let Some(status) = patch.get("status") {
        object["status"] = status.clone();
    }
    // The status subresource writes labels and annotations too (istiod's controller-version
    // mark goes this way); such a write is not counted as one of status.
    for field in ["labels", "annotations"] {
        if let Some(Value::Object(patched)) = patch.get("metadata").and_then(|m| m.get(field)) {
            let current = &mut object["metadata"][field];
            if !current.is_object() {
                *current = json!({});
            }
            for (k, v) in patched {
                if v.is_null() {
                    current.as_object_mut().unwrap().remove(k);
                } else {
                    current[k] = v.clone();
                }
            }
        }
    }
    inner.rv += 1;
    let rv = inner.rv;
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    if patch.get("status").is_some() {
        inner.status_writes += 1;
    }
    let coll = inner.collections.get_mut(path).unwrap();
    let old = coll.objects.insert(key, object.clone());
    coll.record(rv, old, Some(object.clone()));
    Some(json_response(StatusCode::OK, object))
}
