//! An in-process fake Kubernetes API server on 127.0.0.1, for kube's real client.
//!
//! It speaks what axon's watchers use, over plain HTTP/1.1:
//! - discovery: `GET /apis` (APIGroupList) and `GET /apis/G/V` (APIResourceList) of the
//!   Istio groups and the Gateway API ([`discovery`]);
//! - list: `GET /api/v1/services`, `/api/v1/pods`, `/api/v1/namespaces`,
//!   `/apis/discovery.k8s.io/v1/endpointslices`, `/apis/networking.istio.io/v1/PLURAL`,
//!   `/apis/gateway.networking.k8s.io/v1/PLURAL` (the eight Gateway API kinds axon reads),
//!   with `metadata.resourceVersion` and `labelSelector` (equality terms), and each in one
//!   namespace (`/apis/G/V/namespaces/NS/PLURAL`);
//! - watch: `?watch=true&resourceVersion=N`, a chunked stream of newline-delimited JSON
//!   events (ADDED, MODIFIED, DELETED, BOOKMARK when `allowWatchBookmarks`), replaying what
//!   happened after N; a watch from a compacted resourceVersion gets an ERROR event with a
//!   Status of code 410, as the real API server sends.
//!
//! The test drives it synchronously: [`FakeKube::apply`] / [`FakeKube::delete`] change
//! objects (each change gets the next resourceVersion and is sent to open watches; a delete
//! also deletes the objects it owns, as the garbage collector),
//! [`FakeKube::hold_lists`] holds list answers back until [`FakeKube::release_lists`],
//! [`FakeKube::expire_watches`] ends the open watches of a collection with 410 Gone and
//! compacts its history, and [`FakeKube::drop_watches`] closes them as a lost connection
//! would.
//!
//! It also answers TokenReviews for the tokens a test declares ([`tokens`]), and single-object
//! reads and writes (get, create, replace, server-side apply as create-or-replace, delete:
//! [`objects`]; ServiceAccounts and `apps/v1` Deployments too), of namespaced objects and of
//! cluster-scoped ones (ValidatingWebhookConfigurations, GatewayClasses); a `dryRun` create or replace is
//! answered and not stored (and calls no webhook: the fake has none).

#![allow(dead_code)]

mod builders;
mod collections;
mod discovery;
mod objects;
mod status;
mod tokens;

pub use builders::*;
pub use collections::*;

use discovery::Served;

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

struct Watcher {
    tx: UnboundedSender<Bytes>,
    selector: Vec<(String, String)>,
    bookmarks: bool,
}

struct HistoryEntry {
    rv: u64,
    old: Option<Value>,
    new: Option<Value>,
}

#[derive(Default)]
struct Collection {
    objects: BTreeMap<(String, String), Value>,
    history: Vec<HistoryEntry>,
    /// Watches from a resourceVersion below this get 410 Gone.
    compacted: u64,
    watchers: Vec<Watcher>,
    held: bool,
    list_requests: u64,
    lists_served: u64,
    watch_requests: u64,
    /// Objects created or replaced by clients (`objects.rs`).
    writes: u64,
}

struct Inner {
    rv: u64,
    /// Writes of status subresources (`status.rs`).
    status_writes: u64,
    collections: BTreeMap<&'static str, Collection>,
    served: Served,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Wakes held lists when lists are released.
    released: tokio::sync::watch::Sender<u64>,
}

/// The running fake API server. Dropping it stops it.
pub struct FakeKube {
    addr: SocketAddr,
    shared: Arc<Shared>,
    tokens: tokens::Tokens,
    runtime: Option<tokio::runtime::Runtime>,
}

impl FakeKube {
    /// Starts a server that serves the Istio groups and the Gateway API too.
    pub fn start() -> FakeKube {
        Self::start_with(true)
    }

    /// Starts a server; without `serve_crds`, discovery has neither the Istio groups nor
    /// the Gateway API (no CRDs installed).
    pub fn start_with(serve_crds: bool) -> FakeKube {
        Self::start_serving(serve_crds, serve_crds)
    }

    /// Starts a server serving the Istio groups if `istio`, the Gateway API if
    /// `gateway_api`.
    pub fn start_serving(istio: bool, gateway_api: bool) -> FakeKube {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("fake API runtime");
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                rv: 1,
                status_writes: 0,
                collections: COLLECTIONS
                    .iter()
                    .map(|(p, _, _)| (*p, Collection::default()))
                    .collect(),
                served: Served { istio, gateway_api },
            }),
            released: tokio::sync::watch::Sender::new(0),
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind the fake API");
        let addr = listener.local_addr().expect("fake API address");
        let tokens = tokens::Tokens::default();
        let reviews = Router::new()
            .route(
                "/apis/authentication.k8s.io/v1/tokenreviews",
                axum::routing::post(tokens::review),
            )
            .with_state(tokens.clone());
        let app = Router::new()
            .fallback(handle)
            .with_state(shared.clone())
            .merge(reviews);
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeKube {
            addr,
            shared,
            tokens,
            runtime: Some(runtime),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Writes a kubeconfig pointing at this server into `dir`; returns its path.
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig.yaml");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\nusers:\n- name: fake\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.addr
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    /// Adds or replaces an object (apiVersion, kind and metadata as in the API); it gets the
    /// next resourceVersion. Returns that resourceVersion.
    pub fn apply(&self, mut object: Value) -> u64 {
        let path = collection_of(
            object["apiVersion"].as_str().unwrap_or_default(),
            object["kind"].as_str().unwrap_or_default(),
        );
        let mut inner = self.shared.inner.lock().unwrap();
        inner.rv += 1;
        let rv = inner.rv;
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let key = object_key(&object);
        let coll = inner.collections.get_mut(path).unwrap();
        let old = coll.objects.insert(key, object.clone());
        coll.record(rv, old, Some(object));
        rv
    }

    /// Deletes an object, if it exists, and then (as the garbage collector would) the objects
    /// whose ownerReferences name its uid.
    pub fn delete(&self, api_version: &str, kind: &str, namespace: &str, name: &str) {
        let path = collection_of(api_version, kind);
        let mut inner = self.shared.inner.lock().unwrap();
        let Some(uid) = remove(&mut inner, path, &(namespace.to_string(), name.to_string())) else {
            return;
        };
        let Some(uid) = uid else { return };
        let owned: Vec<(&'static str, (String, String))> = inner
            .collections
            .iter()
            .flat_map(|(path, coll)| {
                coll.objects
                    .iter()
                    .filter(|(_, o)| {
                        o["metadata"]["ownerReferences"]
                            .as_array()
                            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid.as_str()))
                    })
                    .map(|(key, _)| (*path, key.clone()))
            })
            .collect();
        for (path, key) in owned {
            remove(&mut inner, path, &key);
        }
    }

    /// The object held under `path`, namespace and name.
    pub fn get(&self, path: &str, namespace: &str, name: &str) -> Option<Value> {
        let inner = self.shared.inner.lock().unwrap();
        inner.collections[path]
            .objects
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of `path` created or replaced by clients.
    pub fn writes(&self, path: &str) -> u64 {
        self.shared.inner.lock().unwrap().collections[path].writes
    }

    /// Status subresource writes, of every collection.
    pub fn status_writes(&self) -> u64 {
        self.shared.inner.lock().unwrap().status_writes
    }

    /// List requests of `path` wait until [`FakeKube::release_lists`].
    pub fn hold_lists(&self, path: &str) {
        self.with(path, |c| c.held = true);
    }

    pub fn release_lists(&self, path: &str) {
        self.with(path, |c| c.held = false);
        self.shared.released.send_modify(|n| *n += 1);
    }

    /// List requests of `path` received so far (held or answered).
    pub fn list_requests(&self, path: &str) -> u64 {
        self.with(path, |c| c.list_requests)
    }

    /// Lists of `path` answered so far.
    pub fn lists_served(&self, path: &str) -> u64 {
        self.with(path, |c| c.lists_served)
    }

    /// Watch requests of `path` received so far.
    pub fn watch_requests(&self, path: &str) -> u64 {
        self.with(path, |c| c.watch_requests)
    }

    /// Open watches of `path`.
    pub fn open_watches(&self, path: &str) -> usize {
        self.with(path, |c| {
            c.watchers.retain(|w| !w.tx.is_closed());
            c.watchers.len()
        })
    }

    /// Ends every open watch of `path` with an ERROR event (Status 410 Expired) and compacts
    /// the history: a watch from any earlier resourceVersion gets 410 too.
    pub fn expire_watches(&self, path: &str) {
        let mut inner = self.shared.inner.lock().unwrap();
        let rv = inner.rv;
        let coll = inner.collections.get_mut(path).unwrap();
        coll.compacted = rv + 1;
        coll.history.clear();
        for w in coll.watchers.drain(..) {
            let _ = w.tx.send(line(&gone_event(rv)));
        }
    }

    /// Closes every open watch of `path`, as a lost connection would.
    pub fn drop_watches(&self, path: &str) {
        self.with(path, |c| c.watchers.clear());
    }

    fn with<T>(&self, path: &str, f: impl FnOnce(&mut Collection) -> T) -> T {
        let mut inner = self.shared.inner.lock().unwrap();
        f(inner
            .collections
            .get_mut(path)
            .unwrap_or_else(|| panic!("no collection {path}")))
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Collection {
    /// Records a change and sends it to the open watches.
    fn record(&mut self, rv: u64, old: Option<Value>, new: Option<Value>) {
        self.watchers.retain(
            |w| match event_for(&w.selector, old.as_ref(), new.as_ref()) {
                Some(event) => w.tx.send(line(&event)).is_ok(),
                None => !w.tx.is_closed(),
            },
        );
        self.history.push(HistoryEntry { rv, old, new });
    }
}

/// Removes an object with the next resourceVersion, which its DELETED event carries;
/// `Some(its uid)` when it existed.
fn remove(inner: &mut Inner, path: &str, key: &(String, String)) -> Option<Option<String>> {
    inner.rv += 1;
    let rv = inner.rv;
    let coll = inner.collections.get_mut(path).unwrap();
    let mut gone = coll.objects.remove(key)?;
    gone["metadata"]["resourceVersion"] = json!(rv.to_string());
    let uid = gone["metadata"]["uid"].as_str().map(str::to_string);
    coll.record(rv, Some(gone), None);
    Some(uid)
}

fn object_key(object: &Value) -> (String, String) {
    let meta = &object["metadata"];
    (
        meta["namespace"].as_str().unwrap_or_default().to_string(),
        meta["name"].as_str().unwrap_or_default().to_string(),
    )
}

/// The selector term a namespaced path (`…/namespaces/NS/PLURAL`) adds: the object's
/// namespace, not a label.
const NAMESPACE_TERM: &str = "\0namespace";

fn matches(selector: &[(String, String)], object: &Value) -> bool {
    selector.iter().all(|(k, v)| {
        let have = match k.as_str() {
            NAMESPACE_TERM => object["metadata"]["namespace"].as_str(),
            _ => object["metadata"]["labels"][k].as_str(),
        };
        have == Some(v.as_str())
    })
}

/// `/apis/G/V/namespaces/NS/PLURAL` as the collection's path and the namespace; any other
/// path as it is.
fn split_namespace(path: &str) -> (String, Option<String>) {
    if let Some((head, rest)) = path.split_once("/namespaces/")
        && let Some((ns, plural)) = rest.split_once('/')
        && !plural.contains('/')
    {
        return (format!("{head}/{plural}"), Some(ns.to_string()));
    }
    (path.to_string(), None)
}

/// The watch event a change is for a watch with `selector`: an object that starts matching
/// is ADDED, one that stops matching is DELETED (as the API server does).
fn event_for(
    selector: &[(String, String)],
    old: Option<&Value>,
    new: Option<&Value>,
) -> Option<Value> {
    let was = old.is_some_and(|o| matches(selector, o));
    match new {
        Some(n) if matches(selector, n) => Some(json!({
            "type": if was { "MODIFIED" } else { "ADDED" },
            "object": n,
        })),
        Some(n) if was => Some(json!({"type": "DELETED", "object": n})),
        None if was => Some(json!({"type": "DELETED", "object": old})),
        _ => None,
    }
}

fn gone_event(rv: u64) -> Value {
    json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": format!("too old resource version (current {rv})"),
            "reason": "Expired",
            "code": 410,
        }
    })
}

fn line(event: &Value) -> Bytes {
    let mut text = event.to_string();
    text.push('\n');
    Bytes::from(text)
}

fn parse_selector(text: Option<&String>) -> Vec<(String, String)> {
    text.into_iter()
        .flat_map(|t| t.split(','))
        .filter_map(|term| {
            let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
            Some((k.trim().to_string(), v.trim().to_string()))
        })
        .collect()
}

fn query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .into_iter()
        .flat_map(|q| q.split('&'))
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), percent_decode(v))
        })
        .collect()
}

fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => out.push(b),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 3]),
                }
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn not_found(path: &str) -> Response {
    json_response(
        StatusCode::NOT_FOUND,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("the server could not find the requested resource ({path})"),
               "reason": "NotFound", "code": 404}),
    )
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let dry_run = query(&uri).contains_key("dryRun");
    if let Some(answer) = status::handle(&shared, &method, &path, &body) {
        return answer;
    }
    if method == axum::http::Method::PATCH
        && let Some(refused) = objects::refuse_patch(&uri, &headers)
    {
        return refused;
    }
    if let Some(answer) = objects::handle(&shared, &method, &path, &body, dry_run) {
        return answer;
    }
    let q = query(&uri);
    let served = shared.inner.lock().unwrap().served;
    if path == "/apis" {
        return json_response(StatusCode::OK, served.api_groups());
    }
    if let Some(list) = path
        .strip_prefix("/apis/")
        .and_then(|gv| served.resources(gv))
    {
        return json_response(StatusCode::OK, list);
    }
    let (path, namespace) = split_namespace(&path);
    let Some((path, api_version, kind)) = COLLECTIONS.iter().find(|(p, _, _)| *p == path).copied()
    else {
        return not_found(&path);
    };
    if !served.serves_path(path) {
        return not_found(path);
    }
    let watch = matches!(q.get("watch").map(String::as_str), Some("true" | "1"));
    let mut selector = parse_selector(q.get("labelSelector"));
    if let Some(ns) = namespace {
        selector.push((NAMESPACE_TERM.to_string(), ns));
    }
    if watch {
        watch_response(&shared, path, kind, &q, selector)
    } else {
        list_response(&shared, path, api_version, kind, selector).await
    }
}

async fn list_response(
    shared: &Arc<Shared>,
    path: &'static str,
    api_version: &str,
    kind: &str,
    selector: Vec<(String, String)>,
) -> Response {
    shared
        .inner
        .lock()
        .unwrap()
        .collections
        .get_mut(path)
        .unwrap()
        .list_requests += 1;
    let mut released = shared.released.subscribe();
    loop {
        if !shared.inner.lock().unwrap().collections[path].held {
            break;
        }
        if released.changed().await.is_err() {
            break;
        }
    }
    let mut inner = shared.inner.lock().unwrap();
    let rv = inner.rv;
    let coll = inner.collections.get_mut(path).unwrap();
    coll.lists_served += 1;
    let items: Vec<Value> = coll
        .objects
        .values()
        .filter(|o| matches(&selector, o))
        .cloned()
        .collect();
    json_response(
        StatusCode::OK,
        json!({
            "apiVersion": api_version,
            "kind": format!("{kind}List"),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    )
}

fn watch_response(
    shared: &Arc<Shared>,
    path: &'static str,
    kind: &str,
    q: &HashMap<String, String>,
    selector: Vec<(String, String)>,
) -> Response {
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = matches!(
        q.get("allowWatchBookmarks").map(String::as_str),
        Some("true" | "1")
    );
    let (tx, rx) = unbounded_channel::<Bytes>();
    {
        let mut inner = shared.inner.lock().unwrap();
        let rv = inner.rv;
        let coll = inner.collections.get_mut(path).unwrap();
        coll.watch_requests += 1;
        if from < coll.compacted {
            let _ = tx.send(line(&gone_event(rv)));
            drop(tx);
        } else {
            for entry in coll.history.iter().filter(|e| e.rv > from) {
                if let Some(event) = event_for(&selector, entry.old.as_ref(), entry.new.as_ref()) {
                    let _ = tx.send(line(&event));
                }
            }
            if bookmarks {
                let bookmark = json!({"type": "BOOKMARK", "object": {
                    "kind": kind, "apiVersion": "v1",
                    "metadata": {"resourceVersion": rv.to_string()}}});
                let _ = tx.send(line(&bookmark));
            }
            coll.watchers.push(Watcher {
                tx,
                selector,
                bookmarks,
            });
        }
    }
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|bytes| (Ok::<Bytes, Infallible>(bytes), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .expect("a watch response")
}
