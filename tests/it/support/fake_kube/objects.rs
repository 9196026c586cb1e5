//! Single objects of the fake API server, for clients that write: `GET`, `PUT` (replace),
//! `PATCH` (server-side apply, as create-or-replace) and `DELETE` of
//! `/api/v1/namespaces/NS/PLURAL/NAME`, and `POST` (create) of
//! `/api/v1/namespaces/NS/PLURAL` (of a cluster-scoped kind: `/apis/G/V/PLURAL[/NAME]`), with the API server's answers (404 NotFound, 409
//! AlreadyExists, a 409 Conflict for a replace of a stale resourceVersion). Every write gets
//! the next resourceVersion and goes to open watches, as [`super::FakeKube::apply`] does; the
//! writes are counted per collection ([`super::FakeKube::writes`]).

use axum::body::Bytes;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::discovery::CLUSTER_SCOPED;
use super::{COLLECTIONS, Shared, json_response, not_found, object_key};

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    json_response(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code.as_u16()}),
    )
}

/// The answer to a request for one object, or a create; `None` for anything else (lists and
/// watches, answered by the caller).
pub(super) fn handle(
    shared: &Shared,
    method: &Method,
    path: &str,
    body: &Bytes,
    dry_run: bool,
) -> Option<Response> {
    let (namespace, collection, name) = match path.split_once("/namespaces/") {
        Some((head, rest)) => {
            let mut parts = rest.split('/');
            let (namespace, plural, name) = (parts.next()?, parts.next()?, parts.next());
            if parts.next().is_some() {
                return None;
            }
            (namespace, format!("{head}/{plural}"), name)
        }
        // A cluster-scoped object, `/apis/G/V/PLURAL/NAME`, or its collection (a create).
        None => {
            let cluster_scoped = |collection: &str| {
                COLLECTIONS
                    .iter()
                    .any(|(p, _, k)| *p == collection && CLUSTER_SCOPED.contains(k))
            };
            if *method == Method::POST && cluster_scoped(path) {
                ("", path.to_string(), None)
            } else {
                let (collection, name) = path.rsplit_once('/')?;
                if !cluster_scoped(collection) {
                    return None;
                }
                ("", collection.to_string(), Some(name))
            }
        }
    };
    let (path, _, kind) = COLLECTIONS
        .iter()
        .find(|(p, _, _)| *p == collection)
        .copied()?;
    match (method, name) {
        (&Method::GET, Some(name)) => {
            let inner = shared.inner.lock().unwrap();
            let found = inner.collections[path]
                .objects
                .get(&(namespace.to_string(), name.to_string()))
                .cloned();
            Some(match found {
                Some(object) => json_response(StatusCode::OK, object),
                None => not_found(&format!("{kind} {namespace}/{name}")),
            })
        }
        (&Method::POST, None) | (&Method::PUT, Some(_)) => {
            let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
                return Some(status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "not JSON".into(),
                ));
            };
            if !namespace.is_empty() {
                object["metadata"]["namespace"] = json!(namespace);
            }
            let key = object_key(&object);
            let mut inner = shared.inner.lock().unwrap();
            let existing = inner.collections[path].objects.get(&key).cloned();
            let create = *method == Method::POST;
            match (&existing, create) {
                (Some(_), true) => {
                    return Some(status(
                        StatusCode::CONFLICT,
                        "AlreadyExists",
                        format!("{kind} {namespace}/{} already exists", key.1),
                    ));
                }
                (None, false) => return Some(not_found(&format!("{kind} {namespace}/{}", key.1))),
                (Some(old), false) => {
                    let sent = object["metadata"]["resourceVersion"].as_str();
                    if sent.is_some() && sent != old["metadata"]["resourceVersion"].as_str() {
                        return Some(status(
                            StatusCode::CONFLICT,
                            "Conflict",
                            format!("{kind} {namespace}/{}: the object has been modified", key.1),
                        ));
                    }
                }
                (None, true) => {}
            }
            if dry_run {
                let code = if create {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                return Some(json_response(code, object));
            }
            inner.rv += 1;
            let rv = inner.rv;
            object["metadata"]["resourceVersion"] = json!(rv.to_string());
            let coll = inner.collections.get_mut(path).unwrap();
            coll.writes += 1;
            let old = coll.objects.insert(key, object.clone());
            coll.record(rv, old, Some(object.clone()));
            let code = if create {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Some(json_response(code, object))
        }
        (&Method::PATCH, Some(name)) => Some(apply_patch(shared, path, namespace, name, body)),
        (&Method::DELETE, Some(name)) => {
            let mut inner = shared.inner.lock().unwrap();
            inner.rv += 1;
            let rv = inner.rv;
            let coll = inner.collections.get_mut(path).unwrap();
            let key = (namespace.to_string(), name.to_string());
            Some(match coll.objects.remove(&key) {
                Some(mut gone) => {
                    gone["metadata"]["resourceVersion"] = json!(rv.to_string());
                    coll.writes += 1;
                    coll.record(rv, Some(gone.clone()), None);
                    json_response(StatusCode::OK, gone)
                }
                None => not_found(&format!("{kind} {namespace}/{name}")),
            })
        }
        _ => None,
    }
}

/// A server-side apply (`PATCH`, `application/apply-patch+yaml`; kube sends JSON, which is
/// YAML) as create-or-replace: the body becomes the object, keeping the uid it had (a new
/// one gets `uid-RV`), with the next resourceVersion. Counted as a write.
fn apply_patch(shared: &Shared, path: &str, namespace: &str, name: &str, body: &Bytes) -> Response {
    let Ok(mut object) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "not JSON".into());
    };
    if !namespace.is_empty() {
        object["metadata"]["namespace"] = json!(namespace);
    }
    object["metadata"]["name"] = json!(name);
    let key = object_key(&object);
    let mut inner = shared.inner.lock().unwrap();
    inner.rv += 1;
    let rv = inner.rv;
    let coll = inner.collections.get_mut(path).unwrap();
    let uid = coll
        .objects
        .get(&key)
        .and_then(|old| old["metadata"]["uid"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("uid-{rv}"));
    object["metadata"]["uid"] = json!(uid);
    object["metadata"]["resourceVersion"] = json!(rv.to_string());
    coll.writes += 1;
    let old = coll.objects.insert(key, object.clone());
    coll.record(rv, old, Some(object.clone()));
    json_response(StatusCode::OK, object)
}

/// A `PATCH` the fake does not take: only server-side applies
/// (`application/apply-patch+yaml`) with a `fieldManager` (as the API server requires) and
/// `force=true` (as istiod's controller sends them).
pub(super) fn refuse_patch(uri: &Uri, headers: &axum::http::HeaderMap) -> Option<Response> {
    let content_type = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let q = super::query(uri);
    let problem = if content_type != "application/apply-patch+yaml" {
        format!("the fake API takes server-side applies only, not {content_type:?}")
    } else if q.get("fieldManager").is_none_or(|m| m.is_empty()) {
        "fieldManager is required for apply requests".to_string()
    } else if q.get("force").map(String::as_str) != Some("true") {
        "the fake API takes forced applies only".to_string()
    } else {
        return None;
    };
    Some(json_response(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": problem, "reason": "Invalid", "code": 422}),
    ))
}
